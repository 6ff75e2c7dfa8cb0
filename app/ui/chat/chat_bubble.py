"""A message of the Chat as the page shows it: the bubble (its text rendered as Markdown as it streams, its
actions, its images, branches and pin) and its parts: the thinking block, the tool cards with their approval, the
mark where the overflow policy cut the prompt. Also the thumbnails the composer's strip shares."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import (QBuffer, QByteArray, QCoreApplication, QEvent, QIODevice, QSize, Qt,
                            QUrl, Signal, Slot)
from PySide6.QtGui import (QImage, QImageReader, QPixmap, QTextBlockFormat, QTextCharFormat, QTextCursor, QTextDocument,
                           QTextFormat)
from PySide6.QtWidgets import (QApplication, QFrame, QHBoxLayout, QLabel, QPushButton, QSizePolicy, QToolButton,
                               QVBoxLayout, QWidget)

from app.chats.messages import Branches, ChatMessage, ToolCard
from app.ui.chat.code_highlight import highlight_code_blocks
from app.ui.common.formatting import SettledMarkdown, code_blocks, human_seconds, stats_summary, with_copy_links
from app.ui.common.theme import is_dark
from app.ui.common.translations import QT_TRANSLATE_NOOP
from app.ui.common.widgets import AutoHeightBrowser

if TYPE_CHECKING:
    from app.ui.chat.citations import CitationChips

COPY_SCHEME = "quantdesk-copy"
ROLE_TITLES = {"user": QT_TRANSLATE_NOOP("MessageBubble", "You"),
               "assistant": QT_TRANSLATE_NOOP("MessageBubble", "Assistant"),
               "system": QT_TRANSLATE_NOOP("MessageBubble", "System")}  # shown through MessageBubble.tr
THUMBNAIL_HEIGHT = 96  # pixels: a message's images, and those waiting in the composer
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".webp")


def thumbnail(source: bytes | Path, height: int = THUMBNAIL_HEIGHT) -> QPixmap:
    """A small copy of an image, decoded at that size where the format allows (QImageReader's scaled read);
    an empty pixmap when Qt cannot read it (the file was removed, or Qt lacks the format's plugin)."""
    if isinstance(source, Path):
        reader = QImageReader(str(source))
    else:
        buffer = QBuffer()
        buffer.setData(QByteArray(source))
        buffer.open(QIODevice.OpenModeFlag.ReadOnly)
        reader = QImageReader(buffer)
    size = reader.size()
    if size.isValid() and size.height() > height:
        reader.setScaledSize(QSize(max(1, size.width() * height // size.height()), height))
    image = reader.read()
    return QPixmap.fromImage(image) if not image.isNull() else QPixmap()


def image_label(pixmap: QPixmap, name: str) -> QLabel:
    label = QLabel()
    label.setObjectName("thumbnail")
    label.setAccessibleName(name)
    if pixmap.isNull():
        label.setText(QCoreApplication.translate("chat_view", "(image missing)"))
    else:
        label.setPixmap(pixmap)
    label.setToolTip(name)
    return label


def png_bytes(image: QImage) -> bytes:
    """A pasted image (Qt hands it over decoded) as a PNG file."""
    buffer = QBuffer()
    buffer.open(QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")  # type: ignore[call-overload]  # the stub wants bytes, which PySide6 refuses
    return bytes(buffer.data().data())


def _flat_button(text: str, tip: str, name: str) -> QToolButton:
    button = QToolButton()
    button.setText(text)
    button.setToolTip(tip)
    button.setAccessibleName(name)
    button.setAutoRaise(True)
    return button


class ThinkingBlock(QFrame):
    """A thinking model's thinking, above its answer: it streams in dimmed, smaller text while the model thinks
    ("Thinking… 5 s"), and folds to one line once the answer starts ("Thought for 12 s · 340 tokens"), which opens
    and closes it on a click or the space bar. Folding is automatic only until the user opens or closes it."""

    def __init__(self, text: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("thinking")
        self.setAccessibleName(self.tr("Thinking"))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(2)
        self.toggle = QToolButton()
        self.toggle.setObjectName("thinkingToggle")
        self.toggle.setCheckable(True)
        self.toggle.setAutoRaise(True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setAccessibleDescription(self.tr("Shows or hides how the model thought before it answered"))
        self.toggle.toggled.connect(self._on_toggled)
        self.toggle.clicked.connect(self._on_clicked)
        self.text = AutoHeightBrowser()
        self.text.setObjectName("thinkingText")
        self.text.setAccessibleName(self.tr("Thinking text"))
        self.text.setPlainText(text)
        layout.addWidget(self.toggle, 0, Qt.AlignmentFlag.AlignLeft)
        layout.addWidget(self.text)
        self.chosen = False  # the user opened or closed it: it stays as they left it
        self.thought_ms = 0.0  # how long the thinking has lasted so far (engine time)
        self.set_open(True)
        self.set_summary(self.tr("Thinking…"))

    @property
    def is_open(self) -> bool:
        return self.toggle.isChecked()

    @property
    def summary(self) -> str:
        return self.toggle.text()

    def set_open(self, is_open: bool) -> None:
        self.toggle.setChecked(is_open)
        self._on_toggled(is_open)  # also when it did not change: the arrow and the text's visibility follow

    def set_summary(self, text: str) -> None:
        self.toggle.setText(text)
        self.toggle.setAccessibleName(text)

    def append(self, text: str) -> None:
        """More thinking, as it streams: O(new text)."""
        cursor = QTextCursor(self.text.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.insertText(text)

    def set_text(self, text: str) -> None:
        if text != self.text.toPlainText():
            self.text.setPlainText(text)

    def thinking(self, thought_ms: float) -> None:
        """Still thinking, for ``thought_ms`` so far."""
        self.thought_ms = thought_ms
        self.set_summary(self.tr("Thinking… {time}").format(time=human_seconds(thought_ms)))

    def answer_started(self) -> None:
        """The answer has begun: the thinking folds away (unless the user chose otherwise) to how long it took."""
        self.set_summary(self.tr("Thought for {time}").format(time=human_seconds(self.thought_ms)) if self.thought_ms
                         else self.tr("Thinking"))
        if not self.chosen:
            self.set_open(False)

    def finish(self, stats: dict[str, Any] | None, answered: bool) -> None:
        """The reply is over: the summary from the engine's figures where it has them (an interrupted reply has
        none). A reply that only thought (stopped, out of tokens) shows its thinking open: it is all there is."""
        tokens = (stats or {}).get("reasoning_tokens") or 0
        thought_ms = (stats or {}).get("reasoning_ms") or self.thought_ms
        if tokens:
            self.set_summary(self.tr("Thought for {time} · %n token(s)", "", tokens).format(
                time=human_seconds(thought_ms)))
        elif thought_ms:
            self.set_summary(self.tr("Thought for {time}").format(time=human_seconds(thought_ms)))
        else:
            self.set_summary(self.tr("Thinking"))
        if not self.chosen:
            self.set_open(not answered)

    @Slot(bool)
    def _on_toggled(self, is_open: bool) -> None:
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if is_open else Qt.ArrowType.RightArrow)
        self.toggle.setToolTip(self.tr("Hide the thinking") if is_open else self.tr("Show the thinking"))
        self.text.setVisible(is_open)

    @Slot()
    def _on_clicked(self) -> None:
        self.chosen = True


# An approval's answers, as the buttons of ApprovalCard send them (app.mcp.approvals keeps "always").
ALLOW_ONCE, ALWAYS_ALLOW, DENY = "once", "always", "deny"
ARGUMENTS_SHOWN = 2000  # characters of a call's arguments shown on its card (the rest is in the export)
RESULT_SHOWN = 20_000  # characters of a result shown when the card is opened (the model got what the tool gave)


def _compact_json(text: str) -> str:
    """A call's arguments on one line, as JSON writes them (a model may space its JSON out over many lines); as
    written where it is no JSON."""
    import json

    try:
        return json.dumps(json.loads(text), ensure_ascii=False)
    except ValueError:
        return text


class ApprovalCard(QFrame):
    """"Run this tool?" inside a tool card, until the user answers: "Allow once", "Always allow this tool",
    "Deny". The tool's name and server are the card's; what the tool does is said in its own words, as text."""

    decided = Signal(str)  # ALLOW_ONCE, ALWAYS_ALLOW or DENY

    def __init__(self, name: str, server: str, description: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("approvalCard")
        self.setAccessibleName(self.tr("Approve the tool call {name}").format(name=name))
        layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 6, 8, 6)
        layout.setSpacing(4)
        self.question = QLabel(self.tr("Run the tool “{name}” of the server “{server}” with these arguments?")
                               .format(name=name, server=server))
        self.question.setWordWrap(True)
        self.question.setTextFormat(Qt.TextFormat.PlainText)
        layout.addWidget(self.question)
        # The tool's description is the server's text: shown as plain text, never as markup or instructions.
        self.description = QLabel(description)
        self.description.setObjectName("caption")
        self.description.setWordWrap(True)
        self.description.setTextFormat(Qt.TextFormat.PlainText)
        self.description.setAccessibleName(self.tr("What the tool says it does"))
        self.description.setVisible(bool(description))
        layout.addWidget(self.description)
        row = QHBoxLayout()
        row.setSpacing(6)
        self.buttons: dict[str, QPushButton] = {}
        for answer, text, tip in (
                (ALLOW_ONCE, self.tr("Allow once"), self.tr("Run this call; ask again next time")),
                (ALWAYS_ALLOW, self.tr("Always allow this tool"),
                 self.tr("Run this call and later calls of this tool without asking (Settings → Tools can revoke "
                         "it)")),
                (DENY, self.tr("Deny"), self.tr("Do not run it; the model is told you denied it"))):
            button = QPushButton(text)
            button.setToolTip(tip)
            button.setAccessibleName(self.tr("{answer}: {name}").format(answer=text, name=name))
            button.clicked.connect(lambda _=False, a=answer: self._answer(a))
            row.addWidget(button)
            self.buttons[answer] = button
        self.buttons[ALLOW_ONCE].setObjectName("primary")
        row.addStretch(1)
        layout.addLayout(row)

    def _answer(self, answer: str) -> None:
        for button in self.buttons.values():
            button.setEnabled(False)  # one answer per call
        self.decided.emit(answer)


class ToolCardView(QFrame):
    """One tool call in a reply: the tool and its server, the arguments, what became of it in words (waiting for
    approval, running, done in 0.4 s, an error, cut, denied), and the result, folded until opened."""

    def __init__(self, card: ToolCard, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("toolCard")
        self._column = layout = QVBoxLayout(self)
        layout.setContentsMargins(8, 4, 8, 6)
        layout.setSpacing(2)
        self.toggle = QToolButton()
        self.toggle.setObjectName("toolToggle")
        self.toggle.setCheckable(True)
        self.toggle.setAutoRaise(True)
        self.toggle.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.toggle.setAccessibleDescription(self.tr("Shows or hides what the tool returned"))
        self.toggle.toggled.connect(self._on_toggled)
        # the whole width: a long summary is never elided ("list_directory …r your approval")
        self.toggle.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        layout.addWidget(self.toggle)
        self.arguments = QLabel()
        self.arguments.setObjectName("toolArguments")
        self.arguments.setWordWrap(True)
        self.arguments.setTextFormat(Qt.TextFormat.PlainText)
        self.arguments.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        layout.addWidget(self.arguments)
        self.status = QLabel()
        self.status.setObjectName("caption")
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        layout.addWidget(self.status)
        self.result = AutoHeightBrowser()
        self.result.setObjectName("toolResult")
        layout.addWidget(self.result)
        self.approval: ApprovalCard | None = None
        self.running = False
        self.live = False  # its reply's tool step is under way: an unanswered call waits its turn
        self.card = card
        self.set_card(card)
        self.set_open(False)

    @property
    def is_open(self) -> bool:
        return self.toggle.isChecked()

    def set_open(self, is_open: bool) -> None:
        self.toggle.setChecked(is_open)
        self._on_toggled(is_open)

    def set_card(self, card: ToolCard, *, running: bool = False, live: bool | None = None) -> None:
        self.card, self.running = card, running
        if live is not None:
            self.live = live
        where = card.server or self.tr("unknown server")
        self.setAccessibleName(self.tr("Tool call {name} on {server}").format(name=card.name, server=where))
        arguments = _compact_json(card.arguments)
        if len(arguments) > ARGUMENTS_SHOWN:
            arguments = arguments[:ARGUMENTS_SHOWN] + "…"
        self.arguments.setText(arguments)
        self.arguments.setAccessibleName(self.tr("Arguments of {name}: {arguments}").format(
            name=card.name, arguments=arguments))
        summary, status = self._words(card, running)
        self.toggle.setText(summary)
        self.toggle.setAccessibleName(summary)
        self.status.setText(status)
        self.status.setAccessibleName(status)
        self.status.setVisible(bool(status))
        shown = card.result if len(card.result) <= RESULT_SHOWN else card.result[:RESULT_SHOWN] + "\n…"
        if shown != self.result.toPlainText():
            self.result.setPlainText(shown)  # the tool's text as text: never rendered as Markdown or HTML
        self.result.setAccessibleName(self.tr("Result of {name}").format(name=card.name))
        if card.decision and self.approval is not None:
            self.approval.deleteLater()
            self.approval = None
        self._on_toggled(self.is_open)

    def _words(self, card: ToolCard, running: bool) -> tuple[str, str]:
        """The one-line summary (the toggle) and the sentence under the arguments."""
        tool = self.tr("{name} · {server}").format(name=card.name, server=card.server or self.tr("unknown server"))
        if card.decision == "denied":
            return (self.tr("{tool} — denied").format(tool=tool),
                    self.tr("You denied this call; the model was told."))
        if running:
            return self.tr("{tool} — running…").format(tool=tool), ""
        if not card.answered:
            if self.approval is not None:
                return self.tr("{tool} — waiting for your approval").format(tool=tool), ""
            if self.live:
                return self.tr("{tool} — waiting its turn").format(tool=tool), ""
            return self.tr("{tool} — not run").format(tool=tool), self.tr("The reply was stopped before it ran.")
        took = human_seconds((card.seconds or 0) * 1000)
        sentences = []
        if card.is_error:
            sentences.append(self.tr("The tool answered with an error; the model was told."))
        if card.cut:
            sentences.append(self.tr("The result was cut to fit; the model got the first part."))
        head = self.tr("{tool} — error after {time}") if card.is_error else self.tr("{tool} — done in {time}")
        return head.format(tool=tool, time=took), " ".join(sentences)

    def ask(self, description: str = "") -> ApprovalCard:
        """Show the approval question under the arguments; its ``decided`` says the answer."""
        if self.approval is None:
            self.approval = ApprovalCard(self.card.name, self.card.server or self.tr("unknown server"), description)
            layout = self._column
            layout.insertWidget(layout.indexOf(self.status), self.approval)
            self.approval.show()
        self.set_card(self.card)
        return self.approval

    @Slot(bool)
    def _on_toggled(self, is_open: bool) -> None:
        self.toggle.setArrowType(Qt.ArrowType.DownArrow if is_open else Qt.ArrowType.RightArrow)
        self.toggle.setToolTip(self.tr("Hide the result") if is_open else self.tr("Show the result"))
        self.result.setVisible(is_open and self.card.answered and self.card.decision != "denied")


class CutMark(QFrame):
    """The mark where the overflow policy left earlier messages out of a reply's prompt (app/engine/overflow.py):
    "12 earlier messages not sent to the model (context full)", and under "compact" the model's note on them,
    folded behind the line (a click or the space bar opens it)."""

    def __init__(self, cut: dict[str, Any], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("contextCut")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(0, 0, 0, 4)
        layout.setSpacing(2)
        dropped = int(cut.get("dropped", 0))
        self.note = str(cut.get("note") or "")
        if self.note:
            text = self.tr("%n earlier message(s) compacted into a note by the model (context full)", "", dropped)
        else:
            text = self.tr("%n earlier message(s) not sent to the model (context full)", "", dropped)
        if kept := len(cut.get("kept") or ()):
            text += self.tr(", %n pinned message(s) kept", "", kept)
        self.line = QToolButton()
        self.line.setObjectName("contextCutLine")
        self.line.setText(text)
        self.line.setAccessibleName(text)
        self.line.setAutoRaise(True)
        self.line.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self.line.setToolTip(self.tr("The context was full: the model did not read these messages for this reply "
                                     "and the ones after it. They stay here, and in the saved chat."))
        layout.addWidget(self.line, 0, Qt.AlignmentFlag.AlignLeft)
        self.text: AutoHeightBrowser | None = None
        if self.note:
            self.line.setCheckable(True)
            self.line.setAccessibleDescription(self.tr("Shows or hides the note the model wrote on them"))
            self.text = AutoHeightBrowser()
            self.text.setObjectName("contextCutNote")
            self.text.setAccessibleName(self.tr("The model's note on the earlier messages"))
            self.text.setPlainText(self.note)
            layout.addWidget(self.text)
            self.line.toggled.connect(self._on_toggled)
            self._on_toggled(False)
        else:
            self.line.setArrowType(Qt.ArrowType.NoArrow)

    @property
    def is_open(self) -> bool:
        return self.line.isChecked()

    @Slot(bool)
    def _on_toggled(self, is_open: bool) -> None:
        self.line.setArrowType(Qt.ArrowType.DownArrow if is_open else Qt.ArrowType.RightArrow)
        if self.text is not None:
            self.text.setVisible(is_open)


class MessageBubble(QFrame):
    """One message. While a reply streams, its settled paragraphs are rendered as Markdown as they
    complete and only the paragraph being written is plain text; each update costs O(new text)."""

    copy_requested = Signal(str)
    edit_requested = Signal(int)  # message id
    regenerate_requested = Signal(int)
    branch_requested = Signal(int)  # the sibling's message id to show instead of this one
    delete_branch_requested = Signal(int)  # message id: it and what follows it on its branches
    pin_requested = Signal(int, bool)  # message id, pinned: an overflow policy never leaves a pinned message out
    citation_requested = Signal(object)  # a citation's dict (app/ui/chat/citations.py): its chip or its "[n]" clicked

    def __init__(self, message: ChatMessage, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.message_id = message.id
        self.role = message.role
        self.state: str = message.state
        self._markdown = ""
        self.setObjectName(f"bubble_{message.role}")
        self.setFrameShape(QFrame.Shape.StyledPanel)
        self.setAccessibleName(self.tr("{role} message").format(role=self.tr(ROLE_TITLES[message.role])))
        self._column = layout = QVBoxLayout(self)
        layout.setContentsMargins(12, 8, 12, 8)
        layout.setSpacing(4)
        header = QHBoxLayout()
        self.title = QLabel(f"<b>{self.tr(ROLE_TITLES[message.role])}</b>")
        self.meta = QLabel()
        self.meta.setObjectName("meta")
        header.addWidget(self.title)
        # A pinned message is always sent to the model, however long the chat grows (app/engine/overflow.py).
        self.pin_mark = QLabel(self.tr("Pinned"))
        self.pin_mark.setObjectName("pinMark")
        self.pin_mark.setAccessibleName(self.tr("Pinned: always sent to the model"))
        self.pin_mark.setToolTip(self.tr("Pinned: the model reads this message in every reply, even once the "
                                         "context is full and earlier messages are left out"))
        self.pin_mark.setVisible(False)
        header.addWidget(self.pin_mark)
        header.addWidget(self.meta, 1)
        # "‹ 2/3 ›": the other versions of this message (edited and resent, or written again), one branch each.
        self.branches = Branches(1, 1, (message.id,))
        self.branch_bar = QWidget()
        self.branch_bar.setAccessibleName(self.tr("Versions of this message"))
        bar = QHBoxLayout(self.branch_bar)
        bar.setContentsMargins(0, 0, 0, 0)
        bar.setSpacing(0)
        self.previous_branch = _flat_button("‹", self.tr("Show the previous version of this message and what "
                                                         "followed it"), self.tr("Previous version"))
        self.branch_position = QLabel()
        self.branch_position.setAccessibleName(self.tr("Version"))
        self.next_branch = _flat_button("›", self.tr("Show the next version of this message and what followed it"),
                                        self.tr("Next version"))
        self.delete_branch = _flat_button(self.tr("Delete version"), self.tr(
                "Delete this version of the message and everything that followed it"), self.tr("Delete this version"))
        for widget in (self.previous_branch, self.branch_position, self.next_branch, self.delete_branch):
            bar.addWidget(widget)
        self.previous_branch.clicked.connect(lambda: self._on_branch_step(-1))
        self.next_branch.clicked.connect(lambda: self._on_branch_step(1))
        self.delete_branch.clicked.connect(lambda: self.delete_branch_requested.emit(self.message_id))
        self.branch_bar.setVisible(False)
        header.addWidget(self.branch_bar)
        self.actions: dict[str, QToolButton] = {}  # type: ignore[assignment]  # by name; QWidget.actions() unused
        for name, text, tip, accessible in (
                ("copy", self.tr("Copy"), self.tr("Copy this message"), self.tr("Copy message")),
                ("edit", self.tr("Edit"), self.tr("Edit and resend from here (the old version stays)"),
                 self.tr("Edit message")),
                ("regenerate", self.tr("Regenerate"), self.tr("Write this reply again"),
                 self.tr("Regenerate message")),
                ("pin", self.tr("Pin"), "", self.tr("Pin message"))):
            if name == "edit" and message.role != "user" or name == "regenerate" and message.role != "assistant":
                continue
            button = _flat_button(text, tip, accessible)
            button.clicked.connect(getattr(self, f"_on_{name}_clicked"))
            header.addWidget(button)
            self.actions[name] = button
        layout.addLayout(header)
        self.images: list[QLabel] = []
        if message.images:
            row = QHBoxLayout()
            row.setSpacing(6)
            for n, image in enumerate(message.images, 1):
                label = image_label(thumbnail(image.path), self.tr("Image {n} of {len}: {width} × {height}")
                                    .format(n=n, len=len(message.images), width=image.width, height=image.height))
                row.addWidget(label)
                self.images.append(label)
            row.addStretch(1)
            layout.addLayout(row)
        self.thinking: ThinkingBlock | None = None  # made when the reply has thinking to show
        self.body = AutoHeightBrowser()
        self.body.setOpenLinks(False)
        self.body.setAccessibleName(self.tr("{role} message text").format(role=self.tr(ROLE_TITLES[message.role])))
        self.body.anchorClicked.connect(self._on_anchor_clicked)
        layout.addWidget(self.body)
        self.tool_cards: list[ToolCardView] = []  # an assistant reply's tool calls, under its text
        self.set_tools(message.tools)
        self.citation_chips: CitationChips | None = None  # made for a reply given passages of the chat's documents
        self._cited: tuple[int, ...] = ()  # the numbers its "[n]" marks link to
        if message.citations:
            self.set_citations(message.citations, render=False)  # rendered below, with its links
        if message.reasoning:
            block = self._thinking_block(message.reasoning)
            if message.state != "streaming":
                block.finish(message.stats, bool(message.content))
        self._settler = SettledMarkdown()
        self._rendered_upto = 0  # characters of the text already rendered as Markdown
        self._tail_position = 0  # where the plain-text tail starts in the document
        self._code_blocks = 0  # code blocks rendered so far (numbers the copy links)
        self._highlighted_dark = False  # which style the code blocks are coloured in
        if message.state == "streaming":  # a reply still being written (reopened mid-way): keep appending
            self.append_text(message.content)
        else:
            self._markdown = message.content
            self._render()
        self._show_body()
        self.set_meta(message.stats, message.state)
        self.cut_mark: CutMark | None = None
        if message.context_cut:
            self.show_cut(message.context_cut)
        self.pinned = False
        self.actions["pin"].setCheckable(True)
        self.set_pinned(message.pinned)

    def set_pinned(self, pinned: bool) -> None:
        """Show the message pinned (its mark, and its action as "Unpin") or not."""
        self.pinned = pinned
        self.pin_mark.setVisible(pinned)
        button = self.actions["pin"]
        button.setChecked(pinned)  # the checked state tells a screen reader whether it is pinned
        button.setText(self.tr("Unpin") if pinned else self.tr("Pin"))
        button.setToolTip(self.tr("Unpin: the message may be left out again once the context is full") if pinned
                          else self.tr("Pin: always send this message to the model, even once the context is full"))
        self.setProperty("pinned", pinned)
        self.style().unpolish(self)
        self.style().polish(self)

    def show_cut(self, cut: dict[str, Any]) -> CutMark:
        """Mark at the top of this reply what the overflow policy left out of its prompt (ContextCut.to_dict())."""
        if self.cut_mark is not None:
            self.cut_mark.deleteLater()
        self.cut_mark = CutMark(cut)
        self._column.insertWidget(0, self.cut_mark)
        self.cut_mark.show()
        return self.cut_mark

    @property
    def markdown(self) -> str:
        return self._markdown

    def _thinking_block(self, text: str = "") -> ThinkingBlock:
        if self.thinking is None:
            self.thinking = ThinkingBlock(text)
            layout = self._column
            layout.insertWidget(layout.indexOf(self.body), self.thinking)
            self.thinking.show()  # at once: a layout shows a child added to a visible parent only on the next turn
        return self.thinking

    def _show_body(self) -> None:
        """A reply that is thinking (or only thought) has no answer to show yet: no empty box under the thinking,
        nor above the tool calls of a reply that only called tools."""
        self.body.setVisible(bool(self._markdown) or self.thinking is None and not self.tool_cards)

    def set_tools(self, cards: tuple[ToolCard, ...] | list[ToolCard], *, live: bool = False) -> list[ToolCardView]:
        """Show the reply's tool calls as they stand (a card per call, kept by call id so an open result or a
        pending approval stays where it is); ``live``: its tool step is under way."""
        layout = self._column
        by_id = {view.card.call_id: view for view in self.tool_cards}
        views: list[ToolCardView] = []
        for card in cards:
            view = by_id.pop(card.call_id, None)
            if view is None:
                view = ToolCardView(card)
                layout.insertWidget(layout.indexOf(self.body) + 1 + len(views), view)
                view.show()
            view.set_card(card, running=view.running and not card.answered, live=live)
            views.append(view)
        for gone in by_id.values():
            gone.deleteLater()
        self.tool_cards = views
        if hasattr(self, "_settler"):
            self._show_body()
        return views

    def set_citations(self, citations: Sequence[Mapping[str, Any]], *, render: bool = True) -> CitationChips:
        """Show the passages the reply was given as numbered chips under its text (and tool cards), and make its
        "[n]" marks links to them (app/ui/chat/citations.py)."""
        from app.ui.chat.citations import CitationChips

        if self.citation_chips is None:
            self.citation_chips = CitationChips()
            self.citation_chips.opened.connect(self.citation_requested)
            self._column.addWidget(self.citation_chips)
        self.citation_chips.set_citations(citations)
        cited = tuple(int(c["number"]) for c in citations if "number" in c)
        if cited != self._cited:
            self._cited = cited
            if render and self.state != "streaming":
                self._render()  # the text as it is, its marks now links (a streaming reply links as it renders)
        return self.citation_chips

    def _linked(self, markdown: str) -> str:
        if not self._cited:
            return markdown
        from app.ui.chat.citations import with_citation_links

        return with_citation_links(markdown, self._cited)

    def tool_card(self, call_id: str) -> ToolCardView | None:
        return next((v for v in self.tool_cards if v.card.call_id == call_id), None)

    def append_reasoning(self, text: str, thought_ms: float) -> None:
        """More thinking as it streams, ``thought_ms`` long so far."""
        block = self._thinking_block()
        block.append(text)
        if not self._markdown:
            block.thinking(thought_ms)
        else:
            block.thought_ms = thought_ms

    def _render(self) -> None:
        self.body.setMarkdown(self._linked(with_copy_links(self._markdown, COPY_SCHEME)))
        self._shade_code_blocks()

    def _shade_code_blocks(self, from_position: int = 0) -> None:
        """Qt's Markdown importer sets fenced code in the fixed-pitch font but gives it no background or colours:
        pygments' style for the palette in use shades each block and colours its tokens."""
        self._highlighted_dark = is_dark(QApplication.palette())
        highlight_code_blocks(self.body.document(), self._highlighted_dark, from_position)

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 (Qt's name)
        """A theme switch: the code blocks again, in the other style (once per switch, not per palette event)."""
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and is_dark(QApplication.palette()) != self._highlighted_dark:
            self._shade_code_blocks()

    def append_text(self, text: str) -> None:
        if text and not self._markdown and self.thinking is not None:
            self.thinking.answer_started()
        self._markdown += text
        self._show_body()
        cursor = QTextCursor(self.body.document())
        cursor.movePosition(QTextCursor.MoveOperation.End)
        cursor.insertText(text)
        self._render_settled(self._settler.update(self._markdown), final=False)

    def _render_settled(self, end: int, *, final: bool) -> None:
        """Replace the plain tail up to ``end`` with its Markdown rendering; keep the rest plain."""
        if end <= self._rendered_upto and not final:
            return
        chunk = self._markdown[self._rendered_upto:end]
        cursor = QTextCursor(self.body.document())
        cursor.beginEditBlock()
        cursor.setPosition(self._tail_position)
        cursor.movePosition(QTextCursor.MoveOperation.End, QTextCursor.MoveMode.KeepAnchor)
        cursor.removeSelectedText()
        start = cursor.position()
        markdown = self._linked(with_copy_links(chunk, COPY_SCHEME, self._code_blocks))
        self._code_blocks += len(code_blocks(chunk))
        cursor.insertMarkdown(markdown)
        # Inserted into the empty block the tail left, a piece's first block either merges into it
        # and takes its plain format (a paragraph, a code block) or goes in after it (a list). Give
        # the first block the format a whole rendering gives it, or drop the empty block.
        probe = QTextCursor(self.body.document())
        probe.setPosition(start)
        if start > 0 and probe.block().length() == 1 and probe.block().next().isValid():
            probe.deletePreviousChar()
            start -= 1
        else:
            reference = QTextDocument()
            reference.setMarkdown(markdown)
            first = reference.begin().blockFormat()
            first.clearProperty(QTextFormat.Property.ObjectIndex)  # a list of the other document
            probe.setBlockFormat(first)
        self._shade_code_blocks(start)
        if not final:
            cursor.movePosition(QTextCursor.MoveOperation.End)
            cursor.insertBlock(QTextBlockFormat(), QTextCharFormat())
            self._tail_position = cursor.position()
            cursor.insertText(self._markdown[end:])
        cursor.endEditBlock()
        self._rendered_upto = end

    def finish(self, text: str, stats: dict[str, Any] | None, state: str, reasoning: str = "") -> None:
        if text == self._markdown:
            self._render_settled(len(text), final=True)  # only the last paragraph is left to render
        else:  # the engine's final text differs from what streamed (it should not): render it whole
            self._markdown = text
            self._render()
        if reasoning or self.thinking is not None:
            block = self._thinking_block()
            block.set_text(reasoning or block.text.toPlainText())
            block.finish(stats, bool(text))
        self._show_body()
        self.set_meta(stats, state)

    def set_meta(self, stats: dict[str, Any] | None, state: str) -> None:
        self.state = state
        note = {"streaming": self.tr("writing…"),
                "interrupted": self.tr("interrupted — the reply was cut off")}.get(state, "")
        self.meta.setText("  ".join(p for p in (stats_summary(stats), note) if p))

    def set_branches(self, branches: Branches) -> None:
        """Where this message stands among its versions; the arrows show only when there are several."""
        self.branches = branches
        self.branch_position.setText(f"{branches.index}/{branches.count}")
        self.branch_position.setAccessibleName(self.tr("Version {index} of {count}").format(index=branches.index,
                                                                                            count=branches.count))
        self.previous_branch.setEnabled(branches.index > 1)
        self.next_branch.setEnabled(branches.index < branches.count)
        self.branch_bar.setVisible(branches.count > 1)

    def _on_branch_step(self, step: int) -> None:
        index = self.branches.index - 1 + step
        if 0 <= index < self.branches.count:
            self.branch_requested.emit(self.branches.ids[index])

    @Slot()
    def _on_copy_clicked(self) -> None:
        self.copy_requested.emit(self._markdown)

    @Slot()
    def _on_edit_clicked(self) -> None:
        self.edit_requested.emit(self.message_id)

    @Slot()
    def _on_regenerate_clicked(self) -> None:
        self.regenerate_requested.emit(self.message_id)

    @Slot()
    def _on_pin_clicked(self) -> None:
        self.actions["pin"].setChecked(self.pinned)  # the page decides: it checks once the pin is saved
        self.pin_requested.emit(self.message_id, not self.pinned)

    @Slot(QUrl)
    def _on_anchor_clicked(self, url: QUrl) -> None:
        if self.citation_chips is not None and url.scheme() != COPY_SCHEME:
            from app.ui.chat.citations import cited_number

            number = cited_number(url)
            citation = self.citation_chips.citation(number) if number is not None else None
            if citation is not None:
                self.citation_requested.emit(citation)
            return
        if url.scheme() == COPY_SCHEME:
            blocks = code_blocks(self._markdown)
            index = int(url.path() or -1)
            if 0 <= index < len(blocks):
                self.copy_requested.emit(blocks[index])
