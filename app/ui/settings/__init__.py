"""The Settings page and its panels: Tools (MCP servers) and the remote engines' connections (whose picker the Chat and
the Lab open too)."""
