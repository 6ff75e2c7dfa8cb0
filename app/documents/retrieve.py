"""A question's passages from the user's collections, fitted into the context, and the prompt that cites them.

``retrieve`` searches the collections two ways and merges the two rankings by reciprocal rank fusion (each passage
scores ``1 / (RRF_K + rank)`` in each list it is in): the store's full-text search (FTS5, bm25), which finds the
question's exact words, names and numbers, and, where a collection has an embedding model and vectors, a search by
the question's embedding, which finds passages that say the same in other words. A reranker, when the library has
one, then orders the best of the merged list by reading each passage with the question. The passages go in that
order while they fit ``budget_tokens`` (counted by the engine's own tokenizer: ``count_tokens``), never past it; a
collection small enough to fit whole is sent whole, in file order, since then nothing need be guessed.

``augment`` puts them in the last user message the engine reads (the stored message stays as the user wrote it):
numbered, each with its file and place (``Passage.where``), and a line asking the model to cite them as [n]. The
text is the documents' own, kept as text: what reads as a chat template's control token is neutralised by the rule
the MCP tool results go through (``app.mcp.client.neutral``), so a document cannot open a turn of its own.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from app.datatypes import Message, SamplingSettings
from app.documents.passages import Citation, DocumentsError, Embedder, Passage, Reranker
from app.documents.store import Collection, DocumentStore
from app.engine.client import EngineClientLike
from app.engine.overflow import reply_room
from app.errors import EngineError, QuantDeskError
from app.mcp.client import neutral

if TYPE_CHECKING:
    from app.engine.pool import ModelPool

RRF_K = 60  # reciprocal rank fusion's constant (Cormack et al. 2009; what Elastic, OpenSearch and Vespa default to)
CANDIDATES = 40  # how many passages each search returns, before fusion
# How many of the merged list a reranker reads: each is the question and a passage through the reranker, so its
# cost grows with them (the tiny test reranker: ~260 ms a 1,000-character passage on 2 CPU threads; a real one on a
# CPU several times that). Twice the passages a prompt takes: the reranker can bring the next eight forward.
RERANK_MAX = 16
WHOLE_MAX_PASSAGES = 400  # a collection of more chunks than this is never counted for sending whole
WHOLE_CHARS_PER_TOKEN = 8  # see _whole
DOCUMENTS_SHARE = 3  # the passages take at most a third of the context: the conversation and the reply need the rest
MISSES = 3  # passages in a row that did not fit the room left: the rest are not counted (each count is an engine call)
QUERY_CHARS = 2000  # the question as it is embedded: an embedding model's context is short, the start says enough

INSTRUCTION = ("Passages from the user's documents follow, numbered. Answer from them where they help, and cite "
               "each one you use by its number, like [1].")
QUESTION = "Question: "


@dataclass(frozen=True)
class Retrieval:
    """The passages a question gets, numbered as the prompt shows them; ``tokens``: what they take of the context
    (the block ``augment`` adds, instruction included, by the engine's count); ``whole``: the collections were sent
    whole; ``notes``: sentences for the user (a collection still indexing, one searched by its words only)."""

    citations: tuple[Citation, ...] = ()
    tokens: int = 0
    whole: bool = False
    notes: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, object]:
        return {"citations": [c.to_dict() for c in self.citations], "tokens": self.tokens, "whole": self.whole,
                "notes": list(self.notes)}


def documents_budget(n_ctx: int, prompt_tokens: int, reply_tokens: int) -> int:
    """The tokens the passages may take: a third of the context at most, within what the prompt (``prompt_tokens``,
    the conversation as it will be sent) and the reply (``reply_tokens``: its max_tokens, as the overflow policy
    counts it, up to half the context) leave. 0 when nothing is left."""
    if n_ctx <= 0:
        return 0
    left = n_ctx - max(0, prompt_tokens) - reply_room(n_ctx, max(0, reply_tokens))
    return max(0, min(n_ctx // DOCUMENTS_SHARE, left))


def engine_counter(engine: EngineClientLike) -> Callable[[str], int]:
    """A text's tokens by ``engine``'s own tokenizer (counted as a raw prompt, as the engine tokenizes a rendered
    chat: special-token text parsed, BOS added), in its turn after what was sent before. An engine that cannot
    count (a remote server) is bounded by the text's UTF-8 bytes instead, which no tokenizer's count passes (a
    byte-level BPE or SentencePiece's byte fallback take at most a token a byte): fewer passages, never too many."""
    counts = True

    def count(text: str) -> int:
        nonlocal counts
        if counts:
            try:
                return engine.count_tokens(text)
            except EngineError as exc:
                if exc.kind != "unavailable":
                    raise
                counts = False
        return len(text.encode("utf-8")) + 1

    return count


def with_documents(engine: EngineClientLike, store: DocumentStore, collections: Sequence[str],
                   messages: Sequence[Message], sampling: SamplingSettings, n_ctx: int, *,
                   embedder: Embedder | None = None, reranker: Reranker | None = None, k: int = 8
                   ) -> tuple[list[Message], Retrieval]:
    """One question's turn with documents, as the Chat, ``quantdesk chat --docs`` and the server take it: the last
    user message is the question; the conversation as it will be sent (after the overflow policy) is counted by
    the engine, the passages get ``documents_budget`` of what is left, and the messages to send carry them
    (``augment``). Raises DocumentsError naming a collection that is not there."""
    question = next((m.content for m in reversed(messages) if m.role == "user"), "")
    count = engine_counter(engine)
    try:
        prompt_tokens = engine.count_tokens(list(messages), sampling)
    except EngineError as exc:
        if exc.kind != "unavailable":
            raise
        prompt_tokens = sum(count(m.content) for m in messages) + 8 * len(messages)  # the template's markers
    budget = documents_budget(n_ctx, prompt_tokens, sampling.max_tokens)
    retrieval = retrieve(store, collections, question, budget_tokens=budget, count_tokens=count,
                         embedder=embedder, reranker=reranker, k=k)
    return augment(messages, retrieval), retrieval


def question_engines(pool: ModelPool, found: Sequence[Collection], *,
                     on_refusal: Callable[[DocumentsError], None] | None = None
                     ) -> tuple[Embedder | None, Reranker | None]:
    """The engines a question of ``found`` collections is searched with, through ``pool`` (the Chat's, the
    server's router's, ``quantdesk chat``'s): the embedding model of the first collection embedded by one (a
    collection of another model is searched by its words: ``retrieve`` says so) and the library's reranker. One that
    cannot be used (its file gone, no reranker) is None, its refusal handed to ``on_refusal``; the search goes on
    without it and the notes say what was searched."""
    from app.documents.embedder import pool_embedder
    from app.documents.rerank import find_reranker, pool_reranker

    def usable(make: Callable[[str], Any], path: str | None) -> Any:
        if path is None:
            return None
        try:
            return make(path)
        except DocumentsError as exc:
            if on_refusal is not None:
                on_refusal(exc)
            return None

    model = next((c.embed_model for c in found if c.embed_model and c.embedded), None)
    return (usable(lambda path: pool_embedder(pool, path), model),
            usable(lambda path: pool_reranker(pool, path), find_reranker()))


def fuse(*rankings: Sequence[int], k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: each id's summed ``1 / (k + rank)`` (rank 1 first) over the rankings it is in, best
    first; ties keep the order of first appearance."""
    scores: dict[int, float] = {}
    for ranking in rankings:
        for rank, chunk_id in enumerate(ranking, 1):
            scores[chunk_id] = scores.get(chunk_id, 0.0) + 1.0 / (k + rank)
    return sorted(scores.items(), key=lambda item: -item[1])


def passages_block(passages: Sequence[Passage]) -> str:
    """What ``augment`` writes before the question: the instruction and the numbered passages, as text only."""
    entries = [f"[{n}] {p.where}\n{p.text.strip()}" for n, p in enumerate(passages, 1)]
    return neutral(f"{INSTRUCTION}\n\n" + "\n\n".join(entries) + f"\n\n{QUESTION}")


def augment(messages: Sequence[Message], retrieval: Retrieval) -> list[Message]:
    """``messages`` with the last user message carrying the retrieval's numbered passages before its text (its
    images kept); the others, and the caller's own message objects, as they were. Without passages: a copy."""
    out = list(messages)
    if not retrieval.citations:
        return out
    for i in range(len(out) - 1, -1, -1):
        if out[i].role == "user":
            block = passages_block([c.passage for c in retrieval.citations])
            out[i] = dataclasses.replace(out[i], content=block + out[i].content)
            break
    return out


def retrieve(store: DocumentStore, collections: Sequence[str], query: str, *, budget_tokens: int,
             count_tokens: Callable[[str], int], embedder: Embedder | None = None,
             reranker: Reranker | None = None, k: int = 8) -> Retrieval:
    """The passages of ``collections`` for ``query`` that fit ``budget_tokens`` (see the module's docstring).
    ``count_tokens``: a text's tokens by the engine that will read the prompt. ``embedder``: the query's embedding
    for the collections embedded by its model (others are searched by their words, said in a note). Raises
    DocumentsError naming a collection that does not exist; an embedder or a reranker that fails is a note, and
    the search goes on without it."""
    names = list(dict.fromkeys(collections))
    if not names:
        return Retrieval()
    found = [store.collection(name) for name in names]  # raises for a name that is not a collection
    notes = _state_notes(found)
    if budget_tokens <= 0:
        return Retrieval(notes=(*notes, "no room is left in the context for passages from the documents"))

    whole = _whole(store, names, found, budget_tokens, count_tokens)
    if whole is not None:
        return dataclasses.replace(whole, notes=tuple(notes))

    ranked, search_notes = _ranked(store, names, found, query, embedder, reranker, max(k * 2, RERANK_MAX))
    notes += search_notes
    if not ranked:
        return Retrieval(notes=tuple(notes))
    chosen = _fit(ranked, budget_tokens, count_tokens, k)
    if not chosen:
        return Retrieval(notes=(*notes, "no passage found fits the room left in the context"))
    citations = tuple(Citation(n, p, score) for n, (p, score) in enumerate(chosen, 1))
    return Retrieval(citations, count_tokens(passages_block([c.passage for c in citations])), False, tuple(notes))


@dataclass(frozen=True)
class Found:
    """A search's passages, best first, each with its score (reciprocal rank fusion's, or the reranker's), and
    the notes ``Retrieval`` has."""

    passages: tuple[tuple[Passage, float], ...] = ()
    notes: tuple[str, ...] = ()


def search(store: DocumentStore, collections: Sequence[str], query: str, *, embedder: Embedder | None = None,
           reranker: Reranker | None = None, limit: int = 10) -> Found:
    """The hybrid search alone, without a budget (``quantdesk docs search``): the best ``limit`` passages of
    ``collections`` for ``query`` as ``retrieve`` ranks them. Raises DocumentsError naming a collection that does
    not exist."""
    names = list(dict.fromkeys(collections))
    found = [store.collection(name) for name in names]
    ranked, notes = _ranked(store, names, found, query, embedder, reranker, limit)
    return Found(tuple(ranked[:limit]), (*_state_notes(found), *notes))


def _ranked(store: DocumentStore, names: list[str], found: Sequence[Collection], query: str,
            embedder: Embedder | None, reranker: Reranker | None, limit: int
            ) -> tuple[list[tuple[Passage, float]], list[str]]:
    """The best ``limit`` passages (or more, where a reranker read them) with their scores, and notes."""
    notes: list[str] = []
    text_ids = [hit.chunk_id for hit in store.text_search(names, query, CANDIDATES)] if query.strip() else []
    vector_ids, vector_notes = _vector_ids(store, found, query, embedder)
    notes += vector_notes
    scored = fuse(text_ids, vector_ids)
    if not scored:
        return [], [*notes, f"nothing in {_names(names)} matches the question"]
    if reranker is not None:
        scored, rerank_note = _reranked(store, scored, query, reranker)
        notes += rerank_note
    head = scored[:max(limit, RERANK_MAX if reranker is not None else 0)]
    scores = dict(head)
    return [(p, scores[p.chunk_id]) for p in store.passages([chunk_id for chunk_id, _ in head])], notes


def _names(names: Sequence[str]) -> str:
    return ", ".join(names)


def _state_notes(found: Sequence[Collection]) -> list[str]:
    """Sentences on collections whose search is not yet whole: still indexing, paused, still embedding, none."""
    notes = []
    for c in found:
        done = c.indexed + c.failed
        if c.files and done < c.files:
            state = "is paused" if c.paused else "is still indexing"
            notes.append(f"{c.name} {state}: {c.indexed} of {c.files} files indexed")
        if c.embed_model is None:
            notes.append(f"{c.name} has no embedding model: searched by its words only")
        elif c.chunks and c.embedded < c.chunks:
            notes.append(f"{c.name} is still embedding: {c.embedded} of {c.chunks} passages can be found by meaning")
    return notes


def _whole(store: DocumentStore, names: list[str], found: Sequence[Collection], budget: int,
           count_tokens: Callable[[str], int]) -> Retrieval | None:
    """The collections whole, in file order, when every passage fits the budget; else None (never counted for a
    collection larger than WHOLE_MAX_PASSAGES, and never pasted past the budget)."""
    total = sum(c.chunks for c in found)
    if not total or total > WHOLE_MAX_PASSAGES:
        return None
    passages = store.collection_passages(names, total + 1)
    if len(passages) != total:  # indexing changed it meanwhile: rank what is there instead
        return None
    # Ordinary text runs at 3 to 5 characters a token: a block of more than WHOLE_CHARS_PER_TOKEN characters a
    # token of budget would not fit, and is not sent to the engine to be counted (were it wrong, the question gets
    # the ranked passages instead of the whole: never more than the budget either way).
    if sum(len(p.text) for p in passages) > budget * WHOLE_CHARS_PER_TOKEN:
        return None
    tokens = count_tokens(passages_block(passages))
    if tokens > budget:
        return None
    return Retrieval(tuple(Citation(n, p, 1.0) for n, p in enumerate(passages, 1)), tokens, True)


def _vector_ids(store: DocumentStore, found: Sequence[Collection], query: str, embedder: Embedder | None
                ) -> tuple[list[int], list[str]]:
    """The vector search's ranking over the collections the embedder's model embedded, and notes on the others."""
    if not query.strip():
        return [], []
    wanted = [c for c in found if c.embed_model is not None and c.embedded]
    if not wanted:
        return [], []
    if embedder is None:
        return [], [f"{_names([c.name for c in wanted])}: its embedding model cannot be used here, so searched by "
                    "words only"]
    same = [c.name for c in wanted if c.embed_model == embedder.model]
    other = [c.name for c in wanted if c.embed_model != embedder.model]
    notes = [f"{_names(other)}: embedded by another model than {_model_name(embedder.model)}, so searched by "
             "words only"] if other else []
    if not same:
        return [], notes
    try:
        vector = embedder.embed([query[:QUERY_CHARS]])[0]
    except QuantDeskError as exc:
        return [], [*notes, f"the question could not be embedded ({exc}): searched by words only"]
    if not vector or not all(math.isfinite(x) for x in vector):
        return [], [*notes, "the embedding model gave no usable vector: searched by words only"]
    return [hit.chunk_id for hit in store.vector_search(same, vector, CANDIDATES, model=embedder.model)], notes


def _model_name(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


def _reranked(store: DocumentStore, fused: list[tuple[int, float]], query: str, reranker: Reranker
              ) -> tuple[list[tuple[int, float]], list[str]]:
    """The best RERANK_MAX of the merged list in the reranker's order (its scores), the rest after them in theirs."""
    head = fused[:RERANK_MAX]
    passages = store.passages([chunk_id for chunk_id, _ in head])
    try:
        scores = reranker.rerank(query[:QUERY_CHARS], [p.text for p in passages])
    except QuantDeskError as exc:
        return fused, [f"the reranker could not be used ({exc}): passages in search order"]
    if len(scores) != len(passages):
        return fused, ["the reranker scored another number of passages: passages in search order"]
    order = sorted(zip((p.chunk_id for p in passages), scores, strict=True), key=lambda item: -item[1])
    return [(chunk_id, float(score)) for chunk_id, score in order] + fused[RERANK_MAX:], []


def _fit(ranked: Sequence[tuple[Passage, float]], budget: int, count_tokens: Callable[[str], int],
         k: int) -> list[tuple[Passage, float]]:
    """Up to ``k`` passages in the order given that fit ``budget`` together: each counted on its own (the
    instruction once), one that does not fit is passed over for the next, until MISSES in a row did not; then the
    block is counted whole and the last passages dropped while it is over (a tokenizer may join text across the
    seams)."""
    chosen: list[tuple[Passage, float]] = []
    used = count_tokens(passages_block([]))
    misses = 0
    for passage, score in ranked:
        if len(chosen) >= k or misses >= MISSES:
            break
        cost = count_tokens(f"[{len(chosen) + 1}] {passage.where}\n{neutral(passage.text.strip())}\n\n")
        if used + cost <= budget:
            chosen.append((passage, score))
            used += cost
            misses = 0
        else:
            misses += 1
    while chosen and count_tokens(passages_block([p for p, _ in chosen])) > budget:
        chosen.pop()
    return chosen


__all__ = ["DocumentsError", "Found", "Retrieval", "augment", "documents_budget", "engine_counter", "fuse",
           "passages_block", "retrieve", "search", "with_documents"]
