"""The remote backend against a local HTTP server that injects each fault: every failure is a sentence, the text
already streamed is kept, and Stop closes the connection at once."""

from __future__ import annotations

import queue
import socket
import threading
import time

import pytest

from app.datatypes import Done, LoadSettings, Message, SamplingSettings, Token
from backends.base import GenerationError
from backends.remote import Endpoint, RemoteBackend, list_models
from tests.fixtures.openai_faults import MODEL, PIECES


def endpoint(server, **changes) -> Endpoint:
    return Endpoint(**{"base_url": server.url, "model": MODEL, "name": "stub", **changes})


def loaded_backend(server, **changes) -> RemoteBackend:
    backend = RemoteBackend(endpoint(server, **changes))
    backend.load(f"remote:stub/{MODEL}", LoadSettings())
    return backend


def run(backend: RemoteBackend, sampling: SamplingSettings | None = None, prompt=None,
        cancelled: threading.Event | None = None) -> tuple[list[Token], Done | None, GenerationError | None]:
    tokens, done, error = [], None, None
    try:
        for event in backend.generate("r1", prompt or [Message("user", "hi")], sampling or SamplingSettings(),
                                      cancelled or threading.Event()):
            if isinstance(event, Done):
                done = event
            else:
                tokens.append(event)
    except GenerationError as exc:
        error = exc
    return tokens, done, error


def test_a_reply_streams_with_the_servers_counts_and_timings_beside_ours(faulty_server):
    backend = loaded_backend(faulty_server)
    tokens, done, error = run(backend, SamplingSettings(max_tokens=4, seed=7, temperature=0.2))
    assert error is None
    assert "".join(t.text for t in tokens) == done.text == "".join(PIECES[:4])
    stats = done.stats
    assert stats.stop_reason == "length"  # the server stopped at max_tokens, and said so
    assert stats.generated_tokens == 8 and stats.prompt_tokens == 11  # from the server's usage, not chunks
    assert stats.cached_tokens == 6  # the prompt's tokens its KV cache held: the server's prompt_tokens_details
    assert stats.server == {"predicted_n": 4, "predicted_per_second": 123.0}
    assert stats.ttft_ms > 0 and stats.peak_memory_bytes == 0
    sent = faulty_server.requests[-1]
    assert sent["max_tokens"] == 4 and sent["seed"] == 7 and sent["temperature"] == 0.2 and sent["stream"] is True
    # An unknown server kind gets OpenAI's own fields only (OpenAI answers 400 to one it does not know).
    assert not {"top_k", "min_p", "repeat_penalty", "repetition_penalty"} & set(sent)


def test_a_raw_prompt_goes_to_completions_and_a_server_that_does_not_stream_still_answers(faulty_server):
    backend = loaded_backend(faulty_server)
    _tokens, done, _error = run(backend, prompt="Once upon a time")
    assert done.text == "".join(PIECES) and faulty_server.requests[-1]["prompt"] == "Once upon a time"
    faulty_server.mode = "no-stream"
    _tokens, done, error = run(backend)
    assert error is None and done.text == "".join(PIECES) and done.stats.generated_tokens == 9


def test_the_load_lists_what_the_server_serves_when_the_model_is_not_there(faulty_server):
    backend = RemoteBackend(endpoint(faulty_server, model="gpt-9"))
    with pytest.raises(GenerationError) as caught:
        backend.load("remote:stub/gpt-9", LoadSettings())
    assert caught.value.kind == "model"
    assert "does not serve the model 'gpt-9' (it serves: stub-model)" in caught.value.message
    info = list_models(endpoint(faulty_server))
    assert [m.id for m in info.models] == [MODEL] and info.models[0].n_ctx == 2048 and info.latency_ms > 0


@pytest.mark.parametrize(("mode", "kind", "words"), [
    ("401", "auth", "refused the API key (401: Forbidden for this key)"),
    ("403", "auth", "refused the API key (403: Forbidden for this key)"),
    ("404", "model", "does not serve the model 'stub-model' (it serves: stub-model) (404: The model `stub-model`"),
    ("429", "busy", "is busy (429: Rate limit reached); it asks to retry after 7 s"),
    ("500", "server", "failed with 500: CUDA error: an illegal memory access"),
])
def test_each_refusal_is_a_sentence(faulty_server, mode, kind, words):
    backend = loaded_backend(faulty_server, api_key="secret-key-123")
    faulty_server.mode = mode
    tokens, done, error = run(backend)
    assert done is None and not tokens
    assert error.kind == kind and words in error.message
    assert "secret-key-123" not in f"{error.message} {error.hint} {backend.endpoint!r}"


