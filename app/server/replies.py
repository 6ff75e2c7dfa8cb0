"""A streamed reply that may hold tool calls: text goes out as it comes, except from where a tool call may have
begun, which is held until the reply is whole and then read as calls (or released as text after all).
Shared by the OpenAI and the Anthropic endpoints."""

from __future__ import annotations

from backends.chat_format import tool_calls


class ReplyStream:
    def __init__(self, tool_format: str) -> None:
        self.tool_format = tool_format  # "": no tools, every piece goes out at once
        self._text = ""
        self._sent = 0  # characters of _text streamed so far

    def feed(self, piece: str) -> str:
        """The text that can be streamed now. Where a call may begin is asked again with every piece (a
        marker's first characters at the end may turn out to be text), over replies of a few thousand characters."""
        self._text += piece
        limit = tool_calls.holds_back(self._text, self.tool_format) if self.tool_format else len(self._text)
        out = self._text[self._sent:max(limit, self._sent)]
        self._sent += len(out)
        return out

    def finish(self) -> tool_calls.Reply:
        """What was not streamed yet, read as the rest of the content and the tool calls."""
        rest = self._text[self._sent:]
        self._sent = len(self._text)
        if not self.tool_format or not rest:
            return tool_calls.Reply(rest)
        return tool_calls.parse(rest, self.tool_format)
