"""A streamed reply is rendered piece by piece and ends up exactly as a whole rendering."""

from __future__ import annotations

import pytest

from app.chats.messages import ChatMessage
from app.ui.chat.chat_bubble import MessageBubble

SAMPLE = """# Plan

Intro with **bold** and `inline`.

- item one
- item two

```python
def f():

    return 1
```

> a quote

1. first
2. second

~~~
tilde code
~~~

Last *words*."""


@pytest.mark.parametrize("step", [1, 3, 17, len(SAMPLE)])
def test_streamed_rendering_matches_a_whole_rendering(qtbot, step):
    whole = MessageBubble(ChatMessage(1, 1, "assistant", SAMPLE, 0.0))
    streamed = MessageBubble(ChatMessage(2, 1, "assistant", "", 0.0, state="streaming"))
    qtbot.addWidget(whole)
    qtbot.addWidget(streamed)
    for i in range(0, len(SAMPLE), step):
        streamed.append_text(SAMPLE[i:i + step])
    # While streaming, finished paragraphs are already Markdown; only the last one is still raw.
    assert streamed.body.toPlainText().startswith("Plan\nIntro with bold and inline.")
    assert streamed.body.toPlainText().endswith("Last *words*.")
    streamed.finish(SAMPLE, None, "complete")
    assert streamed.body.toHtml() == whole.body.toHtml()
    assert streamed.markdown == SAMPLE


def test_final_text_that_differs_from_the_stream_is_rendered_whole(qtbot):
    bubble = MessageBubble(ChatMessage(1, 1, "assistant", "", 0.0, state="streaming"))
    qtbot.addWidget(bubble)
    bubble.append_text("Hello wor")
    bubble.finish("Hello **world**", None, "complete")
    assert bubble.body.toPlainText() == "Hello world"


def test_a_bubble_reopened_on_a_reply_mid_stream_has_its_text_once_and_streams_on(qtbot):
    half = len(SAMPLE) // 2
    whole = MessageBubble(ChatMessage(1, 1, "assistant", SAMPLE, 0.0))
    reopened = MessageBubble(ChatMessage(2, 1, "assistant", SAMPLE[:half], 0.0, state="streaming"))
    qtbot.addWidget(whole)
    qtbot.addWidget(reopened)
    assert reopened.markdown == SAMPLE[:half]
    reopened.append_text(SAMPLE[half:])
    reopened.finish(SAMPLE, None, "complete")
    assert reopened.markdown == SAMPLE
    assert reopened.body.toHtml() == whole.body.toHtml()
