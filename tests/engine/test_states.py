"""Chats that resume: a conversation's llama.cpp state saved after a reply, restored by a freshly started engine
host, checked before it is loaded (app/engine/states.py, backends/llama_cpp/states.py). Real hosts on the tiny
model, real files."""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest

from app.datatypes import Done, LoadSettings, Message, SamplingSettings
from app.engine import states
from app.engine.client import EngineClient

GREEDY = SamplingSettings(temperature=0.0, max_tokens=24, seed=1)
HISTORY = [Message("system", "You are terse."),
           Message("user", "Tell me about lighthouses and the sea, the ships and the keepers. " * 12)]


def _reply(client, messages) -> Done:
    events = list(client.generate(messages, GREEDY))
    assert isinstance(events[-1], Done)
    return events[-1]


@pytest.fixture
def cache(tmp_path):
    return states.StateCache(tmp_path / "states", lambda: 2**30)


@pytest.fixture
def model(tiny_models, tmp_path) -> Path:
    """The tiny model at a path of the test's own (a test may replace the file)."""
    path = tmp_path / "model.gguf"
    shutil.copy(tiny_models.gguf_q8_0, path)
    return path


@pytest.fixture
def saved(model, cache):
    """A chat's first reply, its state saved (as the Chat does after each reply), and the next message."""
    keys = states.StateKeys((states.chat_key(1, 2),), states.chat_key(1, 2))
    with EngineClient() as client:
        client.load(str(model), LoadSettings(n_ctx=1024))
        first = _reply(client, HISTORY)
        result = states.save(client, cache, keys)
        ask = [*HISTORY, Message("assistant", first.text), Message("user", "And the keepers?")]
        warm = _reply(client, ask)  # the same host, the chat still in its KV cache
    assert result is not None and result.n_tokens > first.stats.prompt_tokens
    assert Path(result.path).stat().st_size == result.file_bytes
    return keys, ask, warm, result


def test_a_restarted_host_restores_the_saved_state_and_reads_only_the_new_message(model, cache, saved):
    keys, ask, warm, result = saved
    with EngineClient() as client:  # QuantDesk restarted
        client.load(str(model), LoadSettings(n_ctx=1024))
        restored = states.restore(client, cache, keys, ask, GREEDY)
        resumed = _reply(client, ask)
    with EngineClient() as client:
        client.load(str(model), LoadSettings(n_ctx=1024))
        cold = _reply(client, ask)
    assert restored is not None and restored.path == result.path and restored.discarded == ()
    assert resumed.text == cold.text == warm.text  # greedy: the same reply token for token
    assert resumed.stats.generated_tokens == cold.stats.generated_tokens
    assert cold.stats.cached_tokens == 0
    # the saved prefix came from the file: only the rest of the prompt was evaluated
    assert resumed.stats.cached_tokens == restored.n_tokens >= result.n_tokens - 2
    assert resumed.stats.prompt_tokens - resumed.stats.cached_tokens < 40 < 400 < cold.stats.prompt_tokens


def test_a_state_is_restored_only_where_its_tokens_begin_the_prompt(model, cache, saved):
    """The key names a file; the tokens decide. Another conversation under the same key shares only the template's
    first tokens with the state: the state is cut to them, and the reply is the cold one."""
    keys, _, _, _ = saved
    other = [Message("system", "You are verbose."), Message("user", "Something else entirely.")]
    with EngineClient() as client:
        client.load(str(model), LoadSettings(n_ctx=1024))
        restored = states.restore(client, cache, keys, other, GREEDY)
        resumed = _reply(client, other)
    with EngineClient() as client:
        client.load(str(model), LoadSettings(n_ctx=1024))
        cold = _reply(client, other)
    assert restored is not None and restored.n_tokens < 16
    assert resumed.stats.cached_tokens == restored.n_tokens
    assert resumed.text == cold.text


def _truncate(state: Path, model: Path, models) -> LoadSettings:
    data = state.read_bytes()
    state.write_bytes(data[:len(data) - 1000])
    return LoadSettings(n_ctx=1024)


def _flip_a_byte(state: Path, model: Path, models) -> LoadSettings:
    data = bytearray(state.read_bytes())
    data[-100] ^= 0xFF
    state.write_bytes(bytes(data))
    return LoadSettings(n_ctx=1024)


def _other_model(state: Path, model: Path, models) -> LoadSettings:
    shutil.copy(models.gguf_q4_k_m, model)  # another quant downloaded over it: the same path, another model
    return LoadSettings(n_ctx=1024)


