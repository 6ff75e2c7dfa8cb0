"""The crash guard (app/engine/guard.py) on real engine hosts: a host that aborts in a decode (``QUANTDESK_TEST_CRASH``,
as llama.cpp's AMX kernels crash on some Xeons) while loading or under a request is started again without llama.cpp's
extra buffer types, the request replayed, the sentence said, and the configuration remembered; a crash nothing cures
is said once with the engine's last lines kept in a file."""

from __future__ import annotations

import json
import signal
import threading

import pytest

from app import paths
from app.datatypes import Done, LoadSettings, Message, SamplingSettings
from app.engine import guard
from app.engine.client import EngineClient
from app.errors import EngineCrashed

pytest.importorskip("llama_cpp")

GREEDY = SamplingSettings(temperature=0.0, max_tokens=8, seed=1)
SETTINGS = LoadSettings(n_ctx=512, gpu_layers=0)


def _reply(client: EngineClient, text: str = "hi") -> Done:
    return [e for e in client.generate([Message("user", text)], GREEDY) if isinstance(e, Done)][0]


def _crash_in(monkeypatch, mode: str) -> None:
    monkeypatch.setenv("QUANTDESK_TEST_CRASH", mode)  # the engine host inherits it


@pytest.fixture
def reference(tiny_models) -> str:
    """The greedy reply without any crash switch, for comparing replays with."""
    with EngineClient() as client:
        client.load(tiny_models.gguf_q4_k_m, SETTINGS)
        return _reply(client).text


def test_a_crash_in_the_load_warm_up_is_retried_without_extra_buffer_types_and_remembered(monkeypatch, tiny_models,
                                                                                          reference):
    _crash_in(monkeypatch, "warm-up")
    with EngineClient() as client:
        loaded = client.load(tiny_models.gguf_q4_k_m, SETTINGS)
        first_pid = client.pid
        assert "crashed (SIGABRT) while loading" in loaded.notice
        assert "without llama.cpp's extra buffer types" in loaded.notice and "remembered" in loaded.notice
        assert _reply(client).text == reference  # the safer configuration answers as the default one does
    [learned] = guard.learned()
    assert learned.rung == guard.NO_EXTRA_BUFFER_TYPES and learned.quant == "Q4_K_M"
    assert learned.runtime.startswith("cpu") and "SIGABRT" in learned.crash
    assert json.loads(guard.store_path().read_text())["learned"][0]["quant"] == "Q4_K_M"

    # The next load goes straight to what was learned: no crash, one host, and a shorter sentence.
    with EngineClient() as client:
        loaded = client.load(tiny_models.gguf_q4_k_m, SETTINGS)
        assert loaded.notice.startswith("Loaded without llama.cpp's extra buffer types") and "as learned" in loaded.notice
        assert client.pid != first_pid and _reply(client).text == reference
    # What was learned is for this quant: another quant of the same model starts on llama.cpp's defaults.
    with EngineClient() as client:
        assert "crashed" in client.load(tiny_models.gguf_q8_0, SETTINGS).notice
    assert {e.quant for e in guard.learned()} == {"Q4_K_M", "Q8_0"}
    assert guard.forget() == 2 and guard.learned() == []


def test_a_crash_under_a_reply_is_replayed_on_a_revived_host_and_said_on_the_done(monkeypatch, tiny_models,
                                                                                  reference):
    _crash_in(monkeypatch, "reply")
    with EngineClient() as client:
        loaded = client.load(tiny_models.gguf_q4_k_m, SETTINGS)
        assert loaded.notice == ""  # the warm-up passed: the crash waits for the reply
        dead = client.pid
        done = _reply(client)
        assert done.text == reference and done.stats.stop_reason != "cancelled"
        assert "crashed (SIGABRT) during generation" in done.notice and client.pid != dead
        assert client.loaded is not None and client.loaded.notice == done.notice
        assert _reply(client).notice == ""  # said once
    assert guard.rung_for(guard.learned()[0].key) == guard.NO_EXTRA_BUFFER_TYPES


def test_requests_waiting_on_a_crashed_host_are_all_answered_after_one_revival(monkeypatch, tiny_models, reference):
    _crash_in(monkeypatch, "reply")
    with EngineClient() as client:
        client.load(tiny_models.gguf_q4_k_m, SETTINGS)
        # Three generations and a count sent at once: the host dies under the first, the rest wait in its queue.
        streams = [client.generate([Message("user", "hi")], GREEDY) for _ in range(3)]
        counted: list[int] = []
        counter = threading.Thread(target=lambda: counted.append(client.count_tokens([Message("user", "hi")])))
        counter.start()
        dones = [[e for e in s if isinstance(e, Done)][0] for s in streams]
        counter.join(timeout=120)
        assert [d.text for d in dones] == [reference] * 3 and counted and counted[0] > 0
        assert len(guard.learned()) == 1  # one revival for the one dead host


