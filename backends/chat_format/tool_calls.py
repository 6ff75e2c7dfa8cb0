"""A tool call as a reply's reader hands it out (backends/chat_format/reply.py) and the engine protocol carries it.

Reading calls in each model's own syntax is the chat formats' work (families/, the autoparser), forcing one their
grammar's (grammar.py).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # JSON text, as OpenAI's API carries it
