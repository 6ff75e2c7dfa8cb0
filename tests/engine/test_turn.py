"""One turn (app/engine/turn.py): the request built by one set of rules (the model's preset between the conversation's
values and the model's own, the system prompt, tools, the overflow policy, the documents' passages) and sent by one
restore → generate → save, on the real engine; and no face keeps a copy of its own."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from app.datatypes import Done, LoadSettings, Message, ModelSampling, SamplingSettings
from app.engine import states
from app.engine.client import EngineClient
from app.engine.turn import ModelDefaults, Turn, send, with_system_prompt, with_tools
from app.hub.presets import ModelPreset

ROOT = Path(__file__).resolve().parents[2]
N_CTX = 256
PRESET = ModelPreset("m", sampling={"temperature": 0.25, "max_tokens": 64}, system_prompt="You cook.",
                     overflow="compact")
MODEL = ModelSampling(temperature=0.6, top_k=20, origin="general.sampling.*")


def test_the_conversation_then_the_preset_then_the_model_then_quantdesk():
    defaults = ModelDefaults(MODEL, PRESET)
    chosen = defaults.sampling({})
    assert (chosen.settings.temperature, chosen.settings.top_k, chosen.settings.max_tokens) == (0.25, 20, 64)
    assert (chosen.sources["temperature"], chosen.sources["top_k"], chosen.sources["top_p"]) == (
        "preset", "model", "default")
    assert defaults.sampling({"temperature": 1.1, "top_k": None}).settings.temperature == 1.1
    assert defaults.system_prompt() == "You cook."
    assert defaults.system_prompt("Be brief.") == "Be brief."
    assert defaults.system_prompt("") == ""  # `quantdesk chat --system ""`: none, on purpose
    assert defaults.overflow(None, "stop") == "compact" and defaults.overflow("drop-oldest", "stop") == "drop-oldest"
    assert ModelDefaults().overflow(None, "stop") == "stop" and ModelDefaults().system_prompt() == ""
    assert ModelDefaults(MODEL).sampling({}).settings.temperature == 0.6


def test_the_preset_and_the_models_file_are_read_for_a_model(tiny_sampling_model):
    from app.hub import presets

    assert ModelDefaults.of(tiny_sampling_model).preset is None
    presets.update(tiny_sampling_model, sampling={"top_k": 7}, system_prompt="You cook.")
    defaults = ModelDefaults.of(tiny_sampling_model)
    assert defaults.system_prompt() == "You cook." and defaults.recommended is not None
    chosen = defaults.sampling({}).settings
    assert (chosen.temperature, chosen.top_k) == (0.6, 7)  # tests/fixtures/models.py's value, the preset's
    assert ModelDefaults.of(tiny_sampling_model, preset=False).preset is None


def test_the_system_prompt_and_the_tools():
    ask = [Message("user", "Hi")]
    assert with_system_prompt(ask, "You cook.") == [Message("system", "You cook."), *ask]
    assert with_system_prompt([Message("system", "Mine."), *ask], "You cook.")[0].content == "Mine."
    assert with_system_prompt(ask, "") == ask
    tool = {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}
    offered = with_tools(SamplingSettings(tool_choice="required"), [tool])
    assert offered.tools == (tool,) and offered.tool_choice == "required"
    assert with_tools(offered, [tool], last_step=True).tool_choice == "none"
    assert with_tools(offered, []).tools == () and with_tools(offered, []).tool_choice == "auto"


@pytest.fixture(scope="module")
def engine(tiny_models):
    with EngineClient() as client:
        client.load(tiny_models.gguf_q8_0, LoadSettings(n_ctx=N_CTX))
        yield client


def _conversation(turns: int) -> list[Message]:
    out = [Message("system", "You are terse.")]
    for i in range(turns):
        out += [Message("user", f"Question number {i}: what comes after {i} apples and {i + 1} pears?"),
                Message("assistant", f"After {i} apples and {i + 1} pears come {i + 2} plums.")]
    return out + [Message("user", "And now?")]


def test_the_overflow_policy_first_then_the_passages_in_what_it_kept(engine):
    conversation = _conversation(12)
    sampling = SamplingSettings(max_tokens=16, seed=1)
    given = []

    def passages(messages, chosen):
        given.append((messages, chosen))
        return [*messages[:-1], Message("user", "[1] Plums follow pears.\n\n" + messages[-1].content)], "found"

    prepared = Turn(conversation, sampling, "drop-oldest", passages=passages).prepare(engine, N_CTX)
    assert prepared.cut is not None and prepared.cut.dropped > 0 and prepared.found == "found"
    (kept, chosen), = given
    assert len(kept) == len(conversation) - prepared.cut.dropped and kept[0] == conversation[0]
    assert chosen.cache_reuse  # the kept turns are moved in the KV cache, not read again
    assert prepared.messages[-1].content.startswith("[1] Plums follow pears.")
    # Under "stop" everything goes as it came (the engine refuses what does not fit, in its words)
    whole = Turn(conversation, sampling).prepare(engine, N_CTX)
    assert whole.messages == conversation and whole.cut is None
    assert Turn("Once upon", sampling, "drop-oldest").prepare(engine, N_CTX).messages == "Once upon"


def test_a_turn_is_restored_generated_and_saved_in_that_order(engine, tmp_path):
    cache = states.StateCache(tmp_path, limit_bytes=lambda: 1 << 30)
    sampling = SamplingSettings(max_tokens=4, seed=1)
    first = [Message("user", "Hi")]
    sent = send(engine, first, sampling, states.server_keys(first), cache=cache, request_id="turn-1")
    events = list(sent.events())
    assert isinstance(events[-1], Done) and cache.count() == 1  # its state saved behind it
    reply = events[-1].text
    later = [*first, Message("assistant", reply), Message("user", "And you?")]
    keys = states.server_keys(later)
    assert cache.existing(engine.loaded.model_path, keys.restore)  # the first turn's state continues this one
    sent = send(engine, later, sampling, keys, cache=cache)
    assert isinstance(list(sent.events())[-1], Done) and cache.count() == 2
    # Without keys, and for a raw prompt: a generation only
    assert isinstance(list(send(engine, "Once upon", sampling, keys, cache=cache).events())[-1], Done)
    assert cache.count() == 2


def _calls(path: Path) -> set[str]:
    """The names a module calls (``f(...)``, ``x.f(...)``) and those it imports from app/engine/overflow.py."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Call):
            func = node.func
            names.add(func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", ""))
        elif isinstance(node, ast.ImportFrom) and node.module == "app.engine.overflow":
            names.update(f"overflow.{alias.name}" for alias in node.names)
    return names


def test_no_face_keeps_its_own_restore_generate_save_or_overflow_step():
    """Only the turn sends saved states around a reply (states.py's own ``restore``/``save`` apart) and runs the
    overflow policy; the faces call it."""
    modules = {str(path.relative_to(ROOT)): _calls(path) for path in sorted((ROOT / "app").rglob("*.py"))}
    assert {m for m, calls in modules.items() if calls & {"send_restore", "send_save", "overflow.fit"}} == {
        "app/engine/states.py", "app/engine/turn.py"}
    assert {m for m, calls in modules.items() if calls & {"send_restore", "send_save"} and m != "app/engine/turn.py"
            } == {"app/engine/states.py"}
    users = {m for m, calls in modules.items()
             if {"send", "prepare"} & calls and "app.engine.turn" in (ROOT / m).read_text(encoding="utf-8")}
    assert {"app/ui/chat/engine_bridge.py", "app/server/engine_queue.py", "app/server/turns.py",
            "app/commands/engine.py"} <= users