def test_a_crash_with_no_safer_configuration_left_is_said_once_with_the_log_kept(monkeypatch, tiny_models):
    _crash_in(monkeypatch, "always")
    with EngineClient() as client, pytest.raises(EngineCrashed) as caught:
        client.load(tiny_models.gguf_q4_k_m, SETTINGS)
    crash = caught.value
    assert crash.returncode == -signal.SIGABRT
    assert "crashed (SIGABRT) while loading" in crash.message
    assert "also without llama.cpp's extra buffer types" in crash.message
    logs = sorted(paths.log_dir().glob("engine-crash-*.log"))
    assert len(logs) == 1 and str(logs[0]) in crash.hint
    assert "aborting in llama_decode" in logs[0].read_text()  # the engine's own last lines
    assert guard.learned() == []  # nothing worked: nothing to remember


def test_a_crash_the_guard_has_no_rung_for_is_not_retried(monkeypatch, tiny_models):
    # Already loaded without extra buffer types (as asked): a crash there has nowhere safer to go.
    _crash_in(monkeypatch, "always")
    with EngineClient() as client, pytest.raises(EngineCrashed, match=r"crashed \(SIGABRT\) while loading"):
        client.load(tiny_models.gguf_q4_k_m, LoadSettings(n_ctx=512, gpu_layers=0, extra_buffer_types=False))
    assert len(list(paths.log_dir().glob("engine-crash-*.log"))) == 1


def test_a_host_closed_on_purpose_is_not_revived(monkeypatch, tiny_models):
    _crash_in(monkeypatch, "reply")
    client = EngineClient()
    client.load(tiny_models.gguf_q4_k_m, SETTINGS)
    client.close()
    assert not client.revivable
    client.start()  # a new host, no model: nothing to replay
    with pytest.raises(Exception, match="no model is loaded"):
        _reply(client)
    client.close()
    assert guard.learned() == []


def test_the_store_reads_what_another_version_wrote_and_skips_what_it_cannot(tmp_path):
    guard.store_path().parent.mkdir(parents=True, exist_ok=True)
    guard.store_path().write_text(json.dumps({"learned": [
        {"cpu": "Xeon", "runtime": "cpu 0.3.36", "quant": "Q4_1", "rung": guard.NO_EXTRA_BUFFER_TYPES,
         "crash": "x", "learned_at": "2026-12-01T10:00:00+00:00", "from_the_future": 1},
        {"cpu": "Xeon", "runtime": "cpu 0.3.36", "quant": "Q8_0", "rung": "a-rung-of-a-later-version"},
        {"cpu": "Xeon"},
    ]}))
    [entry] = guard.learned()
    assert entry.quant == "Q4_1" and "Q4_1 on Xeon with the cpu 0.3.36 runtime" in entry.words()
    guard.store_path().write_text("{not json")
    assert guard.learned() == [] and guard.rung_for(guard.Key("Xeon", "cpu", "Q4_1")) == guard.DEFAULT


def test_only_native_crash_signals_are_retried():
    def crash(code: int | None) -> EngineCrashed:
        return EngineCrashed("x", returncode=code)

    assert guard.is_native_crash(crash(-signal.SIGSEGV)) and guard.is_native_crash(crash(-signal.SIGILL))
    assert not guard.is_native_crash(crash(-signal.SIGKILL))  # the system's out-of-memory killer
    assert not guard.is_native_crash(crash(1)) and not guard.is_native_crash(crash(None))
    assert guard.safer(guard.DEFAULT) == guard.NO_EXTRA_BUFFER_TYPES and guard.safer(guard.NO_EXTRA_BUFFER_TYPES) is None
    assert guard.safer(guard.BASIC_CPU_VARIANT) is None


def test_a_portable_runtime_goes_down_to_its_most_basic_cpu_variant(monkeypatch, tiny_models, portable_runtime):
    """A crash in the chosen CPU variant's kernels (QUANTDESK_TEST_CRASH=optimized-cpu) survives the extra buffer types
    going off too, and is cured on the runtime's x86-64 variant, which is remembered."""
    _crash_in(monkeypatch, "optimized-cpu")
    with EngineClient() as client:
        loaded = client.load(tiny_models.gguf_q4_k_m, SETTINGS, runtime=portable_runtime.name)
        assert "on the runtime's most basic CPU variant" in loaded.notice and loaded.runtime == portable_runtime.name
        assert _reply(client).stats.generated_tokens > 0
    [learned] = guard.learned()
    assert learned.rung == guard.BASIC_CPU_VARIANT and learned.runtime.startswith(portable_runtime.name)


def test_a_runtime_without_cpu_variants_has_no_basic_rung(tmp_path):
    assert guard.safer(guard.NO_EXTRA_BUFFER_TYPES, tmp_path) is None  # a native build: nothing below
    assert guard.safer(guard.NO_EXTRA_BUFFER_TYPES, None) is None
