"""The Chat page's side of its MCP tools: the app's ChatTools (app/ui/chat/chat_tools.py) made on first use, so a chat
without tools never imports them, and started after the first paint where an ``mcp.json`` exists; the tools a chat's
model is given; a reply's tool step shown on its bubble (a card per call, the approval asked in the card, asked
again when the chat is reopened), its cards saved with the reply, and the reply going on once every call has its
answer; a tool's trouble said in the banner until the reply is over."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QObject, QTimer, Slot

from app.chats.store import ChatStoreError, NotFound
from app.ui.common.formatting import capitalized
from app.ui.common.widgets import announce

if TYPE_CHECKING:
    from app.chats.messages import Conversation
    from app.datatypes import Done
    from app.ui.chat.chat_tools import ChatTools, ChatToolStep
    from app.ui.chat.reply_session import Reply


class ChatToolCards(QObject):
    def __init__(self, page: Any, provider: Callable[[], ChatTools] | None) -> None:
        """``provider``: gives the app's MCP tools when the chat first needs them (None: the page makes its own)."""
        super().__init__(page)
        self._page, self._provider = page, provider
        self.made: ChatTools | None = None
        self._started = False

    @property
    def tools(self) -> ChatTools:
        if self.made is None:
            from app.ui.chat.chat_tools import ChatTools

            self.made = self._provider() if self._provider is not None else ChatTools(parent=self._page)
        if not self._started:
            self._started = True
            self.made.cards_changed.connect(self.show_cards)
            self.made.approval_needed.connect(self.ask)
            self.made.step_done.connect(self._on_step_done)
            self.made.problem.connect(self._on_problem)
        return self.made

    def start_after_paint(self) -> None:
        if not self._started:  # after the first paint: the servers start while the user reads
            QTimer.singleShot(0, self._start)

    @Slot()
    def _start(self) -> None:
        if self.made is not None or self.mcp_file_exists():
            self.tools.connect_all()

    @staticmethod
    def mcp_file_exists() -> bool:
        from app.mcp.config import McpServers

        return McpServers().path.exists()

    def specs(self, conv: Conversation) -> list[Any]:
        """The tools the chat's model is given: its servers' (a server added in Settings → Tools since the app
        started counts too), none where its template cannot call tools."""
        loaded = self._page.loaded
        if conv.tool_servers == () or loaded is None or not loaded.details.get("tool_format"):
            return []
        if self.made is None and not self.mcp_file_exists():
            return []  # no servers: the tools are not even imported
        return self.tools.specs(conv.tool_servers)

    def servers(self) -> tuple[list[tuple[str, str]], str]:
        """The chat settings' list of servers, each with its state in words, and why the model cannot be given
        tools ("" where it can)."""
        if self.made is None and not self.mcp_file_exists():
            return [], ""
        servers = [(c.name, self._server_state(c)) for c in self.tools.configs()]
        from app.mcp.loop import tool_support_refusal

        loaded = self._page.loaded
        return servers, tool_support_refusal(loaded.details) if servers and loaded is not None else ""

    def _server_state(self, config: Any) -> str:
        status = self.tools.status(config.name)
        if config.disabled:
            return self.tr("off")
        if status is not None and status.state == "ready":
            return self.tr("connected · %n tool(s)", "", status.tools)
        if status is not None and status.state == "failed":
            return self.tr("failed")
        return self.tr("not connected")

    # --- a reply's tool step ------------------------------------------------------------------------------------

    @Slot(object)
    def show_cards(self, step: ChatToolStep) -> None:
        page = self._page
        try:
            page.store.update_message(step.message_id, tools=step.cards)
        except ChatStoreError as exc:  # shown all the same; the banner says why it is not kept
            page.banner.say_store_error(exc)
        except NotFound:
            return  # its chat was deleted
        if bubble := page.view.bubble(step.message_id):
            bubble.set_tools(step.cards, live=self.made is not None and self.made.step is step)
            if step.running and (card_view := bubble.tool_card(step.running)):
                card_view.set_card(card_view.card, running=True)

    @Slot(object, str, str)
    def ask(self, step: ChatToolStep, call_id: str, description: str) -> None:
        page = self._page
        bubble = page.view.bubble(step.message_id)
        card_view = bubble.tool_card(call_id) if bubble is not None else None
        if card_view is None:
            return  # its chat is not open: asked when it is (show_step)
        approval = card_view.ask(description)
        approval.decided.connect(lambda answer, call=call_id: self.tools.answer(call, answer))
        if page.current is not None and page.current.id == step.conversation_id:
            approval.buttons["once"].setFocus()
        announce(page.view, self.tr("The model wants to run the tool {name}: allow or deny it.")
                 .format(name=card_view.card.name))

    def show_step(self) -> None:
        """The open chat's tool step, as it stands (its approval asked again after the chat was reopened)."""
        step = self.made.step if self.made is not None else None
        current = self._page.current
        if step is None or current is None or step.conversation_id != current.id:
            return
        self.show_cards(step)
        waiting = step.pending()
        if waiting is not None and not step.running:
            self.ask(step, waiting.id, step.specs[waiting.name].description)

    def after_done(self, done: Done, reply: Reply) -> bool:
        """After a reply: where it made tool calls, its step begins (True: the reply stays under way through it;
        Stop stops the call, Send waits), or past the step limit the reply ends (said in the banner). A reply given
        tools answers alone (ChatPage.can_send), so the session's tool loop is its."""
        page, session = self._page, self._page.session
        due = session.tool_step_after(done, self.made.max_steps if self.made is not None else 0)
        if due == "limit":
            page.banner.say(self.tr("The reply made %n tool step(s), the most one reply may: it ends here.", "",
                                    self.tools.max_steps))
        if due != "step":
            return False
        reply.request_id = ""  # its generation is over: Stop stops the step's call
        self.tools.begin_step(reply.conversation_id, reply.writer.message_id, done.tool_calls, session.tool_steps,
                              session.offered)
        return True

    @Slot(object)
    def _on_step_done(self, step: ChatToolStep) -> None:
        """Every call has its answer: the tool messages go back to the model, which goes on."""
        page = self._page
        if (reply := page.reply.of(step.conversation_id)) is None:
            return
        page.reply.end(reply)
        page.session.tool_steps += 1
        page._generate(after=step.message_id, conversation_id=step.conversation_id)
        if page.session.tool_problems:  # starting the generation cleared the banner: the servers' trouble stays said
            page.banner.say(" ".join(page.session.tool_problems))

    @Slot(str)
    def _on_problem(self, text: str) -> None:
        page = self._page
        page.banner.say(page.session.tool_problem(capitalized(text) + ("" if text.endswith(".") else ".")))

    def stop(self) -> ChatToolStep | None:
        """Stop during a tool step: its running call cancelled, its cards kept as they stand; None when no step
        was under way."""
        step = self.made.stop() if self.made is not None else None
        if step is not None:
            self.show_cards(step)
        return step

    def shutdown(self) -> None:
        if self.made is not None:
            self.made.shutdown()
