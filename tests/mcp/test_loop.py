"""The tool loop on the real engine: the tiny llama.cpp model with Qwen 2.5's tool-declaring template, forced by the
engine's grammar to call a tool of a real npm MCP server over stdio; the call approved (or denied, or stopped), run,
answered as a ``tool`` message, and the model goes on.

A random-weight model cannot name a path it was never told: the tool the model sees has the server's own schema
narrowed to the one value the test wants (an ``enum``), so the grammar writes it. The call then goes through the
ToolBox as any other, checked against the server's real schema and run by the real server."""

from __future__ import annotations

import json
import threading
import time

import pytest

from app.datatypes import Done, GenerationStats, LoadSettings, Message, SamplingSettings, ToolCall
from app.engine.client import EngineClient
from app.mcp.approvals import ALLOW_ONCE, ALWAYS_ALLOW, DENY, Approvals
from app.mcp.client import ToolBox
from app.mcp.loop import DENIED, ToolLoop, assistant_message, fold, servers_of, tool_support_refusal
from tests.fixtures import mcp_servers

STATS = GenerationStats(prompt_tokens=1, prompt_ms=1.0, ttft_ms=1.0, generated_tokens=1, decode_ms=1.0,
                        stop_reason="eos", peak_memory_bytes=0)
CALL_TOKENS = 600  # room for the grammar's whitespace, which the random model takes (tests/server/test_tools.py)


@pytest.fixture(scope="module")
def engine(tiny_tool_model):
    with EngineClient() as client:
        client.load(tiny_tool_model, LoadSettings(n_ctx=4096))
        yield client


def _generate(client, history, sampling) -> Done:
    done = None
    for event in client.generate(history, sampling):
        if isinstance(event, Done):
            done = event
    assert done is not None
    return done


def narrowed(loop: ToolLoop, function: str, values: dict) -> dict:
    """``function``'s entry for the model with each named argument held to one value (see the module's words)."""
    tool = next(t for t in loop.tools() if t["function"]["name"] == function)
    schema = {"type": "object", "properties": {k: {"enum": [v]} for k, v in values.items()},
              "required": list(values), "additionalProperties": False}
    return {"type": "function", "function": {**tool["function"], "parameters": schema}}


def forced(tool: dict, seed: int = 1) -> SamplingSettings:
    return SamplingSettings(seed=seed, max_tokens=CALL_TOKENS, tools=(tool,), tool_choice="required")


