"""Syntax highlighting of the fenced code blocks in a reply, with pygments: a light style on a light palette, a
dark one on a dark palette, each block on its style's own background.

Qt's Markdown importer makes each line of a fenced block a text block of its own, marked with the
``BlockCodeFence`` property and the fence's language (``BlockCodeLanguage``); consecutive marked blocks are one
code block. Highlighting sets every token's colour, weight and slant explicitly (the default colour included), so
highlighting the same text again with the other style replaces the old colours rather than mixing with them."""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING

from PySide6.QtGui import (QColor, QFont, QTextBlock, QTextBlockFormat, QTextCharFormat, QTextCursor, QTextDocument,
                           QTextFormat)

if TYPE_CHECKING:  # pygments itself is imported on the first code block (~20 ms less start-up)
    from pygments.lexer import Lexer
    from pygments.style import StyleMeta

STYLES = {False: "default", True: "github-dark"}  # by "the palette is dark"


@lru_cache(maxsize=2)
def style(dark: bool) -> StyleMeta:
    from pygments.styles import get_style_by_name

    return get_style_by_name(STYLES[dark])


@lru_cache(maxsize=64)
def lexer_for(language: str) -> Lexer:
    """The lexer a fence's language names ("python", "py", "bash"…); plain text for none or an unknown one."""
    from pygments.lexers import TextLexer, get_lexer_by_name
    from pygments.util import ClassNotFound

    if not language.strip():
        return TextLexer()
    try:
        return get_lexer_by_name(language.strip().lower(), stripnl=False, ensurenl=False)
    except ClassNotFound:
        return TextLexer()


@lru_cache(maxsize=512)
def _token_format(dark: bool, token_type: object) -> QTextCharFormat:
    from pygments.token import Token

    spec = style(dark).style_for_token(token_type)
    default = style(dark).style_for_token(Token.Text)["color"] or ("ffffff" if dark else "000000")
    fmt = QTextCharFormat()
    fmt.setForeground(QColor(f"#{spec['color'] or default}"))
    fmt.setFontWeight(QFont.Weight.Bold if spec["bold"] else QFont.Weight.Normal)
    fmt.setFontItalic(bool(spec["italic"]))
    return fmt


def _is_code(block: QTextBlock) -> bool:
    return block.blockFormat().hasProperty(QTextFormat.Property.BlockCodeFence)


def highlight_code_blocks(document: QTextDocument, dark: bool, from_position: int = 0) -> int:
    """Shade and colour every code block from the one at ``from_position`` on; returns how many it did. One edit
    block: the document is laid out once at the end, not once per token."""
    background = QTextBlockFormat()
    background.setBackground(QColor(style(dark).background_color))
    cursor = QTextCursor(document)
    cursor.beginEditBlock()
    done = 0
    block = document.findBlock(from_position)
    while block.isValid():
        if not _is_code(block):
            block = block.next()
            continue
        first, lines = block, []
        language = block.blockFormat().stringProperty(QTextFormat.Property.BlockCodeLanguage)
        while block.isValid() and _is_code(block):
            cursor.setPosition(block.position())
            cursor.mergeBlockFormat(background)
            lines.append(block.text())
            block = block.next()
        # The lines are consecutive blocks: one separator character between them, as "\n" in the joined text.
        start = first.position()
        for index, token_type, value in lexer_for(language).get_tokens_unprocessed("\n".join(lines)):
            cursor.setPosition(start + index)
            cursor.setPosition(start + index + len(value), QTextCursor.MoveMode.KeepAnchor)
            cursor.mergeCharFormat(_token_format(dark, token_type))
        done += 1
    cursor.endEditBlock()
    return done
