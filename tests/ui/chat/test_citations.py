"""A reply's citations (issue 28): numbered chips under its text, its "[n]" marks made links (never inside code), and
the side panel that opens a cited passage; the context meter's documents' share."""

from __future__ import annotations

from PySide6.QtCore import QUrl

from app.chats.messages import ChatMessage
from app.datatypes import ContextUse
from app.ui.chat.chat_bubble import MessageBubble
from app.ui.chat.citations import CITE_SCHEME, CitationPanel, cited_number, label, with_citation_links
from app.ui.chat.model_bar import ContextMeter

GUIDE = {"number": 1, "score": 0.9, "chunk_id": 4, "collection": "manuals", "path": "/nowhere/guide.pdf",
         "text": "Hold the reset button for five seconds, until the light blinks.", "page": 3, "heading": "",
         "line": None, "where": "guide.pdf, page 3"}
NOTES = {"number": 2, "score": 0.4, "chunk_id": 9, "collection": "chat-1", "path": "/nowhere/notes.md",
         "text": "Plug in the cable first.", "page": None, "heading": "Setup › Cables", "line": 3,
         "where": "notes.md, Setup › Cables"}
REPLY = "Hold the button [1]. Then the cable [2], not [3].\n\n```python\nx = items[1]\n```\n\nSee `a[2]` too."


def test_marks_become_links_outside_code_and_only_for_cited_numbers():
    linked = with_citation_links(REPLY, [1, 2])
    assert f"[\\[1\\]]({CITE_SCHEME}:1)" in linked and f"[\\[2\\]]({CITE_SCHEME}:2)" in linked
    assert "not [3]." in linked  # nothing was cited as 3
    assert "x = items[1]" in linked and "`a[2]`" in linked  # code stays code
    assert with_citation_links(REPLY, []) == REPLY
    already = "[1](https://example.org) and [see][1]\n\n[1]: https://example.org/ref"
    assert with_citation_links(already, [1]) == already  # links, and a reference definition, stay as they are
    assert with_citation_links("As [1]: it holds.", [1]) == f"As [\\[1\\]]({CITE_SCHEME}:1): it holds."
    assert cited_number(QUrl(f"{CITE_SCHEME}:2")) == 2 and cited_number(QUrl("https://example.org")) is None
    assert label(GUIDE) == "[1] guide.pdf · page 3" and label(NOTES) == "[2] notes.md · Setup › Cables"


def test_a_replys_chips_and_its_marks_ask_for_their_passage(qtbot, tmp_path):
    bubble = MessageBubble(ChatMessage(5, 1, "assistant", REPLY, 0.0, citations=(GUIDE, NOTES)))
    qtbot.addWidget(bubble)
    bubble.resize(640, 400)
    bubble.show()
    chips = bubble.citation_chips
    assert chips is not None and chips.isVisible()
    assert [c.text() for c in chips.chips] == ["[1] guide.pdf · page 3", "[2] notes.md · Setup › Cables"]
    assert chips.chips[0].accessibleName() == "Source 1: guide.pdf · page 3"
    assert "five seconds" in chips.chips[0].toolTip()
    with qtbot.waitSignal(bubble.citation_requested) as asked:
        chips.chips[1].click()
    assert asked.args[0]["path"] == "/nowhere/notes.md"
    # The text shows "[1]" as a link to the passage; the code block's "[1]" is no link.
    html = bubble.body.toHtml()
    assert f'href="{CITE_SCHEME}:1"' in html and f'href="{CITE_SCHEME}:2"' in html
    assert html.count(f'href="{CITE_SCHEME}:') == 2
    assert bubble.body.toPlainText().startswith("Hold the button [1]. Then the cable [2], not [3].")
    with qtbot.waitSignal(bubble.citation_requested) as asked:
        bubble.body.anchorClicked.emit(QUrl(f"{CITE_SCHEME}:1"))
    assert asked.args[0]["number"] == 1
    with qtbot.assertNotEmitted(bubble.citation_requested):
        bubble.body.anchorClicked.emit(QUrl(f"{CITE_SCHEME}:7"))  # no passage 7
    bubble.grab().save(str(tmp_path / "bubble_citations.png"))
    from tests.ui.test_accessibility import unnamed_controls

    assert unnamed_controls(bubble) == []  # the chips are named for screen readers


def test_citations_that_arrive_while_the_reply_streams_link_its_marks_as_they_render(qtbot):
    bubble = MessageBubble(ChatMessage(5, 1, "assistant", "", 0.0, state="streaming"))
    qtbot.addWidget(bubble)
    assert bubble.citation_chips is None  # a reply without documents has no sources row
    bubble.set_citations([GUIDE])
    for piece in ("Hold the ", "button [1].\n\n", "Done."):
        bubble.append_text(piece)
    bubble.finish("Hold the button [1].\n\nDone.", None, "complete")
    assert bubble.body.toHtml().count(f'href="{CITE_SCHEME}:1"') == 1


def test_the_panel_shows_the_passage_and_opens_the_file_where_it_is(qtbot, tmp_path):
    panel = CitationPanel()
    qtbot.addWidget(panel)
    panel.resize(320, 420)
    panel.show_citation(GUIDE)  # a file that is no longer there
    assert panel.isVisible() and panel.title.text() == "[1] guide.pdf"
    assert panel.where.text() == "page 3 · collection “manuals”"
    assert panel.text.toPlainText() == GUIDE["text"]
    assert not panel.open_button.isEnabled() and "no longer there" in panel.path_label.text()
    real = tmp_path / "notes.md"
    real.write_text("# Setup\n\n## Cables\n\nPlug in the cable first.\n", encoding="utf-8")
    panel.show_citation(NOTES | {"path": str(real)})
    assert panel.open_button.isEnabled() and panel.where.text() == "Setup › Cables · collection “chat-1”"
    qtbot.wait(20)  # the layout takes the wrapped path's height on the next turn of the event loop
    panel.grab().save(str(tmp_path / "citation_panel.png"))
    from tests.ui.test_accessibility import unnamed_controls

    assert unnamed_controls(panel) == []
    with qtbot.waitSignal(panel.closed):
        panel.close_button.click()
    assert panel.isHidden()


def test_the_context_meter_says_the_documents_share(qtbot):
    meter = ContextMeter()
    qtbot.addWidget(meter)
    meter.show_use(ContextUse(1200, 4096), 512, "/m/model.gguf")
    assert meter.label.text() == "1.2k / 4.1k tokens" and "documents" not in meter.toolTip()
    meter.show_use(ContextUse(1200, 4096, documents=737), 512, "/m/model.gguf")
    assert meter.label.text() == "1.2k / 4.1k tokens · documents 18%"
    assert meter.toolTip().endswith("Of these, 737 tokens (18%) are passages of the chat's documents, found for the "
                                    "latest question.")
    assert ContextUse(100, 0, 50).documents_share == 0.0
