"""CPU model, cores and the instruction-set features llama.cpp's CPU kernels care about."""

from __future__ import annotations

from app.hardware.profile import CpuInfo
from app.hardware.sources import Sources

# Linux /proc/cpuinfo "flags" (x86) -> our name. amx_* stay separate: AMX-INT8 and AMX-BF16 differ.
X86_FLAGS = {
    "sse3": "sse3", "pni": "sse3", "ssse3": "ssse3", "sse4_2": "sse4_2",
    "avx": "avx", "avx2": "avx2", "fma": "fma", "f16c": "f16c", "avx_vnni": "avx_vnni",
    "avx512f": "avx512f", "avx512bw": "avx512bw", "avx512vl": "avx512vl",
    "avx512_vnni": "avx512_vnni", "avx512_bf16": "avx512_bf16",
    "amx_tile": "amx", "amx_int8": "amx_int8", "amx_bf16": "amx_bf16",
}
# Linux /proc/cpuinfo "Features" (arm64, names from the kernel's hwcap list) -> our name.
ARM_FEATURES = {
    "asimd": "neon", "fphp": "fp16", "asimdhp": "fp16", "asimddp": "dotprod", "i8mm": "i8mm",
    "bf16": "bf16", "sve": "sve", "sve2": "sve2", "sme": "sme",
}
# macOS sysctl hw.optional.* (value 1) -> our name, for Apple Silicon and Intel Macs.
SYSCTL_FEATURES = {
    "hw.optional.neon": "neon", "hw.optional.AdvSIMD": "neon",
    "hw.optional.arm.FEAT_FP16": "fp16", "hw.optional.neon_fp16": "fp16",
    "hw.optional.arm.FEAT_DotProd": "dotprod", "hw.optional.arm.FEAT_I8MM": "i8mm",
    "hw.optional.arm.FEAT_BF16": "bf16", "hw.optional.arm.FEAT_SME": "sme",
    "hw.optional.sse3": "sse3", "hw.optional.supplementalsse3": "ssse3", "hw.optional.sse4_2": "sse4_2",
    "hw.optional.avx1_0": "avx", "hw.optional.avx2_0": "avx2", "hw.optional.fma": "fma",
    "hw.optional.avx512f": "avx512f", "hw.optional.avx512bw": "avx512bw",
    "hw.optional.avx512vl": "avx512vl", "hw.optional.avx512vnni": "avx512_vnni",
}
# Windows IsProcessorFeaturePresent codes (winnt.h PF_*) -> our name. Windows offers no call for
# FMA or F16C, so on Windows those are absent from the list even where the CPU has them.
WINDOWS_FEATURES = {13: "sse3", 36: "ssse3", 38: "sse4_2", 39: "avx", 40: "avx2", 41: "avx512f",
                    19: "neon", 43: "dotprod"}  # 19: PF_ARM_NEON_INSTRUCTIONS_AVAILABLE

FLAG_ORDER = ["sse3", "ssse3", "sse4_2", "avx", "avx2", "fma", "f16c", "avx_vnni", "avx512f", "avx512bw",
              "avx512vl", "avx512_vnni", "avx512_bf16", "amx", "amx_int8", "amx_bf16",
              "neon", "fp16", "dotprod", "i8mm", "bf16", "sve", "sve2", "sme"]

# ARM "CPU implementer" 0x41 (Arm Ltd) "CPU part" -> core name, for boards whose cpuinfo has no model.
ARM_PARTS = {"0xd03": "Cortex-A53", "0xd04": "Cortex-A35", "0xd05": "Cortex-A55", "0xd07": "Cortex-A57",
             "0xd08": "Cortex-A72", "0xd09": "Cortex-A73", "0xd0a": "Cortex-A75", "0xd0b": "Cortex-A76",
             "0xd0c": "Neoverse-N1", "0xd0d": "Cortex-A77", "0xd41": "Cortex-A78", "0xd40": "Neoverse-V1",
             "0xd44": "Cortex-X1", "0xd46": "Cortex-A510", "0xd47": "Cortex-A710", "0xd48": "Cortex-X2",
             "0xd49": "Neoverse-N2", "0xd4f": "Neoverse-V2", "0xd80": "Cortex-A520", "0xd81": "Cortex-A720"}


