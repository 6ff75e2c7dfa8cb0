"""The Chat page's banner: one notice at a time (what went wrong, what a load needs, a tool's trouble), with
"Reload model" where a reload helps and "Load anyway" while the fit check holds a load back; and, until the reply
is saved, that it is not saved yet and why, with "Save now" (the ReplySession's save problem: said after the notice,
whatever notice comes, until the store takes the reply)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from PySide6.QtCore import Slot
from PySide6.QtWidgets import QFrame, QHBoxLayout, QLabel, QPushButton, QWidget

from app.ui.common.formatting import capitalized

if TYPE_CHECKING:
    from app.chats.store import ChatStoreError
    from app.ui.chat.model_load import ModelLoadController
    from app.ui.chat.reply_session import ReplySession


class ChatBanner(QFrame):
    def __init__(self, reply: ReplySession, loader: ModelLoadController, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("banner")
        self._reply, self._loader = reply, loader
        self.notice: tuple[str, bool] | None = None  # what it says (text, reload) besides a save problem
        self.busy_notice = False  # it says a reply in another chat must end first
        layout = QHBoxLayout(self)
        self.text = QLabel()
        self.text.setWordWrap(True)
        self.text.setAccessibleName(self.tr("Notice"))
        self.reload_button = QPushButton(self.tr("Reload model"))
        self.reload_button.setAccessibleName(self.tr("Reload model"))
        self.reload_button.clicked.connect(loader.reload)
        self.save_button = QPushButton(self.tr("Save now"))
        self.save_button.setAccessibleName(self.tr("Save the reply now"))
        self.save_button.setToolTip(self.tr("Try again to save the reply that is not saved yet"))
        self.save_button.clicked.connect(reply.save_pending)
        self.load_anyway_button = QPushButton(self.tr("Load anyway"))
        self.load_anyway_button.setAccessibleName(self.tr("Load the model anyway"))
        self.load_anyway_button.setToolTip(self.tr("Load it past what the fit check counts as free on this machine"))
        self.load_anyway_button.clicked.connect(loader.load_anyway)
        layout.addWidget(self.text, 1)
        layout.addWidget(self.load_anyway_button)
        layout.addWidget(self.save_button)
        layout.addWidget(self.reload_button)
        self.hide()
        reply.save_problem_changed.connect(self.render)
        loader.notice.connect(self.say)
        loader.notice_cleared.connect(self.clear)
        loader.load_anyway_offered.connect(self.render)

    @Slot(str, bool)
    def say(self, text: str, reload: bool = False) -> None:
        """Say ``text``, replacing what was said before (except that a reply is not saved: that stays said, after
        ``text``, until it is saved)."""
        self.busy_notice = False
        self.notice = (text, reload)
        self._loader.blocked = None  # a load held back is offered with the notice that said so, not after
        self.render()

    @Slot()
    def clear(self) -> None:
        self.busy_notice = False
        self.notice = None
        self._loader.blocked = None
        self.render()

    def clear_busy(self) -> None:
        """Take back the notice that a reply in another chat must end first (it was about the chat open then)."""
        if self.busy_notice:
            self.clear()

    def say_store_error(self, error: ChatStoreError) -> None:
        self.say(f"{capitalized(error.message)}. {capitalized(error.hint)}.")

    @Slot()
    @Slot(object)
    def render(self, *_: object) -> None:
        text, reload = self.notice or ("", False)
        parts = [text] if text else []
        error = self._reply.save_error
        if error is not None:
            parts.append(self.tr("{message}. The reply is shown here but is not saved yet: {hint}, then click “Save "
                                 "now” (QuantDesk also tries again every few seconds).")
                         .format(message=capitalized(error.message), hint=error.hint))
        if not parts:
            self.hide()
            return
        self.text.setText(" ".join(parts))
        self.reload_button.setVisible(reload)
        self.load_anyway_button.setVisible(self._loader.blocked is not None and bool(text))
        self.save_button.setVisible(error is not None)
        self.show()
