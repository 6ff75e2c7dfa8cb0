"""The Chat page's images: attached to the next message ("Image…", pasted or dropped on the message box), each
checked from its header first (app/images); a model that does not see images says so before anything is sent. The
images wait in the page's AttachmentStrip (app/ui/chat/chat_view.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, Slot
from PySide6.QtWidgets import QFileDialog

from app.images import ImageError
from app.ui.chat.chat_bubble import IMAGE_SUFFIXES
from app.ui.common.formatting import capitalized

if TYPE_CHECKING:
    from app.chats.messages import ChatMessage


class ChatImages(QObject):
    def __init__(self, page: Any) -> None:
        super().__init__(page)
        self._page = page

    @Slot()
    def choose(self) -> None:
        patterns = " ".join(f"*{suffix}" for suffix in IMAGE_SUFFIXES)
        paths, _ = QFileDialog.getOpenFileNames(self._page, self.tr("Attach images"), "",
                                                self.tr("Images ({patterns})").format(patterns=patterns))
        for path in paths:
            self.attach_file(path)

    def attach_file(self, path: str | Path) -> bool:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            self._page.banner.say(self.tr("Cannot read the image {name}: {reason}.").format(
                name=Path(path).name, reason=exc.strerror))
            return False
        return self.attach(data, Path(path).name)

    @Slot(bytes, str)
    def attach(self, data: bytes, name: str) -> bool:
        """Add an image to the next message, checked from its header first; a text-only model says so now."""
        from app.images import image_info

        page = self._page
        if page.loaded is not None and not self.sees_images():
            page.banner.say(self.no_vision_sentence())
            return False
        try:
            info = image_info(data)
        except ImageError as exc:
            page.banner.say(f"{name}: {capitalized(exc.message)}.")
            return False
        page.attachments.add(data, f"{name} ({info.width} × {info.height})")
        page.banner.clear()
        return True

    def sees_images(self) -> bool:
        loaded = self._page.loaded
        return loaded is not None and bool(loaded.details.get("vision"))

    def no_vision_sentence(self) -> str:
        loaded = self._page.loaded
        name = Path(loaded.model_path).name if loaded else self.tr("the model")
        return (self.tr("{name} does not see images: it is a text-only model, or its vision projector (an mmproj "
                        "GGUF file) is not beside it. Load a vision model to send images; your message stays here.")
                .format(name=name))

    def put_back(self, message: ChatMessage) -> None:
        """A message being edited: its images wait again in the strip (one whose file is gone is left out)."""
        strip = self._page.attachments
        strip.clear()
        for n, image in enumerate(message.images, 1):
            try:
                strip.add(image.path.read_bytes(), self.tr("image {n} ({width} × {height})").format(
                    n=n, width=image.width, height=image.height))
            except OSError:
                continue
