"""Runs ``quantdesk`` in this process and counts how often it probes the machine and reads a model's header.

``python -m tests.machine_probes MODEL_FILE chat MODEL ...`` prints one JSON object on the last line of stderr:
the calls of the hardware probe (``app.hardware.detect.detect``, each run of the probes), of the NVIDIA probe
(NVML), of a llama.cpp runtime's device probe (a child process each) and the reads of MODEL_FILE's header. Counted
with a profile hook on the functions' code, so a call is counted however the caller bound the function, in any
thread."""

from __future__ import annotations

import json
import os
import sys
import threading


def main(argv: list[str]) -> int:
    model_file, command = os.path.realpath(argv[0]), argv[1:]
    from app.hardware import gpus
    from app.hardware.detect import detect
    from app.models.metadata import gguf
    from app.runtimes import devices

    watched = {detect.__code__: "hardware_probes", gpus.probe_nvidia.__code__: "nvidia_probes",
               devices.probe.__code__: "runtime_probes"}
    header_code = gguf._read_local_header.__code__
    counts = dict.fromkeys([*watched.values(), "header_reads"], 0)
    lock = threading.Lock()

    def hook(frame, event, _arg):
        if event != "call":
            return
        code = frame.f_code
        name = watched.get(code)
        if name is None and code is header_code and os.path.realpath(frame.f_locals.get("path", "")) == model_file:
            name = "header_reads"
        if name is not None:
            with lock:
                counts[name] += 1

    threading.setprofile(hook)
    sys.setprofile(hook)
    from app.cli import main as quantdesk

    try:
        code = quantdesk(command)
    finally:
        sys.setprofile(None)
        threading.setprofile(None)  # type: ignore[arg-type]
        print(json.dumps(counts), file=sys.stderr)
    return code


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
