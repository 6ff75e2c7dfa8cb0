"""Several chats on one loaded model answer together (issue 38): the Chat loads a llama.cpp model to decode several
replies at once (the model bar's "Decode together", the local server's default), a reply sent in one chat streams
into its own conversation while another chat's reply streams beside it, Stop stops the chat it is pressed in, and
each reply is the text it gets alone. The real engine on SmolLM2-135M-Instruct (greedy), through the window a user
drives: keys, the conversation list, the Stop button."""

from __future__ import annotations

import os
import shutil

import pytest
from PySide6.QtCore import Qt

from app.datatypes import DEFAULT_PARALLEL, Done, LoadSettings
from app.ui.chat.engine_bridge import TokenChunk
from app.ui.chat.model_bar import prefill_for
from tests.engine.test_batching import _Reply, assert_same_reply
from tests.fixtures.machines import machine

pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install -e '.[llama]'")

# Greedy, so that a reply has one text whether it is decoded alone or beside another, up to where the model chose
# between two nearly equal tokens: there llama.cpp's batched decode may take the other (its kernels sum a batch in
# another order), which tests/engine/test_batching.py measures and allows (``assert_same_reply``, on the tokens'
# log-probabilities, asked for here too). A: long enough that B, sent after it, starts before A ends on any machine;
# B: short.
LONG = {"temperature": 0.0, "max_tokens": 160, "seed": 1, "logprobs": 5}
SHORT = {"temperature": 0.0, "max_tokens": 40, "seed": 1, "logprobs": 5}
ASK_A = "Write a short story about a lighthouse keeper."
ASK_B = "List three facts about the Moon."


def test_the_chat_loads_a_llama_cpp_model_to_decode_as_many_as_the_server_does(tiny_models):
    assert prefill_for(str(tiny_models.gguf_q8_0), machine(), 2048).settings.parallel == DEFAULT_PARALLEL
    assert prefill_for(str(tiny_models.gguf_q8_0), machine(), 2048, 2).settings.parallel == 2


def send(qtbot, chat, text: str) -> None:
    qtbot.keyClicks(chat.composer, text)
    qtbot.keyClick(chat.composer, Qt.Key.Key_Return)


class Events:
    """What the bridge routed to each reply, in order: (conversation id, kind); and each reply's Tokens as the engine
    sent them, log-probabilities and all, taken on their way into the reply's buffer (the bridge coalesces them into
    TokenChunks for the page), with its Done."""

    def __init__(self, chat) -> None:
        self.chat = chat
        self.seen: list[tuple[int, str]] = []
        self._ids: dict[str, int] = {}
        self.replies: dict[str, _Reply] = {}
        bridge = chat.bridge
        bridge.replied.connect(self.on_replied)
        make = bridge.buffer

        def buffer(request_id: str):
            made = make(request_id)
            reply = self.replies.setdefault(request_id, _Reply())
            if "push" not in vars(made):  # the worker asks for it again: recorded once
                push = made.push
                made.push = lambda token: (reply.add(token), push(token))[1]
            return made
        bridge.buffer = buffer

    def name(self, conversation_id: int) -> _Reply:
        """The conversation's reply just sent: its request id is known from now on."""
        request_id = self.chat.reply.of(conversation_id).request_id
        self._ids[request_id] = conversation_id
        return self.replies[request_id]

    def on_replied(self, request_id: str, event: object) -> None:
        kind = "tokens" if isinstance(event, TokenChunk) else "done" if isinstance(event, Done) else "other"
        if isinstance(event, Done):
            self.replies[request_id].add(event)
        self.seen.append((self._ids.get(request_id, -1), kind))

    def first(self, conversation_id: int, kind: str) -> int:
        return self.seen.index((conversation_id, kind))


def new_chat(chat, sampling: dict) -> int:
    chat.new_conversation()
    chat.store.update_settings(chat.current.id, sampling=sampling)
    return chat.current.id


def alone(qtbot, chat, events: Events, text: str, sampling: dict) -> _Reply:
    """The reply a chat gets with no other reply beside it."""
    conversation_id = new_chat(chat, sampling)
    with qtbot.waitSignal(chat.bridge.done, timeout=180_000):
        send(qtbot, chat, text)
        reply = events.name(conversation_id)
    assert not chat.reply.streaming and reply.done is not None and reply.entries
    return reply


def load(qtbot, window, path) -> None:
    window.chat.set_profile(machine())
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000) as loaded:
        window.chat.open_model(str(path))  # prefilled by the fit check: "Decode together" as the server's default
    assert loaded.args[0].details["parallel"] == DEFAULT_PARALLEL == window.chat.model_bar.parallel_box.value()
    assert f"{DEFAULT_PARALLEL} chats at once" in window.chat.model_label.text()


def shot(window, tmp_path, name: str) -> None:
    path = tmp_path / name
    assert window.grab().save(str(path))
    if shots := os.environ.get("QUANTDESK_SHOTS"):
        shutil.copy(path, os.path.join(shots, name))


