"""``quantdesk hw``: in process through app.cli.main, and once as the real command in a child process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import psutil

from app.cli import main
from app.machine import detect
from app.hardware.profile import HardwareProfile
from tests.hardware.replay import recorded_sources

ROOT = Path(__file__).resolve().parents[2]


def test_hw_prints_a_readable_summary_of_this_machine(capsys):
    assert main(["hw"]) == 0
    out = capsys.readouterr().out
    rows = dict(line.split(None, 1) for line in out.splitlines() if line and not line.startswith(" "))
    me = detect()
    assert me.cpu.model in out
    assert f"{me.cpu.physical_cores} cores, {me.cpu.logical_cores} threads" in out
    assert f"{psutil.virtual_memory().total / 1024**3:.1f} GiB total" in out
    assert "RAM" in rows and "Disk" in rows and "Backends" in rows
    # Values start in one column.
    starts = {line.index(value) for line in out.splitlines()[:6] for value in [line.split("  ")[-1].strip()]}
    assert len(starts) == 1, out


def test_hw_json_is_the_profile_of_this_machine(capsys):
    assert main(["hw", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    profile = HardwareProfile.from_dict(data)
    assert profile.cpu == detect().cpu
    assert profile.ram_total_bytes == psutil.virtual_memory().total


def test_hw_plans_for_a_saved_machine(tmp_path, capsys):
    saved = detect(recorded_sources("two-gpu-box"))
    file = tmp_path / "box.json"
    file.write_text(saved.to_json())
    assert main(["hw", "--hardware", str(file)]) == 0
    out = capsys.readouterr().out
    assert "GPU 0" in out and "NVIDIA GeForce RTX 3090: 24.0 GiB VRAM (23.6 GiB free), 936.1 GB/s" in out
    assert "GPU 1" in out and "NVIDIA GeForce RTX 3060: 12.0 GiB VRAM" in out
    assert main(["hw", "--json", "--hardware", str(file)]) == 0
    assert HardwareProfile.from_json(capsys.readouterr().out) == saved


def test_hw_summary_shows_hints_and_unified_memory(tmp_path, capsys):
    file = tmp_path / "m1.json"
    file.write_text(detect(recorded_sources("m1-16gb")).to_json())
    assert main(["hw", "--hardware", str(file)]) == 0
    out = capsys.readouterr().out
    assert "Apple M1: 16.0 GiB unified, GPU may use 10.7 GiB" in out
    assert "Hints:\n- Metal lets the GPU use 10.7 of 16 GiB" in out


def test_hw_with_a_missing_profile_exits_1_with_a_sentence(tmp_path, capsys):
    assert main(["hw", "--hardware", str(tmp_path / "nope.json")]) == 1
    err = capsys.readouterr().err
    assert err.startswith("quantdesk: hardware profile ") and "does not exist" in err
    assert "quantdesk hw --json > machine.json" in err


def test_hw_refuses_to_measure_a_saved_machine(tmp_path, capsys):
    file = tmp_path / "m.json"
    file.write_text(HardwareProfile().to_json())
    assert main(["hw", "--hardware", str(file), "--measure-bandwidth"]) == 1
    assert "cannot be combined with --hardware" in capsys.readouterr().err


def test_hw_measure_bandwidth_reports_and_caches_it(capsys):
    assert main(["hw", "--json", "--measure-bandwidth"]) == 0
    measured = json.loads(capsys.readouterr().out)["ram_bandwidth_gbps"]
    assert measured > 0
    assert main(["hw", "--json"]) == 0  # later runs read the cache
    assert json.loads(capsys.readouterr().out)["ram_bandwidth_gbps"] == measured
    assert main(["hw"]) == 0
    assert f"{measured:g} GB/s (measured)" in capsys.readouterr().out


def test_hw_json_as_a_real_command():
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    done = subprocess.run([sys.executable, "-m", "app", "hw", "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    profile = HardwareProfile.from_json(done.stdout)
    assert profile.cpu.logical_cores == psutil.cpu_count(logical=True)
    assert profile.ram_total_bytes == psutil.virtual_memory().total
    assert {b.name for b in profile.backends} >= {"llama.cpp", "mlx"}
