"""Continuous batching in the llama.cpp engine (issue 38): a model loaded with ``LoadSettings.parallel`` decodes
several requests together, each in its own sequence of one unified KV cache, through the real engine host and client.
Each request keeps its own sampler, grammar, stop strings and cancel: its text is the one it gets alone; a cancel or an
overflow ends that request only.

"The text it gets alone", token for token, with one allowance that llama.cpp's batched decode itself needs: where the
reply alone chose between tokens less than ``NEAR_TIE`` apart, batched may choose another of them (llama-server's slots
do the same, and its own test of equal results across batch sizes is skipped). llama.cpp's CPU kernels compute a
batch of several rows in another order than one row (the matrix products, and attention over a cache whose cells
lie between other sequences'), so the logits move: on SmolLM2 Q4_1 a chosen token's log-probability moves by up to
0.25 nats between a prompt read whole, one token read after a cached prefix, and a batch of four sequences (measured
with flash attention on and off; the same reply alone, once fresh and once after its cached prompt, differs so too).
Every request asks for its top five log-probabilities to tell such a tie from a wrong row or position, which would
change the text where the model was sure (the choice is compared by log-probability, not rank: a repetition penalty
makes greedy choose other than the raw logits' first). A seeded sampled reply may so flip where its draw fell near
the edge between two tokens: there batched must take a token alone had among its likeliest five, or, where alone's draw
fell past them, one about as likely as alone's."""

from __future__ import annotations

import itertools
import os
import threading

import pytest

from app.datatypes import Done, LoadSettings, Message, SamplingSettings, Token, TokenLogprob
from app.engine.client import EngineClient
from app.errors import EngineError

pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install -e '.[llama]'")

NEAR_TIE = 0.5  # nats between the two likeliest tokens: a choice llama.cpp's batch shapes may flip
PERSON = {"type": "object", "properties": {"name": {"type": "string"}, "age": {"type": "integer"}},
          "required": ["name", "age"], "additionalProperties": False}


def _chat(text: str) -> list[Message]:
    return [Message("user", text)]


class _Reply:
    """One reply's Done, its streamed text and its tokens with their top two log-probabilities."""

    def __init__(self) -> None:
        self.done: Done | None = None
        self.text = ""
        self.entries: list[TokenLogprob] = []

    def add(self, event: Token | Done) -> None:
        if isinstance(event, Token):
            self.text += event.text
            self.entries.extend(event.logprobs)
        else:
            self.done = event


def assert_same_reply(alone: _Reply, batched: _Reply, name: str) -> None:
    """``batched`` is ``alone`` token for token, up to where it ended (a cancel), or where alone chose between two
    tokens less than NEAR_TIE apart and batched took the other (see the module's words)."""
    assert alone.done is not None and batched.done is not None, name
    sampled = name.startswith("sampled")
    for k, (a, b) in enumerate(zip(alone.entries, batched.entries, strict=False)):
        if a.id != b.id:
            rated = {t.id: t.logprob for t in a.top}
            if sampled and b.id not in rated:
                # A draw at the tail of alone's likeliest five flips to the token next to alone's in probability
                # order: one as likely as it, just outside the five.
                gap = abs(a.logprob - b.logprob)
                assert gap < NEAR_TIE, f"{name}: token {k} is {b.token!r}, {gap:.3f} from alone's {a.token!r}"
                return
            assert b.id in rated, f"{name}: token {k} is {b.token!r}, not among alone's likeliest"
            if not sampled:  # a draw may take any likely token; a greedy choice only one as likely as alone's
                gap = a.logprob - rated[b.id]
                assert gap < NEAR_TIE, f"{name}: token {k} is {b.token!r}, alone {a.token!r} was ahead by {gap:.3f}"
            return
    if batched.done.stats.stop_reason != "cancelled":
        assert batched.done.text == alone.done.text, name
    else:
        assert alone.done.text.startswith(batched.done.text), name
    assert batched.text == batched.done.text, name


