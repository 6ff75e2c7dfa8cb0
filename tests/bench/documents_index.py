"""Benchmark: indexing documents (issue 28). ``--files`` generated text PDFs of ``--pages`` pages each (fpdf2,
~250 words a page, tests/fixtures/documents.py), in a folder in memory:

- extraction: pypdf's text page by page and the chunking after it (``extract.sections`` → ``chunk.chunks``), in
  this process, pages/s (and chunks, MiB of PDF);
- embedding: every chunk's text through the engine host (``embedder.pool_embedder``, the one ``ModelPool``), pages/s
  and chunks/s, the model's load apart; with the tiny test model (``build_embedding_model``: 256 wide, 2 layers)
  and, with ``--real``, a real-shaped one (SmolLM2-135M's shape, 576 wide, 30 layers, mean pooling);
- the whole indexing, ``indexer.index_collection`` into a fresh store, in child processes, each with its peak memory
  (VmHWM): scan, extract, chunk and store without an embedding model on a tenth of the files and on all of them
  (bounded memory: the two peaks are close), then all of them with the tiny embedding model (the engine host's peak
  apart); beside a child that only imports what the indexing imports. Without ``app.documents.indexer`` the
  children extract and chunk only, said in the output.

Rounds alternate, medians printed side by side (a shared machine is noisy: compare figures of one run).

    python -m tests.bench.documents_index [--files 500] [--pages 3] [--rounds 1] [--real] [--threads 2]
                                          [--no-embedding] [--no-index-embedding]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from app.documents.chunk import chunks
from app.documents.extract import sections
from tests.fixtures.documents import memory_folder, write_pdf_corpus

MIB = 2**20


def extract_all(files: list[Path]) -> tuple[int, int]:
    """(pages, chunks) of every file, extracted and chunked (a file's few pages held at once)."""
    pages = count = 0
    for path in files:
        found = list(sections(path))
        pages += len({s.page for s in found})
        count += sum(1 for _ in chunks(found))
    return pages, count


def have(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


def embedding_model(real: bool) -> Path:
    from tests.fixtures.models import SPECS, TINY, build_embedding_model, build_model_set

    spec = SPECS["smollm2-135m-shape"] if real else TINY
    return build_embedding_model(build_model_set(spec, quants=(), mlx=False))


# --- the child: one indexing (or one import) measured from inside -------------------------------------------------

def peak_rss(pid: int | str = "self") -> int:
    """A process's peak resident memory, VmHWM (Linux). Not ru_maxrss: Linux carries the parent's peak over an
    exec into the child's, so a child of this (large) parent would report the parent's memory."""
    status = Path(f"/proc/{pid}/status").read_text()
    return next(int(line.split()[1]) * 1024 for line in status.splitlines() if line.startswith("VmHWM:"))


def child(mode: str, folder: str, model: str, threads: int) -> None:
    """``import``: only what the indexing imports; ``store``: index_collection without an embedding model (scan,
    extract, chunk, store); ``index``: with the tiny embedding model through a pool; ``extract``: extraction and
    chunking alone (before the indexer landed). Prints one JSON line."""
    import psutil

    import app.documents.chunk  # noqa: F401 - what the indexing imports, for the import-only baseline
    import app.documents.extract  # noqa: F401
    import app.engine.pool  # noqa: F401

    out: dict[str, float | int | str] = {}
    start = time.perf_counter()
    if mode in ("store", "index"):
        from app.datatypes import LoadSettings
        from app.documents.embedder import pool_embedder
        from app.documents.indexer import index_collection
        from app.documents.store import DocumentStore
        from app.engine.pool import ModelPool

        with tempfile.TemporaryDirectory() as tmp:
            store = DocumentStore(Path(tmp) / "documents.sqlite3")
            pool = ModelPool()
            try:
                embedder = None
                if mode == "index":
                    embedder = pool_embedder(pool, model, settings=LoadSettings(n_ctx=2048, threads=threads))
                store.create_collection("bench", folder=Path(folder), embed_model=model if embedder else None)
                progress = index_collection(store, "bench", embedder)
                collection = store.collection("bench")
                out.update(state=progress.state, pages=progress.pages, chunks=collection.chunks,
                           embedded=collection.embedded, failed=collection.failed, files=collection.files)
                engines = [peak_rss(p.pid) for p in psutil.Process().children(recursive=True) if p.is_running()]
                out["engine_peak"] = max(engines, default=0)
            finally:
                pool.close()
                store.close()
    elif mode == "extract":
        pages, count = extract_all(sorted(Path(folder).glob("*.pdf")))
        out.update(pages=pages, chunks=count)
    out["seconds"] = time.perf_counter() - start
    out["peak"] = peak_rss()
    print(json.dumps(out))


def run_child(mode: str, folder: Path, model: Path, threads: int) -> dict[str, float]:
    result = subprocess.run([sys.executable, "-m", "tests.bench.documents_index", "--child", mode, str(folder),
                             str(model), str(threads)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise SystemExit(f"the {mode} child failed ({result.returncode}):\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


# --- the parent ---------------------------------------------------------------------------------------------------

def embed_rate(model: Path, texts: list[str], threads: int) -> dict[str, float]:
    from app.datatypes import LoadSettings
    from app.documents.embedder import pool_embedder
    from app.engine.pool import ModelPool

    pool = ModelPool()
    try:
        embedder = pool_embedder(pool, str(model), settings=LoadSettings(n_ctx=2048, threads=threads))
        start = time.perf_counter()
        embedder.embed(texts[:1])  # the load (and a first batch of one)
        load = time.perf_counter() - start
        start = time.perf_counter()
        vectors = embedder.embed(texts)
        took = time.perf_counter() - start
    finally:
        pool.close()
    assert len(vectors) == len(texts)
    return {"load": load, "seconds": took, "chunks/s": len(texts) / took, "dims": len(vectors[0])}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--files", type=int, default=500)
    parser.add_argument("--pages", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--threads", type=int, default=min(4, os.cpu_count() or 1))
    parser.add_argument("--real", action="store_true", help="embed with a real-shaped model too (SmolLM2-135M's)")
    parser.add_argument("--real-chunks", type=int, default=200, help="chunks the real-shaped model embeds")
    parser.add_argument("--no-index-embedding", action="store_true",
                        help="leave out the child that indexes with embeddings (the longest part)")
    parser.add_argument("--no-embedding", action="store_true", help="leave out the embedding-alone figures")
    parser.add_argument("--child", nargs=4, metavar=("MODE", "FOLDER", "MODEL", "THREADS"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        mode, folder, model, threads = args.child
        child(mode, folder, model, int(threads))
        return

    models = {"tiny": embedding_model(False)}
    if args.real:
        models["smollm2-135m-shape"] = embedding_model(True)
    with memory_folder("quantdesk-bench-") as root:
        start = time.perf_counter()
        files = write_pdf_corpus(root / "all", args.files, pages=args.pages)
        written = time.perf_counter() - start
        tenth = root / "tenth"
        tenth.mkdir()
        for path in files[: max(1, args.files // 10)]:
            os.link(path, tenth / path.name)
        size = sum(p.stat().st_size for p in files)
        print(f"{args.files} PDFs of {args.pages} pages ({args.files * args.pages} pages, {size / MIB:.1f} MiB), "
              f"written by fpdf2 in {written:.1f} s; {args.threads} engine threads, {args.rounds} rounds")

        # extraction and chunking, in this process
        times, counts = [], (0, 0)
        for _ in range(args.rounds):
            start = time.perf_counter()
            counts = extract_all(files)
            times.append(time.perf_counter() - start)
        pages, count = counts
        took = statistics.median(times)
        print(f"\nextraction + chunking  {pages / took:8.0f} pages/s  {count / took:8.0f} chunks/s  "
              f"{size / MIB / took:6.1f} MiB/s   ({pages} pages, {count} chunks, median {took:.2f} s)")

        # embedding alone, of the chunks' texts (a real-shaped model: the first --real-chunks of them)
        texts = [c.text for path in files for c in chunks(sections(path))]
        if not have("app.documents.embedder"):
            print("(app.documents.embedder is not here yet: no embedding figures)")
            models.clear()
        if args.no_embedding:
            models.clear()
        for name, model in models.items():
            some = texts if name == "tiny" else texts[: args.real_chunks]
            rates = [embed_rate(model, some, args.threads) for _ in range(args.rounds)]
            best = {k: statistics.median(r[k] for r in rates) for k in rates[0]}
            per_page = count / pages
            print(f"embedding ({name})  {best['chunks/s'] / per_page:8.1f} pages/s  {best['chunks/s']:8.1f} chunks/s"
                  f"   ({len(some)} chunks of {statistics.mean(map(len, some)):.0f} characters, "
                  f"{int(best['dims'])} dims, load {best['load']:.1f} s, median {best['seconds']:.2f} s)")

        # the whole indexing, in children: their peak memory
        indexing = have("app.documents.indexer")
        tiny = embedding_model(False)
        if indexing:
            plan = [("store", tenth, "a tenth, no embedding"), ("store", root / "all", "all, no embedding"),
                    ("index", root / "all", "all, tiny embedding model")]
        else:
            print("\n(app.documents.indexer is not here yet: the children extract and chunk only, nothing stored)")
            plan = [("extract", tenth, "a tenth, extraction only"), ("extract", root / "all", "all, extraction only")]
        baseline = run_child("import", root / "all", tiny, args.threads)
        runs: dict[str, list[dict[str, float]]] = {label: [] for _, _, label in plan}
        for _ in range(args.rounds):
            for mode, folder, label in plan:
                if mode == "index" and args.no_index_embedding:
                    continue
                runs[label].append(run_child(mode, folder, tiny, args.threads))
        print(f"\n{'child process':<28} {'files':>6} {'pages':>6} {'chunks':>7} {'s':>8} {'pages/s':>8} "
              f"{'peak RSS':>9} {'engine peak':>12}")
        print(f"{'imports only':<28} {'':>6} {'':>6} {'':>7} {baseline['seconds']:8.2f} {'':>8} "
              f"{baseline['peak'] / MIB:7.0f} M")
        for (mode, folder, label) in plan:
            row = runs[label]
            if not row:
                continue
            seconds = statistics.median(r["seconds"] for r in row)
            last = row[-1]
            engine = max(r.get("engine_peak", 0) for r in row)
            files_n = int(last.get("files", len(list(folder.glob("*.pdf")))))
            print(f"{label:<28} {files_n:>6} {int(last['pages']):>6} {int(last['chunks']):>7} {seconds:8.2f} "
                  f"{last['pages'] / seconds:8.1f} {max(r['peak'] for r in row) / MIB:7.0f} M "
                  f"{(f'{engine / MIB:10.0f} M' if engine else ''):>12}")
            if mode != "extract" and (last.get("failed") or last.get("state") != "done"):
                print(f"  !! {last}")
        labels = [label for _, _, label in plan[:2]]
        if all(runs[label] for label in labels):
            growth = (max(r["peak"] for r in runs[labels[1]]) - max(r["peak"] for r in runs[labels[0]])) / MIB
            print(f"peak memory from a tenth of the files to all of them: {growth:+.1f} MiB")

if __name__ == "__main__":
    main()