def test_a_server_that_wants_a_key_says_so(faulty_server):
    faulty_server.api_key = "right-key"
    with pytest.raises(GenerationError) as caught:
        RemoteBackend(endpoint(faulty_server)).load("remote:stub/x", LoadSettings())
    assert caught.value.kind == "auth" and "asks for an API key (401: Invalid API key)" in caught.value.message
    assert caught.value.hint == "set the connection's API key"
    loaded_backend(faulty_server, api_key="right-key")  # and the right one passes
    assert faulty_server.headers == []  # no generation was asked for


def test_a_stream_cut_mid_reply_keeps_the_text_so_far(faulty_server):
    backend = loaded_backend(faulty_server)
    faulty_server.mode = "cut"
    tokens, done, error = run(backend)
    assert done is None and error.kind == "stream"
    assert "".join(t.text for t in tokens) == "".join(PIECES[:3])  # what arrived stays with the caller


def test_a_stream_that_finished_but_sent_no_done_marker_is_complete(faulty_server):
    backend = loaded_backend(faulty_server)
    faulty_server.mode = "no-done"
    _tokens, done, error = run(backend)
    assert error is None and done.text == "".join(PIECES) and done.stats.stop_reason == "eos"


def test_a_stalled_stream_is_given_up_after_the_stall_limit(faulty_server):
    backend = loaded_backend(faulty_server, stall_s=0.5)
    faulty_server.mode = "stall"
    tokens, done, error = run(backend)
    assert error.kind == "stalled" and "sent nothing for 0.5 s" in error.message
    assert "".join(t.text for t in tokens) == "".join(PIECES[:2])


def test_stop_closes_a_stalled_stream_at_once_and_the_server_sees_it(faulty_server):
    backend = loaded_backend(faulty_server)
    faulty_server.mode = "stall"
    cancelled = threading.Event()
    events: queue.Queue = queue.Queue()

    def generate():
        for event in backend.generate("r1", [Message("user", "hi")], SamplingSettings(), cancelled):
            events.put(event)
        events.put(time.monotonic())

    threading.Thread(target=generate, daemon=True).start()
    received = [events.get(timeout=10), events.get(timeout=10)]  # two pieces are here; the server now stalls
    assert "".join(t.text for t in received) == "".join(PIECES[:2])
    assert faulty_server.stalling.wait(10) and not faulty_server.closed.is_set()
    asked = time.monotonic()
    cancelled.set()
    done, ended = events.get(timeout=5), events.get(timeout=5)
    assert done.stats.stop_reason == "cancelled" and done.text == "".join(PIECES[:2])
    assert ended - asked < 0.2
    assert faulty_server.closed.wait(5), "the server never saw the client go"


def test_nobody_listening_is_a_sentence_that_says_to_start_the_server():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    with pytest.raises(GenerationError) as caught:
        RemoteBackend(Endpoint(f"http://127.0.0.1:{port}/v1", "m", name="box")).load("remote:box/m", LoadSettings())
    assert caught.value.kind == "connection"
    assert caught.value.message.startswith(f"box: could not connect to http://127.0.0.1:{port}/v1")
    assert "is the server running?" in caught.value.hint


def test_tls_is_verified_and_a_ca_file_makes_a_private_server_trusted(tls_faulty_server):
    with pytest.raises(GenerationError) as caught:
        list_models(endpoint(tls_faulty_server))
    assert caught.value.kind == "tls" and "could not be verified" in caught.value.message
    assert "never turns verification off" in caught.value.hint
    backend = loaded_backend(tls_faulty_server, ca_file=tls_faulty_server.ca_file)
    _tokens, done, error = run(backend)
    assert error is None and done.text == "".join(PIECES)


def test_the_endpoint_never_shows_its_key():
    shown = f"{Endpoint('http://h/v1', 'm', api_key='sk-very-secret')!r}"
    assert "sk-very-secret" not in shown and "key=set" in shown
