"""The engine host and its client, with real engines on the generated tiny models."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from app.engine import protocol
from app.engine.client import EngineClient
from app.errors import EngineCrashed, EngineError, ModelFileError
from app.datatypes import Done, LoadSettings, Message, SamplingSettings, Token
from tests.fixtures.models import TINY, write_gguf_f16

HELLO = [Message("system", "You are terse."), Message("user", "Hello there! How are you?")]
VARIANTS = ["gguf_f16", "gguf_q8_0", "gguf_q4_k_m", "mlx_f16", "mlx_4bit"]


@pytest.fixture
def client():
    with EngineClient() as c:
        yield c


def _collect(stream) -> tuple[list[Token], Done]:
    events = list(stream)
    assert isinstance(events[-1], Done)
    assert all(isinstance(e, Token) for e in events[:-1])
    return events[:-1], events[-1]


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_variant_loads_in_the_host_and_streams_with_consistent_stats(client, tiny_models, variant):
    loaded = client.load(getattr(tiny_models, variant), LoadSettings(n_ctx=512))
    assert loaded.backend == ("mlx" if variant.startswith("mlx") else "llama.cpp")
    assert loaded.n_layers == TINY.n_layer and loaded.load_ms > 0 and loaded.memory_bytes["cpu"] > 0

    tokens, done = _collect(client.generate(HELLO, SamplingSettings(max_tokens=24, seed=7)))
    stats = done.stats
    assert "".join(t.text for t in tokens) == done.text
    assert sum(t.count for t in tokens) == stats.generated_tokens
    assert 0 < stats.generated_tokens <= 24
    assert stats.stop_reason in ("eos", "length")
    assert stats.prompt_tokens > 10 and stats.prompt_ms > 0 and stats.prompt_tps > 0
    assert stats.ttft_ms >= stats.prompt_ms
    assert stats.peak_memory_bytes > 0
    if stats.generated_tokens > 1:
        assert stats.decode_ms > 0
        assert stats.decode_tps == pytest.approx(stats.decode_tokens / (stats.decode_ms / 1000))
        assert stats.decode_tokens == stats.generated_tokens - 1
    times = [t.t_ms for t in tokens]
    assert times == sorted(times) and times[0] == pytest.approx(stats.ttft_ms, abs=1.0)


def test_loading_a_gguf_reports_progress_as_llama_cpp_reads_the_tensors(client, tiny_models):
    seen: list[float] = []
    client.load(tiny_models.gguf_f16, LoadSettings(n_ctx=512), on_progress=seen.append)
    assert seen[0] == 0.0 and seen[-1] == 1.0 and seen == sorted(seen)
    assert len([f for f in seen if 0.0 < f < 1.0]) >= 3, seen  # steps between, not only start and end


def test_greedy_generation_is_reproducible_and_stop_strings_cut_the_text(client, tiny_models):
    client.load(tiny_models.gguf_q8_0, LoadSettings(n_ctx=512))
    greedy = SamplingSettings(temperature=0.0, max_tokens=40)
    _, first = _collect(client.generate(HELLO, greedy))
    _, second = _collect(client.generate(HELLO, greedy))
    assert first.text == second.text and first.stats.generated_tokens == 40
    stop = first.text[len(first.text) // 2:][:3]
    assert stop.strip(), f"need a printable stop string from {first.text!r}"
    tokens, cut = _collect(client.generate(HELLO, SamplingSettings(temperature=0.0, max_tokens=40, stop=(stop,))))
    assert cut.stats.stop_reason == "stop"
    assert cut.text == first.text[: first.text.index(stop)]
    assert stop not in "".join(t.text for t in tokens)


def test_cancel_stops_the_generation_and_the_host_stays_usable(client, tiny_models):
    # How fast (the 200 ms goal) is measured side by side in tests/bench/token_loop.py; a test on a shared machine
    # can only say that the cancel stopped the reply early.
    client.load(tiny_models.gguf_q4_k_m, LoadSettings(n_ctx=2048))
    stream = client.generate(HELLO, SamplingSettings(max_tokens=2000, seed=1))
    seen, cancelled = 0, False
    for event in stream:
        if isinstance(event, Token):
            seen += event.count
            if seen >= 5 and not cancelled:
                client.cancel()
                cancelled = True
        else:
            done = event
    assert done.stats.stop_reason == "cancelled"
    assert done.stats.generated_tokens < 2000
    _, again = _collect(client.generate(HELLO, SamplingSettings(max_tokens=8, seed=1)))
    assert again.stats.generated_tokens == 8


def test_cancel_from_another_thread_keeps_the_text_so_far(client, tiny_models):
    client.load(tiny_models.mlx_f16, LoadSettings(n_ctx=2048))
    first_token = threading.Event()
    threading.Thread(target=lambda: (first_token.wait(30), client.cancel()), daemon=True).start()
    texts, done = [], None
    for event in client.generate(HELLO, SamplingSettings(max_tokens=1500, seed=2)):
        if isinstance(event, Token):
            texts.append(event.text)
            first_token.set()
        else:
            done = event
    assert done.stats.stop_reason == "cancelled"
    assert done.text == "".join(texts)


def test_two_threads_sharing_a_client_take_turns_and_cancel_only_their_own_request(client, tiny_models):
    client.load(tiny_models.gguf_q8_0, LoadSettings(n_ctx=2048))
    log: list[tuple[str, str]] = []  # (request, event type) in the order the events arrived
    first_token, results = threading.Event(), {}

    def run(request_id: str, max_tokens: int, queued: threading.Event | None = None) -> None:
        stream = client.generate(HELLO, SamplingSettings(max_tokens=max_tokens, seed=1), request_id=request_id,
                                 on_wait=lambda _ahead: queued.set())
        for event in stream:
            log.append((request_id, type(event).__name__))
            first_token.set()
            if isinstance(event, Done):
                results[request_id] = event

    first = threading.Thread(target=run, args=("first", 2000))
    first.start()
    assert first_token.wait(30)
    waiting = []
    for name in ("second", "third", "fourth"):  # each queued before the next starts: this is their order
        queued = threading.Event()
        waiting.append(threading.Thread(target=run, args=(name, 4, queued)))
        waiting[-1].start()
        assert queued.wait(30)
    client.cancel("third")  # still waiting for its turn: it ends at once, and the engine never runs it
    waiting[1].join(30)
    assert "third" in results and first.is_alive()  # its caller did not wait for the requests ahead of it
    for thread in (first, *waiting):
        thread.join(60)
    assert results["first"].stats.generated_tokens == 2000  # not stopped by the other's cancel
    assert results["third"].stats.stop_reason == "cancelled" and results["third"].text == ""
    assert results["second"].stats.generated_tokens == results["fourth"].stats.generated_tokens == 4
    first_done = log.index(("first", "Done"))
    assert {name for name, kind in log[:first_done + 1] if kind == "Token"} == {"first"}  # nobody ran while first did
    assert [kind for name, kind in log if name == "third"] == ["Done"]
    # The order the host ran them in, from its own log (one timings line per generation it ran): first come,
    # first served, and the cancelled one never ran. (The threads' log above is in the order the threads were
    # scheduled, not the host's.)
    def ran() -> list[str]:
        return [line.split("]")[0].lstrip("[") for line in client.stderr_tail() if "llama.cpp timings" in line]

    deadline = time.monotonic() + 30  # the host's last lines may still be on their way through its stderr pipe
    while len(ran()) < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert ran()[-3:] == ["first", "second", "fourth"] and "third" not in ran()


def test_a_cancel_sent_before_the_host_has_started_the_request_still_stops_it(client, tiny_models):
    client.load(tiny_models.gguf_q8_0, LoadSettings(n_ctx=2048))
    send = client._send

    def send_then_cancel(request: dict) -> None:  # the cancel is written right behind the generate request
        send(request)
        if request["op"] == "generate":
            client.cancel(request["id"])

    client._send = send_then_cancel
    _, done = _collect(client.generate(HELLO, SamplingSettings(max_tokens=1500, seed=1), request_id="early"))
    assert done.stats.stop_reason == "cancelled" and done.stats.generated_tokens < 1500


def test_closing_the_stream_early_cancels_and_the_next_request_works(client, tiny_models):
    client.load(tiny_models.gguf_q8_0, LoadSettings(n_ctx=2048))
    stream = client.generate(HELLO, SamplingSettings(max_tokens=1500))
    next(stream)
    stream.close()
    _, done = _collect(client.generate(HELLO, SamplingSettings(max_tokens=4)))
    assert done.stats.generated_tokens == 4


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSEGV])
def test_a_host_killed_mid_stream_becomes_a_typed_error_and_a_new_host_streams(client, tiny_models, sig):
    client.load(tiny_models.gguf_q8_0, LoadSettings(n_ctx=2048))
    with pytest.raises(EngineCrashed) as crash:
        for i, _event in enumerate(client.generate(HELLO, SamplingSettings(max_tokens=2000))):
            if i == 3:
                os.kill(client.pid, sig)
    error = crash.value
    assert error.returncode == -sig
    assert f"({sig.name})" in str(error) and "during generation" in str(error)
    if sig == signal.SIGSEGV:  # faulthandler printed the host's stack before it died
        assert any("Segmentation fault" in line for line in error.stderr_tail)
    if sig == signal.SIGSEGV:  # a native crash: the crash guard revives the host, a safer one, for the next request
        _, done = _collect(client.generate(HELLO, SamplingSettings(max_tokens=2)))
        assert done.stats.generated_tokens == 2 and "without llama.cpp's extra buffer types" in client.loaded.notice
    else:
        with pytest.raises(EngineCrashed):  # killed (the system's out-of-memory killer): the dead host stays dead
            list(client.generate(HELLO, SamplingSettings(max_tokens=2)))
    client.load(tiny_models.gguf_q8_0, LoadSettings(n_ctx=512))  # a fresh host
    _, done = _collect(client.generate(HELLO, SamplingSettings(max_tokens=6)))
    assert done.stats.generated_tokens == 6


def test_a_host_killed_while_loading_names_the_model(client, tiny_models, monkeypatch):
    send = client._send

    def send_then_kill(request):  # the host dies right after it received the load request
        send(request)
        os.kill(client.pid, signal.SIGKILL)

    monkeypatch.setattr(client, "_send", send_then_kill)
    with pytest.raises(EngineCrashed, match=r"killed \(SIGKILL\) while loading tiny-llama-Q8_0\.gguf"):
        client.load(tiny_models.gguf_q8_0)


def test_bad_model_files_give_a_clear_error_naming_the_file(tiny_models, tmp_path):
    client = EngineClient()
    data = tiny_models.gguf_q8_0.read_bytes()
    truncated = tmp_path / "truncated.gguf"
    truncated.write_bytes(data[: len(data) // 2])
    bad_magic = tmp_path / "page.gguf"
    bad_magic.write_bytes(b"<!DOCTYPE html><html>Bad gateway</html>")
    empty = tmp_path / "empty-folder"
    empty.mkdir()
    cases = [(truncated, r"truncated\.gguf is truncated"), (bad_magic, r"page\.gguf is not a GGUF file"),
             (empty, r"empty-folder holds no model"), (tmp_path / "missing.gguf", r"missing\.gguf does not exist")]
    for path, message in cases:
        with pytest.raises(ModelFileError, match=message):
            client.load(path)
    assert client.pid is None  # nothing was worth starting an engine for
    client.close()


HOSTILE = "{{ ''.__class__.__mro__[1].__subclasses__() }}{% for m in messages %}{{ m['content'] }}{% endfor %}"


def test_a_gguf_chat_template_reaching_for_python_internals_is_refused(client, tiny_models, tmp_path):
    hostile = write_gguf_f16(TINY, tiny_models.hf, tmp_path / "hostile.gguf", chat_template=HOSTILE)
    with pytest.raises(EngineError, match="Python internals") as refused:
        client.load(hostile)
    assert refused.value.kind == "template"
    client.load(tiny_models.gguf_q8_0)  # the same host carries on
    _, done = _collect(client.generate(HELLO, SamplingSettings(max_tokens=3)))
    assert done.stats.generated_tokens == 3


def test_an_mlx_chat_template_reaching_for_python_internals_is_refused(client, tiny_models, tmp_path):
    folder = shutil.copytree(tiny_models.mlx_4bit, tmp_path / "hostile-mlx")
    config_path = folder / "tokenizer_config.json"
    config = json.loads(config_path.read_text())
    config["chat_template"] = HOSTILE
    config_path.write_text(json.dumps(config))
    (folder / "chat_template.jinja").unlink(missing_ok=True)
    with pytest.raises(EngineError, match="template") as refused:
        client.load(folder)
    assert refused.value.kind == "template"


def test_a_conversation_longer_than_the_context_is_refused_and_the_engine_lives(client, tiny_models):
    loaded = client.load(tiny_models.gguf_q8_0, LoadSettings(n_ctx=64))
    assert loaded.n_ctx == 256  # llama.cpp pads the context to a multiple of 256, and says so
    with pytest.raises(EngineError, match=f"context holds {loaded.n_ctx}") as refused:
        list(client.generate([Message("user", "word " * 200)], SamplingSettings(max_tokens=4)))
    assert refused.value.kind == "context"
    _, done = _collect(client.generate([Message("user", "hi")], SamplingSettings(max_tokens=4)))
    assert done.stats.generated_tokens >= 1


def test_the_parent_never_imports_an_inference_library(tiny_models):
    code = (
        "import sys\n"
        "from app.engine.client import EngineClient\n"
        "from backends.base import Message, SamplingSettings\n"
        "with EngineClient() as c:\n"
        f"    for path in ({str(tiny_models.gguf_q8_0)!r}, {str(tiny_models.mlx_4bit)!r}):\n"
        "        c.load(path)\n"
        "        done = list(c.generate([Message('user', 'hi')], SamplingSettings(max_tokens=3)))[-1]\n"
        "        assert done.stats.generated_tokens == 3\n"
        "leaked = sorted(m for m in sys.modules if m.split('.')[0] in\n"
        "                ('llama_cpp', 'mlx', 'mlx_lm', 'torch', 'exllamav2', 'exllamav3', 'transformers'))\n"
        "print(leaked)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240,
                            cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip() == "[]"


@pytest.mark.parametrize("variant", ["gguf_q8_0", "mlx_f16"])
def test_a_raw_prompt_reaches_the_model_without_the_chat_template(client, tiny_models, variant):
    from tokenizers import Tokenizer

    raw = "Once upon a time, the quick brown fox"
    expected = len(Tokenizer.from_file(str(tiny_models.hf / "tokenizer.json")).encode(raw).ids)
    client.load(getattr(tiny_models, variant), LoadSettings(n_ctx=512))
    _, done = _collect(client.generate(raw, SamplingSettings(max_tokens=3)))
    assert done.stats.prompt_tokens == expected  # no <|im_start|> turn wrapped around it
    _, chat = _collect(client.generate([Message("user", raw)], SamplingSettings(max_tokens=3)))
    assert chat.stats.prompt_tokens > expected


def test_a_prompt_is_counted_as_the_generation_counts_it_and_a_conversation_reuses_its_prefix(client, tiny_models):
    client.load(tiny_models.gguf_q8_0, LoadSettings(n_ctx=512))
    greedy = SamplingSettings(max_tokens=4, temperature=0)
    counted = client.count_tokens(HELLO, greedy)
    tokens, done = _collect(client.generate(HELLO, greedy))
    assert counted == done.stats.prompt_tokens > 5
    # the first event says the prompt's figures (a stream's opening), the others none
    assert tokens[0].prompt_tokens == counted and tokens[0].cached_tokens == done.stats.cached_tokens
    assert all(t.prompt_tokens == 0 and t.cached_tokens == 0 for t in tokens[1:])
    # the next turn of the conversation: its earlier turns are in the KV cache, and counting did not disturb it
    turn = [*HELLO, Message("assistant", done.text), Message("user", "And then?")]
    counted = client.count_tokens(turn, greedy)
    tokens, second = _collect(client.generate(turn, greedy))
    assert second.stats.prompt_tokens == counted
    # (at least the first turn's prompt, which the second renders the same; at least one token is evaluated anew)
    assert done.stats.prompt_tokens - 1 <= second.stats.cached_tokens < counted
    assert tokens[0].cached_tokens == second.stats.cached_tokens
    raw = "Once upon a time, the quick brown fox"
    assert client.count_tokens(raw) == _collect(client.generate(raw, greedy))[1].stats.prompt_tokens


def test_an_mlx_prompt_is_counted_as_its_generation_counts_it(client, tiny_models):
    """MLX (its CPU build runs here) tokenizes a counted prompt as mlx-lm's generation does: the same figure."""
    client.load(tiny_models.mlx_f16, LoadSettings(n_ctx=512))
    greedy = SamplingSettings(max_tokens=3, temperature=0)
    for prompt in (HELLO, "Once upon a time, the quick brown fox"):
        counted = client.count_tokens(prompt, greedy)
        tokens, done = _collect(client.generate(prompt, greedy))
        assert counted == done.stats.prompt_tokens == tokens[0].prompt_tokens > 5


