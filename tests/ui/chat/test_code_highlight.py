"""Code blocks in a reply are highlighted by pygments in the palette's style, and again when the theme changes."""

from __future__ import annotations

from PySide6.QtGui import QTextCursor, QTextFormat
from PySide6.QtWidgets import QApplication

from app.chats.messages import ChatMessage
from app.ui.chat.chat_bubble import MessageBubble
from app.ui.chat.code_highlight import highlight_code_blocks, style
from app.ui.common.theme import ThemeFollower
from pygments.token import Comment, Keyword

REPLY = """Here it is:

```python
def greet(name):
    # say hello
    return f"Hello, {name}!"
```

Done."""


def code_colours(bubble: MessageBubble) -> dict[str, str]:
    """Each word of the code block with the colour it is drawn in."""
    document = bubble.body.document()
    colours = {}
    block = document.begin()
    while block.isValid():
        if block.blockFormat().hasProperty(QTextFormat.Property.BlockCodeFence):
            it = block.begin()
            while not it.atEnd():
                fragment = it.fragment()
                for word in fragment.text().split():
                    colours[word] = fragment.charFormat().foreground().color().name()
                it += 1
        block = block.next()
    return colours


def message(text: str) -> ChatMessage:
    return ChatMessage(id=1, conversation_id=1, role="assistant", content=text, created=0.0)


def test_a_code_block_gets_pygments_colours_that_follow_the_theme(qtbot):
    app = QApplication.instance()
    follower = ThemeFollower(app, "light")
    try:
        bubble = MessageBubble(message(REPLY))
        qtbot.addWidget(bubble)
        light = code_colours(bubble)
        # keyword, comment and string each in their own colour, as the light style says
        assert light["def"] == "#" + style(False).style_for_token(Keyword)["color"].lower()
        assert light["#"] == "#" + style(False).style_for_token(Comment)["color"].lower()
        assert len({light["def"], light["#"], light['f"Hello,'], light["greet"]}) == 4
        follower.set_theme("dark")
        qtbot.waitUntil(lambda: code_colours(bubble)["def"] != light["def"])
        dark = code_colours(bubble)
        assert dark["def"] == "#" + style(True).style_for_token(Keyword)["color"].lower()
        assert dark["#"] != light["#"]  # the comment too
    finally:
        follower.set_theme("system")
        follower.deleteLater()


def test_an_unknown_language_is_plain_text_on_the_code_background(qtbot):
    bubble = MessageBubble(message("```nosuchlanguage\nsome words here\n```"))
    qtbot.addWidget(bubble)
    assert highlight_code_blocks(bubble.body.document(), dark=False) == 1
    cursor = QTextCursor(bubble.body.document())
    assert cursor.block().blockFormat().background().color().name() == style(False).background_color.lower()
