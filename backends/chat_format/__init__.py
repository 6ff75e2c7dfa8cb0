"""The chat-format layer: how a model's chat template turns a request into a prompt, and how the model's reply
turns back into content, reasoning and tool calls.

``template`` renders Jinja chat templates safely (a sandbox on a budget); ``request`` holds the base types
(``Template``, ``Request``, ``Prepared``) and ``formats`` picks the reader of a template's replies; a tool call is
``app.datatypes.ToolCall``.
Every engine, the server, the Chat and the CLI go through here, so a model family is understood in one place.
"""