@pytest.mark.engine
def test_a_host_speaking_another_protocol_version_is_refused_with_a_sentence(monkeypatch):
    other = ("import app.engine.protocol as p; p.PROTOCOL_VERSION = 99; "  # a host from another release
             "from app.engine.host import main; main()")
    monkeypatch.setattr("app.engine.client.host_command", lambda: [sys.executable, "-c", other])
    client = EngineClient()
    with pytest.raises(EngineError) as refused:
        client.start()
    assert refused.value.kind == "protocol"
    assert str(refused.value) == (f"the engine host speaks protocol version 99, this QuantDesk speaks version "
                                  f"{protocol.PROTOCOL_VERSION}: the app and its engine come from different QuantDesk "
                                  "versions (reinstall QuantDesk)")
    assert not client.alive and client.pid is None  # the stranger was sent away


def test_events_reach_their_own_request_when_the_chat_and_another_user_share_the_host(client, tiny_models):
    client.load(tiny_models.gguf_q8_0, LoadSettings(n_ctx=2048))
    # Sent one after the other before either is read: the host queues the second behind the first.
    first = client.generate(HELLO, SamplingSettings(max_tokens=30, seed=1), request_id="a")
    second = client.generate("Once upon a time", SamplingSettings(max_tokens=7, seed=1), request_id="b")
    tokens_b, done_b = _collect(second)  # read first: its events wait until the first request is through
    tokens_a, done_a = _collect(first)
    assert {t.request_id for t in tokens_a} == {"a"} and done_a.stats.generated_tokens == 30
    assert {t.request_id for t in tokens_b} == {"b"} and done_b.stats.generated_tokens == 7
    assert done_b.stats.prompt_tokens < done_a.stats.prompt_tokens  # b's raw prompt, not a's chat


