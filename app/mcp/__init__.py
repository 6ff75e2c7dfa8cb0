"""MCP servers' tools for the Chat and ``quantdesk chat --tools``: the servers the user added (``config``, saved in
``mcp.json`` in the format LM Studio, Claude Desktop and Cursor use), a synchronous façade over the official ``mcp``
SDK that connects to them and calls their tools (``client.ToolBox``: every failure an outcome with a sentence), the
user's approvals per tool (``approvals``) and the Qt-free tool loop step the CLI and the Chat share (``loop``).

Qt-free; the GUI's tool cards and Settings → Tools live in app/ui. QuantDesk's own MCP server is not here.
"""
