"""Benchmark: what answering from documents adds to a chat turn (issue 28), on the real engines: the time from the
question to the messages the engine reads (``retrieve.with_documents``), against a turn without documents (the
conversation counted once by the engine, as the overflow policy does).

A collection of ``--chunks`` generated chunks (A2's Zipf text, ~1,000 characters each; each with a vector of the
tiny embedding model's size) in a temporary documents database; the tiny chat model in an engine host counts the
tokens, the tiny embedding model in another embeds the question, the tiny reranker in a third reranks. In
alternating rounds, each question is answered by:

- ``plain``: the conversation counted by the chat engine (what every turn does);
- ``words``: ``with_documents`` searching the words only (no embedding model);
- ``hybrid``: with the question embedded (text and vector search merged);
- ``reranked``: hybrid, then the 16 best (RERANK_MAX) reranked by the reranker.

Medians (and the 90th percentile) in milliseconds, the engine's token counts per turn, and paired ratios to
``plain`` of the same question. The engines are the test fixtures' tiny models on this machine's CPU: the search's
share is what a real model adds too; the counting and embedding shares grow with a real model's size. Then the same
rounds again with each real model's file as the chat model (tests/fixtures/real_models.py: SmolLM2-135M-Instruct,
Gemma 3 270M with its 262,144-token vocabulary; where cached, ``--no-real`` leaves them out): its tokenizer counts
the conversation and the passages.

    python -m tests.bench.documents_turn [--chunks 20000] [--questions 20] [--budget-ctx 4096] [--no-real]
"""

from __future__ import annotations

import argparse
import random
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np

from app.datatypes import LoadSettings, Message, SamplingSettings
from app.documents.embedder import client_embedder
from app.documents.passages import Chunk
from app.documents.retrieve import with_documents
from app.documents.store import DocumentStore
from app.engine.client import EngineClient
from tests.bench.documents_query import CHUNKS_PER_FILE, vocabulary, zipf_text
from tests.fixtures import real_models


class CountingEngine:
    """The chat engine, its count_tokens calls counted."""

    def __init__(self, client: EngineClient) -> None:
        self.client, self.calls = client, 0

    def count_tokens(self, messages, sampling=None) -> int:
        self.calls += 1
        return self.client.count_tokens(messages, sampling)


class ClientReranker:
    def __init__(self, client: EngineClient) -> None:
        self.client, self.model = client, client.loaded.model_path

    def rerank(self, query, texts):
        return list(self.client.rerank(query, texts).scores)


def fill(store: DocumentStore, chunks: int, dims: int, model: str, rng: random.Random) -> list[str]:
    words = vocabulary(5000, rng)
    weights = [1 / (i + 1) for i in range(len(words))]
    cumulative = list(np.cumsum(weights))
    store.create_collection("bench", embed_model=model)
    for start in range(0, chunks, CHUNKS_PER_FILE):
        count = min(CHUNKS_PER_FILE, chunks - start)
        store.store_file("bench", f"/bench/file{start // CHUNKS_PER_FILE:05}.txt", size=1, mtime_ns=1, sha256=None,
                         pages=0, chunks=[Chunk(zipf_text(words, cumulative, rng, 1000), i, line=1 + 20 * i)
                                          for i in range(count)])
    ids = [chunk_id for chunk_id, _ in store.unembedded("bench", model, chunks)]
    vectors = np.asarray([rng.gauss(0, 1) for _ in range(len(ids) * dims)], dtype=np.float32).reshape(-1, dims)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    for start in range(0, len(ids), 5000):
        store.put_vectors("bench", model, list(zip(ids[start:start + 5000], vectors[start:start + 5000].tolist(),
                                                   strict=True)))
    return words


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chunks", type=int, default=20_000)
    parser.add_argument("--questions", type=int, default=20)
    parser.add_argument("--budget-ctx", type=int, default=4096, help="the chat model's context")
    real_models.bench_option(parser, "the rounds")
    args = parser.parse_args()
    from tests.fixtures.models import TINY, build_embedding_model, build_model_set, build_reranker_model

    models = build_model_set(TINY)
    chat_models = {"tiny Q8_0": models.gguf_q8_0, **{path.name: path for path in
                                                      real_models.bench_models(args.real).values()}}
    rng = random.Random(28)
    with tempfile.TemporaryDirectory() as tmp, DocumentStore(Path(tmp) / "documents.sqlite3") as store, \
            EngineClient() as chat, EngineClient() as embedding, EngineClient() as rerank:
        embedding.load(build_embedding_model(models), LoadSettings(n_ctx=512, threads=2))
        rerank.load(build_reranker_model(), LoadSettings(n_ctx=2048, threads=2))
        embedder = client_embedder(embedding)
        dims = len(embedder.embed(["x"])[0])
        began = time.perf_counter()
        words = fill(store, args.chunks, dims, embedder.model, rng)
        print(f"{args.chunks:,} chunks of ~1,000 characters, {dims}-dimension vectors: filled in "
              f"{time.perf_counter() - began:.1f} s")
        reranker = ClientReranker(rerank)
        for name, path in chat_models.items():
            chat.load(path, LoadSettings(n_ctx=args.budget_ctx, threads=2))
            print(f"\nchat model {name}:")
            rounds(chat, store, embedder, reranker, words, random.Random(29), args)


def rounds(chat: EngineClient, store: DocumentStore, embedder, reranker, words: list[str], rng: random.Random,
           args) -> None:
    engine = CountingEngine(chat)
    sampling = SamplingSettings(max_tokens=512)
    ways = {"plain": None, "words": {}, "hybrid": {"embedder": embedder},
            "reranked": {"embedder": embedder, "reranker": reranker}}
    times: dict[str, list[float]] = {w: [] for w in ways}
    calls: dict[str, list[int]] = {w: [] for w in ways}
    tokens: list[int] = []
    for q in range(args.questions + 1):  # the first round warms the engines and the vector matrix: not counted
        question = " ".join(rng.sample(words[:400], 3)) + "?"
        messages = [Message("system", "You answer briefly."), Message("user", question)]
        order = list(ways)
        rng.shuffle(order)
        for way in order:
            engine.calls = 0
            start = time.perf_counter()
            if ways[way] is None:
                chat.count_tokens(messages, sampling)
                engine.calls = 1
            else:
                _sent, retrieval = with_documents(engine, store, ["bench"], messages, sampling, args.budget_ctx,
                                                  **ways[way])
                if way == "hybrid":
                    tokens.append(retrieval.tokens)
            elapsed = (time.perf_counter() - start) * 1000
            if q:
                times[way].append(elapsed)
                calls[way].append(engine.calls)
    print(f"{args.questions} questions, context {args.budget_ctx} (passages' budget up to {args.budget_ctx // 3} "
          f"tokens; median {statistics.median(tokens):.0f} used):")
    print(f"{'turn':10} {'median ms':>10} {'p90 ms':>8} {'engine counts':>14} {'÷ plain (paired median)':>24}")
    for way in ways:
        ms = sorted(times[way])
        ratio = statistics.median(a / b for a, b in zip(times[way], times["plain"], strict=True))
        print(f"{way:10} {statistics.median(ms):10.1f} {ms[int(len(ms) * 0.9) - 1]:8.1f} "
              f"{statistics.median(calls[way]):14.0f} {ratio:24.1f}")


if __name__ == "__main__":
    main()