@pytest.mark.real_model
def test_two_chats_answer_together_each_as_alone_into_its_own_conversation(qtbot, real_window, smollm2_gguf,
                                                                          tmp_path):
    window = real_window()
    chat = window.chat
    window.show_page("Chat")
    load(qtbot, window, smollm2_gguf)
    events = Events(chat)
    alone_a, alone_b = alone(qtbot, chat, events, ASK_A, LONG), alone(qtbot, chat, events, ASK_B, SHORT)
    events.seen.clear()

    a = new_chat(chat, LONG)
    send(qtbot, chat, ASK_A)
    together_a = events.name(a)
    b = new_chat(chat, SHORT)  # A goes on streaming while B is shown
    assert chat.send_button.isEnabled() and chat.reply.streams_in(a)
    send(qtbot, chat, ASK_B)
    together_b = events.name(b)
    assert chat.reply.streams_in(a) and chat.reply.streams_in(b)
    listed = [chat.conversation_list.item(i) for i in range(chat.conversation_list.count())]
    assert [(item.text(), item.toolTip()) for item in listed[:2]] == [  # the list says which chats are writing
        (ASK_B, f"{ASK_B}: a reply is being written"), (ASK_A, f"{ASK_A}: a reply is being written")]
    assert [item.toolTip() for item in listed[2:]] == [ASK_B, ASK_A]  # the chats that answered alone, before
    # Both stream before either ends: B's first tokens arrive while A is still writing.
    qtbot.waitUntil(lambda: (b, "tokens") in events.seen, timeout=120_000)
    assert (a, "done") not in events.seen, events.seen
    shot(window, tmp_path, "chat_two_replies_b.png")
    reply_b = chat.view.bubbles[-1]
    assert reply_b.state == "streaming" and ASK_A not in [bubble.markdown for bubble in chat.view.bubbles]
    # Back to A: its reply is there, growing (or done), and B's goes on into B.
    chat.conversation_list.setCurrentRow(next(i for i in range(chat.conversation_list.count())
                                              if chat.conversation_list.item(i).data(Qt.ItemDataRole.UserRole) == a))
    assert chat.current.id == a and chat.view.bubbles[0].markdown == ASK_A
    shown = len(chat.view.bubbles[-1].markdown)
    qtbot.waitUntil(lambda: not chat.reply.streams_in(a) or len(chat.view.bubbles[-1].markdown) > shown,
                    timeout=60_000)
    shot(window, tmp_path, "chat_two_replies_a.png")
    qtbot.waitUntil(lambda: not chat.reply.streaming, timeout=180_000)

    first_done = min(events.first(a, "done"), events.first(b, "done"))
    assert events.first(a, "tokens") < first_done and events.first(b, "tokens") < first_done
    for conversation_id, asked, by_itself, beside in ((a, ASK_A, alone_a, together_a), (b, ASK_B, alone_b, together_b)):
        user, reply = chat.store.messages(conversation_id)
        assert (user.content, reply.state) == (asked, "complete")
        assert reply.content == beside.done.text == beside.text  # its own reply, not mixed with the other's
        assert_same_reply(by_itself, beside, asked)  # the greedy text it gets alone
    assert chat.view.bubbles[-1].markdown == together_a.done.text  # A is on show: its reply, whole
    assert chat.send_button.isEnabled() and not chat.stop_button.isEnabled()


@pytest.mark.real_model
def test_stop_in_one_chat_stops_that_reply_alone(qtbot, real_window, smollm2_gguf):
    window = real_window()
    chat = window.chat
    window.show_page("Chat")
    load(qtbot, window, smollm2_gguf)
    events = Events(chat)
    alone_b = alone(qtbot, chat, events, ASK_B, SHORT)

    a = new_chat(chat, {**LONG, "max_tokens": 1500})
    send(qtbot, chat, ASK_A)
    events.name(a)
    b = new_chat(chat, SHORT)
    send(qtbot, chat, ASK_B)
    together_b = events.name(b)
    qtbot.waitUntil(lambda: (a, "tokens") in events.seen and (b, "tokens") in events.seen, timeout=120_000)
    # Stop pressed in A stops A: B's reply goes on.
    chat.open_conversation(a)
    assert chat.stop_button.isEnabled()
    with qtbot.waitSignal(chat.bridge.done, timeout=60_000,
                          check_params_cb=lambda done: done.stats.stop_reason == "cancelled") as stopped:
        qtbot.mouseClick(chat.stop_button, Qt.MouseButton.LeftButton)
    qtbot.waitUntil(lambda: not chat.reply.streaming, timeout=120_000)
    (_, reply_a), (_, reply_b) = chat.store.messages(a), chat.store.messages(b)
    assert reply_a.stats["stop_reason"] == "cancelled" and reply_a.content == stopped.args[0].text
    assert reply_a.stats["generated_tokens"] < 1500
    assert reply_b.stats["stop_reason"] != "cancelled" and reply_b.content == together_b.done.text
    assert_same_reply(alone_b, together_b, ASK_B)  # unchanged by A's stop


def test_a_chat_reloaded_with_another_context_answers_on_a_model_that_decodes_together(qtbot, real_window,
                                                                                     tiny_models):
    """The chat's saved state was written with another context, so the engine refuses it and the reply goes to
    another sequence than the one the load's warm-up read its prompt in: that warm-up must not hold the decode
    steps (a reply waited for it forever, on the Chat and on `quantdesk serve` alike)."""
    window = real_window()
    chat = window.chat
    for n_ctx in (1024, 2048):
        with qtbot.waitSignal(window.bridge.loaded, timeout=120_000):
            chat.load_model(str(tiny_models.gguf_q8_0), LoadSettings(n_ctx=n_ctx, gpu_layers=0, parallel=4))
        if chat.current is None:
            new_chat(chat, {"max_tokens": 8, "seed": 1})
        with qtbot.waitSignal(window.bridge.done, timeout=60_000) as done:
            send(qtbot, chat, f"Hello at {n_ctx}")
        assert done.args[0].stats.generated_tokens > 0
    assert [m.state for m in chat.store.messages(chat.current.id)] == ["complete"] * 4
