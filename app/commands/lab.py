"""``quantdesk bench``: compare quants and formats of one model on this machine, speed and quality side by side."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from app.lab.results import BenchResult, BenchSettings, VariantResult


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "bench", help="compare quants/formats of a model: speed, memory and quality side by side",
        description="Measure each model through the engine the chat uses: load time, prompt and generation "
                    "tok/s, time to first token, peak memory (median and range over --reps runs, interleaved), "
                    "and quality against the reference: perplexity on a bundled public-domain text, KL divergence "
                    "and top-1 agreement of next-token distributions. Results are saved for later comparison.")
    p.add_argument("models", nargs="*", metavar="MODEL", help=".gguf files or model folders (MLX, safetensors)")
    p.add_argument("--repo", metavar="REPO", help="also compare quants of this Hub repo, downloaded (verified) first")
    p.add_argument("--quant", action="append", default=[], metavar="Q",
                   help="with --repo: a quant to fetch and compare (repeatable), e.g. --quant Q4_K_M --quant Q8_0")
    p.add_argument("--reference", metavar="MODEL",
                   help="quality reference (default: the variant with the most bits per weight)")
    p.add_argument("--prompt-tokens", type=int, default=512, help="measured prompt length (default 512)")
    p.add_argument("--gen-tokens", type=int, default=128, help="tokens generated per run (default 128)")
    p.add_argument("--reps", type=int, default=3, help="measured runs per variant (default 3)")
    p.add_argument("--ppl-tokens", type=int, default=512, help="tokens of the text scored for perplexity (default 512)")
    p.add_argument("--no-quality", action="store_true", help="skip perplexity, KL divergence and top-1 agreement")
    p.add_argument("--threads", type=int, help="CPU threads (default: physical cores)")
    p.add_argument("--gpu-layers", type=int, default=-1, help="layers to offload to the GPU, -1 all (default), 0 none")
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true", help="print the whole result as JSON")
    fmt.add_argument("--csv", action="store_true", help="print one CSV row per variant")
    p.add_argument("--out", metavar="FILE", help="write the output to FILE instead of stdout")
    p.add_argument("--no-save", action="store_true", help="do not keep this result in the bench history")
    p.add_argument("--history", action="store_true", help="list saved results and exit")
    p.add_argument("--show", metavar="ID", help="print a saved result (as a table, --json or --csv)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from app.errors import QuantDeskError
    from app.lab.store import ResultStore

    store = ResultStore()
    if args.history:
        return _print_history(store)
    if args.show:
        return _emit(store.load(args.show), args)
    models = list(args.models) + _fetch_quants(args)
    if not models:
        raise QuantDeskError("name the models to compare", "e.g. quantdesk bench model-Q8_0.gguf model-Q4_K_M.gguf")
    from app.lab.runner import run_bench

    settings = BenchSettings(prompt_tokens=args.prompt_tokens, gen_tokens=args.gen_tokens, reps=args.reps,
                             ppl_tokens=args.ppl_tokens, quality=not args.no_quality, threads=args.threads,
                             gpu_layers=args.gpu_layers)
    try:
        settings.validate()
    except ValueError as exc:
        raise QuantDeskError(str(exc)) from None

    def progress(p) -> None:
        print(f"[{p.step}/{p.total}] {p.phase}: {p.message}", file=sys.stderr, flush=True)

    result = run_bench(models, settings, reference=args.reference, on_progress=progress)
    if not args.no_save:
        saved = store.save(result)
        print(f"saved as {result.id} ({saved})", file=sys.stderr)
    _emit(result, args)
    return 1 if all(v.error for v in result.variants) else 0


def _fetch_quants(args: argparse.Namespace) -> list[str]:
    """Download (or find already installed, verified) each --quant of --repo; their paths join the bench."""
    from app.errors import QuantDeskError

    if bool(args.repo) != bool(args.quant):
        raise QuantDeskError("--repo and --quant go together",
                             "e.g. --repo owner/Model-GGUF --quant Q4_K_M --quant Q8_0")
    if not args.repo:
        return []
    from app.hub.download import download
    from app.hub.listing import RepoListing
    from app.hub.plan import DownloadRequest

    listing = RepoListing.fetch(args.repo)  # listed once for every quant
    paths = []
    for quant in args.quant:
        print(f"fetching {args.repo} {quant}…", file=sys.stderr)
        paths.append(str(download(DownloadRequest(repo_id=args.repo, quant=quant), listing=listing).path))
    return paths


def _emit(result: BenchResult, args: argparse.Namespace) -> int:
    from app.lab import export

    if args.json or (args.out and not args.csv and Path(args.out).suffix.lower() == ".json"):
        text = export.to_json(result) + "\n"
    elif args.csv or (args.out and Path(args.out).suffix.lower() == ".csv"):
        text = export.to_csv(result)
    else:
        text = table(result)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _print_history(store) -> int:
    saved = store.history()
    if not saved:
        print("no saved bench results", file=sys.stderr)
        return 0
    for r in saved:
        print(f"{r.id}  {r.created_at}  reference {r.reference}  · {', '.join(r.variants)}")
    return 0


# --- the table ---------------------------------------------------------------------------------------


def _ranged(v: VariantResult, metric: str, scale: float = 1.0, digits: int = 0) -> str:
    spread = v.speed.get(metric)
    if spread is None:
        return "n/a"
    median, low, high = (x / scale for x in (spread.median, spread.low, spread.high))
    if spread.n == 1:
        return f"{median:.{digits}f}"
    return f"{median:.{digits}f} ({low:.{digits}f}-{high:.{digits}f})"


def _value(v: VariantResult, metric: str, fmt: str) -> str:
    value = getattr(v, metric)
    return "n/a" if value is None else format(value, fmt)


def table(result: BenchResult) -> str:
    header = ("variant", "backend", "quant", "bpw", "load ms", "prompt tok/s", "gen tok/s", "TTFT ms", "peak MiB",
              "PPL", "KL", "top-1")
    rows = []
    footnotes = []
    for v in result.variants:
        name = v.label + (" (ref)" if v.is_reference else "")
        if v.error:
            rows.append((name, v.backend or "-", v.quant, _bpw(v), *["failed"] * 8))
            footnotes.append(f"{v.label}: {v.error}")
            continue
        rows.append((name, v.backend, v.quant, _bpw(v), _ranged(v, "load_ms"), _ranged(v, "prompt_tps", digits=1),
                     _ranged(v, "decode_tps", digits=1), _ranged(v, "ttft_ms"),
                     _ranged(v, "peak_memory_bytes", scale=2**20), _value(v, "perplexity", ".2f"),
                     _value(v, "kl_mean", ".3g"),
                     "n/a" if v.top1_agreement is None else f"{v.top1_agreement:.1%}"))
        reasons = dict.fromkeys(v.unavailable.values())  # one line per distinct reason
        footnotes += [f"{v.label}: {why}" for why in reasons] + [f"{v.label}: {note}" for note in v.notes]
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    lines = ["  ".join(str(cell).ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
             for r in (header, *rows)]
    s = result.settings
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("")
    lines.append(f"medians (min-max) of {s.reps} run(s): prompt ≈{s.prompt_tokens} tokens, {s.gen_tokens} generated; "
                 f"PPL over {s.ppl_tokens} tokens; KL/top-1 against {result.reference}")
    lines += footnotes
    return "\n".join(lines) + "\n"


def _bpw(v: VariantResult) -> str:
    return "?" if v.bits_per_weight is None else f"{v.bits_per_weight:.2f}"
