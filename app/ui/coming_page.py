"""A page whose core is still being built: says plainly what will be here, instead of a fake."""

from __future__ import annotations

from PySide6.QtCore import Qt
from PySide6.QtWidgets import QLabel, QVBoxLayout, QWidget


class ComingPage(QWidget):
    def __init__(self, title: str, what: str, meanwhile: str = "", parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName(f"{title} (coming)")
        layout = QVBoxLayout(self)
        layout.setContentsMargins(48, 48, 48, 48)
        heading = QLabel(f"<h1>{title}</h1>")
        body = QLabel(f"<p style='font-size:13pt'>{what}</p>"
                      "<p><b>Not in this build yet.</b> This page arrives with the next update.</p>"
                      + (f"<p>Meanwhile: {meanwhile}</p>" if meanwhile else ""))
        body.setObjectName("comingText")
        body.setWordWrap(True)
        body.setTextFormat(Qt.TextFormat.RichText)
        body.setMaximumWidth(640)
        layout.addWidget(heading)
        layout.addWidget(body)
        layout.addStretch(1)
