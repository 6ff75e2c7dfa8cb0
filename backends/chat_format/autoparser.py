"""The differential analysis of a chat template (being ported from llama.cpp's common/chat-diff-analyzer.cpp)."""

from __future__ import annotations

from backends.chat_format.formats import Prepared, Request, Template, content_only


def prepare(template: Template, request: Request) -> Prepared:
    return content_only(template, request)
