"""``quantdesk chat --docs NAME[,NAME]``: each question answered with passages of the user's collections
(app/documents/retrieve.py). Before each reply the question retrieves (its words and, where a collection is
embedded, its meaning: the question embedded by the collection's embedding model in an engine host of the one pool
machinery), the passages go into the message the engine reads (the history keeps the question as typed), and the
citations follow the reply ("[1] guide.pdf, page 3"; ``--json``: ``citations``). The retrieval is the turn's
documents step (app/engine/turn.py ``Passages``), run after the overflow policy as the Chat's."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.datatypes import Message, SamplingSettings
from app.documents.passages import DocumentsError, Embedder, Reranker
from app.documents.retrieve import Retrieval, question_engines, with_documents
from app.documents.store import DocumentStore

if TYPE_CHECKING:
    from app.engine.client import EngineClientLike
    from app.engine.pool import ModelPool
    from app.engine.turn import Passages


def collections_of(text: str) -> list[str]:
    """The names ``--docs`` lists, comma-separated, each once."""
    return list(dict.fromkeys(name.strip() for name in text.split(",") if name.strip()))


def documents_pool() -> ModelPool:
    """A command's own pool for the documents' embedding model and reranker (no count limit: the machine's free
    memory is its budget); no engine starts until a model is asked for."""
    from app import machine
    from app.engine.pool import ModelPool, PoolLimits

    return ModelPool(PoolLimits(max_loaded=None), free_memory=machine.free_memory_bytes)


class TerminalDocuments:
    """The collections of one ``quantdesk chat`` run, its embedder and the last question's retrieval."""

    def __init__(self, store: DocumentStore, names: list[str], *, quiet: bool = False) -> None:
        self.store, self.names, self.quiet = store, names, quiet
        self.n_ctx = 0  # the chat model's context, once it is loaded
        self.retrieval = Retrieval()
        self._said: tuple[str, ...] = ()  # the notes printed last
        self._pool: Any = None
        self._engines: tuple[Embedder | None, Reranker | None] | None = None
        self._reranker_model: str | None = None

    @classmethod
    def start(cls, args: argparse.Namespace) -> TerminalDocuments:
        """The collections --docs names, checked before any engine starts (a name that is none is a sentence)."""
        names = collections_of(args.docs)
        store = DocumentStore()
        try:
            if not names:
                raise DocumentsError("--docs names no collection", "see `quantdesk docs ls`")
            found = [store.collection(name) for name in names]
        except BaseException:
            store.close()
            raise
        docs = cls(store, [c.name for c in found], quiet=bool(args.json))
        from app.documents.rerank import find_reranker

        docs._reranker_model = find_reranker()  # the library's reranker, if it has one
        return docs

    def loaded(self, n_ctx: int) -> None:
        self.n_ctx = n_ctx
        if not self.quiet:
            reranked = f" (reranked by {Path(self._reranker_model).name})" if self._reranker_model else ""
            print(f"documents: {', '.join(self.names)}{reranked}", file=sys.stderr)

    def engines(self) -> tuple[Embedder | None, Reranker | None]:
        """The question's embedding model and reranker (``retrieve.question_engines``), made at the first question
        through a pool of this chat's own (each model in an engine host of its own, loaded on first use and kept
        for the next question; closed with the chat); one that cannot be used is a note."""
        if self._engines is None:
            def say(exc: DocumentsError) -> None:  # its file is gone: the words still find passages
                if not self.quiet:
                    print(f"note: {exc}", file=sys.stderr)

            self._pool = documents_pool()
            self._engines = question_engines(self._pool, [self.store.collection(n) for n in self.names],
                                             on_refusal=say)
        return self._engines

    def passages(self, engine: EngineClientLike) -> Passages:
        """The turn's documents step (app/engine/turn.py): the question's passages in the messages the engine reads,
        within what they and the reply leave of the context (``with_documents``, counted by ``engine``, the chat's;
        each reply of a tool loop's turn retrieves for the same question again)."""
        def step(messages: list[Message], sampling: SamplingSettings) -> tuple[list[Message], Retrieval]:
            embedder, reranker = self.engines()
            return with_documents(engine, self.store, self.names, messages, sampling, self.n_ctx,
                                  embedder=embedder, reranker=reranker)

        return step

    def found(self, retrieval: Retrieval) -> None:
        """What the step found, kept for the citations and --json; its notes said on stderr (a tool loop's next
        reply that finds the same: said once)."""
        self.retrieval = retrieval
        if not self.quiet and retrieval.notes != self._said:
            for note in retrieval.notes:
                print(f"note: {note}", file=sys.stderr)
            self._said = retrieval.notes

    def citation_lines(self) -> list[str]:
        return [f"[{c.number}] {c.passage.where}" for c in self.retrieval.citations]

    def print_citations(self) -> None:
        """After a printed reply: the passages it was given, as the reply cites them."""
        if lines := self.citation_lines():
            print("\n".join(lines))

    def described(self) -> dict[str, Any]:
        """For --json: the citations, and the documents' share of the prompt."""
        r = self.retrieval
        return {"citations": [c.to_dict() for c in r.citations],
                "documents": {"collections": self.names, "tokens": r.tokens, "whole": r.whole,
                              "notes": list(r.notes)}}

    def close(self) -> None:
        if self._pool is not None:
            self._pool.close()
        self.store.close()
