"""packaging/bundle_runtimes.py refuses a llama.cpp built for the build machine's CPU (issue 36)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bundler():
    spec = importlib.util.spec_from_file_location("bundle_runtimes", ROOT / "packaging" / "bundle_runtimes.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def runtime_folder(where: Path, libs: list[str]) -> Path:
    lib = where / "site" / "llama_cpp" / "lib"
    lib.mkdir(parents=True)
    (lib.parent / "__init__.py").write_text("")
    for name in libs:
        (lib / name).write_bytes(b"")
    (where / "runtime.json").write_text('{"backend": "cpu", "llama_cpp_python": "0.3.36", "cmake_args": ""}')
    return where


@pytest.mark.skipif(sys.platform == "darwin", reason="a macOS build shows nothing of its CPU flags in its files")
def test_a_build_for_this_machines_cpu_is_refused(bundler, tmp_path):
    native = runtime_folder(tmp_path / "native", ["libggml.so", "libggml-base.so", "libggml-cpu.so", "libllama.so"])
    with pytest.raises(SystemExit) as refused:
        bundler.bundle(tmp_path / "app", "cpu", str(native))
    assert "was built for this machine's CPU (it has no CPU variants beside libggml)" in str(refused.value)
    assert "quantdesk runtime build BACKEND" in str(refused.value)
    assert not (tmp_path / "app" / "runtimes" / "cpu").exists()


def test_a_portable_build_is_bundled(bundler, tmp_path):
    portable = runtime_folder(tmp_path / "portable", ["libggml.so", "libggml-base.so", "libllama.so",
                                                      "libggml-cpu-x64.so", "libggml-cpu-haswell.so"])
    target = bundler.bundle(tmp_path / "app", "cpu", str(portable))
    assert sorted(p.name for p in (target / "site" / "llama_cpp" / "lib").iterdir()) == [
        "libggml-base.so", "libggml-cpu-haswell.so", "libggml-cpu-x64.so", "libggml.so", "libllama.so"]
