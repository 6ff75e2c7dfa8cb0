"""Conversations and presets, kept in SQLite under the user data folder (Qt-free).

In detail (each module's job, read with docs/architecture.md's module map):

``session`` the Chat's conversation without Qt (``ChatSession``: the open chat, the message being edited, a delete and
its undo, a chat deleted once its streaming reply stops, branches, pins, export, and the reply under way: its chat,
context figures, the cut it goes on from, its tool loop; the rule ``tool_step_after`` over ``app/mcp/loop``'s; on its
own layer above ``app/engine`` and ``app/mcp``, while the rest of ``app/chats`` is below them; shown by
``ui/chat/chat_page.ChatPage``), ``store`` the conversation store (SQLite) and presets, ``messages`` its records
(``Conversation``, ``ChatMessage``, ``ToolCard``, ``Branches``, ``Preset``: frozen dataclasses, no SQL), ``export`` a
conversation as JSON (``EXPORT_VERSION``) or Markdown, and a reply saved as it streams (``ReplyWriter``); a message's
images as files under ``attachments/`` beside the database (named by sha256, purged once no row refers to them);
messages form a tree (``parent_id``), the conversation's ``leaf_id`` names the branch on show, ``messages()`` walks it
up with a recursive query; edit/regenerate add a sibling, never delete; a thinking model's reply keeps its thinking
apart from its answer (``reasoning``, its figures in the stats), saved as it streams, exported, and given back to the
engine as ``Message.reasoning``; a reply that called tools keeps its tool cards (``ToolCard``: the call, its server, the
result, error / cut / denied, seconds; schema 6), exported, and given back next turn as the assistant's ``tool_calls``
and the ``tool`` messages (``ChatMessage.engine_turns``); a chat's own overflow policy (``Conversation.overflow``, NULL:
Settings' default) and, on a reply whose prompt the policy cut, the ``ContextCut`` with the model's note
(``ChatMessage.context_cut``, ``set_context_cut``; its ``start`` counts the turns sent to the engine without the system
prompt), so the mark stays where it happened and the next reply goes on from that cut (schema 7); a message's pin
(``ChatMessage.pinned``, ``set_pinned``; on its own row, so an edit or a regenerated reply is not pinned; ``pinned:
true`` in the JSON export, version 5), which the overflow policy never leaves out (schema 8); a reply's citations, the
passages of the user's documents it was given (``ChatMessage.citations``, plain dicts of ``Citation.to_dict()`` with its
``where``: the store stays below ``app/documents``; ``set_citations``; on its own row, so a regenerated reply has its
own; ``citations`` in the JSON export, version 6, and a "Sources" list under the reply in Markdown) and a chat's
attached collections (``Conversation.documents``, ``set_documents``) (schema 9)
"""
