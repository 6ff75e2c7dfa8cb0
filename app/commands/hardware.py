"""``quantdesk hw``: what this machine (or a saved profile) offers for running models."""

from __future__ import annotations

import argparse

from app.commands import add_command
from app.errors import QuantDeskError
from app.hardware.profile import GpuInfo, HardwareProfile, RuntimeInfo

GIB = 1024**3


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from app.hardware import add_hardware_argument

    parser = add_command(subparsers, "hw",
                         description="Detect the CPU, memory, GPUs, free disk and usable backends. "
                                     "Save the --json output to plan for this machine elsewhere.")
    parser.add_argument("--json", action="store_true", help="print the profile as JSON (the --hardware file format)")
    add_hardware_argument(parser)
    parser.add_argument("--measure-bandwidth", action="store_true",
                        help="measure CPU memory bandwidth (a second or two; cached for later runs)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from app import machine
    from app.hardware import load_profile

    if args.hardware and args.measure_bandwidth:
        raise QuantDeskError("--measure-bandwidth measures this machine; it cannot be combined with --hardware")
    if args.hardware:
        profile = load_profile(args.hardware)
    else:
        profile = machine.profile(measure_bandwidth=args.measure_bandwidth)
    print(profile.to_json() if args.json else summary(profile))
    if not args.json and not args.hardware:
        print(learned_lines())
    return 0


def learned_lines() -> str:
    """What the crash guard learned on this machine (app/engine/guard.py), for the summary's end."""
    from app.engine import guard

    learned = guard.learned()
    if not learned:
        return "Learned after engine crashes: nothing (every model loads with llama.cpp's defaults)"
    return "\n".join(["Learned after engine crashes (quantdesk runtime forget forgets them):",
                      *(f"  {entry.words()}" for entry in learned)])


def gib(n: int | None) -> str:
    return "unknown" if n is None else f"{n / GIB:.1f} GiB"


def _gpu_line(gpu: GpuInfo) -> str:
    parts = []
    if gpu.vendor == "apple":
        parts.append(f"{gib(gpu.vram_total_bytes)} unified, GPU may use {gib(gpu.working_set_limit_bytes)}"
                     f" ({gpu.working_set_source})")
    elif gpu.unified and gpu.shared_bytes:
        parts.append(f"{gib(gpu.vram_total_bytes)} carved out + {gib(gpu.shared_bytes)} shared")
    else:
        free = f" ({gib(gpu.vram_free_bytes)} free)" if gpu.vram_free_bytes is not None else ""
        parts.append(f"{gib(gpu.vram_total_bytes)} VRAM{free}")
    if gpu.bandwidth_gbps:
        parts.append(f"{gpu.bandwidth_gbps:g} GB/s")
    if gpu.compute_capability:
        parts.append(f"compute {gpu.compute_capability}")
    if gpu.driver:
        parts.append(f"driver {gpu.driver}")
    return f"{gpu.name}: " + ", ".join(parts)


def _runtime_line(r: RuntimeInfo | None) -> str:
    if r is None:
        return "none installed (pip install 'quantdesk[llama]')"
    head = f"{r.name:<8} llama-cpp-python {r.version or '?'}"
    if r.problem or r.error:
        return f"{head}: cannot start: {r.problem or r.error}"
    seen = [f"{d.description or d.name} ({d.type}{', software' if d.software else ''}, "
            f"{gib(d.memory_free)} of {gib(d.memory_total)} free)" for d in r.devices if d.type != "cpu"]
    return f"{head}: " + ("; ".join(seen) if seen else "CPU only")


def summary(p: HardwareProfile) -> str:
    os_name = {"linux": "Linux", "darwin": "macOS", "windows": "Windows"}.get(p.os, p.os)
    rows: list[tuple[str, str]] = [("Machine", f"{os_name} {p.arch}")]
    cores = f"{p.cpu.physical_cores or '?'} cores, {p.cpu.logical_cores or '?'} threads"
    rows.append(("CPU", f"{p.cpu.model or 'unknown'} ({cores})"))
    rows.append(("CPU features", " ".join(p.cpu.flags) or "unknown"))
    rows.append(("RAM", f"{gib(p.ram_total_bytes)} total, {gib(p.ram_available_bytes)} available"))
    rows.append(("RAM bandwidth", f"{p.ram_bandwidth_gbps:g} GB/s (measured)" if p.ram_bandwidth_gbps
                 else "not measured (quantdesk hw --measure-bandwidth)"))
    if p.gpus:
        rows += [(f"GPU {i}" if len(p.gpus) > 1 else "GPU", _gpu_line(g)) for i, g in enumerate(p.gpus)]
    else:
        rows.append(("GPU", "none found"))
    if p.runtimes is not None:
        for i, r in enumerate(p.runtimes or [None]):
            rows.append(("llama.cpp runtimes" if i == 0 else "", _runtime_line(r)))
    elif p.llama_cpp_gpu_backends is not None:
        rows.append(("llama.cpp build", ", ".join(["cpu", *p.llama_cpp_gpu_backends])))
    disk = f"{gib(p.disk_free_bytes)} free" + (f" at {p.disk_path}" if p.disk_path else "")
    rows.append(("Disk", disk))
    for i, b in enumerate(p.backends):
        state = "available" if b.available else f"unavailable: {b.reason}" + (f" ({b.hint})" if b.hint else "")
        rows.append(("Backends" if i == 0 else "", f"{b.name:<10} {state}"))
    for i, (part, reason) in enumerate(sorted(p.absent.items())):
        rows.append(("Not found" if i == 0 else "", f"{part}: {reason}"))
    width = max(len(label) for label, _ in rows) + 2
    lines = [f"{label:<{width}}{value}" for label, value in rows]
    if p.hints:
        lines += ["", "Hints:"] + [f"- {h}" for h in p.hints]
    return "\n".join(lines)
