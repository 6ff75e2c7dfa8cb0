"""MLX's continuous batching (issue 38, backends/mlx_batch.py): a model loaded with ``LoadSettings.parallel`` > 1
decodes concurrent replies together through mlx-lm's BatchGenerator, on the real tiny float16 MLX models. Each reply
keeps its own sampler, penalty, grammar, stop strings, token limit, thinking budget and cancel, and its text is the
one it gets alone (mlx's CPU kernels give a row of a batch the logits it gets alone on these models: compared token
for token); a reply joins at the next step and leaves when done. What mlx-lm cannot batch (speculation, vision) loads
with one reply at a time and says why."""

from __future__ import annotations

import threading
import time

import pytest

from app.datatypes import Done, LoadSettings, Message, SamplingSettings, Token
from app.engine.client import EngineClient

pytest.importorskip("mlx_lm", reason="needs mlx-lm: pip install -e '.[mlx]' (mlx[cpu] on Linux)")

from backends import mlx_batch  # noqa: E402
from backends.mlx import MlxBackend  # noqa: E402

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")  # mlx-lm's transformers import

PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}


def _chat(text: str) -> list[Message]:
    return [Message("user", text)]


def _greedy(max_tokens: int, **more) -> SamplingSettings:
    return SamplingSettings(temperature=0.0, max_tokens=max_tokens, **more)


class _Reply:
    """One reply's events as its thread read them, each stamped with a shared counter (who streamed when)."""

    def __init__(self) -> None:
        self.tokens: list[Token] = []
        self.done: Done | None = None
        self.ticks: list[int] = []
        self.error: BaseException | None = None

    @property
    def text(self) -> str:
        return "".join(t.text for t in self.tokens)


class _Together:
    """Replies of one backend, each generated on a thread of its own as the engine host runs them."""

    def __init__(self, backend: MlxBackend) -> None:
        self.backend = backend
        self.replies: dict[str, _Reply] = {}
        self.cancels: dict[str, threading.Event] = {}
        self._tick = 0
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []

    def start(self, name: str, prompt, sampling: SamplingSettings, on_token=None) -> _Reply:
        reply = self.replies[name] = _Reply()
        cancelled = self.cancels[name] = threading.Event()

        def read() -> None:
            try:
                for event in self.backend.generate(name, prompt, sampling, cancelled):
                    with self._lock:
                        self._tick += 1
                        reply.ticks.append(self._tick)
                    if isinstance(event, Token):
                        reply.tokens.append(event)
                        if on_token is not None:
                            on_token(reply)
                    else:
                        reply.done = event
            except Exception as exc:  # the test asserts on it
                reply.error = exc

        thread = threading.Thread(target=read, name=f"reply-{name}")
        self._threads.append(thread)
        thread.start()
        return reply

    def join(self) -> None:
        for thread in self._threads:
            thread.join(120)
            assert not thread.is_alive(), "a reply did not end"


def _loaded(model, parallel: int, **more) -> MlxBackend:
    backend = MlxBackend()
    backend.load(str(model), LoadSettings(n_ctx=1024, parallel=parallel, **more))
    return backend


def _alone(backend: MlxBackend, prompt, sampling: SamplingSettings) -> Done:
    *_, done = backend.generate("alone", prompt, sampling, threading.Event())
    assert isinstance(done, Done)
    return done


def _same(alone: Done, batched: _Reply, name: str) -> None:
    assert batched.error is None, f"{name}: {batched.error}"
    done = batched.done
    assert done is not None, name
    assert done.text == alone.text and done.reasoning == alone.reasoning, name
    assert done.tool_calls == alone.tool_calls, name
    assert (done.stats.generated_tokens, done.stats.stop_reason, done.stats.prompt_tokens) == (
        alone.stats.generated_tokens, alone.stats.stop_reason, alone.stats.prompt_tokens), name
    assert batched.text == done.text, name  # the stream adds up to the whole


@pytest.fixture(scope="module")
def alone_backend(tiny_models):
    backend = _loaded(tiny_models.mlx_f16, 1)
    yield backend
    backend.unload()


@pytest.fixture(scope="module")
def batched_backend(tiny_models):
    backend = _loaded(tiny_models.mlx_f16, 4)
    yield backend
    backend.unload()