class _Run:
    """Requests sent together from threads of their own; each one's events, in the order they were read."""

    def __init__(self) -> None:
        self.order = itertools.count()
        self.first: dict[str, int] = {}
        self.last: dict[str, int] = {}
        self.replies: dict[str, _Reply] = {}
        self.errors: dict[str, EngineError] = {}

    def read(self, name: str, stream, on_token=None) -> None:
        reply = self.replies[name] = _Reply()
        try:
            for event in stream:
                tick = next(self.order)
                self.first.setdefault(name, tick)
                self.last[name] = tick
                reply.add(event)
                if isinstance(event, Token) and on_token is not None:
                    on_token(event)
        except EngineError as exc:
            self.errors[name] = exc

    def done(self, name: str) -> Done:
        done = self.replies[name].done
        assert done is not None, name
        return done

    def overlapped(self) -> bool:
        """Some two requests streamed at the same time: one's first event came before the other's last."""
        names = list(self.first)
        return any(self.first[a] < self.last[b] and self.first[b] < self.last[a]
                   for a, b in itertools.combinations(names, 2))


def _together(client: EngineClient, requests: dict[str, tuple[object, SamplingSettings]],
              on_token=None) -> _Run:
    run = _Run()
    threads = []
    for name, (prompt, sampling) in requests.items():
        stream = client.generate(prompt, sampling, request_id=name)  # sent now, in this order
        threads.append(threading.Thread(target=run.read, args=(name, stream, on_token.get(name) if on_token else None)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    return run


def _alone(client: EngineClient, prompt, sampling: SamplingSettings) -> _Reply:
    reply = _Reply()
    for event in client.generate(prompt, sampling):
        reply.add(event)
    assert reply.done is not None
    return reply


def _greedy(max_tokens: int, **more) -> SamplingSettings:
    return SamplingSettings(temperature=0.0, max_tokens=max_tokens, logprobs=5, **more)


@pytest.mark.real_model
def test_concurrent_requests_each_get_the_text_they_get_alone(smollm2_gguf):
    """Greedy chats, a seeded sampled one, one held to a JSON schema and one cut by a stop string, decoded together
    in four sequences of SmolLM2: each text is its text alone, and their streams overlapped."""
    requests = {
        "greedy": (_chat("Name three colours."), _greedy(40)),
        "sampled": (_chat("Write a short poem about the sea."),
                    SamplingSettings(temperature=0.9, seed=11, top_k=40, max_tokens=40, logprobs=5)),
        "json": (_chat("Describe a person as JSON."), _greedy(60, json_schema=PERSON)),
        "raw": ("Once upon a time, in a small village,", _greedy(40)),
    }
    with EngineClient() as client:
        loaded = client.load(smollm2_gguf, LoadSettings(n_ctx=2048, parallel=4, threads=2))
        assert loaded.details["parallel"] == 4
        raw = _alone(client, *requests["raw"]).text
        stop = raw.split()[3]
        requests["stopped"] = ("Once upon a time, in a small village,", _greedy(40, stop=(stop,)))
        del requests["raw"]
        alone = {name: _alone(client, prompt, sampling) for name, (prompt, sampling) in requests.items()}
        run = _together(client, requests)
    assert not run.errors
    for name in requests:
        assert_same_reply(alone[name], run.replies[name], name)
    assert alone["stopped"].done.stats.stop_reason == "stop" and stop not in alone["stopped"].text
    assert run.done("json").text.startswith("{") and '"age"' in run.done("json").text
    assert run.overlapped(), "the requests were served one after the other"


def test_the_parallel_setting_is_one_sequence_per_request_up_to_the_whole_context(tiny_models):
    """The cache is unified: each sequence may use the whole context (never the context divided by N), and a fifth
    request waits for one of four to end."""
    with EngineClient() as client:
        loaded = client.load(tiny_models.gguf_q4_k_m, LoadSettings(n_ctx=512, parallel=4, threads=2))
        assert loaded.n_ctx == 512 and loaded.details["parallel"] == 4
        long_prompt = " ".join(["fox"] * 200)  # more than 512 / 4 tokens: fits one sequence of the unified cache
        greedy = _greedy(30)
        alone = {str(i): _alone(client, long_prompt if i == 0 else f"Story {i}:", greedy) for i in range(5)}
        run = _together(client, {str(i): (long_prompt if i == 0 else f"Story {i}:", greedy) for i in range(5)})
    assert not run.errors
    for name in alone:
        assert_same_reply(alone[name], run.replies[name], name)
    assert 128 < run.done("0").stats.prompt_tokens < 512 - 30


def test_cancelling_one_request_mid_stream_leaves_the_others_text_unchanged(tiny_models):
    greedy = _greedy(200)
    prompts = {"a": "The fox", "b": "The cat", "c": "The owl"}
    with EngineClient() as client:
        client.load(tiny_models.gguf_q4_k_m, LoadSettings(n_ctx=1024, parallel=3, threads=2))
        alone = {name: _alone(client, prompt, greedy) for name, prompt in prompts.items()}
        run = _together(client, {name: (prompt, greedy) for name, prompt in prompts.items()},
                        on_token={"b": lambda token: client.cancel("b")})
        after = _alone(client, prompts["b"], greedy)  # the engine serves on
    assert not run.errors
    assert run.done("b").stats.stop_reason == "cancelled"
    assert run.done("b").stats.generated_tokens < 200
    for name in prompts:
        assert_same_reply(alone[name], run.replies[name], name)
    assert run.done("a").stats.generated_tokens == run.done("c").stats.generated_tokens == 200
    assert_same_reply(alone["b"], after, "b again")


def test_one_request_overflowing_gets_its_error_while_the_others_finish(tiny_models):
    """A prompt longer than the context is refused alone; sequences that together outgrow the shared cache end one
    of them with a context error (the longest), and the others finish with their text alone."""
    greedy = _greedy(100)
    with EngineClient() as client:
        client.load(tiny_models.gguf_q4_k_m, LoadSettings(n_ctx=256, parallel=3, threads=2))
        alone = {name: _alone(client, f"The {name}", greedy) for name in ("fox", "cat")}
        too_long = " ".join(["fox"] * 400)
        run = _together(client, {"fox": ("The fox", greedy), "long": (too_long, greedy), "cat": ("The cat", greedy)})
        assert run.errors["long"].kind == "context" and set(run.errors) == {"long"}
        assert_same_reply(alone["fox"], run.replies["fox"], "fox")
        assert_same_reply(alone["cat"], run.replies["cat"], "cat")

        # 3 x (prompt + 100) tokens do not fit 256 cells together, 2 x do: one reply ends with the error, two finish
        names = ("fox", "cat", "owl")
        alone["owl"] = _alone(client, "The owl", greedy)
        run = _together(client, {name: (f"The {name}", greedy) for name in names})
        assert len(run.errors) == 1 and all(exc.kind == "context" for exc in run.errors.values()), run.errors
        assert "full" in next(iter(run.errors.values())).message
        finished = [name for name in names if name not in run.errors]
        assert len(finished) == 2
        for name in finished:
            assert_same_reply(alone[name], run.replies[name], name)
        assert_same_reply(alone["fox"], _alone(client, "The fox", greedy), "fox again")  # the engine serves on


# --- a sequence another conversation takes: kept in the saved-state cache, restored when its conversation returns


def _conversation(topic: str) -> list[Message]:
    return [Message("user", f"Tell me about {topic}, and where they are found, and how they live. " * 6)]


def _turn(client: EngineClient, cache, messages: list[Message]) -> _Reply:
    """One turn as the faces send it (app/engine/turn.py), without keys of its own: a raw prompt's, or a client's
    whose history comes back changed; only the evicted sequences' files can serve it."""
    from app.engine.turn import send

    reply = _Reply()
    for event in send(client, messages, _greedy(16), None, cache=cache).events():
        reply.add(event)
    assert reply.done is not None
    return reply


def _next(messages: list[Message], reply: _Reply) -> list[Message]:
    assert reply.done is not None
    return [*messages, Message("assistant", reply.done.text), Message("user", "And then?")]


def _evicted_files(cache, model: str) -> list[str]:
    from app.engine import states

    return cache.existing(model, states.evicted_keys())


def test_a_conversation_whose_sequence_was_taken_is_served_from_its_saved_state(tiny_models, tmp_path):
    """Three conversations take turns on two sequences: the third takes the first's sequence, whose state is saved
    first; when the first comes back, that state is restored into a sequence and only the new message is read, and
    its reply is the one a fresh read of the whole conversation gives."""
    from app.engine import states

    cache = states.StateCache(tmp_path / "states", lambda: 2**30)
    model = tiny_models.gguf_q8_0
    with EngineClient() as client:
        client.load(model, LoadSettings(n_ctx=2048, parallel=2, threads=2))
        talks = {name: _conversation(topic) for name, topic in (("a", "foxes"), ("b", "owls"), ("c", "whales"))}
        for name in talks:
            talks[name] = _next(talks[name], _turn(client, cache, talks[name]))
        assert len(_evicted_files(cache, model)) == 1  # a's sequence went to c
        back = _turn(client, cache, talks["a"])
        prompt, cached = back.done.stats.prompt_tokens, back.done.stats.cached_tokens
        assert cached >= prompt - 40, (cached, prompt)  # all but the new message (and the reply's last token)

        for name in ("b", "c"):  # both sequences hold other conversations again: a's turn read from scratch
            _turn(client, cache, talks[name])
        fresh = _Reply()
        for event in client.generate(talks["a"], _greedy(16)):  # no restore offered
            fresh.add(event)
    assert fresh.done is not None and fresh.done.stats.cached_tokens < 20
    assert_same_reply(fresh, back, "restored")


def test_a_sequence_freed_to_make_room_is_kept_and_restored(tiny_models, tmp_path):
    """Two conversations outgrow the unified cache together: the idle one's cells are freed for the other's prompt
    (the batcher's make_room), its state saved first; it comes back served from that state, the other's freed in
    turn to make room for it."""
    from app.engine import states

    cache = states.StateCache(tmp_path / "states", lambda: 2**30)
    model = tiny_models.gguf_q8_0
    with EngineClient() as client:
        client.load(model, LoadSettings(n_ctx=512, parallel=2, threads=2))
        a = _conversation("foxes")
        a = _next(a, _turn(client, cache, a))
        assert not _evicted_files(cache, model)
        b = [Message("user", "Write about the rivers of the north and the boats on them. " * 12)]
        first_b = _turn(client, cache, b)
        assert first_b.done.stats.prompt_tokens + 250 > 512  # a's cells and b's prompt do not fit together
        assert len(_evicted_files(cache, model)) == 1
        back = _turn(client, cache, a)
    assert back.done.stats.cached_tokens >= back.done.stats.prompt_tokens - 40, back.done.stats


def test_a_saved_sequence_of_another_load_is_never_restored(tiny_models, tmp_path, caplog):
    """The evicted sequences' files are named by the model's path: a load of the same file with another context
    finds them, refuses them (their identity says another context) and deletes them, and reads its prompt whole."""
    import logging

    from app.engine import states

    cache = states.StateCache(tmp_path / "states", lambda: 2**30)
    model = tiny_models.gguf_q8_0
    talks = {name: _conversation(topic) for name, topic in (("a", "foxes"), ("b", "owls"), ("c", "whales"))}
    with EngineClient() as client:
        client.load(model, LoadSettings(n_ctx=2048, parallel=2, threads=2))
        for name in talks:
            _turn(client, cache, talks[name])
    assert len(_evicted_files(cache, model)) == 1
    with EngineClient() as client, caplog.at_level(logging.WARNING, logger="app.engine.states"):
        client.load(model, LoadSettings(n_ctx=1024, parallel=2, threads=2))
        again = _turn(client, cache, talks["a"])
    assert again.done is not None and again.done.stats.cached_tokens == 0
    assert not _evicted_files(cache, model)
    assert "another n ctx" in caplog.text


def test_a_taken_sequence_whose_reply_was_saved_is_kept_under_a_second_name(tiny_models, tmp_path):
    """A conversation with keys (the Chat's, the server's) has its state saved after each reply: when its sequence is
    taken, the evicted sequences' file is a hard link to that state, not a second copy on disk."""
    from app.engine import states
    from app.engine.turn import send

    cache = states.StateCache(tmp_path / "states", lambda: 2**30)
    model = tiny_models.gguf_q8_0
    saved = {}
    with EngineClient() as client:
        client.load(model, LoadSettings(n_ctx=2048, parallel=2, threads=2))
        for name, topic in (("a", "foxes"), ("b", "owls"), ("c", "whales")):
            messages = _conversation(topic)
            keys = states.server_keys(messages)
            list(send(client, messages, _greedy(16), keys, cache=cache).events())
            saved[name] = cache.path(model, keys.save)
    evicted = _evicted_files(cache, model)
    assert len(evicted) == 1
    assert os.path.samefile(evicted[0], saved["a"])  # a's sequence went to c: kept by a second name
    assert cache.count() == 3  # a's, b's and c's states, each once
