"""The user's documents (issue 28): collections of files and folders indexed on this machine, searched by text and
by meaning, and the passages a question retrieves, cited in the reply. Qt-free; nothing here leaves the machine.

``passages`` the shared shapes (a file's ``Section``s, the ``Chunk``s stored, the ``Passage``s a search returns, the
``Citation``s kept with a reply); ``extract`` a file's text with its positions (page, heading, line), ``chunk`` that
text cut into passages, ``scan`` a folder's files (bounded, symlink loops, sizes); ``store`` the SQLite database
(collections, files, chunks, full-text search with FTS5, vectors); ``embedder`` embeddings through the engine host;
``indexer`` the background indexing (incremental, paused and resumed across restarts, a report line per file it
could not read); ``retrieve`` a question's passages (text search and vectors merged, a reranker where the library
has one) fitted into the context, and the prompt that cites them.
"""
