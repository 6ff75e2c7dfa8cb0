"""CLI: ``quantdesk search | show | pull | ls | update | rm | import | login``."""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import TYPE_CHECKING

from app.commands import add_command

if TYPE_CHECKING:
    from app.hub.download import Progress


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(subparsers, "search")
    p.add_argument("query", help="text to find in repo ids (owner/name), e.g. llama-3")
    p.add_argument("--format", choices=("gguf", "mlx", "exl2", "exl3"), help="only repos tagged with this format")
    p.add_argument("--sort", choices=("downloads", "likes", "recent"), default="downloads",
                   help="order of the results (default: downloads)")
    p.add_argument("--limit", type=int, default=20, help="results per page (default 20)")
    p.add_argument("--page", type=int, default=1, help="page of --limit results (1 = first)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.set_defaults(func=_search)

    p = add_command(subparsers, "show")
    p.add_argument("repo", help="Hub repo id, owner/name")
    p.add_argument("--revision", help="branch, tag or commit to show (default: main)")
    p.add_argument("--json", action="store_true", help="print the details as JSON")
    p.set_defaults(func=_show)

    p = add_command(subparsers, "pull",
                    description="Download a model from the Hub into the library, checking each file "
                                "against the Hub's size and hash. An interrupted download is kept: run "
                                "the same command again to resume it.")
    p.add_argument("repo", help="Hub repo id, owner/name")
    which = p.add_mutually_exclusive_group()
    which.add_argument("--quant", help="GGUF quant to fetch, e.g. Q4_K_M (all its shards), or an EXL2/EXL3 bit "
                                       "rate, e.g. 4.0bpw or a branch name such as 6_5 (the whole branch holding it)")
    which.add_argument("--file", action="append", help="fetch this file of the repo only (repeatable)")
    p.add_argument("--revision", default="main",
                   help="branch, tag or commit to download (default: main; an EXL2/EXL3 --quant picks its own branch)")
    projector = p.add_mutually_exclusive_group()
    projector.add_argument("--mmproj", metavar="FILE",
                           help="the vision projector to fetch with a GGUF (default: the F16 one beside it, checked "
                                "against the model before downloading)")
    projector.add_argument("--no-mmproj", action="store_true", help="fetch a vision model's GGUF without its projector")
    p.add_argument("--json", action="store_true", help="print the result as JSON, progress as JSON lines on stderr")
    p.set_defaults(func=_pull)

    p = add_command(subparsers, "ls",
                    description="List the local model library, with what the last update check found "
                                "for downloaded models (the app checks at most daily).")
    p.add_argument("--check-updates", action="store_true",
                   help="ask the Hub now whether downloaded models changed (one request per repo)")
    p.add_argument("--json", action="store_true", help="print the models and disk use as JSON")
    p.set_defaults(func=_ls)

    p = add_command(subparsers, "update",
                    description="Check the model's repo now and download only the files that changed, "
                                "verified; the old files keep working until every new one is complete.")
    p.add_argument("model", help="an id as `quantdesk ls` prints it, a repo id (with :QUANT where the library holds "
                                 "several), a unique prefix or a path")
    p.add_argument("--json", action="store_true", help="print the result as JSON, progress as JSON lines on stderr")
    p.set_defaults(func=_update)

    p = add_command(subparsers, "rm")
    p.add_argument("model", help="an id as `quantdesk ls` prints it, a repo id (with :QUANT where the library holds "
                                 "several), a unique prefix or a path")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_rm)

    p = add_command(subparsers, "import")
    p.add_argument("path", help="a .gguf file, a model folder, or (with --watch) a folder of models")
    p.add_argument("--link", action="store_true", help="use it where it is instead of copying it in")
    p.add_argument("--watch", action="store_true",
                   help="remember the folder: models added to it later are listed too (implies --link)")
    p.add_argument("--json", action="store_true", help="print the added models as JSON")
    p.set_defaults(func=_import)

    p = add_command(subparsers, "login",
                    description="Store a Hugging Face token (for gated and private repos) where "
                                "huggingface_hub's login keeps it. HF_TOKEN in the environment, when set, "
                                "is used instead.")
    p.add_argument("--token", help="the token (read from standard input when left out)")
    p.set_defaults(func=_login)


def _size(n: int | None) -> str:
    if n is None:
        return "?"
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.1f} {unit}"
    return f"{n} B"


