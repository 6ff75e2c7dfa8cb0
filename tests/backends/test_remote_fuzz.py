"""Property-based tests of the remote backend's reading of what a server answers (backends/remote.py): whatever
``/models``, a streamed or whole ``/chat/completions`` and ``/completions`` send back, loading, a reply and a
score end in a result or a GenerationError with a sentence; never another exception, and never one that kills
the stream's reader thread (which would end the reply silently, as if it were complete).

The answers come from a real HTTP server on 127.0.0.1 that sends whatever bytes the example holds; the bodies are
mostly well formed (OpenAI's shapes) with hostile values in the fields the backend reads.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from app.datatypes import Done, LoadSettings, Message, SamplingSettings, Token
from backends.base import GenerationError
from backends.remote import Endpoint, RemoteBackend
from tests.fixtures.limits import capped_examples

MODEL = "m"
EXTREME = [0, -1, 1, 2**31, 2**63, 2**64, 10**30, True, False, 1e308, -0.0]
json_scalars = (st.none() | st.booleans() | st.sampled_from(EXTREME) | st.integers() | st.floats()
                | st.text(max_size=12) | st.sampled_from(["", "stop", "length", "[DONE]", "data:"]))
json_values = st.recursive(json_scalars, lambda children: st.lists(children, max_size=4)
                           | st.dictionaries(st.text(max_size=8), children, max_size=4), max_leaves=12)


def maybe(strategy: st.SearchStrategy) -> st.SearchStrategy:
    """The well-formed value, or now and then any JSON value instead."""
    return strategy | strategy | json_values


models_answers = st.fixed_dictionaries({"object": st.just("list"), "data": maybe(st.lists(
    st.fixed_dictionaries({"id": st.just(MODEL)}, optional={
        "owned_by": maybe(st.sampled_from(["vllm", "me", "llamacpp", "quantdesk", "openai"])),
        "max_model_len": maybe(st.sampled_from(EXTREME) | st.integers(1, 1 << 20)),
        "meta": maybe(st.fixed_dictionaries({}, optional={"n_ctx": json_values, "n_ctx_train": json_values}))}),
    min_size=1, max_size=3))})
choices = maybe(st.lists(maybe(st.fixed_dictionaries({}, optional={
    "delta": maybe(st.fixed_dictionaries({}, optional={"content": maybe(st.text(max_size=8)), "role": json_values})),
    "message": maybe(st.fixed_dictionaries({}, optional={"content": maybe(st.text(max_size=8))})),
    "text": maybe(st.text(max_size=8)),
    "finish_reason": maybe(st.sampled_from(["stop", "length", None]))})), max_size=3))
usage = maybe(st.fixed_dictionaries({}, optional={"prompt_tokens": maybe(st.sampled_from(EXTREME)),
                                                  "completion_tokens": maybe(st.sampled_from(EXTREME))}))
chunks = maybe(st.fixed_dictionaries({"choices": choices}, optional={"usage": usage, "timings": json_values}))


@st.composite
def event_streams(draw) -> bytes:
    lines = []
    for chunk in draw(st.lists(chunks, max_size=5)):
        lines.append(b"data: " + json.dumps(chunk).encode())
    for _ in range(draw(st.integers(0, 2))):  # junk between the events: comments, a bad event, raw bytes
        junk = draw(st.sampled_from([b": keep-alive", b"event: x", b"data: {", b"data:", b"data: [DONE]"])
                    | st.binary(max_size=12))
        lines.insert(draw(st.integers(0, len(lines))), junk)
    if draw(st.booleans()):
        lines.append(b"data: [DONE]")
    return b"\n\n".join(lines) + b"\n\n"


score_answers = maybe(st.fixed_dictionaries({"choices": maybe(st.lists(st.fixed_dictionaries({"logprobs": maybe(
    st.fixed_dictionaries({"text_offset": maybe(st.lists(maybe(st.integers(-1, 20)), max_size=6)),
                           "token_logprobs": maybe(st.lists(maybe(st.floats() | st.none() | st.sampled_from(EXTREME)),
                                                            max_size=6))}))}), max_size=2))}))


def as_body(value) -> bytes:
    return json.dumps(value).encode()


answers = st.fixed_dictionaries({
    "models": st.tuples(st.sampled_from([200] * 6 + [401, 404, 500]),
                        models_answers.map(as_body) | json_values.map(as_body) | st.binary(max_size=20)),
    "stream": st.tuples(st.sampled_from([200] * 6 + [404, 429, 500]),
                        st.sampled_from(["text/event-stream"] * 3 + ["application/json"]),
                        event_streams() | st.fixed_dictionaries({"choices": choices, "usage": usage}).map(as_body)
                        | json_values.map(as_body)),
    "score": st.tuples(st.sampled_from([200] * 4 + [400]), score_answers.map(as_body) | st.binary(max_size=20)),
})


class _Answers(BaseHTTPRequestHandler):
    """Answers each path with the bytes the current example holds (HTTP/1.0: one request per connection, so no
    server thread outlives its answer)."""

    def log_message(self, format, *args):  # noqa: A002 - quiet
        pass

    def _answer(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        self._answer(*self.server.answers["models"])

    def do_POST(self):
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.endswith("/chat/completions"):
            status, content_type, body = self.server.answers["stream"]
            self._answer(status, body, content_type)
        else:
            self._answer(*self.server.answers["score"])


@pytest.fixture
def answering_server() -> Iterator[ThreadingHTTPServer]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Answers)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="fuzz-openai-server", daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


@pytest.fixture
def thread_errors(monkeypatch) -> list[BaseException]:
    """Exceptions that ended a thread (the stream's reader), instead of pytest's warning after the test."""
    found: list[BaseException] = []
    monkeypatch.setattr(threading, "excepthook", lambda args: found.append(args.exc_value))
    return found


def _is_sentence(error: GenerationError) -> None:
    text = str(error)
    assert text and len(text) < 2000, text


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # the server is set for each example
@given(answers=answers)
@example(answers={"models": (200, as_body({"data": [{"id": MODEL}]})), "stream": (200, "text/event-stream",
                  b"data: 1\n\n"), "score": (200, as_body({"choices": [{"logprobs": {"text_offset": 1,
                                                                                       "token_logprobs": []}}]}))})
@example(answers={"models": (200, as_body({"data": [{"id": MODEL}]})), "stream": (200, "application/json",
                  b"[]"), "score": (200, as_body({"choices": [{"logprobs": {"text_offset": [0, 1, 2],
                                                                            "token_logprobs": [None, 10**400 // 10**100,
                                                                                               "x"]}}]}))})
@example(answers={"models": (200, as_body({"data": [{"id": MODEL}]})), "stream": (200, "text/event-stream",
                  b'data: {"choices": [{"delta": "x"}, 5]}\n\ndata: {"choices": 7, "usage": {"prompt_tokens": -3}}'
                  b"\n\n"), "score": (200, as_body({"choices": [{"logprobs": {"text_offset": ["a"],
                                                                              "token_logprobs": [1]}}]}))})
@capped_examples
def test_any_server_answer_gives_a_result_or_a_sentence(answers, answering_server, thread_errors):
    answering_server.answers = answers
    host, port = answering_server.server_address[:2]
    backend = RemoteBackend(Endpoint(f"http://{host}:{port}/v1", MODEL, name="fuzz", timeout_s=10, stall_s=10))
    try:
        loaded = backend.load(f"remote:fuzz/{MODEL}", LoadSettings())
    except GenerationError as exc:
        _is_sentence(exc)
        return
    assert loaded.n_ctx > 0
    try:
        events = list(backend.generate("r", [Message("user", "hi")], SamplingSettings(max_tokens=8),
                                       threading.Event()))
        assert all(isinstance(e, Token) for e in events[:-1]) and isinstance(events[-1], Done)
        stats = events[-1].stats
        assert stats.generated_tokens >= 0 and stats.prompt_tokens >= 0
        json.dumps(stats.server)
    except GenerationError as exc:
        _is_sentence(exc)
    try:
        scored = backend.score("s", text="hello there")
        assert scored.token_logprobs and all(isinstance(v, float) for v in scored.token_logprobs)
    except GenerationError as exc:
        _is_sentence(exc)
    assert thread_errors == []
