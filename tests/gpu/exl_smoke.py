"""EXL2 and EXL3 end to end on a CUDA machine: quantize the test model with each library's own
converter, then load and chat with it through the engine host (EngineClient), as the app does.

Needs an NVIDIA GPU (Ampere or newer for EXL3), a CUDA build of torch and the exl2/exl3 extras:

    pip install -e '.[exl2,exl3,test]'   # plus a CUDA torch first if pip does not pick one
    python tests/gpu/exl_smoke.py                          # the tiny test model, both formats
    python tests/gpu/exl_smoke.py --spec llama-3.2-1b-shape --formats exl3   # real shapes, real tok/s

It prints each step's outcome, the generated text, prompt and decode tok/s, the VRAM the engine
process holds per GPU, and checks that cancel stops a reply and that unload gives the VRAM back.
Exits non-zero when any step fails. Converted models are kept under --out for reruns.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from app.engine.client import EngineClient  # noqa: E402
from backends import registry  # noqa: E402
from app.datatypes import Done, LoadSettings, Message, SamplingSettings, Token  # noqa: E402
from tests.fixtures.models import SPECS, write_hf_folder  # noqa: E402

# exllamav3 ships its converter as a module with parser/prepare/main but no __main__ block; this is
# the repository's own convert.py.
EXL3_CONVERT = ("import sys\nfrom exllamav3.conversion.convert_model import parser, main, prepare\n"
                "args = parser.parse_args(sys.argv[1:])\nin_args, job_state, ok, err = prepare(args)\n"
                "sys.exit(f'exllamav3 convert: {err}') if not ok else main(in_args, job_state)\n")

QUESTIONS = ["Hello! How are you today?", "Write one sentence about quantization."]


def run(argv: list[str], log: Path) -> None:
    print(f"  $ {' '.join(argv)}  (log: {log})", flush=True)
    t0 = time.perf_counter()
    with log.open("w") as out:
        done = subprocess.run(argv, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    if done.returncode != 0:
        print(log.read_text()[-4000:])
        raise SystemExit(f"converter failed with exit code {done.returncode}")
    print(f"  converted in {time.perf_counter() - t0:.1f} s", flush=True)


def convert(fmt: str, hf: Path, out: Path, bits: float) -> Path:
    target = out / f"{fmt}-{bits}bpw"
    if (target / "config.json").exists():
        print(f"  reusing {target}")
        return target
    work = out / f"{fmt}-work"
    work.mkdir(parents=True, exist_ok=True)
    if fmt == "exl2":
        # convert.py of exllamav2 is `import exllamav2.conversion.convert_exl2`: the module is the script.
        run([sys.executable, "-m", "exllamav2.conversion.convert_exl2", "-i", str(hf), "-o", str(work),
             "-cf", str(target), "-b", str(bits), "-hb", "6", "-nr"], out / "exl2-convert.log")
    else:
        run([sys.executable, "-c", EXL3_CONVERT, "-i", str(hf), "-o", str(target), "-w", str(work),
             "-b", str(bits), "-hb", "6"], out / "exl3-convert.log")
    return target


def process_vram(pid: int) -> dict[str, int]:
    """VRAM the driver says process ``pid`` holds, per GPU (NVML), independent of torch's own figures."""
    import pynvml

    pynvml.nvmlInit()
    try:
        used = {}
        for index in range(pynvml.nvmlDeviceGetCount()):
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            for proc in pynvml.nvmlDeviceGetComputeRunningProcesses(handle):
                if proc.pid == pid and proc.usedGpuMemory:
                    used[f"gpu{index}"] = int(proc.usedGpuMemory)
        return used
    finally:
        pynvml.nvmlShutdown()


def chat(client: EngineClient, question: str, max_tokens: int) -> Done:
    text = []
    done = None
    for event in client.generate([Message("user", question)], SamplingSettings(max_tokens=max_tokens, seed=7)):
        if isinstance(event, Token):
            text.append(event.text)
        else:
            done = event
    print(f"  Q: {question}\n  A: {''.join(text)!r}")
    s = done.stats
    print(f"  {s.prompt_tokens} prompt tokens at {s.prompt_tps:.0f} tok/s; {s.generated_tokens} generated, "
          f"decode {s.decode_tps:.1f} tok/s, ttft {s.ttft_ms:.0f} ms, stop: {s.stop_reason}", flush=True)
    return done


def smoke(fmt: str, model: Path, args: argparse.Namespace) -> list[str]:
    failures = []
    with EngineClient() as client:
        for kv in args.cache_types:
            loaded = client.load(model, LoadSettings(n_ctx=args.ctx, kv_cache_type=kv))
            print(f"  loaded with {kv} cache in {loaded.load_ms:.0f} ms: n_ctx {loaded.n_ctx}, "
                  f"memory {json.dumps(loaded.memory_bytes)}, details {json.dumps(loaded.details, default=str)}")
            held = process_vram(client.pid)
            print(f"  NVML: the engine holds {held}")
            for question in QUESTIONS:
                done = chat(client, question, args.tokens)
                if done.stats.generated_tokens == 0:
                    failures.append(f"{fmt}/{kv}: no tokens generated")
            stream = client.generate([Message("user", QUESTIONS[1])], SamplingSettings(max_tokens=10_000,
                                                                                       temperature=1.0))
            count = 0
            for event in stream:
                if isinstance(event, Token):
                    count += 1
                    if count == 5:
                        client.cancel()
                elif isinstance(event, Done):
                    print(f"  cancel after 5 tokens: stop reason {event.stats.stop_reason}, "
                          f"{event.stats.generated_tokens} tokens")
                    if event.stats.stop_reason != "cancelled":
                        failures.append(f"{fmt}/{kv}: cancel did not stop the reply")
            client.unload()
            time.sleep(1)  # the host unloads on its own thread; NVML reads the driver's figure
            after = process_vram(client.pid)
            print(f"  after unload NVML says the engine holds {after} (the CUDA context stays)")
            freed = sum(held.values()) - sum(after.values())
            if freed < sum(loaded.details.get("allocated_bytes", {}).values()) // 2:
                failures.append(f"{fmt}/{kv}: unload did not give the VRAM back ({held} -> {after})")
    return failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, default=ROOT / ".cache" / "exl-smoke")
    parser.add_argument("--spec", default="tiny-llama", choices=sorted(SPECS))
    parser.add_argument("--formats", default="exl2,exl3")
    parser.add_argument("--bits", type=float, default=4.0)
    parser.add_argument("--ctx", type=int, default=2048)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--cache-types", default="fp16,q4", type=lambda s: s.split(","))
    args = parser.parse_args()

    statuses = {s.name: s.availability for s in registry.statuses()}
    out = args.out / args.spec
    hf = out / "hf"
    if not (hf / "config.json").exists():
        print(f"writing the {args.spec} HF folder to {hf}")
        write_hf_folder(SPECS[args.spec], hf)
    failures = []
    for fmt in args.formats.split(","):
        backend = registry.backend_for_format(fmt)
        availability = statuses[backend]
        print(f"\n== {fmt} via {backend}: {'available' if availability.available else availability.reason}")
        if not availability.available:
            failures.append(f"{fmt}: {availability.reason} ({availability.hint})")
            continue
        try:
            model = convert(fmt, hf, out, args.bits)
            failures += smoke(fmt, model, args)
        except Exception as exc:  # report and go on with the other format
            failures.append(f"{fmt}: {type(exc).__name__}: {exc}")
            print(f"  FAILED: {type(exc).__name__}: {exc}")
    print("\n" + ("all good" if not failures else "failures:\n  " + "\n  ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    raise SystemExit(main())
