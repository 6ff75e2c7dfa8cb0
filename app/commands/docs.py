"""``quantdesk docs add | ls | index | search | rm``: the user's document collections (app/documents), the CLI twin of
the Documents page. ``add`` makes a collection of a folder (watched: the app picks up new, changed and deleted
files) or of files added by hand; ``index`` indexes it now, in this process (progress on stderr, the report at the
end); ``search`` finds passages by their words and, where the collection is embedded, by their meaning, as
``retrieve.search`` ranks them (the two rankings merged, the library's reranker where it has one). Nothing leaves
the machine."""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.commands import add_command

if TYPE_CHECKING:
    from app.documents.indexer import IndexProgress
    from app.documents.store import Collection, DocumentStore


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers, "docs",
        description="Your documents, indexed on this machine for search and for chats that cite them: a folder "
                    "(watched for new, changed and deleted files) or files added by hand; PDF, text, Markdown, "
                    "HTML, DOCX and source code.")
    sub = parser.add_subparsers(dest="docs_command", metavar="ACTION", required=True,
                                help="add, ls, index, search or rm")

    add = sub.add_parser("add", help="make a collection of a folder or files, or add files to one",
                         description="Make collection NAME of PATH: one folder is a watched folder; files (or "
                                     "several folders) are added by hand. Adding to a collection that exists adds "
                                     "the paths to it. Index it with `quantdesk docs index NAME`.")
    add.add_argument("name", metavar="NAME", help="the collection's name")
    add.add_argument("paths", metavar="PATH", nargs="+", help="a folder, or files and folders")
    add.add_argument("--embed-model", metavar="MODEL",
                     help="an embedding model (a GGUF file, or a library model by name or id) for search by meaning; "
                          "changing it embeds every passage again")
    add.set_defaults(func=run_add)

    ls = sub.add_parser("ls", help="list the collections", description="List the collections with their files, "
                                                                       "passages, embedding model and size.")
    ls.add_argument("--json", action="store_true", help="print the collections as JSON")
    ls.set_defaults(func=run_ls)

    index = sub.add_parser("index", help="index a collection now (only what is new or changed)",
                           description="Index collection NAME now: new and changed files read, deleted ones "
                                       "removed, passages embedded. Progress on stderr, the report at the end.")
    index.add_argument("name", metavar="NAME")
    index.add_argument("--json", action="store_true", help="print the result and the report as JSON")
    index.set_defaults(func=run_index)

    search = sub.add_parser("search", help="search a collection's passages",
                            description="The passages of NAME that best match QUERY: by its words (full-text) and, "
                                        "where the collection is embedded, by its meaning, merged.")
    search.add_argument("name", metavar="NAME", help="a collection, or several separated by commas")
    search.add_argument("query", metavar="QUERY")
    search.add_argument("-k", type=int, default=5, metavar="N", help="how many passages (default 5)")
    search.add_argument("--json", action="store_true", help="print the passages as JSON")
    search.set_defaults(func=run_search)

    rm = sub.add_parser("rm", help="remove a collection (its index only; your files stay)",
                        description="Remove collection NAME from the index. The files themselves are not touched.")
    rm.add_argument("name", metavar="NAME")
    rm.set_defaults(func=run_rm)


def _store() -> DocumentStore:
    from app.documents.store import DocumentStore

    return DocumentStore()


def embedding_model_path(text: str) -> str:
    """``--embed-model``'s model: a GGUF file, or a library model as `quantdesk ls` names it, its repo or a unique
    prefix (app/hub/resolve.local_model); it must declare a pooling."""
    from app.documents.embedder import embedding_models, is_embedding_model
    from app.documents.passages import DocumentsError
    from app.hub.resolve import local_model

    found = str(Path(local_model(text)).expanduser().resolve())
    if not Path(found).exists():
        raise DocumentsError(f"{text} does not exist", "name a GGUF file that is there, or a library model "
                                                      "(quantdesk ls)")
    if not is_embedding_model(found):
        offered = ", ".join(entry.name for entry in embedding_models()) or "none yet"
        raise DocumentsError(f"{Path(found).name} is not an embedding model (its GGUF declares no pooling)",
                             f"the library's embedding models: {offered}")
    return found


