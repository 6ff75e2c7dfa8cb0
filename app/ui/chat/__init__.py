"""The Chat page and its parts: the conversations, the model bar and loads, the reply as it streams, a chat's settings,
tools and documents, and the engine bridge the window's pages share."""
