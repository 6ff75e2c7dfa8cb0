"""The chat-format layer: how a model's chat template turns a request into a prompt, and how the model's reply
turns back into content, reasoning and tool calls.

``template`` renders Jinja chat templates safely (a sandbox on a budget); ``tool_calls`` holds the tool-call types.
Every engine, the server, the Chat and the CLI go through here, so a model family is understood in one place.
"""