def run_add(args: argparse.Namespace) -> int:
    from app.documents.passages import DocumentsError

    paths = [Path(p).expanduser() for p in args.paths]
    for path in paths:
        if not path.exists():
            raise DocumentsError(f"{path} does not exist", "name a file or folder that is there")
    model = embedding_model_path(args.embed_model) if args.embed_model else None
    store = _store()
    try:
        existing = {c.name for c in store.collections()}
        if args.name in existing:
            store.add_paths(args.name, paths)
            if model is not None:
                store.set_embed_model(args.name, model)
            made = store.collection(args.name)
            print(f"added {len(paths)} path{'s' if len(paths) != 1 else ''} to “{made.name}”")
        else:
            watched = len(paths) == 1 and paths[0].is_dir()
            made = store.create_collection(args.name, folder=paths[0] if watched else None, embed_model=model)
            if not watched:
                store.add_paths(made.name, paths)
            what = f"the folder {made.folder} (watched)" if watched else \
                f"{len(paths)} path{'s' if len(paths) != 1 else ''} added by hand"
            print(f"made the collection “{made.name}” of {what}")
        if model is not None:
            print(f"embedding model: {Path(model).name}")
        print(f"index it with: quantdesk docs index {_quoted(made.name)}", file=sys.stderr)
    finally:
        store.close()
    return 0


def _quoted(name: str) -> str:
    return name if name.replace("-", "").replace("_", "").isalnum() else json.dumps(name)


def _row(store: DocumentStore, c: Collection) -> dict[str, Any]:
    return {"name": c.name, "folder": c.folder, "paths": list(c.sources), "embed_model": c.embed_model,
            "paused": c.paused, "files": c.files, "indexed": c.indexed, "failed": c.failed, "chunks": c.chunks,
            "embedded": c.embedded, "size_bytes": store.size_on_disk(c.name)}


def run_ls(args: argparse.Namespace) -> int:
    from app.documents.extract import size_words

    store = _store()
    try:
        rows = [_row(store, c) for c in store.collections()]
    finally:
        store.close()
    if args.json:
        print(json.dumps(rows, indent=1, ensure_ascii=False))
        return 0
    if not rows:
        print("no collections yet; make one with: quantdesk docs add NAME FOLDER")
    for r in rows:
        where = r["folder"] or ", ".join(r["paths"]) or "no files yet"
        model = Path(r["embed_model"]).name if r["embed_model"] else "no embedding model"
        state = "  paused" if r["paused"] else ""
        failed = f", {r['failed']} failed" if r["failed"] else ""
        print(f"{r['name']}\t{r['indexed']}/{r['files']} files{failed}\t{r['chunks']} passages, {r['embedded']} "
              f"embedded\t{model}\t{size_words(r['size_bytes'])}\t{where}{state}")
    return 0


def _progress_line(p: IndexProgress) -> str:
    from app.documents.extract import size_words

    if p.state == "scanning":
        return f"{p.collection}: scanning… {p.files_total} files found"
    if p.state == "embedding":
        line = f"{p.collection}: embedding {p.embedded}/{p.to_embed} passages"
    else:
        line = (f"{p.collection}: {p.state} {p.files_done}/{p.files_total} files, "
                f"{size_words(p.bytes_done)} of {size_words(p.bytes_total)}")
        if p.failed:
            line += f", {p.failed} failed"
    if p.eta_s is not None and p.state in ("indexing", "embedding"):
        line += f", about {_duration(p.eta_s)} left"
    if p.current:
        line += f" — {Path(p.current).name}"
    return line


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{max(1, round(seconds))} s"
    if seconds < 3600:
        return f"{round(seconds / 60)} min"
    return f"{seconds / 3600:.1f} h"


class _Printer:
    """Progress on stderr: one line rewritten on a terminal, else a line when the state changes or every 2 s."""

    def __init__(self, quiet: bool) -> None:
        self.tty = sys.stderr.isatty()
        self.quiet = quiet
        self.last_state = ""
        self.last_time = 0.0

    def __call__(self, progress: IndexProgress) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        line = _progress_line(progress)
        if self.tty:
            print(f"\r\x1b[2K{line[:200]}", end="", file=sys.stderr, flush=True)
        elif progress.state != self.last_state or now - self.last_time >= 2.0:
            print(line, file=sys.stderr, flush=True)
            self.last_time = now
        self.last_state = progress.state

    def end(self) -> None:
        if self.tty and not self.quiet:
            print(file=sys.stderr)


