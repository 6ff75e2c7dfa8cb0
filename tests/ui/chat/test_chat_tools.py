"""MCP tools in the Chat, on real parts: the real engine on the tiny model with a tool-declaring template (Qwen 2.5's),
forced to call a tool by the engine's grammar; the real npm servers (server-filesystem, server-everything) over
stdio through the ToolBox; real widgets, a real chat store.

The acceptance of issue 26: a folder listed through server-filesystem after approval, the reply going on with the
result; a denial told to the model; Stop during server-everything's long-running operation ending within 1 s."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import pytest
from PySide6.QtCore import Qt

from app.chats import export as chat_export
from app.chats.messages import ToolCard
from app.datatypes import LoadSettings
from app.mcp.config import McpServers
from app.mcp.loop import DENIED
from tests.fixtures import mcp_servers

pytest.importorskip("llama_cpp")
# The Hermes-style grammar lets a call's JSON take some whitespace between tokens, which the random model uses.
CALL_TOKENS = 600
SHOTS = Path("/tmp")


@pytest.fixture
def folder(tmp_path):
    notes = tmp_path / "notes"
    (notes / "old").mkdir(parents=True)
    (notes / "a.txt").write_text("alpha\n")
    (notes / "b.md").write_text("beta\n")
    return notes


def add_servers(*configs) -> None:
    """The servers in the (test's own) mcp.json, confirmed as the user confirms them in Settings → Tools."""
    servers = McpServers()
    for config in configs:
        servers.save(config)
        servers.confirm(config.name)


def load(qtbot, window, model: Path) -> None:
    with qtbot.waitSignal(window.bridge.loaded, timeout=300_000):
        window.chat.load_model(str(model), LoadSettings(n_ctx=4096, gpu_layers=0))


def force(chat, tool: str, **fixed) -> None:
    """Give the model only ``tool``, each argument named held to one value (an enum the grammar enforces): the
    tiny random model then calls it with arguments the real server takes. The call itself is the server's."""
    real = chat.tools.specs

    def narrowed(chosen):
        out = []
        for spec in real(chosen):
            if spec.name == tool:
                schema = json.loads(json.dumps(spec.input_schema))
                schema["properties"] = {k: {**schema["properties"][k], "enum": [v]} for k, v in fixed.items()}
                schema["required"] = list(fixed)
                schema["additionalProperties"] = False
                out.append(replace(spec, input_schema=schema))
        return out

    chat.tools.specs = narrowed


def sent_messages(chat) -> list[list]:
    """Every conversation the page sends the engine, recorded on its way (the engine still gets it)."""
    sent: list[list] = []
    generate = chat.bridge.generate

    def recording(messages, sampling, *more, **named) -> str:  # the saved states' keys and the overflow policy besides
        sent.append((list(messages), sampling))
        return generate(messages, sampling, *more, **named)  # the request id the page routes its reply by

    chat.bridge.generate = recording
    return sent


def start_chat(qtbot, window, *configs, sampling) -> None:
    add_servers(*configs)
    chat = window.chat
    chat.tools.connect_all()
    qtbot.waitUntil(lambda: chat.tools.ready and all(
        getattr(chat.tools.status(c.name), "state", "") == "ready" for c in configs), timeout=60_000)
    chat.new_conversation()
    chat.store.update_settings(chat.current.id, sampling=sampling)
    chat.tools.max_steps = 1  # one forced step, then the model answers in words


def send(qtbot, chat, text: str) -> None:
    qtbot.keyClicks(chat.composer, text)
    qtbot.keyClick(chat.composer, Qt.Key.Key_Return)


def next_approval(qtbot, chat):
    """The approval card the chat shows next; None once the reply's tool step is over (or the reply made none)."""
    found = []
    steps = chat._tool_steps

    def asked() -> bool:
        for bubble in chat.view.bubbles:
            for view in bubble.tool_cards:
                if view.approval is not None and view.approval.isVisible() and \
                        view.approval.buttons["once"].isEnabled():
                    found.append(view)
                    return True
        return not chat.reply.streaming or chat._tool_steps > steps
    qtbot.waitUntil(asked, timeout=300_000)
    return found[0] if found else None


def test_a_folder_is_listed_through_server_filesystem_after_approval(qtbot, real_window, tiny_tool_model, folder):
    window = real_window()
    window.show_page("Chat")
    chat = window.chat
    mcp_servers.require()
    load(qtbot, window, tiny_tool_model)
    start_chat(qtbot, window, mcp_servers.filesystem(folder),
               sampling={"tool_choice": "required", "max_tokens": CALL_TOKENS, "seed": 1})
    force(chat, "list_directory", path=str(folder))
    sent = sent_messages(chat)
    send(qtbot, chat, "What is in my notes folder?")
    first = next_approval(qtbot, chat)
    assert first is not None, "the model called no tool"
    assert first.card.name == "list_directory" and first.card.server == "files"
    assert json.loads(first.card.arguments) == {"path": str(folder)}
    assert "waiting for your approval" in first.toggle.text() and first.approval.question.text().startswith(
        "Run the tool “list_directory” of the server “files”")
    first.approval.grab().save(str(SHOTS / "chattools-approval-card.png"))
    window.grab().save(str(SHOTS / "chattools-approval-window.png"))
    view = first
    while view is not None:  # the random model may call it more than once: each call is asked
        qtbot.mouseClick(view.approval.buttons["once"], Qt.MouseButton.LeftButton)
        view = next_approval(qtbot, chat)
    with qtbot.waitSignal(window.bridge.done, timeout=300_000) as going_on:
        pass
    qtbot.waitUntil(lambda: not chat.reply.streaming, timeout=10_000)
    messages = chat.store.messages(chat.current.id)
    assert [m.role for m in messages] == ["user", "assistant", "assistant"]
    cards = messages[1].tools
    assert cards and all(c.decision == "allowed" and not c.is_error for c in cards)
    assert "[FILE] a.txt" in cards[0].result and "[DIR] old" in cards[0].result and "[FILE] b.md" in cards[0].result
    assert messages[2].content == going_on.args[0].text  # the reply went on after the results
    # The engine got the call and the listing back, in the chat format's shape, and went on from them.
    history, sampling = sent[-1]
    assert [m.role for m in history][-1 - len(cards):] == ["assistant", *["tool"] * len(cards)]
    assert history[-1 - len(cards)].tool_calls[0]["function"] == {"name": "files__list_directory",
                                                                  "arguments": {"path": str(folder)}}
    assert history[-len(cards)].tool_call_id == cards[0].call_id and "[FILE] a.txt" in history[-len(cards)].content
    assert sampling.tool_choice == "none" and sampling.tools  # the step limit: shown the tools, held to words
    assert going_on.args[0].stats.prompt_tokens > messages[1].stats["prompt_tokens"] + \
        messages[1].stats["generated_tokens"]
    # The card: the tool, its server, the arguments, a result that folds.
    bubble = chat.view.bubble(messages[1].id)
    card = bubble.tool_cards[0]
    assert card.toggle.text().startswith("list_directory · files — done in")
    assert not card.result.isVisible()
    qtbot.mouseClick(card.toggle, Qt.MouseButton.LeftButton)
    assert card.result.isVisible() and "[FILE] a.txt" in card.result.toPlainText()
    assert card.accessibleName() == "Tool call list_directory on files"
    bubble.grab().save(str(SHOTS / "chattools-tool-card.png"))
    # Reopened from the store: the same cards; and exported.
    conversation = chat.current.id
    chat.open_conversation(conversation)
    assert [v.card for v in chat.view.bubble(messages[1].id).tool_cards] == list(cards)
    assert "**Tool** `list_directory` (files): done" in chat_export.to_markdown(chat.store, conversation)


def test_a_denial_is_told_to_the_model(qtbot, real_window, tiny_tool_model, folder):
    window = real_window()
    window.show_page("Chat")
    chat = window.chat
    mcp_servers.require()
    load(qtbot, window, tiny_tool_model)
    start_chat(qtbot, window, mcp_servers.filesystem(folder),
               sampling={"tool_choice": "required", "max_tokens": CALL_TOKENS, "seed": 2})
    force(chat, "list_directory", path=str(folder))
    sent = sent_messages(chat)
    send(qtbot, chat, "List my notes")
    view = next_approval(qtbot, chat)
    assert view is not None
    while view is not None:
        qtbot.mouseClick(view.approval.buttons["deny"], Qt.MouseButton.LeftButton)
        view = next_approval(qtbot, chat)
    qtbot.waitUntil(lambda: not chat.reply.streaming, timeout=300_000)
    messages = chat.store.messages(chat.current.id)
    assert [m.role for m in messages] == ["user", "assistant", "assistant"]
    assert all(c.decision == "denied" and c.seconds is None and c.result == DENIED for c in messages[1].tools)
    history, _ = sent[-1]
    told = [m for m in history if m.role == "tool"]
    assert told and all(m.content == DENIED for m in told)
    card = chat.view.bubble(messages[1].id).tool_cards[0]
    assert card.toggle.text() == "list_directory · files — denied"
    assert card.status.text() == "You denied this call; the model was told."


def test_a_write_cut_by_max_tokens_is_no_call_so_nothing_is_asked_or_written(qtbot, real_window, tiny_tool_model,
                                                                            tmp_path):
    """The issue's case in the Chat: a forced write_file cut by max_tokens inside its arguments (this seed's random
    model has named the tool by 50 tokens, the call's JSON is far from closed; the engine once handed out the call
    with its arguments cut to "{", and the Chat asked to run it). The reply is no call: no approval card, no tool
    step, no file, no markup as the answer."""
    window = real_window()
    window.show_page("Chat")
    chat = window.chat
    mcp_servers.require()
    shared = tmp_path / "shared"
    shared.mkdir()
    load(qtbot, window, tiny_tool_model)
    start_chat(qtbot, window, mcp_servers.filesystem(shared),
               sampling={"tool_choice": "required", "max_tokens": 50, "seed": 1})
    force(chat, "write_file", path=str(shared / "notes.md"), content="line one\nline two\n" * 4)
    steps = chat._tool_steps
    with qtbot.waitSignal(window.bridge.done, timeout=300_000) as done:
        send(qtbot, chat, "Save my notes")
    qtbot.waitUntil(lambda: not chat.reply.streaming, timeout=30_000)
    assert done.args[0].stats.stop_reason == "length" and done.args[0].tool_calls == ()
    assert chat._tool_steps == steps and not [v for b in chat.view.bubbles for v in b.tool_cards]
    messages = chat.store.messages(chat.current.id)
    assert [m.role for m in messages] == ["user", "assistant"] and not messages[1].tools
    assert not messages[1].content.strip() and list(shared.iterdir()) == []


def test_stop_during_a_long_tool_call_ends_within_a_second(qtbot, real_window, tiny_tool_model):
    window = real_window()
    window.show_page("Chat")
    chat = window.chat
    mcp_servers.require()
    load(qtbot, window, tiny_tool_model)
    start_chat(qtbot, window, mcp_servers.everything(),
               sampling={"tool_choice": "required", "max_tokens": CALL_TOKENS, "seed": 3})
    force(chat, "trigger-long-running-operation", duration=60, steps=60)
    send(qtbot, chat, "Run the long job")
    view = next_approval(qtbot, chat)
    assert view is not None
    qtbot.mouseClick(view.approval.buttons["always"], Qt.MouseButton.LeftButton)  # and later calls run unasked
    qtbot.waitUntil(lambda: view.running, timeout=10_000)
    assert "running" in view.toggle.text()
    time.sleep(1.0)  # well into the 60 s operation
    calls = chat.tools._calls
    started = time.monotonic()
    qtbot.mouseClick(chat.stop_button, Qt.MouseButton.LeftButton)
    ended = time.monotonic() - started
    assert not chat.reply.streaming and chat.send_button.isEnabled() and ended < 1.0, ended
    qtbot.waitUntil(lambda: not calls._jobs, timeout=1000)  # the ToolBox's call itself ended within the second
    assert time.monotonic() - started < 1.0 + 0.2  # (waitUntil polls)
    messages = chat.store.messages(chat.current.id)
    stopped = messages[1].tools[0]
    assert stopped.is_error and "stopped by the user" in stopped.result and stopped.seconds >= 1.0
    assert ("everything", "trigger-long-running-operation") in chat.tools.approvals.always()
    # The chat goes on: the next message is answered (the stopped call goes back to the model as stopped).
    chat.store.update_settings(chat.current.id, sampling={"max_tokens": 8, "seed": 1})
    sent = sent_messages(chat)
    chat.tools.max_steps = 0
    with qtbot.waitSignal(window.bridge.done, timeout=300_000):
        send(qtbot, chat, "Never mind")
    tool_turns = [m for m in sent[-1][0] if m.role == "tool"]
    assert tool_turns and "stopped by the user" in tool_turns[0].content


def test_settings_tools_lists_servers_confirms_commands_and_revokes(qtbot, make_window, folder, tmp_path):
    mcp_servers.require()
    window = make_window()
    window.show_page("Settings")
    panel = window.pages["Settings"].tools_panel
    tools = window.chat.tools
    files = mcp_servers.filesystem(folder)
    panel.name_edit.setText("files")
    panel.command_edit.setText(" ".join([files.command, *files.args]))
    qtbot.mouseClick(panel.add_button, Qt.MouseButton.LeftButton)
    # Not started before the user saw the command in full and confirmed it.
    assert panel.confirm_box.isVisible() and panel.confirm_command.text() == files.command_line()
    assert "files" not in tools.connecting and tools.status("files") is None
    assert "waits for your confirmation" in panel.list.item(0).text()
    qtbot.mouseClick(panel.start_button, Qt.MouseButton.LeftButton)
    # "tool(s)" until the lead's translation update gives English its plural forms
    qtbot.waitUntil(lambda: "connected · 14 tool" in panel.list.item(0).text(), timeout=60_000)
    panel.list.setCurrentRow(0)
    assert "list_directory: " in panel.server_tools.text()
    # An mcp.json of another app: imported, not started until confirmed.
    other = tmp_path / "claude_desktop_config.json"
    other.write_text(json.dumps({"mcpServers": {"broken": {"command": "node", "args": ["-e", "process.exit(3)"]}}}))
    panel.import_file(other)
    assert "added 1: broken" in panel.status.text()
    panel.list.setCurrentRow(1)
    assert panel.confirm_box.isVisible() and "process.exit(3)" in panel.confirm_command.text()
    qtbot.mouseClick(panel.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "failed: " in panel.list.item(1).text(), timeout=60_000)
    tools.approvals.allow_always("files", "list_directory")
    panel.refresh()
    assert panel.allowed.item(0).text() == "list_directory of files"
    panel.grab().save(str(SHOTS / "chattools-settings-tools.png"))
    panel.allowed.setCurrentRow(0)
    qtbot.mouseClick(panel.revoke_button, Qt.MouseButton.LeftButton)
    assert panel.allowed.count() == 0 and tools.approvals.always() == []
    panel.list.setCurrentRow(1)
    qtbot.mouseClick(panel.remove_button, Qt.MouseButton.LeftButton)
    assert [c.name for c in McpServers().all()] == ["files"]


def test_stored_tool_cards_show_in_words_and_fold(qtbot, make_window):
    window = make_window()
    chat = window.chat
    conv = chat.store.create_conversation("Notes")
    writer = chat.store.begin_reply(conv.id, prompt="List my notes")
    writer.finish({}, text="")
    cards = [ToolCard("c1", "list_directory", '{"path": "/srv"}', "files", "[FILE] a.txt", decision="allowed",
                      seconds=0.2),
             ToolCard("c2", "write_file", '{"path": "/etc/x"}', "files", DENIED, is_error=True, decision="denied"),
             ToolCard("c3", "read_file", '{"path": "/big"}', "files", "x" * 100, cut=True, is_error=True,
                      decision="allowed", seconds=2.0),
             ToolCard("c4", "get_file_info", '{"path": "/srv"}', "files")]
    chat.store.update_message(writer.message_id, tools=cards)
    chat.open_conversation(conv.id)
    bubble = chat.view.bubble(writer.message_id)
    views = bubble.tool_cards
    assert [v.toggle.text() for v in views] == [
        "list_directory · files — done in 0.2 s", "write_file · files — denied", "read_file · files — error after 2.0 s",
        "get_file_info · files — not run"]
    assert views[2].status.text() == ("The tool answered with an error; the model was told. The result was cut to "
                                      "fit; the model got the first part.")
    assert views[3].status.text() == "The reply was stopped before it ran."
    assert bubble.body.isHidden()  # a reply that only called tools: no empty answer box
    assert views[0].result.isHidden()
    views[0].toggle.click()
    assert not views[0].result.isHidden() and views[0].result.toPlainText() == "[FILE] a.txt"
    assert views[0].arguments.accessibleName() == 'Arguments of list_directory: {"path": "/srv"}'
    views[1].toggle.click()
    assert views[1].result.isHidden()  # nothing ran: nothing to open


def test_a_server_killed_mid_call_is_said_in_the_chat_and_the_reply_goes_on(qtbot, real_window, tiny_tool_model):
    import psutil

    window = real_window()
    window.show_page("Chat")
    chat = window.chat
    mcp_servers.require()
    load(qtbot, window, tiny_tool_model)
    start_chat(qtbot, window, mcp_servers.everything(),
               sampling={"tool_choice": "required", "max_tokens": CALL_TOKENS, "seed": 3})
    chat.tools.approvals.allow_always("everything", "trigger-long-running-operation")  # runs unasked
    force(chat, "trigger-long-running-operation", duration=60, steps=60)
    send(qtbot, chat, "Run the long job")
    qtbot.waitUntil(lambda: chat.tools.step is not None and bool(chat.tools.step.running), timeout=300_000)
    server = next(p for p in psutil.Process().children(recursive=True)
                  if any("mcp-server-everything" in part for part in p.cmdline()))
    server.kill()
    qtbot.waitUntil(lambda: not chat.reply.streaming, timeout=300_000)  # the reply went on, and ended
    messages = chat.store.messages(chat.current.id)
    assert [m.role for m in messages] == ["user", "assistant", "assistant"]
    crashed = messages[1].tools[0]
    assert crashed.is_error and "went away during everything/trigger-long-running-operation" in crashed.result
    assert "went away during everything/trigger-long-running-operation" in chat.banner_text.text()
    assert chat.banner.isVisible()


def test_a_chat_chooses_whose_tools_its_model_sees(qtbot, tmp_path):
    from app.chats.store import ChatStore
    from app.mcp.loop import tool_support_refusal
    from app.ui.chat.chat_settings import ChatSettingsDialog

    with ChatStore(tmp_path / "chats.sqlite3") as store:
        conv = store.create_conversation("Notes")
        servers = [("files", "connected · 14 tools"), ("web", "failed")]
        dialog = ChatSettingsDialog(store, conv, tool_servers=servers)
        qtbot.addWidget(dialog)
        assert [b.isChecked() for b in dialog.tool_boxes.values()] == [True, True]  # every server by default
        assert dialog.tool_boxes["files"].accessibleName() == "Tools of files"
        dialog.tool_boxes["web"].setChecked(False)
        dialog.accept()
        assert store.conversation(conv.id).tool_servers == ("files",)
        again = ChatSettingsDialog(store, store.conversation(conv.id), tool_servers=servers)
        qtbot.addWidget(again)
        assert not again.tool_boxes["web"].isChecked()
        again.tool_boxes["web"].setChecked(True)
        again.accept()
        assert store.conversation(conv.id).tool_servers is None  # every one again, new ones too
        # A model whose template cannot call tools: the dialog says so.
        refusal = tool_support_refusal({"chat_template": "model", "tool_format": ""})
        plain = ChatSettingsDialog(store, conv, tool_servers=servers, tools_refusal=refusal)
        qtbot.addWidget(plain)
        assert plain.tools_note.text().startswith("This model's chat template has no tool support")
        none = ChatSettingsDialog(store, conv)
        qtbot.addWidget(none)
        assert none.tools_note.text() == "No MCP servers yet: add them in Settings → Tools."


def test_a_server_added_in_settings_after_the_chat_opened_is_offered(qtbot, make_window, folder):
    """The Chat started with no mcp.json (nothing imported, nothing started); a server added in Settings → Tools
    later reaches the next reply of a model that takes tools."""
    from app.chats.messages import Conversation
    from app.datatypes import Loaded

    window = make_window()
    window.show_page("Chat")
    chat = window.chat
    assert chat._tools is None
    window.show_page("Settings")
    panel = window.pages["Settings"].tools_panel
    files = mcp_servers.filesystem(folder)
    panel.name_edit.setText("files")
    panel.command_edit.setText(" ".join([files.command, *files.args]))
    qtbot.mouseClick(panel.add_button, Qt.MouseButton.LeftButton)
    qtbot.mouseClick(panel.start_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: "connected" in panel.list.item(0).text(), timeout=60_000)
    # what the engine reports of a model whose template takes tools (as the tiny tool model's load does)
    chat.loader.loaded = Loaded("llama.cpp", "/m.gguf", 4096, 4, 0, False, {}, 1.0, details={"tool_format": "auto"})
    conv = Conversation(1, "t", 0, 0)
    assert "files__list_directory" in {s.function_name for s in chat._tool_specs(conv)}
    assert chat._tool_specs(replace(conv, tool_servers=())) == []  # the chat chose none
    chat.loader.loaded = replace(chat.loader.loaded, details={"tool_format": ""})
    assert chat._tool_specs(conv) == []  # a template that cannot call tools is given none


def test_chat_tools_step_asks_runs_and_stops_on_the_real_server(qtbot, tmp_path):
    """ChatTools alone (no engine): a step's calls are asked for in order, run on a worker, answered; a tool the
    model was not given is answered at once in the ToolBox's words; Stop while a call waits leaves it not run."""
    from app.datatypes import ToolCall
    from app.ui.chat.chat_tools import ChatTools

    mcp_servers.require()
    add_servers(mcp_servers.everything())
    tools = ChatTools()
    try:
        tools.connect_all()
        qtbot.waitUntil(lambda: getattr(tools.status("everything"), "state", "") == "ready", timeout=60_000)
        specs = tools.specs(None)
        asked: list[str] = []
        tools.approval_needed.connect(lambda _step, call_id, _description: asked.append(call_id))
        calls = (ToolCall("c1", "everything__echo", '{"message": "hi"}'), ToolCall("c2", "nowhere__nothing", "{}"),
                 ToolCall("c3", "everything__get-sum", '{"a": 2, "b": 3}'))
        with qtbot.waitSignal(tools.step_done, timeout=30_000) as done:
            tools.begin_step(1, 1, calls, 0, specs)
            assert asked == ["c1"]
            tools.answer("c1", "once")
            qtbot.waitUntil(lambda: asked == ["c1", "c3"], timeout=30_000)  # c2 needed no one: it does not exist
            tools.answer("c3", "deny")
        step = done.args[0]
        echo, missing, denied = step.cards
        assert (echo.name, echo.server, echo.function, echo.decision, echo.is_error) == (
            "echo", "everything", "everything__echo", "allowed", False)
        assert "Echo: hi" in echo.result and echo.seconds is not None
        assert missing.is_error and "there is no tool named 'nowhere__nothing'" in missing.result
        assert denied.decision == "denied" and denied.seconds is None
        asked.clear()
        tools.begin_step(1, 2, (ToolCall("c4", "everything__echo", '{"message": "again"}'),), 1, specs)
        assert asked == ["c4"]
        stopped = tools.stop()
        assert tools.step is None and not stopped.cards[0].answered  # the model is told it was not run
    finally:
        tools.shutdown()


def test_the_chat_and_the_cli_run_one_tool_step(qtbot, monkeypatch):
    """The same calls, answered the same, through the Chat's ChatTools and `quantdesk chat --tools`' ToolLoop.step:
    both build app.mcp.loop.ToolStep and keep the same cards (the seconds aside)."""
    from app.datatypes import Done, GenerationStats, ToolCall
    from app.mcp import loop
    from app.mcp.approvals import ALLOW_ONCE, DENY
    from app.ui.chat.chat_tools import ChatTools

    made: list[loop.ToolStep] = []
    post_init = loop.ToolStep.__post_init__
    monkeypatch.setattr(loop.ToolStep, "__post_init__", lambda self: (made.append(self), post_init(self))[1])
    add_servers(mcp_servers.everything())
    calls = (ToolCall("c1", "everything__echo", '{"message": "hi"}'), ToolCall("c2", "nowhere__nothing", "{}"),
             ToolCall("c3", "everything__get-sum", '{"a": 2, "b": 3}'))
    answers = {"c1": ALLOW_ONCE, "c3": DENY}
    tools = ChatTools()
    try:
        tools.connect_all()
        qtbot.waitUntil(lambda: getattr(tools.status("everything"), "state", "") == "ready", timeout=60_000)
        tools.approval_needed.connect(lambda _step, call_id, _description: tools.answer(call_id, answers[call_id]))
        with qtbot.waitSignal(tools.step_done, timeout=30_000) as done:
            tools.begin_step(1, 1, calls, 0, tools.specs(None))
        chat_cards = done.args[0].cards
        cli = loop.ToolLoop(tools.toolbox, ["everything"], approvals=tools.approvals,
                            approve=lambda _spec, call, _arguments: answers[call.id])
        stats = GenerationStats(prompt_tokens=1, prompt_ms=1.0, ttft_ms=1.0, generated_tokens=1, decode_ms=1.0,
                                stop_reason="eos", peak_memory_bytes=0)
        cli_cards = list(cli.step(Done("r", "", stats, tool_calls=calls)).cards)
    finally:
        tools.shutdown()
    assert [type(step).__name__ for step in made] == ["ChatToolStep", "ToolStep"]
    assert isinstance(made[0], loop.ToolStep) and made[0] is done.args[0]
    same = [replace(card, seconds=None if card.seconds is None else 0.0) for card in chat_cards]
    assert same == [replace(card, seconds=None if card.seconds is None else 0.0) for card in cli_cards]
    assert [c.decision for c in cli_cards] == ["allowed", "allowed", "denied"] and "Echo: hi" in cli_cards[0].result