def test_a_forced_call_lists_a_folder_through_server_filesystem_after_approval_and_the_reply_goes_on(engine, tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    (folder / "report.txt").write_text("q3")
    (folder / "photos").mkdir()
    asked = []
    with ToolBox() as box:
        assert box.connect(mcp_servers.filesystem(folder)).state == "ready"
        loop = ToolLoop(box, ["files"], approve=lambda spec, call, args: asked.append((spec.name, args)) or
                        ALLOW_ONCE, approvals=Approvals())
        tool = narrowed(loop, "files__list_directory", {"path": str(folder)})
        history = [Message("user", "What is in the shared folder?")]
        first = _generate(engine, history, forced(tool))
        assert first.tool_calls and first.tool_calls[0].name == "files__list_directory"
        step = loop.step(first)
        assert asked[0] == ("list_directory", {"path": str(folder)})  # asked before it ran, with the arguments
        run = step.runs[0]
        assert run.decision == ALLOW_ONCE and run.outcome.kind == "ok" and run.server == "files"
        assert "[FILE] report.txt" in run.outcome.text and "[DIR] photos" in run.outcome.text
        assert step.messages[0] == Message("tool", run.outcome.text, tool_call_id=first.tool_calls[0].id,
                                           name="files__list_directory")
        assert step.assistant.tool_calls[0]["function"]["arguments"] == {"path": str(folder)}
        history += [step.assistant, *step.messages]
        after = _generate(engine, history, SamplingSettings(seed=1, max_tokens=20, tools=(tool,)))
        assert after.stats.stop_reason in ("eos", "length") and after.stats.generated_tokens > 0
        assert after.stats.prompt_tokens > first.stats.prompt_tokens  # the call and its listing are in the prompt
    assert not Approvals().always()  # "once" is not remembered


def test_a_denied_call_is_never_run_and_the_model_is_told(engine, tmp_path):
    target = tmp_path / "new.txt"
    with ToolBox() as box:
        box.connect(mcp_servers.filesystem(tmp_path))
        loop = ToolLoop(box, ["files"], approve=lambda *_: DENY, approvals=Approvals())
        tool = narrowed(loop, "files__write_file", {"path": str(target), "content": "written"})
        done = _generate(engine, [Message("user", "Write the file.")], forced(tool))
        step = loop.step(done)
    assert [r.decision for r in step.runs] == [DENY] * len(step.runs) and step.runs
    assert all(m.content == DENIED == "the user denied this call" for m in step.messages)
    assert not target.exists()


def test_a_write_cut_by_max_tokens_is_no_call_so_half_a_file_is_never_written(engine, tmp_path):
    """The issue's case: an agent's write_file cut by max_tokens in the middle of its content. The engine's reply
    holds no call, so the loop (the Chat's and quantdesk chat --tools') runs nothing; one token more and the call is
    whole, and the whole file is written."""
    target = tmp_path / "notes.md"
    text = "line one\nline two\n" * 4
    with ToolBox() as box:
        box.connect(mcp_servers.filesystem(tmp_path))
        loop = ToolLoop(box, ["files"], allow_all=True)
        tool = narrowed(loop, "files__write_file", {"path": str(target), "content": text})

        def reply(max_tokens: int) -> Done:
            return _generate(engine, [Message("user", "Write the notes.")],
                             SamplingSettings(seed=1, max_tokens=max_tokens, tools=(tool,), tool_choice="required"))

        # the least max_tokens whose reply holds the call (the same seed: the same reply, cut shorter)
        low, high = 1, CALL_TOKENS
        while low < high:
            middle = (low + high) // 2
            low, high = (low, middle) if reply(middle).tool_calls else (middle + 1, high)
        assert low > 20  # the content alone takes more tokens than that
        for cut in (low // 2, low - 1):
            done = reply(cut)
            assert done.stats.stop_reason == "length" and done.tool_calls == () and not done.text.strip(), done
            step = loop.step(done)
            assert step.runs == () and not target.exists()
        done = reply(low)
        assert done.stats.stop_reason == "length" and [c.name for c in done.tool_calls] == ["files__write_file"]
        step = loop.step(done)
        assert [r.outcome.kind for r in step.runs] == ["ok"] and target.read_text() == text


def test_always_allow_is_remembered_and_the_next_call_is_not_asked(engine, tmp_path):
    asked = []
    with ToolBox() as box:
        box.connect(mcp_servers.filesystem(tmp_path))
        approve = lambda spec, call, args: asked.append(spec.name) or ALWAYS_ALLOW  # noqa: E731
        loop = ToolLoop(box, ["files"], approve=approve, approvals=Approvals())
        tool = narrowed(loop, "files__list_directory", {"path": str(tmp_path)})
        done = _generate(engine, [Message("user", "List it.")], forced(tool))
        loop.step(done)
        loop.step(done)
    assert asked == ["list_directory"]  # once, for the first call of all
    assert Approvals().always() == [("files", "list_directory")]


def test_stop_during_the_slow_tool_ends_the_step_within_a_second_and_the_engine_goes_on(engine):
    stop = threading.Event()
    with ToolBox() as box:
        box.connect(mcp_servers.everything())
        loop = ToolLoop(box, ["everything"], allow_all=True)
        tool = narrowed(loop, "everything__trigger-long-running-operation", {"duration": 30, "steps": 30})
        done = _generate(engine, [Message("user", "Run it.")], forced(tool))
        assert done.tool_calls
        threading.Timer(0.8, stop.set).start()
        started = time.monotonic()
        step = loop.step(done, cancel=stop)
        assert time.monotonic() - started - 0.8 < 1.0
    assert step.cancelled and step.runs[0].outcome.kind == "cancelled"
    assert all(r.outcome.kind == "cancelled" for r in step.runs)  # later calls of the reply were not run
    assert all(m.content for m in step.messages)  # every call has its answer
    after = _generate(engine, [Message("user", "hi")], SamplingSettings(seed=1, max_tokens=5))
    assert after.stats.generated_tokens > 0


def test_a_call_to_a_tool_that_is_not_there_is_answered_without_asking(engine):
    with ToolBox() as box:
        box.connect(mcp_servers.everything())
        loop = ToolLoop(box, ["everything"], approve=lambda *_: pytest.fail("asked for a tool that is not there"))
        done = Done("r", "", STATS, tool_calls=(ToolCall("call_1", "everything__rm_rf", "{}"),))
        step = loop.step(done)
    assert step.runs[0].decision == "" and step.runs[0].outcome.kind == "no_such_tool"
    assert "there is no tool named 'everything__rm_rf'" in step.messages[0].content


def test_the_step_limit_is_counted_per_turn():
    with ToolBox() as box:
        loop = ToolLoop(box, [], max_steps=2)
        done = Done("r", "", STATS)
        assert not loop.step(done).limit_reached and loop.step(done).limit_reached and not loop.can_continue()
        loop.reset()
        assert loop.can_continue()


def test_the_small_helpers():
    assert tool_support_refusal({"tool_format": "auto"}) == ""
    assert "no tool support" in tool_support_refusal({})
    assert servers_of("a, b,,c") == ["a", "b", "c"]
    assert fold("\n".join(f"line {i}" for i in range(10)), lines=3) == "line 0\nline 1\nline 2\n… (7 more lines)"
    message = assistant_message(Done("r", "let me look", STATS, reasoning="hm",
                                     tool_calls=(ToolCall("c1", "f", '{"a": 1}'), ToolCall("c2", "g", "not json"))))
    assert message.tool_calls == ({"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}},
                                  {"id": "c2", "type": "function", "function": {"name": "g", "arguments": {}}})
    assert (message.content, message.reasoning) == ("let me look", "hm")
    json.dumps(message.template_dict())


def test_the_step_is_one_state_machine_asked_run_denied_and_stopped_on_the_real_server():
    """ToolStep without an engine: the calls of one reply on server-everything, answered in order; the machine
    ToolLoop.step drives here is the one the Chat drives (tests/ui/chat/test_chat_tools.py)."""
    calls = (ToolCall("c1", "everything__echo", '{"message": "hi"}'), ToolCall("c2", "nowhere__nothing", "{}"),
             ToolCall("c3", "everything__get-sum", '{"a": 2, "b": 3}'),
             ToolCall("c4", "everything__trigger-long-running-operation", '{"duration": 30, "steps": 30}'))
    with ToolBox() as box:
        assert box.connect(mcp_servers.everything()).state == "ready"
        loop = ToolLoop(box, ["everything"], approvals=Approvals())
        step = loop.begin(calls)
        assert loop.steps == 1
        # a tool the model was not given is answered at once, in the ToolBox's words, nobody asked
        assert step.runs["c2"].outcome.kind == "no_such_tool" and step.pending() == calls[0]
        assert step.must_ask(calls[0]) and [c.decision for c in step.cards] == ["", "allowed", "", ""]
        assert step.decide("c1", ALLOW_ONCE)
        step.start("c1")
        assert step.running == "c1" and step.cards[0].decision == "allowed" and not step.cards[0].answered
        run = step.finish("c1", step.run("c1"))
        assert run.outcome.kind == "ok" and "Echo: hi" in run.outcome.text and step.running == ""
        assert step.pending() == calls[2]
        assert not step.decide("c3", DENY)  # denied: answered, never run
        assert step.runs["c3"].outcome.text == DENIED and step.cards[2].decision == "denied"
        assert step.decide("c4", ALWAYS_ALLOW) and not step.must_ask(calls[3])  # remembered for the tool
        step.start("c4")
        stopped = step.stop()  # Stop during the call: answered as stopped now, the caller cancels the call
        assert stopped is not None and stopped.outcome.kind == "cancelled" and step.pending() is None
        cards = step.cards
        assert [c.answered for c in cards] == [True, True, True, True]
        assert cards[3].is_error and cards[3].result == "The tool call was stopped by the user before it finished."
        result = step.result(Done("r", "", STATS, tool_calls=calls))
        assert [m.tool_call_id for m in result.messages] == ["c1", "c2", "c3", "c4"] and result.cards == tuple(cards)