def run_index(args: argparse.Namespace) -> int:
    from app import settings as app_settings
    from app.documents.embedder import pool_embedder
    from app.documents.indexer import index_collection
    from app.documents.passages import DocumentsError

    settings = app_settings.load()
    store = _store()
    pool = None
    printer = _Printer(quiet=bool(args.json))
    try:
        collection = store.collection(args.name)
        embedder = None
        problem = ""
        if collection.embed_model:
            try:
                from app.commands.chat_docs import documents_pool

                pool = documents_pool()
                embedder = pool_embedder(pool, collection.embed_model)
            except DocumentsError as exc:
                problem = str(exc)
        if collection.paused:
            print(f"{collection.name} is paused in the app; indexing it now anyway", file=sys.stderr)
        try:
            result = index_collection(store, collection.name, embedder, on_progress=printer,
                                      max_bytes=settings.documents_max_file_mb * 2**20)
        except KeyboardInterrupt:
            printer.end()
            print(f"stopped; `quantdesk docs index {_quoted(collection.name)}` goes on from here", file=sys.stderr)
            return 130
        printer.end()
        report = store.report(collection.name)
    finally:
        if pool is not None:
            pool.close()
        store.close()
    problem = result.problem or problem
    if args.json:
        out = {"collection": result.collection, "state": result.state, "files": result.files_total,
               "added": result.added, "changed": result.changed, "unchanged": result.unchanged,
               "removed": result.removed, "failed": result.failed, "pages": result.pages, "chunks": result.chunks,
               "embedded": result.embedded, "size_bytes": result.size_bytes, "problem": problem,
               "report": [{"path": line.path, "reason": line.reason} for line in report]}
        print(json.dumps(out, indent=1, ensure_ascii=False))
        return 0
    from app.documents.extract import size_words

    print(f"{result.collection}: {result.files_total} files ({result.added} new, {result.changed} changed, "
          f"{result.unchanged} unchanged, {result.removed} removed), {result.chunks} passages stored, "
          f"{result.embedded} embedded; {size_words(result.size_bytes)} on disk")
    if problem:
        print(f"note: {problem}")
    if report:
        print(f"{len(report)} {'files' if len(report) != 1 else 'file'} not indexed:")
        for line in report:
            print(f"  {line.path}: {line.reason}")
    return 0


def run_search(args: argparse.Namespace) -> int:
    from app.commands.chat_docs import collections_of, documents_pool
    from app.documents.passages import DocumentsError
    from app.documents.retrieve import question_engines, search

    names = collections_of(args.name)
    if args.k < 1:
        raise DocumentsError("-k takes a whole number of passages from 1 up")
    store = _store()
    pool = documents_pool()  # no engine starts until the embedding model or the reranker is asked
    try:
        found = [store.collection(name) for name in names]
        embedder, reranker = question_engines(pool, found)
        result = search(store, [c.name for c in found], args.query, embedder=embedder, reranker=reranker,
                        limit=args.k)
    finally:
        pool.close()
        store.close()
    notes = list(result.notes)
    if args.json:
        print(json.dumps({"passages": [{"chunk_id": p.chunk_id, "collection": p.collection, "path": p.path,
                                        "page": p.page, "heading": p.heading, "line": p.line, "where": p.where,
                                        "score": score, "text": p.text} for p, score in result.passages],
                          "notes": notes}, indent=1, ensure_ascii=False))
        return 0
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    if not result.passages:
        print("no passage matches")
    for n, (p, _score) in enumerate(result.passages, 1):
        text = " ".join(p.text.split())
        print(f"[{n}] {p.where} ({p.path})\n    {text[:300]}{'…' if len(text) > 300 else ''}")
    return 0


def run_rm(args: argparse.Namespace) -> int:
    store = _store()
    try:
        found = store.collection(args.name)
        store.remove_collection(found.name)
    finally:
        store.close()
    print(f"removed the collection “{found.name}” (its files are where they were)")
    return 0