def test_every_engine_client_takes_the_arguments_of_the_protocol():
    """EngineClientLike is structural, so a class missing a parameter fails only when a caller passes it: the app's
    local server passed events_every_s to the Chat's ModelPool, and every request to the Chat's model was a 500.
    Each engine client, and each double the GUI tests and screenshots use in its place, takes every parameter of
    the protocol's calls by the same name (or through **kwargs)."""
    import inspect

    from app.engine.client import EngineClientLike
    from app.engine.pool import ModelPool
    from tests.bench.render_pages import ScriptedEngine
    from tests.ui.engine_double import EngineDouble, SuccessiveEngines

    missing = []
    for cls in (EngineClient, ModelPool, EngineDouble, SuccessiveEngines, ScriptedEngine):
        for call in ("load", "generate", "embed", "count_tokens", "save_state", "restore_state", "cancel", "close"):
            if not hasattr(cls, call):
                continue  # a double for the chat only (no embeddings): a caller asking for it fails at once
            wanted = inspect.signature(getattr(EngineClientLike, call)).parameters
            has = inspect.signature(getattr(cls, call)).parameters
            open_ended = any(p.kind == p.VAR_KEYWORD for p in has.values())
            missing += [f"{cls.__name__}.{call}({name})" for name in wanted
                        if name not in has and not (open_ended and wanted[name].kind == wanted[name].KEYWORD_ONLY)]
    assert missing == []
