"""This machine, probed once per process (app/machine.py): counted in a real ``quantdesk chat``."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from app import machine
from app.runtimes import catalog

ROOT = Path(__file__).resolve().parents[1]


def counted_chat(model: Path, *extra: str) -> dict[str, int]:
    """``quantdesk chat MODEL --prompt …`` as a real child, with what it probed and read (tests/machine_probes.py)."""
    result = subprocess.run([sys.executable, "-m", "tests.machine_probes", str(model), "chat", str(model),
                             "--prompt", "hi", "--max-tokens", "2", "--seed", "1", *extra],
                            cwd=ROOT, capture_output=True, text=True, timeout=240)
    assert result.returncode == 0, result.stderr[-2000:]
    counts: dict[str, int] = json.loads(result.stderr.strip().splitlines()[-1])
    return counts


def test_quantdesk_chat_probes_the_machine_once_and_reads_the_model_header_once(tiny_models):
    counts = counted_chat(tiny_models.gguf_q8_0)
    runtimes = len(catalog.discover())  # the child sees the same isolated folders (tests/conftest.py)
    assert runtimes >= 1
    # The fit check's profile is the one the load's runtime choice reads: each runtime started once, NVML asked once.
    assert counts == {"hardware_probes": 1, "nvidia_probes": 1, "runtime_probes": runtimes, "header_reads": 1}


def test_a_chat_with_a_projector_still_reads_the_model_header_once(tiny_vision):
    # The fit check, the load's file check and the projector's pair check share one read.
    counts = counted_chat(tiny_vision.text.gguf_q8_0, "--mmproj", str(tiny_vision.mmproj_f16), "--ctx", "512")
    assert counts["header_reads"] == 1 and counts["hardware_probes"] == 1


def test_the_profile_is_kept_for_the_process_until_asked_afresh(monkeypatch):
    made = []
    monkeypatch.setattr(machine, "detect", lambda **kw: made.append(kw) or object())
    first = machine.profile()
    assert machine.profile() is first and len(made) == 1
    assert machine.profile(fresh=True) is not first and len(made) == 2


@pytest.mark.parametrize("fresh", [False, True])
def test_a_runtime_is_started_once_per_folder_unless_the_machine_is_probed_afresh(monkeypatch, tmp_path, fresh):
    started = []
    monkeypatch.setattr(machine.devices, "probe", lambda lib_dir: started.append(lib_dir) or machine.devices.Probe())
    runtime = catalog.Runtime(name="x", backend="cpu", origin="user", lib_dir=tmp_path)
    machine.runtime_probe(runtime)
    machine.runtime_probe(runtime)
    assert started == [tmp_path]
    if fresh:
        monkeypatch.setattr(machine, "detect", lambda **kw: object())
        machine.profile(fresh=True)
        machine.runtime_probe(runtime)
        assert started == [tmp_path, tmp_path]
