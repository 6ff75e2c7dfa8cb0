"""Benchmark: query latency of the documents store at 100k chunks (issue 28): text search (FTS5, bm25), vector search
(cosine over 384-dimension float32 vectors) and both, as retrieval runs them; and the same vector search through
sqlite-vec, the SQLite vector extension, to decide the store (docs/facts.md).

The store (app/documents/store.py) is filled with ``--chunks`` chunks of generated text (words drawn with a Zipf
law from a made-up vocabulary, ~1,000 characters each, 50 per file) and a random unit vector each. Then, in
alternating rounds, each query is answered by:

- ``text``: ``DocumentStore.text_search`` (three words; every word first, then some);
- ``numpy``: ``DocumentStore.vector_search`` (the collection's vectors read once into one float32 matrix, kept until
  vectors are deleted, new ones appended: brute force, one matrix product); ``vectors after a write``: the same
  right after a changed file's chunks were replaced (the matrix read again from SQLite);
- ``both``: the text search and the vector search one after the other, as ``retrieve`` does;
- ``sqlite-vec``: a ``vec0`` table of the same vectors (k-nearest by cosine, ``MATCH ... AND k = 20``), through
  ``apsw`` (this Python's sqlite3 cannot load extensions: no ``enable_load_extension``). Skipped with a line when
  ``apsw`` and ``sqlite_vec`` cannot be imported: ``pip install --target DIR apsw sqlite-vec==0.1.9`` and
  ``--with-path DIR`` (they are not QuantDesk's dependencies).

Medians (and the 90th percentile) of ``--queries`` queries each, milliseconds; paired ratios numpy / sqlite-vec of
the same query. Also the time to fill the store and the database's size, and the vectors' memory.

    python -m tests.bench.documents_query [--chunks 100000] [--dims 384] [--queries 40] [--with-path DIR]
"""

from __future__ import annotations

import argparse
import itertools
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from app.documents.passages import Chunk
from app.documents.store import DocumentStore

CHUNKS_PER_FILE = 50


def vocabulary(size: int, rng: random.Random) -> list[str]:
    syllables = ["ka", "lo", "mi", "ne", "pu", "ra", "si", "to", "ve", "zu", "bar", "den", "fil", "gor", "hun",
                 "jas", "kel", "mor", "nip", "qua", "rust", "stel", "tri", "won"]
    words: set[str] = set()
    while len(words) < size:
        words.add("".join(rng.choice(syllables) for _ in range(rng.randint(1, 4))))
    return sorted(words)


def zipf_text(words: list[str], cumulative: list[float], rng: random.Random, chars: int) -> str:
    out: list[str] = []
    length = 0
    while length < chars:
        picked = rng.choices(words, cum_weights=cumulative, k=20)
        out.extend(picked)
        length += sum(len(w) + 1 for w in picked)
    return " ".join(out)[:chars]


