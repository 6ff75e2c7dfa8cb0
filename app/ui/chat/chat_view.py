"""The pieces of the Chat page around its bubbles (app/ui/chat/chat_bubble.py): the scrolling message view, the
attachments strip, the composer and the live stats strip."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QMimeData, Qt, Signal, Slot
from PySide6.QtGui import QGuiApplication, QImage, QKeyEvent
from PySide6.QtWidgets import (QFrame, QHBoxLayout, QLabel, QPlainTextEdit, QScrollArea, QSizePolicy, QToolButton,
                               QVBoxLayout, QWidget)

from app.chats.messages import ChatMessage
from app.ui.chat.chat_bubble import IMAGE_SUFFIXES, THUMBNAIL_HEIGHT, MessageBubble, image_label, png_bytes, thumbnail
from app.ui.common.formatting import (human_memory, human_ms, human_seconds, number, tokens_per_second,
                                      tokens_per_second_unknown)
from app.ui.common.widgets import Sparkline

if TYPE_CHECKING:
    from app.ui.chat.engine_bridge import TokenChunk


class MessageView(QScrollArea):
    """The conversation as a column of bubbles; follows the bottom while the user stays there."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWidgetResizable(True)
        self.setFrameShape(QFrame.Shape.NoFrame)
        self.setAccessibleName(self.tr("Messages"))
        self._column = QWidget()
        self._layout = QVBoxLayout(self._column)
        self._layout.setContentsMargins(16, 12, 16, 12)
        self._layout.setSpacing(10)
        self._layout.addStretch(1)
        self.setWidget(self._column)
        self.bubbles: list[MessageBubble] = []
        self._follow = True
        self.verticalScrollBar().valueChanged.connect(self._on_scrolled)
        self.verticalScrollBar().rangeChanged.connect(self._on_range_changed)

    def clear(self) -> None:
        for bubble in self.bubbles:
            bubble.deleteLater()
        self.bubbles.clear()
        self._follow = True

    def add(self, message: ChatMessage) -> MessageBubble:
        bubble = MessageBubble(message)
        bubble.copy_requested.connect(self._on_copy_requested)
        self._layout.insertWidget(self._layout.count() - 1, bubble)
        self.bubbles.append(bubble)
        return bubble

    def bubble(self, message_id: int) -> MessageBubble | None:
        """The bubble of that message, if this view shows it (the newest is looked at first)."""
        return next((b for b in reversed(self.bubbles) if b.message_id == message_id), None)

    def remove_from(self, message_id: int) -> None:
        keep = [b for b in self.bubbles if b.message_id < message_id]
        for bubble in self.bubbles[len(keep):]:
            bubble.deleteLater()
        self.bubbles = keep

    @Slot(str)
    def _on_copy_requested(self, text: str) -> None:
        QGuiApplication.clipboard().setText(text)

    @Slot(int)
    def _on_scrolled(self, value: int) -> None:
        self._follow = value >= self.verticalScrollBar().maximum() - 24

    @Slot(int, int)
    def _on_range_changed(self, _minimum: int, maximum: int) -> None:
        if self._follow:
            self.verticalScrollBar().setValue(maximum)