DAMAGE = {
    "truncated": (_truncate, "truncated"),
    "damaged": (_flip_a_byte, "checksum"),
    "another model": (_other_model, "another model"),
    "another context": (lambda state, model, models: LoadSettings(n_ctx=768), "another n ctx"),
    "another KV type": (lambda state, model, models: LoadSettings(n_ctx=1024, kv_cache_type="q8_0",
                                                                  flash_attention=True),  # llama.cpp's rule for q8_0
                        "another kv cache type (f16; now q8_0)"),
}


@pytest.mark.parametrize("case", DAMAGE)
def test_a_stale_or_damaged_state_is_discarded_with_a_log_line_and_the_chat_answers(tiny_models, model, cache, saved,
                                                                                   caplog, case):
    keys, ask, _, result = saved
    damage, words = DAMAGE[case]
    load = damage(Path(result.path), model, tiny_models)
    with EngineClient() as client:
        client.load(str(model), load)
        with caplog.at_level(logging.WARNING, logger="app.engine.states"):
            restored = states.restore(client, cache, keys, ask, GREEDY)
        answer = _reply(client, ask)
    assert restored is not None and restored.path == "" and restored.n_tokens == 0
    assert [p for p, _ in restored.discarded] == [result.path]
    line = next(r.getMessage() for r in caplog.records if "discarded" in r.getMessage())
    assert result.path in line and words in line, line
    assert not Path(result.path).exists()  # it would be refused again: gone from the cache
    assert answer.text and answer.stats.cached_tokens == 0  # read again, and answered


def test_branches_keep_their_own_states(tiny_models, cache):
    """Two replies to two versions of a message (two branches): each branch restores its own state."""
    a = [*HISTORY[:1], Message("user", "Tell me about lighthouses. " * 10)]
    b = [*HISTORY[:1], Message("user", "Tell me about submarines. " * 10)]
    keys_a = states.chat_keys(7, [1, 2], 3, a)
    keys_b = states.chat_keys(7, [1, 4], 5, b)
    with EngineClient() as client:
        client.load(str(tiny_models.gguf_q8_0), LoadSettings(n_ctx=1024))
        reply_a = _reply(client, a)
        saved_a = states.save(client, cache, keys_a)
        reply_b = _reply(client, b)
        saved_b = states.save(client, cache, keys_b)
    assert saved_a is not None and saved_b is not None and saved_a.path != saved_b.path
    ask_a = [*a, Message("assistant", reply_a.text), Message("user", "More?")]
    ask_b = [*b, Message("assistant", reply_b.text), Message("user", "More?")]
    with EngineClient() as client:
        client.load(str(tiny_models.gguf_q8_0), LoadSettings(n_ctx=1024))
        back_a = states.restore(client, cache, states.chat_keys(7, [1, 2, 3, 8], 9, ask_a), ask_a, GREEDY)
        done_a = _reply(client, ask_a)
        back_b = states.restore(client, cache, states.chat_keys(7, [1, 4, 5, 10], 11, ask_b), ask_b, GREEDY)
        done_b = _reply(client, ask_b)
    assert back_a is not None and back_a.path == saved_a.path
    assert back_b is not None and back_b.path == saved_b.path
    assert done_a.stats.cached_tokens >= saved_a.n_tokens - 2
    assert done_b.stats.cached_tokens >= saved_b.n_tokens - 2


def test_a_new_chat_with_the_same_system_prompt_starts_from_its_state(tiny_models, cache):
    """The shared prefix: the first chat's state is also named by its system prompt."""
    system = Message("system", "You are a lighthouse keeper. " * 20)
    first = [system, Message("user", "Hello")]
    with EngineClient() as client:
        client.load(str(tiny_models.gguf_q8_0), LoadSettings(n_ctx=1024))
        _reply(client, first)
        assert states.save(client, cache, states.chat_keys(1, [1], 2, first)) is not None
    second = [system, Message("user", "Good evening")]
    with EngineClient() as client:
        client.load(str(tiny_models.gguf_q8_0), LoadSettings(n_ctx=1024))
        restored = states.restore(client, cache, states.chat_keys(2, [5], 6, second), second, GREEDY)
        done = _reply(client, second)
    assert restored is not None and restored.path
    assert done.stats.cached_tokens == restored.n_tokens > 100  # the system prompt's tokens, not read again


def test_the_cache_evicts_the_least_recently_used_states_by_size(tmp_path):
    limit = [3000]
    cache = states.StateCache(tmp_path, lambda: limit[0])
    paths = []
    for i, key in enumerate(("a", "b", "c")):
        path = cache.path("/m.gguf", key)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"x" * 1000)
        os.utime(path, ns=(10**18 + i * 10**9, 10**18 + i * 10**9))
        paths.append(path)
    cache.used(paths[0])  # restored just now: the most recently used
    assert cache.total_bytes() == 3000 and cache.count() == 3
    d = cache.path("/m.gguf", "d")
    d.write_bytes(b"y" * 1500)
    cache.saved(d, [cache.path("/m.gguf", "d-alias")])
    assert cache.path("/m.gguf", "d-alias").exists()  # a second name, no second copy
    assert cache.total_bytes() == 2500 and cache.count() == 2
    assert [p.exists() for p in paths] == [True, False, False]  # b and c were the oldest
    limit[0] = 0
    cache.evict()
    assert cache.total_bytes() == 0 and list(tmp_path.iterdir()) == []