def _search(args: argparse.Namespace) -> int:
    from app.hub.search import search_models

    results = search_models(args.query, fmt=args.format, sort=args.sort, limit=args.limit,
                            offset=(max(args.page, 1) - 1) * args.limit)
    if args.json:
        print(json.dumps([r.to_json() for r in results], indent=1))
        return 0
    if not results:
        print("no models found")
    for r in results:
        gated = "  gated" if r.gated else ""
        print(f"{r.repo_id:<60} {r.format:<12} ↓{r.downloads or 0:<9} ♥{r.likes or 0:<6}{gated}")
    return 0


def _show(args: argparse.Namespace) -> int:
    from app.hub.listing import RepoListing

    listing = RepoListing.fetch(args.repo, args.revision)
    if args.json:
        print(json.dumps(listing.to_json(), indent=1))
        return 0
    print(f"{listing.repo_id} @ {listing.commit[:12]}  format {listing.format}  licence {listing.license or '?'}"
          f"{'  gated' if listing.gated else ''}  updated {listing.last_modified or '?'}")
    if listing.summary():
        print(listing.summary())
    if len(listing.branches) > 1:
        print("branches: " + ", ".join(b.name for b in listing.branches))
    quants = listing.quants()
    for group in quants:
        where = f"branch {group.revision}: " if group.revision else ""
        sees = f"  · sees images with {' or '.join(group.projectors)}" if group.projectors else ""
        print(f"  {group.quant:<10} {_size(group.size):>10}  {where}{', '.join(group.files)}{sees}")
    if not quants:
        for f in listing.files:
            print(f"  {_size(f.size):>10}  {f.path}")
    return 0


class _Bar:
    """A one-line terminal progress bar (or JSON lines with --json)."""

    def __init__(self, as_json: bool) -> None:
        self.as_json = as_json
        self._last = 0.0

    def __call__(self, p: Progress) -> None:
        now = time.monotonic()
        if p.state == "downloading" and now - self._last < 0.2:
            return
        self._last = now
        if self.as_json:
            print(json.dumps({"state": p.state, "file": p.file, "done": p.done, "total": p.total,
                              "speed": round(p.speed), "eta": p.eta, "message": p.message}), file=sys.stderr,
                  flush=True)
            return
        if p.state in ("failed", "paused"):  # the command prints the sentence itself
            sys.stderr.write("\n")
            sys.stderr.flush()
            return
        if p.state == "retrying" and p.message:
            sys.stderr.write(f"\r\x1b[K{p.state}: {p.message}\n")
        width = 30
        filled = int(width * p.fraction)
        eta = f"{int(p.eta) // 60}:{int(p.eta) % 60:02d}" if p.eta is not None else "--:--"
        sys.stderr.write(f"\r\x1b[K{p.state:<11} [{'#' * filled}{'.' * (width - filled)}] {p.fraction:6.1%} "
                         f"{_size(p.done)}/{_size(p.total)} {_size(int(p.speed))}/s ETA {eta} {p.file[-40:]}")
        if p.state in ("done",):
            sys.stderr.write("\n")
        sys.stderr.flush()


def _pull(args: argparse.Namespace) -> int:
    from app.hub.download import Downloader, partial_downloads
    from app.hub.plan import DownloadRequest

    request = DownloadRequest(repo_id=args.repo, revision=args.revision, quant=args.quant,
                              files=tuple(args.file or ()), projector="" if args.no_mmproj else args.mmproj)
    runner = Downloader(request, _Bar(args.json))
    try:
        result = runner.run()
    except KeyboardInterrupt:
        kept = next((p for p in partial_downloads() if p["staging"] == str(runner.staging)), None)
        have = f" ({_size(kept['have'])} of {_size(kept['total'])} kept)" if kept else ""
        print(f"\nquantdesk: interrupted; the partial download is kept in {runner.staging}{have}. "
              "Run the same command again to resume.", file=sys.stderr)
        return 130
    if args.json:
        print(json.dumps({"repo_id": result.repo_id, "commit": result.commit, "path": str(result.path),
                          "files": [f.path for f in result.files], "resumed_bytes": result.resumed_bytes,
                          "projector": result.projector or None, "other_projectors": list(result.other_projectors)}))
    else:
        print(f"installed {result.repo_id} @ {result.commit[:12]} -> {result.path}")
        if result.projector:
            others = f"; also in the repo: {', '.join(result.other_projectors)} (--mmproj FILE)" \
                if result.other_projectors else ""
            print(f"sees images: with the vision projector {result.projector}{others}")
    return 0