class AttachmentStrip(QFrame):
    """Images waiting to go with the next message: a thumbnail each with a button that removes it."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("attachments")
        self.setAccessibleName(self.tr("Attached images"))
        self._row = QHBoxLayout(self)
        self._row.setContentsMargins(12, 6, 12, 0)
        self._row.setSpacing(8)
        self._row.addStretch(1)
        self.images: list[bytes] = []
        self._items: list[QWidget] = []
        self.hide()

    def add(self, data: bytes, name: str) -> None:
        """Attach one image (checked by the caller: app.images.image_info)."""
        item = QWidget()
        column = QVBoxLayout(item)
        column.setContentsMargins(0, 0, 0, 0)
        column.setSpacing(2)
        column.addWidget(image_label(thumbnail(data, THUMBNAIL_HEIGHT // 2 + 16), name))
        remove = QToolButton()
        remove.setText(self.tr("Remove"))
        remove.setAccessibleName(self.tr("Remove {name}").format(name=name))
        remove.setAutoRaise(True)
        remove.clicked.connect(self._on_remove_clicked)
        column.addWidget(remove)
        self._row.insertWidget(self._row.count() - 1, item)
        item.show()  # at once: a layout shows a child added to a visible parent only on the next event loop turn
        self.images.append(data)
        self._items.append(item)
        self.show()
        self.changed.emit()

    def remove(self, index: int) -> None:
        item = self._items.pop(index)
        self.images.pop(index)
        item.deleteLater()
        self.setVisible(bool(self.images))
        self.changed.emit()

    def clear(self) -> None:
        while self.images:
            self.remove(len(self.images) - 1)

    @property
    def remove_buttons(self) -> list[QToolButton]:
        return [button for item in self._items if (button := item.findChild(QToolButton)) is not None]

    @Slot()
    def _on_remove_clicked(self) -> None:
        button = self.sender()
        index = next(i for i, item in enumerate(self._items)
                     if isinstance(button, QWidget) and item.isAncestorOf(button))
        self.remove(index)


class Composer(QPlainTextEdit):
    """The input box: Enter sends, Shift+Enter starts a new line. Images pasted or dropped on it are handed out
    (``image_given``: the file's bytes and a name) instead of being inserted as text, and so are documents (PDF,
    Markdown, code…: ``documents_given``, their paths, for the chat's own collection)."""

    submitted = Signal()
    image_given = Signal(bytes, str)
    documents_given = Signal(list)  # list[Path]

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setPlaceholderText(self.tr("Message the model — Enter sends, Shift+Enter for a new line"))
        self.setAccessibleName(self.tr("Message input"))
        self.setTabChangesFocus(True)
        self.setSizePolicy(QSizePolicy.Policy.Expanding, QSizePolicy.Policy.Fixed)
        self.setFixedHeight(76)

    def keyPressEvent(self, event: QKeyEvent) -> None:  # noqa: N802 (Qt's name)
        if event.key() in (Qt.Key.Key_Return, Qt.Key.Key_Enter) and not (
                event.modifiers() & Qt.KeyboardModifier.ShiftModifier):
            self.submitted.emit()
            return
        super().keyPressEvent(event)

    @staticmethod
    def _image_files(source: QMimeData) -> list[Path]:
        return [Path(url.toLocalFile()) for url in source.urls()
                if url.isLocalFile() and url.toLocalFile().lower().endswith(IMAGE_SUFFIXES)]

    @staticmethod
    def _document_files(source: QMimeData) -> list[Path]:
        """Local files of the formats a documents collection reads (app/documents/extract.py), images aside."""
        local = [Path(url.toLocalFile()) for url in source.urls() if url.isLocalFile()]
        if not local:
            return []
        from app.documents.extract import SUPPORTED_SUFFIXES  # on a drop only: not before the window shows

        return [path for path in local if path.suffix.lower() in SUPPORTED_SUFFIXES
                and not path.name.lower().endswith(IMAGE_SUFFIXES)]

    def canInsertFromMimeData(self, source: QMimeData) -> bool:  # noqa: N802 (Qt's name)
        return source.hasImage() or bool(self._image_files(source)) or bool(self._document_files(source)) or \
            super().canInsertFromMimeData(source)

    def insertFromMimeData(self, source: QMimeData) -> None:  # noqa: N802 (Qt's name): paste and drop both land here
        files = self._image_files(source)
        documents = self._document_files(source)
        if files or documents:
            for path in files:
                try:
                    self.image_given.emit(path.read_bytes(), path.name)
                except OSError:
                    self.image_given.emit(b"", path.name)  # the page says it cannot be read
            if documents:
                self.documents_given.emit(documents)
            return
        if source.hasImage():
            self.image_given.emit(png_bytes(QImage(source.imageData())), self.tr("pasted image"))
            return
        super().insertFromMimeData(source)


class StatsStrip(QFrame):
    """Live figures while a reply streams: tok/s with a sparkline, TTFT, prompt tok/s, tokens, memory. A reply that
    thinks adds the time to its first answer token and its thinking's tokens and time beside the answer's."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("statsStrip")
        self.setAccessibleName(self.tr("Generation statistics"))
        # A narrow window clips the last figures rather than forcing the whole window wider.
        self.setSizePolicy(QSizePolicy.Policy.Ignored, QSizePolicy.Policy.Fixed)
        self.setMinimumWidth(0)
        column = QVBoxLayout(self)
        column.setContentsMargins(12, 4, 12, 4)
        column.setSpacing(2)
        # Whose figures these are when they belong to a chat other than the open one: a line of its
        # own, shown only then, so a narrow window clips figures rather than this.
        self.source = QLabel()
        self.source.setObjectName("caption")
        self.source.setTextFormat(Qt.TextFormat.PlainText)  # it quotes a chat title
        self.source.setAccessibleName(self.tr("Figures of"))
        self.source.hide()
        column.addWidget(self.source)
        layout = QHBoxLayout()
        layout.setSpacing(16)
        column.addLayout(layout)
        self.tps = self._field(layout, self.tr("Speed"), tokens_per_second_unknown())
        self.sparkline = Sparkline()
        self.sparkline.setAccessibleName(self.tr("Speed over time"))
        layout.addWidget(self.sparkline)
        self.ttft = self._field(layout, self.tr("First token"), "—")
        self.prompt_tps = self._field(layout, self.tr("Prompt"), tokens_per_second_unknown())
        self.tokens = self._field(layout, self.tr("Tokens"), "0")
        self.memory = self._field(layout, self.tr("Memory"), "—")
        layout.addStretch(1)
        # A reply that thinks: its thinking's figures apart from the answer's, on a line of their own (shown only
        # then), so the line above keeps the figures every reply has.
        self.thinking_row = QWidget()
        self.thinking_row.setAccessibleName(self.tr("Thinking statistics"))
        row = QHBoxLayout(self.thinking_row)
        row.setContentsMargins(0, 0, 0, 0)
        row.setSpacing(16)
        self.first_answer = self._field(row, self.tr("First answer"), "—")
        self.thinking = self._field(row, self.tr("Thinking"), "—")
        self.answer = self._field(row, self.tr("Answer"), "—")
        row.addStretch(1)
        column.addWidget(self.thinking_row)
        self.thinking_row.hide()
        self._last_sample: tuple[int, float] | None = None

    @staticmethod
    def _field(layout: QHBoxLayout, title: str, value: str) -> QLabel:
        label = QLabel(value)
        label.setAccessibleName(title)
        label.setToolTip(title)
        label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        caption = QLabel(f"{title}:")
        caption.setObjectName("caption")
        layout.addWidget(caption)
        layout.addWidget(label)
        layout.setSpacing(6)
        return label

    def _tokens_in(self, count: int, ms: float | None) -> str:
        if ms is None:
            return self.tr("{count} tok").format(count=count)
        return self.tr("{count} tok · {time}").format(count=count, time=human_seconds(ms))

    def start_reply(self) -> None:
        self.sparkline.clear()
        self._last_sample = None
        self.tps.setText(tokens_per_second_unknown())
        self.ttft.setText("…")
        self.prompt_tps.setText(tokens_per_second_unknown())
        self.tokens.setText("0")
        self.thinking_row.hide()

    def show_waiting(self, ahead: int) -> None:
        """The reply waits for the local server's requests (they share the engine); tokens replace this."""
        self.ttft.setText(self.tr("after %n server request(s)", "", ahead))

    def on_progress(self, chunk: TokenChunk) -> None:
        """Live figures from engine timestamps (measured where tokens are made, not where they land)."""
        count, first_ms, last_ms = chunk.count, chunk.first_ms, chunk.last_ms
        self.tokens.setText(str(count))
        self.ttft.setText(human_ms(first_ms))
        if chunk.reasoning_tokens:
            self.thinking_row.show()
            self.thinking.setText(self._tokens_in(chunk.reasoning_tokens, chunk.reasoning_ms))
            started = chunk.first_answer_ms
            self.first_answer.setText("…" if started is None else human_ms(started))
            self.answer.setText("…" if started is None else
                                self._tokens_in(count - chunk.reasoning_tokens, last_ms - started))
        if count > 1 and last_ms > first_ms:
            self.tps.setText(tokens_per_second((count - 1) / ((last_ms - first_ms) / 1000)))
        if self._last_sample is None:
            self._last_sample = (count, last_ms)
        elif last_ms - self._last_sample[1] >= 100:  # one point per 0.1 s keeps the line readable
            n0, t0 = self._last_sample
            self.sparkline.add((count - n0) / ((last_ms - t0) / 1000))
            self._last_sample = (count, last_ms)

    def on_done(self, stats: dict[str, Any]) -> None:
        self.tokens.setText(str(stats["generated_tokens"]))
        self.tps.setText(tokens_per_second(stats["decode_tps"]))
        self.ttft.setText(human_ms(stats["ttft_ms"]))
        thought = stats.get("reasoning_tokens") or 0
        self.thinking_row.setVisible(bool(thought))
        if thought:
            self.thinking.setText(self._tokens_in(thought, stats["reasoning_ms"]))
            started = stats.get("first_answer_ms") or 0
            self.first_answer.setText(human_ms(started) if started else self.tr("no answer"))
            last_ms = stats["ttft_ms"] + stats["decode_ms"]
            self.answer.setText(self._tokens_in(stats["generated_tokens"] - thought,
                                                last_ms - started if started else None))
        self.prompt_tps.setText(tokens_per_second(stats["prompt_tps"], 0))
        self.memory.setText(self.tr("peak {memory}").format(memory=human_memory(stats["peak_memory_bytes"]))
                            if stats["peak_memory_bytes"] else self.tr("on the server"))
        server_tps = (stats.get("server") or {}).get("predicted_per_second")
        if server_tps:  # a remote engine: measured here (network included), and what the server measured itself
            self.tps.setText(self.tr("{speed} · server {server_speed}").format(
                speed=tokens_per_second(stats["decode_tps"]), server_speed=number(server_tps, 1)))
            self.tps.setToolTip(self.tr("Measured here, as the tokens arrive · the server's own figure"))
        else:
            self.tps.setToolTip(self.tr("Speed"))

    def set_source(self, text: str) -> None:
        """Say which chat the figures are from ("" when it is the one on screen)."""
        self.source.setText(text)
        self.source.setVisible(bool(text))

    def set_memory(self, bytes_in_use: int) -> None:
        self.memory.setText(human_memory(bytes_in_use))