def test_each_loaded_model_keeps_its_own_states(tmp_path):
    """Several models loaded (the pool): the same chat's states are separate files per model file."""
    cache = states.StateCache(tmp_path, lambda: 2**30)
    key = states.chat_key(1, 2)
    assert cache.path("/models/a.gguf", key) != cache.path("/models/b.gguf", key)
    cache.path("/models/a.gguf", key).parent.mkdir(parents=True, exist_ok=True)
    cache.path("/models/a.gguf", key).write_bytes(b"x")
    assert cache.existing("/models/b.gguf", [key]) == [] and len(cache.existing("/models/a.gguf", [key])) == 1


def test_keys_name_each_branch_and_each_conversation_prefix():
    m = [Message("system", "s"), Message("user", "u"), Message("assistant", "a", reasoning="thought")]
    assert states.chat_keys(1, [2, 3], 4, m).restore[:2] == ("chat:1:3", "chat:1:2")
    assert states.chat_keys(1, [2, 3], 4, m).save == "chat:1:4"
    # a reply on another branch (10 after 5) is also offered the other branches' tips (9, 3), newest first
    regenerated = states.chat_keys(1, [2, 5], 10, m, others=[3, 9, 10])
    assert regenerated.restore[:4] == ("chat:1:5", "chat:1:2", "chat:1:9", "chat:1:3")
    assert regenerated.supersedes == ("chat:1:5", "chat:1:2")  # only the branch's own earlier states go
    # a client that sends the reply back without its thinking continues the same stored conversation
    assert states.prefix_keys(m)[0] == states.prefix_keys([*m[:2], Message("assistant", "a")])[0]
    keys = states.server_keys(m[:2])  # saved after its reply under the request's own messages
    assert keys.save in states.server_keys([*m, Message("user", "next")]).restore
    assert states.system_key(m) in keys.aliases and states.system_key(m[1:]) is None


def test_a_thinking_models_state_gives_only_the_tokens_the_next_prompt_repeats(tiny_thinking_model, cache):
    """Qwen3.5's template drops an earlier turn's thinking: the state after a reply holds thinking tokens the next
    prompt does not repeat, so only the prefix the two share is restored, and the reply is the cold one."""
    keys = states.StateKeys((states.chat_key(1, 2),), states.chat_key(1, 2))
    with EngineClient() as client:
        client.load(str(tiny_thinking_model), LoadSettings(n_ctx=2048))
        first = _reply(client, HISTORY)
        saved = states.save(client, cache, keys)
    assert saved is not None and first.reasoning  # the tiny model thinks until its budget of tokens ends
    ask = [*HISTORY, Message("assistant", first.text, reasoning=first.reasoning), Message("user", "And then?")]
    with EngineClient() as client:
        client.load(str(tiny_thinking_model), LoadSettings(n_ctx=2048))
        restored = states.restore(client, cache, keys, ask, GREEDY)
        resumed = _reply(client, ask)
    with EngineClient() as client:
        client.load(str(tiny_thinking_model), LoadSettings(n_ctx=2048))
        cold = _reply(client, ask)
    assert restored is not None and restored.path
    assert first.stats.prompt_tokens - 8 <= restored.n_tokens < saved.n_tokens
    assert resumed.stats.cached_tokens == restored.n_tokens
    assert (resumed.text, resumed.reasoning) == (cold.text, cold.reasoning)


def test_the_state_requests_and_events_cross_the_wire_typed():
    from app.datatypes import StateRestored, StateSaved
    from app.engine import protocol

    restore = protocol.RestoreStateRequest("w1", ["/a.qdstate"], [Message("user", "hi", reasoning="r")],
                                           SamplingSettings(temperature=0.0))
    assert protocol.decode_request(protocol.encode(restore)) == restore
    save = protocol.SaveStateRequest("v1", "/a.qdstate")
    assert protocol.decode_request(protocol.encode(save)) == save
    restored = StateRestored("w1", "", 0, 1.5, (("/a.qdstate", "the file is truncated"),))
    saved = StateSaved("v1", "/a.qdstate", 12, 3456, 2.0)
    assert protocol.decode_event(protocol.encode(restored)) == restored
    assert protocol.decode_event(protocol.encode(saved)) == saved
    assert protocol.PROTOCOL_VERSION >= 5  # the state requests came with version 5 (6 added rerank)
