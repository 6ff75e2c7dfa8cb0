"""The user's documents (issue 28): collections of files and folders indexed on this machine, searched by text and
by meaning, and the passages a question retrieves, cited in the reply. Qt-free; nothing here leaves the machine.

``passages`` the shared shapes (a file's ``Section``s, the ``Chunk``s stored, the ``Passage``s a search returns, the
``Citation``s kept with a reply); ``extract`` a file's text with its positions (page, heading, line), ``chunk`` that
text cut into passages, ``scan`` a folder's files (bounded, symlink loops, sizes); ``store`` the SQLite database
(collections, files, chunks, full-text search with FTS5, vectors); ``embedder`` embeddings through the engine host;
``indexer`` the background indexing (incremental, paused and resumed across restarts, a report line per file it
could not read); ``retrieve`` a question's passages (text search and vectors merged, a reranker where the library
has one) fitted into the context, and the prompt that cites them.

In detail (each module's job, read with docs/architecture.md's module map):

the user's documents (issue 28), Qt-free, nothing leaves the machine: ``passages`` the shared shapes (``Section``,
``Chunk``, ``Passage`` with its ``where`` ("guide.pdf, page 3"), ``Citation``, ``DocumentsError``, the ``Embedder``
and ``Reranker`` protocols); ``extract`` a file's text with its positions per format (PDF page by page through
pypdf, DOCX headings and tables through python-docx, HTML through the stdlib's parser, Markdown headings, text and
code lines), lazy and bounded, each unreadable file an ``ExtractError`` whose sentence is its report line
(encrypted, damaged, no text, binary, too large); ``chunk`` that text cut into passages that keep their page,
headings and line; ``scan`` a folder's files (document suffixes only, hidden and vendored folders left out, symlinks
followed once, a loop, a too-large file, a folder past its file limit each a ``Skipped`` line); ``store`` the SQLite
database ``documents.sqlite3`` under the user data folder (collections, files with size, mtime and hash, chunks,
FTS5 over their text with bm25 and user text quoted safe, vectors as float32 BLOBs per model searched with numpy,
kept in memory per collection; the pause flag and the report lines; a locked, damaged or full database in words);
``embedder`` embeddings through the one model pool (``pool_embedder``: the model acquired per batch, texts cut to
what it takes), the library's embedding models by their declared pooling; ``rerank`` the reranker through the pool
(``pool_reranker``, ``find_reranker``: the library's GGUF with rank pooling); ``indexer`` ``index_collection``
(incremental and counted: new, changed, unchanged, removed; file by file, vectors in batches, progress with time
left and size on disk, a pause between pages) and ``Indexer``, one daemon thread for every collection (pause kept in
the database across restarts, watched folders polled); ``retrieve`` ``search`` (FTS5 and vectors merged by
reciprocal rank fusion, reranked when the library has a reranker), ``retrieve`` (fitted to ``documents_budget``: a
third of the context at most, within what the conversation and the reply leave; a collection that fits sent whole),
``augment`` (the numbered passages, neutralised as MCP results are, in the last user message the engine reads) and
``with_documents`` (a question's whole turn, for the Chat's bridge, ``quantdesk chat --docs`` and the server)
"""
