"""CI check: a portable llama.cpp runtime answers on older CPUs than the build machine's (issue 36).

Runs ``quantdesk chat SmolLM2 --prompt "What is the capital of France? Answer in one sentence." --temperature 0`` to its end under
qemu-user's emulated CPUs (Debian's qemu-user 7.2: ``qemu-x86_64 -cpu help``): Haswell (AVX2, no AVX-512) and
Nehalem (x86-64-v2: SSE4.2, no AVX). Every process runs emulated, the engine host and the runtime's device probe too:
qemu-user runs a program's children on the real CPU, so Python is started through a small virtual environment whose
``python`` is a script putting qemu in front of the real interpreter (its ``sys.executable``, the program the app
starts its children with). The app runs from this checkout with the environment's packages; the portable runtime is
tests/fixtures/portable_runtime.py's (or ``--runtime FOLDER``), pinned with ``--runtime``. Each run must exit 0
with "Paris" in the reply; the run with this environment's own llama-cpp-python (pip's native build) only shows
what happens to it (``--native``; not a failure of this check: the README's editable install stays native).

    python -m tests.packaging.cpu_levels [--cpus Haswell,Nehalem] [--runtime FOLDER] [--native] [--timeout 900]

Needs qemu-user (apt-get install qemu-user) on an x86-64 Linux machine.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
QEMU = "qemu-x86_64"
PROMPT = "What is the capital of France? Answer in one sentence."
RUNTIME_NAME = "cpu-portable"


def emulated_python(where: Path, cpu: str) -> Path:
    """A virtual environment's layout whose ``bin/python`` runs this environment's interpreter on the emulated
    ``cpu``, giving it its own path as argv[0]: Python then finds the pyvenv.cfg beside it (and this environment's
    site-packages through the lib link) and starts its children through the same script."""
    real = Path(os.path.realpath(sys.executable))
    (where / "bin").mkdir(parents=True)
    (where / "pyvenv.cfg").write_text(f"home = {real.parent}\ninclude-system-site-packages = false\n"
                                      f"version = {sys.version.split()[0]}\n")
    (where / "lib").symlink_to(Path(sysconfig.get_paths()["purelib"]).parents[1], target_is_directory=True)
    script = where / "bin" / "python"
    script.write_text(f'#!/bin/sh\nexec {QEMU} -cpu {cpu} -0 "$0" {real} "$@"\n')
    script.chmod(0o755)
    return script


def chat(cpu: str, runtime_arg: str, runtime_folder: Path | None, model: Path,
         timeout: float) -> tuple[int, str, float, str]:
    """(exit code, output, seconds, the CPU variant ggml chose) of one ``quantdesk chat`` on the emulated ``cpu``."""
    with tempfile.TemporaryDirectory(prefix="qd-cpu-levels-") as tmp:
        home = Path(tmp)
        python = emulated_python(home / "venv", cpu)
        # OPENBLAS_CORETYPE: numpy's OpenBLAS picks its kernels from CPUID, and under qemu's Nehalem (and Westmere,
        # and qemu64 with the x86-64-v2 flags) it picks one that dies of SIGILL while numpy imports; named, it keeps
        # to that CPU. Not llama.cpp's concern (it links no BLAS here), and not seen on a real CPU here.
        env = dict(os.environ, PYTHONPATH=str(ROOT), XDG_DATA_HOME=str(home / "data"),
                   XDG_CONFIG_HOME=str(home / "config"), XDG_CACHE_HOME=str(home / "cache"),
                   QT_QPA_PLATFORM="offscreen", OPENBLAS_CORETYPE=cpu.split("-")[0].split(",")[0])
        env.pop("VIRTUAL_ENV", None)
        if runtime_folder is not None:
            runtimes = home / "data" / "QuantDesk" / "runtimes"
            runtimes.mkdir(parents=True)
            (runtimes / RUNTIME_NAME).symlink_to(runtime_folder, target_is_directory=True)
        argv = [str(python), "-m", "app", "chat", str(model), "--runtime", runtime_arg, "--prompt", PROMPT,
                "--temperature", "0", "--max-tokens", "12", "--ctx", "512"]
        start = time.monotonic()
        try:
            done = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                                  stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            return 124, f"timed out after {timeout:g} s: {exc.stderr or ''}", time.monotonic() - start, ""
        seconds = time.monotonic() - start
        variant = ""
        if runtime_folder is not None and done.returncode == 0:  # which CPU variant ggml chose on this CPU
            probe = subprocess.run([str(python), "-m", "app.runtimes.devices",
                                    str(runtime_folder / "site" / "llama_cpp" / "lib")], env=env, cwd=ROOT,
                                   capture_output=True, text=True, timeout=timeout)
            lines = probe.stdout.strip().splitlines()
            variant = json.loads(lines[-1]).get("cpu_variant", "") if lines else ""
        return done.returncode, done.stdout + done.stderr, seconds, variant


def main() -> int:
    from tests.fixtures import portable_runtime
    from tests.fixtures.real_models import REAL_MODELS

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpus", default="Haswell,Nehalem", help="qemu CPU models (qemu-x86_64 -cpu help)")
    parser.add_argument("--runtime", type=Path, help="the portable runtime folder (default: "
                                                     "tests/fixtures/portable_runtime.py's)")
    parser.add_argument("--native", action="store_true",
                        help="also run this environment's own llama-cpp-python on the first CPU, to show it")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    args = parser.parse_args()
    if shutil.which(QEMU) is None:
        raise SystemExit(f"{QEMU} is missing: apt-get install qemu-user")
    folder = args.runtime or portable_runtime.folder()
    if args.runtime is None and portable_runtime.problem():
        raise SystemExit(portable_runtime.problem())
    model = REAL_MODELS["smollm2"].path()
    if not model.is_file():
        raise SystemExit(f"{model} is missing: python -m tests.fixtures.real_models")
    runs = [(cpu, "portable") for cpu in args.cpus.split(",")]
    if args.native:
        runs.append((runs[0][0], "native"))
    failed = 0
    for cpu, build in runs:
        portable = build == "portable"
        code, output, seconds, variant = chat(cpu, RUNTIME_NAME if portable else "cpu", folder if portable else None, model,
                                     args.timeout)
        answered = code == 0 and "Paris" in output
        signal = f" (signal {code - 128})" if code > 128 else ""
        print(f"{cpu:10s} {build:8s} exit {code}{signal}, {seconds:.0f} s: "
              + (f"answered Paris{f' (CPU variant {variant})' if variant else ''}" if answered else "NO ANSWER"),
              flush=True)
        if not answered:
            print("    " + "\n    ".join(output.strip().splitlines()[-12:]), flush=True)
            failed += portable  # the native build's failure is what this check documents, not one of its failures
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
