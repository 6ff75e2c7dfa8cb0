"""A runtime started in a child process: the devices its ggml sees, or why it cannot start."""

import json
import subprocess
import sys

from app.runtimes import catalog, devices
from tests.fixtures.runtimes import install_copy


def test_the_cpu_runtime_sees_the_cpu(environment_site):
    probe = devices.probe(catalog.environment_runtime().lib_dir)
    assert probe.ok and probe.env == {}
    [cpu] = probe.devices
    assert (cpu.name, cpu.type, cpu.software) == ("CPU", "cpu", False)
    assert cpu.memory_total > 0 and probe.gpus() == []


def test_a_runtime_with_a_deleted_library_cannot_start_and_says_which(environment_site):
    folder = install_copy(environment_site, "cpu-copy", "cpu")
    (folder / "site" / "llama_cpp" / "lib" / "libggml-cpu.so.0").unlink()
    probe = devices.probe(catalog.find("cpu-copy").lib_dir)
    assert not probe.ok and probe.devices == ()
    assert "libggml-cpu.so.0: cannot open shared object file" in probe.error
    assert (environment_site / "llama_cpp" / "lib" / "libggml-cpu.so.0").exists()  # the original is whole


def test_a_runtime_without_its_libraries_says_which_file_is_missing(tmp_path):
    probe = devices.probe(tmp_path)
    assert not probe.ok and probe.error == f"{tmp_path / 'libggml-base.so'} is missing"


def test_the_child_answers_in_one_json_line(environment_site):
    lib = catalog.environment_runtime().lib_dir
    done = subprocess.run([sys.executable, "-m", "app.runtimes.devices", str(lib)], capture_output=True, text=True,
                          check=True)
    answer = json.loads(done.stdout)
    assert answer["error"] == "" and [d["name"] for d in answer["devices"]] == ["CPU"]


def test_a_newer_probes_extra_figures_are_left_out():
    probe = devices.Probe.from_dict({"devices": [{"name": "CPU", "description": "x", "type": "cpu", "memory_total": 1,
                                                  "memory_free": 1, "numa_node": 0}], "error": "", "env": {}})
    assert probe.devices == (devices.Device("CPU", "x", "cpu", 1, 1),)


def test_a_library_that_is_not_one_is_named(tmp_path):
    (tmp_path / "libggml-base.so").write_text("not a library, but long enough to be read as one " * 40)
    probe = devices.probe(tmp_path)
    assert not probe.ok and "libggml-base.so: invalid ELF header" in probe.error
