"""The Chat past a full context on the real engine (a tiny model, 256 tokens of context): the chat's overflow policy
keeps it answering, and what was left out is marked on the reply, stored with it, and shown again on reopening."""

from __future__ import annotations

import pytest

from app.datatypes import LoadSettings
from app.ui.chat.chat_settings import ChatSettingsDialog
from tests.ui.chat.test_chat_page import type_and_send

N_CTX = 256
REPLY = 24


def _question(i: int) -> str:
    return f"Question number {i}: what comes after {i} apples and {i + 1} pears?"


@pytest.mark.parametrize("policy", ["drop-oldest", "truncate-middle", "compact"])
def test_the_chat_keeps_answering_past_a_full_context_and_marks_each_cut(qtbot, real_window, tiny_models, policy,
                                                                        tmp_path):
    pytest.importorskip("llama_cpp")
    window = real_window()
    chat = window.chat
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000):
        chat.load_model(str(tiny_models.gguf_q8_0), LoadSettings(n_ctx=N_CTX, gpu_layers=0))
    conv = chat.store.create_conversation(system_prompt="You are terse.", sampling={"max_tokens": REPLY, "seed": 1}).id
    # the chat's own policy, chosen in its settings dialog
    dialog = ChatSettingsDialog(chat.store, chat.store.conversation(conv))
    qtbot.addWidget(dialog)
    dialog.overflow.setCurrentIndex(dialog.overflow.findData(policy))
    dialog.accept()
    assert chat.store.conversation(conv).overflow == policy
    chat.open_conversation(conv)
    past = 0
    i = -1
    while past < 20:
        i += 1
        with qtbot.waitSignal(window.bridge.done, timeout=120_000) as done:
            type_and_send(qtbot, chat, _question(i))
        assert done.args[0].text and done.args[0].stats.generated_tokens > 0  # it keeps answering
        assert done.args[0].stats.prompt_tokens + REPLY <= N_CTX
        cut = next((m.context_cut for m in reversed(chat.store.messages(conv)) if m.context_cut), None)
        past += cut is not None
    assert chat.banner.isHidden()
    marked = [m for m in chat.store.messages(conv) if m.context_cut]
    assert len(marked) >= 2 and all(m.role == "assistant" for m in marked)
    dropped = [m.context_cut["dropped"] for m in marked]
    assert dropped == sorted(dropped) and len(set(dropped)) == len(dropped)
    for message in marked:
        cut = message.context_cut
        assert cut["policy"] == policy and cut["start"] == (2 if policy == "truncate-middle" else 0)
        bubble = chat.view.bubble(message.id)
        mark = bubble.cut_mark
        assert mark is not None and mark.isVisible()
        words = "compacted into a note by the model" if policy == "compact" else "not sent to the model"
        assert mark.line.text() == f"{cut['dropped']} earlier messages {words} (context full)"
        assert mark.line.accessibleName() == mark.line.text()
        if policy == "compact":  # the model's own note, stored, folded behind the line
            assert cut["note"] and mark.text is not None and not mark.text.isVisible()
            mark.line.click()
            assert mark.is_open and mark.text.isVisible() and mark.text.toPlainText() == cut["note"]
        else:
            assert not cut["note"] and mark.text is None
    assert [b.message_id for b in chat.view.bubbles if b.cut_mark] == [m.id for m in marked]
    if policy == "compact":
        window.grab().save(str(tmp_path / "overflow.png"))
    # reopened, the marks are where they happened
    chat.new_conversation()
    chat.open_conversation(conv)
    assert [b.message_id for b in chat.view.bubbles if b.cut_mark] == [m.id for m in marked]


def test_the_context_meter_says_what_the_chats_policy_does_when_the_context_is_full(qtbot):
    from app.datatypes import ContextUse
    from app.ui.chat.model_bar import ContextMeter

    meter = ContextMeter()
    qtbot.addWidget(meter)
    meter.show_use(ContextUse(250, 256), REPLY, "model.gguf")  # stop, as before there was a choice
    assert meter.near_full and meter.toolTip().endswith(
        "The next reply may not fit: when the context is full the model cannot answer. Start a new chat, or load "
        "the model with a larger context.")
    meter.show_use(ContextUse(250, 256), REPLY, "model.gguf", "compact")
    assert meter.near_full and meter.toolTip().endswith(
        "When the context is full, this chat's overflow policy leaves its oldest turns out (and marks them where it "
        "happens); the model goes on answering.")


