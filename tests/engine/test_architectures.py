"""Mixture-of-experts and hybrid / recurrent architectures load and chat through the engine host: random-weight
GGUFs in the tensor layouts llama.cpp expects (tests/fixtures/models.py, GgufSpec)."""

from __future__ import annotations

import pytest

from app.engine.client import EngineClient
from app.datatypes import Done, LoadSettings, Message, SamplingSettings, Token

HELLO = [Message("system", "You are terse."), Message("user", "Hello there! How are you?")]


@pytest.mark.parametrize(("fixture", "settings"), [
    ("tiny_moe", LoadSettings(n_ctx=1024)),
    ("tiny_moe", LoadSettings(n_ctx=1024, cpu_moe=2)),  # the setting crosses the process boundary
    ("tiny_lfm2", LoadSettings(n_ctx=1024)),
    ("tiny_granite_hybrid", LoadSettings(n_ctx=1024)),
    ("tiny_mamba2", LoadSettings(n_ctx=1024)),
    ("tiny_qwen3vl", LoadSettings(n_ctx=1024)),
    ("tiny_qwen3vlmoe", LoadSettings(n_ctx=1024, cpu_moe=-1)),
    ("tiny_llama4", LoadSettings(n_ctx=16384)),  # beyond the 8192-token chunk
    ("tiny_minimax_m2", LoadSettings(n_ctx=1024, cpu_moe=2)),
    ("tiny_qwen2vl", LoadSettings(n_ctx=1024)),
    ("tiny_bailingmoe2", LoadSettings(n_ctx=1024, cpu_moe=-1)),
    ("tiny_afmoe", LoadSettings(n_ctx=1024)),
])
def test_the_architecture_loads_and_chats_through_the_engine_host(request, fixture, settings):
    models = request.getfixturevalue(fixture)
    with EngineClient() as client:
        loaded = client.load(models.gguf_q8_0, settings)
        assert loaded.backend == "llama.cpp" and loaded.n_layers == models.spec.n_layer
        assert loaded.details["architecture"] == models.spec.arch
        experts_in_ram = models.spec.n_layer if settings.cpu_moe < 0 else settings.cpu_moe
        assert loaded.details.get("experts_in_ram", 0) == experts_in_ram
        for turn in range(2):  # a second reply reuses (or, for recurrent state, rebuilds) the cached prompt
            events = list(client.generate(HELLO, SamplingSettings(max_tokens=10, seed=turn)))
            done = events[-1]
            assert isinstance(done, Done) and done.stats.stop_reason == "length", done
            tokens = [e for e in events if isinstance(e, Token)]
            assert sum(t.count for t in tokens) == 10 and done.text.strip()


def test_chat_cpu_moe_on_the_command_line(tiny_moe):
    import json
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]

    def chat(*extra):
        return subprocess.run([sys.executable, "-m", "app", "chat", str(tiny_moe.gguf_q8_0), "--prompt", "hi",
                               "--json", "--max-tokens", "4", "--ctx", "512", *extra], capture_output=True,
                              text=True, timeout=240, cwd=root)

    result = chat("--cpu-moe", "all")
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)["experts_in_ram"] == 4
    assert json.loads(chat("--cpu-moe", "3").stdout)["experts_in_ram"] == 3
    bad = chat("--cpu-moe", "-2")
    assert bad.returncode != 0 and "--cpu-moe takes a number of layers or 'all'" in bad.stderr