def test_concurrent_replies_with_their_own_settings_each_get_their_text_alone(alone_backend, batched_backend):
    """Four replies at once, each with settings of its own: greedy with a token limit, a repetition penalty with the
    tokens' log-probabilities, a seeded sampled one, a stop string, and one held to a JSON schema (llguidance), then
    a raw prompt: each text, count, log-probability and end is the one it gets alone, and they decoded together."""
    raw = "Once upon a time, in a small village,"
    free = _alone(alone_backend, raw, _greedy(40))
    stop = free.text[len(free.text) // 2: len(free.text) // 2 + 4]
    requests = {
        "greedy": (_chat("Name three colours."), _greedy(17)),
        "penalty": (_chat("Tell me about lighthouses and the sea."), _greedy(30, repeat_penalty=1.3, logprobs=3)),
        "sampled": (_chat("Write a short poem about the sea."),
                    SamplingSettings(temperature=0.9, seed=11, top_k=40, top_p=0.9, max_tokens=35)),
        "stopped": (raw, _greedy(40, stop=(stop,))),
        "json": (_chat("Describe a person as JSON."), _greedy(60, json_schema=PERSON)),
    }
    alone = {name: _alone(alone_backend, *request) for name, request in requests.items()}
    assert alone["stopped"].stats.stop_reason == "stop" and stop not in alone["stopped"].text
    assert alone["greedy"].stats.stop_reason == "length" and alone["greedy"].stats.generated_tokens == 17
    run = _Together(batched_backend)
    batch = batched_backend._batch
    assert batch is not None and batched_backend.parallel == 4
    before = batch.batched_steps
    for name, (prompt, sampling) in requests.items():
        run.start(name, prompt, sampling)
    run.join()
    for name in requests:
        _same(alone[name], run.replies[name], name)
    penalty = [e for t in run.replies["penalty"].tokens for e in t.logprobs]
    assert [(e.id, round(e.logprob, 4)) for e in penalty] == [
        (e.id, round(e.logprob, 4)) for e in _alone_entries(alone_backend, *requests["penalty"])]
    assert len(penalty) == 30 and all(len(e.top) == 3 for e in penalty)
    held = run.replies["json"].done.text  # the grammar's JSON (a random model fills the name up to the token limit)
    assert held.startswith("{") and '"name"' in held
    assert batch.batched_steps - before >= 10, "the replies were not decoded together"


def _alone_entries(backend, prompt, sampling):
    return [e for event in backend.generate("alone", prompt, sampling, threading.Event()) if isinstance(event, Token)
            for e in event.logprobs]


def test_cancelling_one_reply_mid_stream_leaves_the_others_text_unchanged(alone_backend, batched_backend):
    prompts = {"a": "The fox", "b": "The cat", "c": "The owl"}
    greedy = _greedy(120)
    alone = {name: _alone(alone_backend, prompt, greedy) for name, prompt in prompts.items()}
    run = _Together(batched_backend)

    def cancel_b(reply: _Reply) -> None:
        if len(reply.tokens) == 3:
            run.cancels["b"].set()

    for name, prompt in prompts.items():
        run.start(name, prompt, greedy, on_token=cancel_b if name == "b" else None)
    run.join()
    cancelled = run.replies["b"].done
    assert cancelled is not None and cancelled.stats.stop_reason == "cancelled"
    assert 3 <= cancelled.stats.generated_tokens < 120
    assert alone["b"].text.startswith(cancelled.text)
    for name in ("a", "c"):
        _same(alone[name], run.replies[name], name)
    _same(alone["b"], _run_one(batched_backend, prompts["b"], greedy), "b again")  # the batch serves on


def _run_one(backend, prompt, sampling) -> _Reply:
    run = _Together(backend)
    run.start("one", prompt, sampling)
    run.join()
    return run.replies["one"]


def test_a_reply_that_joins_while_another_streams_gets_its_tokens_before_that_one_ends(alone_backend,
                                                                                       batched_backend):
    """A short reply sent while a long one streams joins the batch at its next step: its tokens come, and it ends,
    while the long one still streams; both texts are as alone."""
    long, short = _greedy(400), _greedy(8)
    alone_long = _alone(alone_backend, "The fox", long)
    alone_short = _alone(alone_backend, _chat("Hi"), short)
    assert alone_long.stats.generated_tokens > 100
    run = _Together(batched_backend)
    joined = threading.Event()

    def join_short(reply: _Reply) -> None:
        if sum(t.count for t in reply.tokens) >= 20 and not joined.is_set():
            joined.set()
            run.start("short", _chat("Hi"), short)

    run.start("long", "The fox", long, on_token=join_short)
    run.join()
    run.join()  # the short one's thread, started from the long one's
    first_long, last_long = run.replies["long"].ticks[0], run.replies["long"].ticks[-1]
    short_ticks = run.replies["short"].ticks
    assert first_long < short_ticks[0] and short_ticks[-1] < last_long, "the short reply waited for the long one"
    _same(alone_long, run.replies["long"], "long")
    _same(alone_short, run.replies["short"], "short")


def test_a_thinking_budget_and_its_forced_closing_work_in_the_batch(tiny_thinking_mlx):
    """The thinking budget forces the format's closing tag into one reply (a logits processor of its own) while
    another thinks on unbudgeted: each reads its thinking and answer as alone."""
    ask = _chat("Why is the sky blue?")
    requests = {"budget": (ask, _greedy(40, reasoning_budget=8)), "free": (_chat("And the sea?"), _greedy(30))}
    backend = _loaded(tiny_thinking_mlx, 1)
    try:
        alone = {name: _alone(backend, *request) for name, request in requests.items()}
    finally:
        backend.unload()
    assert alone["budget"].reasoning and alone["budget"].text and alone["free"].text == ""
    backend = _loaded(tiny_thinking_mlx, 2)
    try:
        run = _Together(backend)
        for name, (prompt, sampling) in requests.items():
            run.start(name, prompt, sampling)
        run.join()
    finally:
        backend.unload()
    for name in requests:
        _same(alone[name], run.replies[name], name)


def test_a_failing_logits_processor_ends_its_own_reply_only(tiny_models):
    """A logits processor that raises (as a grammar refusing the model's token does) ends the reply it belongs to
    with its error; the reply beside it goes on to the end as alone."""
    import mlx_lm

    model, tokenizer = mlx_lm.load(str(tiny_models.mlx_f16))
    prompt = list(tokenizer.encode("The fox"))
    greedy = mlx_batch.sampler(_greedy(1))
    calls = 0

    def failing(tokens, logits):
        nonlocal calls
        calls += 1
        if calls == 5:
            raise ValueError("refused")
        return logits

    def tokens_of(batch, processors, limit) -> list[int]:
        return [token for token, _, _ in batch.run("r", prompt, limit, greedy, processors, False, None)]

    batch = mlx_batch.Batch(model, 2, tokenizer.eos_token_ids, 1024)
    try:
        alone = tokens_of(batch, [], 30)
        results: dict[str, object] = {}

        def read(name, processors):
            try:
                results[name] = tokens_of(batch, processors, 30)
            except ValueError as exc:
                results[name] = exc

        threads = [threading.Thread(target=read, args=("failing", [failing])),
                   threading.Thread(target=read, args=("plain", []))]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
        assert isinstance(results["failing"], ValueError) and str(results["failing"]) == "refused"
        assert results["plain"] == alone and len(alone) == 30
        assert tokens_of(batch, [], 30) == alone  # the batch serves on
    finally:
        batch.close()
    assert not batch._thread.is_alive()


def test_speculation_and_vision_load_one_reply_at_a_time_and_say_why(tiny_draft_pair, tiny_mlx_vision):
    backend = MlxBackend()
    try:
        loaded = backend.load(str(tiny_draft_pair.mlx_target), LoadSettings(
            n_ctx=512, parallel=4, draft=str(tiny_draft_pair.mlx_draft), draft_tokens=4))
        assert loaded.details["parallel"] == 1 and backend.parallel == 1 and backend._batch is None
        assert loaded.details["parallel_note"] == "one reply at a time: speculative decoding verifies one " \
                                                 "sequence's guesses"
    finally:
        backend.unload()
    backend = MlxBackend()
    try:
        loaded = backend.load(str(tiny_mlx_vision), LoadSettings(n_ctx=512, parallel=4))
        assert loaded.details["parallel"] == 1 and "mlx-vlm" in loaded.details["parallel_note"]
    finally:
        backend.unload()


HISTORY = [Message("system", "You are terse."),
           Message("user", "Tell me about lighthouses and the sea, the ships and the keepers. " * 6)]


def test_a_returning_conversation_reads_only_its_new_tokens_while_others_run(tiny_models, alone_backend, tmp_path):
    """A conversation's next turn, sent while two other chats stream, goes to the sequence holding its turns and reads
    only its new tokens (``cached_tokens``), answering as alone; its sequence's state saved after it comes back in
    another batched load, where the turn after reads only its own new tokens again."""
    first_alone = _alone(alone_backend, HISTORY, _greedy(20))
    ask = [*HISTORY, Message("assistant", first_alone.text), Message("user", "And the keepers?")]
    then = [*ask, Message("assistant", _alone(alone_backend, ask, _greedy(20)).text), Message("user", "And now?")]
    expected = {"ask": _alone(alone_backend, ask, _greedy(20)), "then": _alone(alone_backend, then, _greedy(20)),
                "fox": _alone(alone_backend, "The fox", _greedy(60)), "owl": _alone(alone_backend, "The owl", _greedy(60))}
    backend = _loaded(tiny_models.mlx_f16, 3)
    try:
        first = _run_one(backend, HISTORY, _greedy(20))
        _same(first_alone, first, "first")
        run = _Together(backend)
        run.start("fox", "The fox", _greedy(60))
        run.start("owl", "The owl", _greedy(60))
        run.start("ask", ask, _greedy(20))
        run.join()
        for name in ("fox", "owl", "ask"):
            _same(expected[name], run.replies[name], name)
        warm = run.replies["ask"].done.stats
        assert first.done.stats.prompt_tokens < warm.cached_tokens < warm.prompt_tokens, warm
        backend.use_sequence_of("ask")  # as the engine host asks before a save that follows a reply
        saved = backend.save_state("s", str(tmp_path / "ask.state"))
        assert saved.n_tokens >= warm.prompt_tokens
    finally:
        backend.unload()
    backend = _loaded(tiny_models.mlx_f16, 2)
    try:
        restored = backend.restore_state("r", [saved.path], then, _greedy(20))
        assert restored.path == saved.path and warm.prompt_tokens <= restored.n_tokens < len(then) * 100
        turn = _run_one(backend, then, _greedy(20))
        _same(expected["then"], turn, "then")
        assert turn.done.stats.cached_tokens == restored.n_tokens
    finally:
        backend.unload()


def test_concurrent_requests_through_the_engine_host(tiny_models, tmp_path):
    """Through the real engine host (a child process): it runs each generation of an MLX model loaded with
    ``parallel`` 3 on a thread of its own, and the three replies stream at the same time, each as alone; a save
    that follows them writes the last one's sequence."""
    prompts = {"a": "The fox", "b": "The cat", "c": "The owl"}
    greedy = _greedy(60)
    with EngineClient() as client:
        loaded = client.load(tiny_models.mlx_f16, LoadSettings(n_ctx=1024, parallel=3))
        assert loaded.backend == "mlx" and loaded.details["parallel"] == 3
        alone = {name: _events(client.generate(prompt, greedy)) for name, prompt in prompts.items()}
        order: list[str] = []
        replies: dict[str, list] = {}

        def read(name: str, stream) -> None:
            replies[name] = []
            for event in stream:
                order.append(name)
                replies[name].append(event)

        streams = {name: client.generate(prompt, greedy, request_id=name) for name, prompt in prompts.items()}
        threads = [threading.Thread(target=read, args=item) for item in streams.items()]
        t0 = time.perf_counter()
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(120)
        assert time.perf_counter() - t0 < 120
        saved = client.save_state(tmp_path / "c.state")
    for name in prompts:
        done = replies[name][-1]
        assert isinstance(done, Done) and done.text == alone[name].text
        assert done.stats.generated_tokens == alone[name].stats.generated_tokens
    # some reply's first event came before another's last: they streamed together
    first = {name: order.index(name) for name in prompts}
    last = {name: len(order) - 1 - order[::-1].index(name) for name in prompts}
    assert any(first[a] < last[b] and first[b] < last[a] for a in prompts for b in prompts if a != b)
    c = replies["c"][-1].stats
    assert saved.path and saved.n_tokens >= c.prompt_tokens + c.generated_tokens


def _events(stream) -> Done:
    *_, done = list(stream)
    assert isinstance(done, Done)
    return done


def test_the_free_sequences_keep_a_contexts_worth_of_tokens_the_least_recently_used_dropped_first(tiny_models,
                                                                                                  alone_backend):
    """Three conversations one after the other in three sequences whose caches would together hold more than the
    context: the oldest one's cache is dropped, so its next turn reads its whole prompt, while the newest's next turn
    reads only its new tokens; both answer as alone."""
    topics = {name: [Message("user", f"Tell me about {name} and the sea, the ships and the keepers. " * 4)]
              for name in ("lighthouses", "harbours", "islands")}
    sizes = {name: alone_backend.count_prompt_tokens(chat, _greedy(10)) for name, chat in topics.items()}
    n_ctx = sizes["harbours"] + sizes["islands"] + 2 * 10 + 16  # two conversations' caches fit, not three
    assert n_ctx < sum(sizes.values()) + 3 * 10
    backend = MlxBackend()
    backend.load(str(tiny_models.mlx_f16), LoadSettings(n_ctx=n_ctx, parallel=3))
    try:
        first = {name: _run_one(backend, chat, _greedy(10)).done for name, chat in topics.items()}
        again = {name: [*chat, Message("assistant", first[name].text), Message("user", "And then?")]
                 for name, chat in topics.items()}
        newest = _run_one(backend, again["islands"], _greedy(10))
        oldest = _run_one(backend, again["lighthouses"], _greedy(10))
    finally:
        backend.unload()
    assert newest.done.stats.cached_tokens > sizes["islands"]
    assert oldest.done.stats.cached_tokens == 0
    _same(_alone(alone_backend, again["islands"], _greedy(10)), newest, "newest")
    _same(_alone(alone_backend, again["lighthouses"], _greedy(10)), oldest, "oldest")