def test_a_pinned_message_is_sent_past_a_full_context_and_stays_pinned(qtbot, real_window, tiny_models, tmp_path):
    """Pinned from its bubble, the chat's second question is in every prompt the engine gets under drop-oldest, past
    the point where the oldest turns are left out; the mark says it was kept, and the pin comes back on reopening."""
    pytest.importorskip("llama_cpp")
    from tests.ui.chat.test_chat_tools import sent_messages

    window = real_window()
    chat = window.chat
    with qtbot.waitSignal(window.bridge.loaded, timeout=120_000):
        chat.load_model(str(tiny_models.gguf_q8_0), LoadSettings(n_ctx=N_CTX, gpu_layers=0))
    conv = chat.store.create_conversation(system_prompt="You are terse.", sampling={"max_tokens": REPLY, "seed": 1}).id
    chat.store.update_settings(conv, overflow="drop-oldest")
    chat.open_conversation(conv)
    asked = sent_messages(chat)  # the history the page hands the bridge
    prompts: list[list] = []  # the prompts the engine got, after the overflow policy
    client = window.bridge.client
    generate = client.generate

    def recording(messages, *more, **named):
        prompts.append(list(messages))
        return generate(messages, *more, **named)

    client.generate = recording
    for i in (0, 1):
        with qtbot.waitSignal(window.bridge.done, timeout=120_000):
            type_and_send(qtbot, chat, _question(i))
    first = chat.store.messages(conv)[2]
    bubble = chat.view.bubble(first.id)
    pin = bubble.actions["pin"]
    assert pin.text() == "Pin" and not pin.isChecked() and bubble.pin_mark.isHidden()
    pin.click()
    assert chat.store.message(first.id).pinned
    assert pin.text() == "Unpin" and pin.isChecked() and bubble.pin_mark.isVisible()
    assert bubble.pin_mark.accessibleName() == "Pinned: always sent to the model"
    qtbot.waitUntil(lambda: pin.width() >= pin.sizeHint().width())  # "Unpin" whole, once laid out again
    bubble.grab().save(str(tmp_path / "pinned.png"))
    bubble.grab().save("/tmp/pins_bubble.png")
    past = 0
    while past < 6:
        i += 1
        with qtbot.waitSignal(window.bridge.done, timeout=120_000) as done:
            type_and_send(qtbot, chat, _question(i))
        assert done.args[0].stats.prompt_tokens + REPLY <= N_CTX
        prompt = prompts[-1]
        assert prompt[0].content == "You are terse." and prompt[-1].content == _question(i)
        assert _question(1) in [m.content for m in prompt]  # the pinned question, always sent
        cut = next((m.context_cut for m in reversed(chat.store.messages(conv)) if m.context_cut), None)
        past += cut is not None
    assert i > 6 and len(asked[-1][0]) == 2 * i + 2  # the page handed the whole conversation to the rule
    assert asked[-1][0][3].content == _question(1)
    # the turns left out were the droppable ones around the pin: its question and answer kept, and said so
    assert not any(m.content == _question(0) for m in prompt)
    assert prompt[1].content == _question(1) and prompt[2].role == "assistant"
    assert cut["start"] == 0 and cut["kept"] == [2, 3]
    reply = next(m for m in reversed(chat.store.messages(conv)) if m.context_cut)
    mark = chat.view.bubble(reply.id).cut_mark
    assert mark.line.text() == f"{cut['dropped']} earlier messages not sent to the model (context full), " \
                               "2 pinned messages kept"
    # reopened, the pin is there
    chat.new_conversation()
    chat.open_conversation(conv)
    bubble = chat.view.bubble(first.id)
    assert bubble.pinned and not bubble.pin_mark.isHidden() and bubble.actions["pin"].text() == "Unpin"
    bubble.actions["pin"].click()  # and it comes off
    assert not chat.store.message(first.id).pinned and bubble.pin_mark.isHidden()
