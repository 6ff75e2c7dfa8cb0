"""A load on the runtime chosen for it, through the real engine host: pins, the fallback from a runtime that
cannot start, and what the CLI says about it (CPU runtimes: these run on every machine; the Vulkan
runtime on lavapipe is in test_vulkan.py)."""

from pathlib import Path

from app.cli import main
from app.engine.client import EngineClient
from app.runtimes import pins
from app.datatypes import LoadSettings
from tests.fixtures.runtimes import install_copy

SETTINGS = LoadSettings(n_ctx=256, gpu_layers=0)


def test_the_automatic_choice_here_is_the_cpu(tiny_models):
    with EngineClient() as client:
        loaded = client.load(tiny_models.gguf_q8_0, SETTINGS)
    assert loaded.runtime == "cpu"
    assert [(d.name, d.layers) for d in loaded.devices] == [("CPU", 2)]


def test_a_pinned_runtime_is_the_one_the_host_imports(tiny_models, environment_site):
    folder = install_copy(environment_site, "cpu-copy", "cpu")
    pins.pin("cpu-copy", tiny_models.gguf_q8_0)
    with EngineClient() as client:
        loaded = client.load(tiny_models.gguf_q8_0, SETTINGS)
        assert (loaded.runtime, loaded.runtime_reason) == ("cpu-copy", "cpu-copy is pinned for this model")
        assert Path(loaded.details["llama_cpp_path"]) == folder / "site" / "llama_cpp"
        first_host = client.pid
        other = client.load(tiny_models.gguf_q8_0, SETTINGS, runtime="cpu")  # another runtime: a new host
        assert other.runtime == "cpu" and client.pid != first_host
        assert Path(other.details["llama_cpp_path"]) == environment_site / "llama_cpp"


def test_a_pinned_runtime_that_cannot_start_falls_back_with_a_sentence(tiny_models, environment_site, capsys):
    folder = install_copy(environment_site, "cpu-copy", "cpu")
    (folder / "site" / "llama_cpp" / "lib" / "libggml-cpu.so.0").unlink()
    pins.pin("cpu-copy")
    with EngineClient() as client:
        loaded = client.load(tiny_models.gguf_q8_0, SETTINGS)
    assert loaded.runtime == "cpu"
    why = ("the runtime cpu-copy pinned for every model cannot start (libggml-cpu.so.0: cannot open shared object "
           "file: No such file or directory); no GPU was found, so the CPU runs the model")
    assert loaded.runtime_reason == why

    assert main(["chat", str(tiny_models.gguf_q8_0), "--prompt", "hi", "--max-tokens", "3", "--ctx", "256"]) == 0
    err = capsys.readouterr().err
    assert "· CPU · all layers on the CPU · context 256" in err
    assert f"runtime cpu: {why}" in err