def ordered(flags: set[str]) -> list[str]:
    return sorted(flags, key=lambda f: (FLAG_ORDER.index(f) if f in FLAG_ORDER else len(FLAG_ORDER), f))


def parse_sysctl(text: str) -> dict[str, str]:
    """``sysctl`` output ("name: value" per line) -> dict."""
    values = {}
    for line in text.splitlines():
        key, sep, value = line.partition(": ")
        if sep:
            values[key.strip()] = value.strip()
    return values


def parse_cpuinfo(text: str) -> list[dict[str, str]]:
    """Linux /proc/cpuinfo -> one dict per block (one per logical CPU, plus ARM's trailing summary)."""
    blocks: list[dict[str, str]] = []
    current: dict[str, str] = {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                blocks.append(current)
            current = {}
            continue
        key, sep, value = line.partition(":")
        if sep:
            current[key.strip()] = value.strip()
    if current:
        blocks.append(current)
    return blocks


def cpu_from_cpuinfo(text: str, arch: str, board_model: str = "") -> CpuInfo:
    blocks = parse_cpuinfo(text)
    processors = [b for b in blocks if "processor" in b and b["processor"].isdigit()]
    first = processors[0] if processors else (blocks[0] if blocks else {})
    names = set()
    for b in processors or blocks:
        names |= set((b.get("flags") or b.get("Features") or "").split())
    if "Features" in first:
        flags = {ARM_FEATURES[n] for n in names if n in ARM_FEATURES}
    else:
        flags = {X86_FLAGS[n] for n in names if n in X86_FLAGS}
    model = first.get("model name") or first.get("Model name") or first.get("cpu model") or ""
    if not model and "CPU part" in first:
        part = first["CPU part"].lower()
        core = ARM_PARTS.get(part, f"ARM core {part}") if first.get("CPU implementer", "").lower() == "0x41" \
            else f"ARM core {first.get('CPU implementer', '?')}/{part}"
        model = f"{board_model} ({core})" if board_model else core
    cores = {(b.get("physical id"), b.get("core id")) for b in processors}
    has_topology = all(b.get("core id") is not None for b in processors)
    logical = len(processors) or None
    return CpuInfo(
        model=model, arch=arch, logical_cores=logical,
        physical_cores=(len(cores) if has_topology and processors else logical),
        flags=ordered(flags),
        vendor=first.get("vendor_id") or (f"ARM implementer {first['CPU implementer']}" if "CPU implementer" in first else ""),
    )


def cpu_from_sysctl(values: dict[str, str], arch: str) -> CpuInfo:
    flags = {name for key, name in SYSCTL_FEATURES.items() if values.get(key) == "1"}
    words = set((values.get("machdep.cpu.features", "") + " " + values.get("machdep.cpu.leaf7_features", "")).split())
    flags |= {"fma"} if "FMA" in words else set()
    flags |= {"f16c"} if "F16C" in words else set()
    flags |= {"avx2"} if "AVX2" in words else set()
    model = values.get("machdep.cpu.brand_string", "")
    return CpuInfo(
        model=model, arch=arch, flags=ordered(flags),
        physical_cores=to_int(values.get("hw.physicalcpu")), logical_cores=to_int(values.get("hw.logicalcpu")),
        vendor="Apple" if model.startswith("Apple") else values.get("machdep.cpu.vendor", ""),
    )


def to_int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def probe_cpu(src: Sources) -> CpuInfo:
    arch = src.machine
    if src.system == "Linux":
        try:
            board = src.read_text("/proc/device-tree/model").strip("\x00\n ")
        except OSError:
            board = ""
        info = cpu_from_cpuinfo(src.read_text("/proc/cpuinfo"), arch, board)
    elif src.system == "Darwin":
        info = cpu_from_sysctl(parse_sysctl(src.run(["sysctl", "hw", "machdep.cpu"])), arch)
    elif src.system == "Windows":
        info = CpuInfo(model=src.processor(), arch=arch,
                       flags=ordered({n for code, n in WINDOWS_FEATURES.items() if src.windows_feature(code)}))
    else:
        info = CpuInfo(model=src.processor(), arch=arch)
    # psutil fills what the platform source left out (and is the only source for core counts on Windows).
    if info.logical_cores is None:
        info.logical_cores = src.cpu_count(True)
    if info.physical_cores is None:
        info.physical_cores = src.cpu_count(False)
    return info
