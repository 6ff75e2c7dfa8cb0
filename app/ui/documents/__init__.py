"""The Documents page and the window's one document store and indexer (the Chat's documents use it)."""