def fill(store: DocumentStore, n_chunks: int, dims: int, seed: int = 7) -> tuple[list[str], np.ndarray, np.ndarray]:
    rng = random.Random(seed)
    words = vocabulary(20_000, rng)
    cumulative = list(itertools.accumulate(1.0 / (rank + 1) for rank in range(len(words))))
    store.create_collection("bench", embed_model="bench-embed")
    vectors = np.random.default_rng(seed).standard_normal((n_chunks, dims)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    ids: list[int] = []
    for file_no in range(0, n_chunks, CHUNKS_PER_FILE):
        count = min(CHUNKS_PER_FILE, n_chunks - file_no)
        chunks = [Chunk(zipf_text(words, cumulative, rng, 1000), i, page=i // 3 + 1) for i in range(count)]
        store.store_file("bench", f"/bench/file{file_no // CHUNKS_PER_FILE:05d}.pdf", size=1, mtime_ns=1,
                         sha256=None, chunks=chunks, pages=count // 3 + 1)
    ids = [row[0] for row in store.db.execute("SELECT id FROM chunks ORDER BY id")]
    for start in range(0, n_chunks, 1000):
        store.put_vectors("bench", "bench-embed", list(zip(ids[start:start + 1000], vectors[start:start + 1000], strict=True)))
    return words, np.asarray(ids, dtype=np.int64), vectors


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def line(label: str, values: list[float]) -> str:
    return f"  {label:<24} median {statistics.median(values):8.2f} ms   p90 {percentile(values, 0.9):8.2f} ms"


def sqlite_vec_connection(path: Path, ids: np.ndarray, vectors: np.ndarray):  # type: ignore[no-untyped-def]
    """An apsw connection to a copy of the vectors in a vec0 table (None where apsw or sqlite_vec is missing)."""
    try:
        import apsw  # type: ignore[import-not-found,unused-ignore]
        import sqlite_vec  # type: ignore[import-not-found,unused-ignore]
    except ImportError as exc:
        print(f"sqlite-vec: skipped ({exc}: pip install --target DIR apsw sqlite-vec==0.1.9, then --with-path DIR)")
        return None
    db = apsw.Connection(str(path))
    db.enable_load_extension(True)
    db.load_extension(sqlite_vec.loadable_path())
    dims = vectors.shape[1]
    db.execute(f"CREATE VIRTUAL TABLE vec_chunks USING vec0(embedding float[{dims}] distance_metric=cosine)")
    t0 = time.perf_counter()
    with db:
        db.executemany("INSERT INTO vec_chunks(rowid, embedding) VALUES (?, ?)",
                       ((int(i), v.tobytes()) for i, v in zip(ids, vectors, strict=True)))
    version = db.execute("SELECT vec_version()").fetchone()[0]
    print(f"sqlite-vec {version} (SQLite {apsw.sqlite_lib_version()} through apsw): {len(ids)} vectors inserted in "
          f"{time.perf_counter() - t0:.1f} s")
    return db


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--chunks", type=int, default=100_000)
    parser.add_argument("--dims", type=int, default=384)
    parser.add_argument("--queries", type=int, default=40)
    parser.add_argument("--with-path", default=None, help="a folder with apsw and sqlite_vec (pip install --target)")
    args = parser.parse_args(argv)
    if args.with_path:
        sys.path.insert(0, args.with_path)

    with tempfile.TemporaryDirectory(prefix="qd-docs-bench-") as tmp:
        path = Path(tmp) / "documents.sqlite3"
        store = DocumentStore(path)
        t0 = time.perf_counter()
        words, ids, vectors = fill(store, args.chunks, args.dims)
        filled = time.perf_counter() - t0
        store.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        print(f"{args.chunks} chunks × {args.dims} dims in {args.chunks // CHUNKS_PER_FILE} files: stored in "
              f"{filled:.1f} s ({args.chunks / filled:.0f} chunks/s with FTS5 and vectors); database "
              f"{path.stat().st_size / 2**20:.0f} MiB (size_on_disk's estimate {store.size_on_disk('bench') / 2**20:.0f} MiB); "
              f"the vectors in memory {vectors.nbytes / 2**20:.0f} MiB")
        vec_path = Path(tmp) / "vec.sqlite3"
        vec_db = sqlite_vec_connection(vec_path, ids, vectors)

        rng = random.Random(11)
        common, middle = words[:200], words[200:5000]
        queries = [" ".join([rng.choice(common), rng.choice(middle), rng.choice(middle)]) for _ in range(args.queries)]
        query_vectors = np.random.default_rng(3).standard_normal((args.queries, args.dims)).astype(np.float32)
        query_vectors /= np.linalg.norm(query_vectors, axis=1, keepdims=True)

        t0 = time.perf_counter()
        store.vector_search(["bench"], query_vectors[0])
        first_load = (time.perf_counter() - t0) * 1000
        timings: dict[str, list[float]] = {k: [] for k in ("text", "numpy", "both", "numpy cold", "sqlite-vec")}
        ratios: list[float] = []
        agree: list[float] = []
        for i, (query, vector) in enumerate(zip(queries, query_vectors, strict=True)):
            t0 = time.perf_counter()
            store.text_search(["bench"], query, 20)
            timings["text"].append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            numpy_hits = store.vector_search(["bench"], vector, 20)
            numpy_ms = (time.perf_counter() - t0) * 1000
            timings["numpy"].append(numpy_ms)
            t0 = time.perf_counter()
            store.text_search(["bench"], query, 20)
            store.vector_search(["bench"], vector, 20)
            timings["both"].append((time.perf_counter() - t0) * 1000)
            if vec_db is not None:
                t0 = time.perf_counter()
                rows = vec_db.execute("SELECT rowid, distance FROM vec_chunks WHERE embedding MATCH ? AND k = 20",
                                      (vector.tobytes(),)).fetchall()
                vec_ms = (time.perf_counter() - t0) * 1000
                timings["sqlite-vec"].append(vec_ms)
                ratios.append(numpy_ms / vec_ms)
                agree.append(len({h.chunk_id for h in numpy_hits} & {int(r[0]) for r in rows}) / 20)
            if i % 4 == 0:  # a changed file (its chunks and their vectors replaced): the next search reads them again
                store.store_file("bench", f"/bench/file{i:05d}.pdf", size=2, mtime_ns=2, sha256=None,
                                 chunks=[Chunk(query, 0)], pages=1)
                t0 = time.perf_counter()
                store.vector_search(["bench"], vector, 20)
                timings["numpy cold"].append((time.perf_counter() - t0) * 1000)

        print(f"query latency over {args.queries} queries (top 20), this machine:")
        print(line("text (FTS5, bm25)", timings["text"]))
        print(line("vectors (numpy)", timings["numpy"]))
        print(line("both (text + numpy)", timings["both"]))
        print(line("vectors after a write", timings["numpy cold"]) + f"   (first search: {first_load:.0f} ms)")
        if vec_db is not None:
            print(line("vectors (sqlite-vec)", timings["sqlite-vec"]))
            print(f"  paired ratio numpy / sqlite-vec: median {statistics.median(ratios):.3f} "
                  f"(p10 {percentile(ratios, 0.1):.3f}, p90 {percentile(ratios, 0.9):.3f}); the same top 20: "
                  f"{statistics.mean(agree) * 100:.0f}%")
            print(f"  sqlite-vec's table {vec_path.stat().st_size / 2**20:.0f} MiB on disk")
            vec_db.close()
        store.close()


if __name__ == "__main__":
    main()