def _ls(args: argparse.Namespace) -> int:
    from app.hub import updates
    from app.hub.library import Library

    library = Library()
    entries = library.entries()
    failures: list[str] = []
    if args.check_updates:
        report = updates.check_updates(library, force=True)
        statuses, failures = report.statuses, report.failures
    else:
        statuses = updates.known_updates(library, entries) if updates.enabled() else {}
    if args.json:
        print(json.dumps({"models": [e.to_json() for e in entries], "disk": library.disk_usage(),
                          "updates": {k: s.to_json() for k, s in statuses.items()}, "update_failures": failures},
                         indent=1))
        return 1 if failures else 0
    if not entries:
        print("the library is empty (quantdesk pull REPO, or quantdesk import PATH)")
    for e in entries:
        origin = f"{e.repo_id}@{(e.commit_hash or '')[:8]}" if e.repo_id else e.source
        sees = f"  sees images ({e.projector})" if e.projector else ""
        pooling = e.pooling
        sees += ("  reranker (rank pooling)" if pooling == "rank" else
                 f"  embedding model ({pooling} pooling)" if pooling else "")
        print(f"{e.id:<50} {e.format:<11} {e.quant or '-':<9} {_size(e.size):>9} {e.architecture or '-':<10} "
              f"{origin}  {e.path}{sees}")
        status = statuses.get(e.id)
        if status is not None and (status.available or args.check_updates):
            print(f"    {status.headline}" + (f" (quantdesk update {e.id})" if status.available else ""))
            for line in status.details():
                print(f"      {line}")
    for failure in failures:
        print(f"quantdesk: could not check for updates: {failure}", file=sys.stderr)
    usage = library.disk_usage()
    print(f"{usage['models']} models; {_size(usage['owned_bytes'])} in {usage['models_dir']}, "
          f"{_size(usage['referenced_bytes'])} referenced; {_size(usage['free_bytes'])} free")
    return 1 if failures else 0


def _update(args: argparse.Namespace) -> int:
    from app.hub import updates
    from app.hub.download import Downloader
    from app.hub.library import Library

    entry = Library().find(args.model)
    if not updates.checkable(entry):
        from app.hub.errors import LibraryError

        raise LibraryError(f"{entry.name} was not downloaded from a branch of a Hub repo, so it has no updates.",
                           "only models pulled with `quantdesk pull` (not pinned to a commit) are updated")
    report = updates.check_updates(force=True, only=entry.id)
    if report.failures:
        from app.hub.errors import HubError

        raise HubError(f"Could not check {entry.name} for updates: {report.failures[0]}")
    status = report.statuses[entry.id]
    if not status.available:
        print(json.dumps({"id": entry.id, "updated": False, "commit": entry.commit_hash}) if args.json else
              f"{entry.id} is up to date" + "".join(f"\n  {line}" for line in status.details()))
        return 0
    result = Downloader(updates.update_request(entry, status), _Bar(args.json)).run()
    if args.json:
        print(json.dumps({"id": entry.id, "updated": True, "commit": result.commit, "reasons": status.reasons,
                          "fetched": [f.path for f in result.files]}))
    else:
        print(f"updated {entry.id} to {result.commit[:12]} ({', '.join(status.reasons)}); fetched "
              f"{', '.join(f.path for f in result.files) or 'nothing'}")
    return 0


def _rm(args: argparse.Namespace) -> int:
    from app.hub.library import Library

    entry, freed = Library().remove(args.model)
    if args.json:
        print(json.dumps({"removed": entry.id, "freed_bytes": freed, "owned": entry.owned}))
    elif entry.owned:
        print(f"removed {entry.id}; freed {_size(freed)}")
    else:
        print(f"forgot {entry.id}; its files at {entry.path} were left in place")
    return 0


def _import(args: argparse.Namespace) -> int:
    from app.hub.library import Library

    library = Library()
    entries = library.add_folder(args.path) if args.watch else library.import_path(args.path, copy=not args.link)
    if args.json:
        print(json.dumps([e.to_json() for e in entries], indent=1))
    for e in entries if not args.json else []:
        print(f"{'linked' if not e.owned else 'imported'} {e.id} ({e.format} {e.quant or ''}, {_size(e.size)}) "
              f"-> {e.path}")
    return 0


def _login(args: argparse.Namespace) -> int:
    from app.hub import config

    value = args.token
    if not value:
        if sys.stdin.isatty():
            import getpass

            value = getpass.getpass("Hugging Face token: ")
        else:
            value = sys.stdin.readline()
    if not value.strip():
        from app.hub.errors import HubError

        raise HubError("No token given.", "create one at https://huggingface.co/settings/tokens")
    path = config.save_token(value)
    print(f"token saved to {path} (where huggingface_hub keeps it)")
    return 0
