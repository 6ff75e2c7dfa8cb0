"""MCP servers' tools for the Chat and ``quantdesk chat --tools``: the servers the user added (``config``, saved in
``mcp.json`` in the format LM Studio, Claude Desktop and Cursor use), a synchronous façade over the official ``mcp``
SDK that connects to them and calls their tools (``client.ToolBox``: every failure an outcome with a sentence), the
user's approvals per tool (``approvals``) and the Qt-free tool loop step the CLI and the Chat share (``loop``).

Qt-free; the GUI's tool cards and Settings → Tools live in app/ui. QuantDesk's own MCP server is not here.

In detail (each module's job, read with docs/architecture.md's module map):

MCP servers' tools for the Chat and ``quantdesk chat --tools``, Qt-free: ``config`` (the servers in ``mcp.json``,
the format LM Studio, Claude Desktop and Cursor use, plus QuantDesk's keys: ``confirmed`` command line,
``disabled``, where the bearer token is kept; ``import_mcp_json``), ``client`` (``ToolBox``: a synchronous façade
over the official ``mcp`` SDK, one asyncio thread, every connection a task; tools as ``ToolSpec`` with unique
``server__tool`` function names; each call a ``ToolOutcome``: its failure, timeout, Stop, a result cut to the
budget, arguments checked against the tool's schema, all in words; ``stdio`` the SDK's stdio transport with a reader
linear in a line's length), ``approvals`` (allow once, always, deny; the always-allowed tools in
``mcp-approvals.json``), ``loop`` (the one tool step, ``ToolStep``: a state machine over a reply's
``Done.tool_calls``, each answered in order: a tool the model was not given at once, the others asked for unless
always allowed, run, denied or stopped; its ``ToolRun``s for the next prompt, its ``ToolCard``s for the chat store;
both faces drive it: ``ToolLoop.step`` blocks on it for ``quantdesk chat --tools``, up to a step limit, the Chat's
``ui/chat/chat_tools.ChatTools`` advances it on signals; tests/ui/chat/test_chat_tools.py runs the same calls through
both)
"""
