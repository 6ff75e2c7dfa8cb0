"""``quantdesk bench``: compare quants and formats of one model on this machine, speed and quality side by side."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from app.commands import add_command
from app.lab.results import BenchResult, BenchSettings, VariantResult

if TYPE_CHECKING:
    from app.lab.runner import LabProgress
    from app.lab.store import ResultStore
    from app.lab.uploaders import Candidate


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(
        subparsers, "bench",
        description="Measure each model through the engine the chat uses: load time, prompt and generation "
                    "tok/s, time to first token, peak memory (median and range over --reps runs, interleaved), "
                    "and quality against the reference as llama-perplexity --kl-divergence measures it: the bundled "
                    "public-domain text in windows of --ctx tokens, the second half of each scored; mean KLD, its "
                    "percentiles, Δp, same top p and PPL(Q)/PPL(base), each ± its standard error. The reference's "
                    "likeliest tokens are kept in a file, reused by later runs. Results are saved for later "
                    "comparison.")
    p.add_argument("models", nargs="*", metavar="MODEL",
                   help="library models as `quantdesk ls` prints them (or OWNER/REPO, with :QUANT where the library "
                        "holds several, or a unique prefix), .gguf files or model folders (MLX, safetensors)")
    p.add_argument("--repo", action="append", default=[], metavar="REPO",
                   help="also compare quants of this Hub repo, fetched (verified) into the lab's cache first; repeat "
                        "it to set the same quant from several uploaders side by side")
    p.add_argument("--uploaders", metavar="BASE",
                   help="compare the --quant of every GGUF repo on the Hub that quantizes the base model BASE "
                        "(owner/name, as its model card's base_model names it), checked to have its architecture and "
                        "vocabulary, fetched into the lab's cache and ranked by mean KLD")
    p.add_argument("--pick", action="append", default=[], metavar="OWNER/REPO",
                   help="with --uploaders: only these of the repos found (repeatable; default: every one that fits)")
    p.add_argument("--list", action="store_true",
                   help="with --uploaders: list the repos found, their files and the check, and stop")
    p.add_argument("--quant", action="append", default=[], metavar="Q",
                   help="with --repo or --uploaders: a quant to fetch and compare (repeatable), e.g. --quant Q4_K_M")
    p.add_argument("--keep-downloads", action="store_true",
                   help="keep what --repo and --uploaders fetched in the lab's cache, where the next bench finds it "
                        "(default: removed after; a file the library already holds is used where it is)")
    p.add_argument("--reference", metavar="MODEL",
                   help="quality reference (default: the variant with the most bits per weight)")
    p.add_argument("--reference-file", metavar="FILE",
                   help="compare against a KL reference made earlier instead of a reference model: a file this "
                        "command saved (--save-reference), or one llama-perplexity --kl-divergence-base wrote")
    p.add_argument("--save-reference", metavar="FILE", help="also copy the KL reference used to FILE, to share it")
    p.add_argument("--card", metavar="FILE.md",
                   help="also write a quant card: FILE.md (Markdown, for a model repo or a bug report) and FILE.json")
    p.add_argument("--prompt-tokens", type=int, default=512, help="measured prompt length (default 512)")
    p.add_argument("--gen-tokens", type=int, default=128, help="tokens generated per run (default 128)")
    p.add_argument("--reps", type=int, default=3, help="measured runs per variant (default 3)")
    p.add_argument("--ctx", type=int, default=512,
                   help="quality: the window in tokens, the second half of each scored (llama-perplexity's -c; "
                        "default 512)")
    p.add_argument("--chunks", type=int, default=0,
                   help="quality: at most this many windows of the text (llama-perplexity's --chunks; default all)")
    p.add_argument("--corpus", metavar="SET|PATH|chats",
                   help="quality: the text to score: a bundled set (prose, the default; code: QuantDesk's own source; "
                        "conversations: chats with tool calls and thinking, rendered with the reference's chat "
                        "template; german), a text file, every text file in a folder (./code for a folder named like "
                        "a set), or 'chats' (your chats, rendered with the reference's chat template)")
    p.add_argument("--no-quality", action="store_true", help="skip the quality pass (perplexity, KL divergence)")
    p.add_argument("--no-speed", action="store_true", help="skip the speed runs (quality only)")
    p.add_argument("--kv-types", metavar="T,T", default="",
                   help="a sweep: every GGUF variant once per KV-cache type, e.g. f16,q8_0,q4_0 (the reference: f16)")
    p.add_argument("--contexts", metavar="N,N", default="",
                   help="a sweep: every variant once per context length, e.g. 512,2048,8192: its quality in windows "
                        "of that length (against the reference's windows of that length) and its speed with a prompt "
                        "that fills it; with --kv-types, every pair of both")
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
        shown = store.load(args.show)
        _write_card(shown, args.card)
        return _emit(shown, args)
    from app.hub.resolve import local_model

    args.models = [local_model(model) for model in args.models]  # library models by name: their paths
    candidates, reference = _hub_quants(args)
    if args.list:
        return 0
    from app.lab import uploaders

    def fetching(message: str, fraction: float | None) -> None:
        if fraction is None or fraction in (0.0, 1.0):
            print(message, file=sys.stderr, flush=True)

    fetched = uploaders.fetch(candidates, on_progress=fetching)
    try:
        models = list(args.models) + [f.path for f in fetched]
        if not models:
            raise QuantDeskError("name the models to compare",
                                 "e.g. quantdesk bench model-Q8_0.gguf model-Q4_K_M.gguf")
        from app.lab.runner import run_bench

        settings = BenchSettings(prompt_tokens=args.prompt_tokens, gen_tokens=args.gen_tokens, reps=args.reps,
                                 ctx=args.ctx, chunks=args.chunks, quality=not args.no_quality,
                                 speed=not args.no_speed, threads=args.threads, gpu_layers=args.gpu_layers,
                                 kv_types=tuple(t.strip() for t in args.kv_types.split(",") if t.strip()),
                                 contexts=_numbers(args.contexts, "--contexts"))
        try:
            settings.validate()
        except ValueError as exc:
            raise QuantDeskError(str(exc)) from None

        def progress(p: LabProgress) -> None:
            if p.fraction is None or p.fraction >= 1:  # one line per step, and the step's last
                print(f"[{p.step}/{p.total}] {p.phase}: {p.message}", file=sys.stderr, flush=True)

        by_origin: dict[str | None, str] = {f.origin: f.path for f in fetched}  # looked up by a reference or None
        result = run_bench(models, settings, reference=by_origin.get(reference, reference),
                           reference_file=args.reference_file, corpus_text=args.corpus,
                           labels={f.path: f.label for f in fetched}, origins={f.path: f.origin for f in fetched},
                           on_progress=progress)
    finally:
        for line in uploaders.clean_up(fetched, args.keep_downloads):
            print(line, file=sys.stderr)
    if args.save_reference and result.reference_file:
        from app.lab import references

        saved_reference = references.export(Path(result.reference_file["path"]), args.save_reference)
        print(f"KL reference saved as {saved_reference}", file=sys.stderr)
    if not args.no_save:
        saved = store.save(result)
        print(f"saved as {result.id} ({saved})", file=sys.stderr)
    _write_card(result, args.card)
    _emit(result, args)
    return 1 if all(v.error for v in result.variants) else 0


def _numbers(text: str, option: str) -> tuple[int, ...]:
    """A comma-separated list of whole numbers ("512,2048"), in words when it is not one."""
    from app.errors import QuantDeskError

    try:
        return tuple(int(t) for t in text.replace(" ", "").split(",") if t)
    except ValueError:
        raise QuantDeskError(f"{option} takes whole numbers separated by commas, not {text!r}",
                             f"e.g. {option} 512,2048,8192") from None


def _hub_quants(args: argparse.Namespace) -> tuple[list[Candidate], str | None]:
    """The Hub files --repo and --uploaders name, to fetch, and the reference to use (a local model, an origin among
    them, or None: the bench's own choice). --uploaders lists what it found on stderr (stdout with --list)."""
    from app.errors import QuantDeskError

    if (args.repo or args.uploaders) and not args.quant:
        raise QuantDeskError("--repo and --uploaders need a --quant to compare",
                             "e.g. --repo owner/Model-GGUF --quant Q4_K_M, or --uploaders owner/Model --quant Q4_K_M")
    if args.quant and not (args.repo or args.uploaders):
        raise QuantDeskError("--quant goes with --repo or --uploaders",
                             "e.g. --uploaders owner/Model --quant Q4_K_M")
    if (args.pick or args.list) and not args.uploaders:
        raise QuantDeskError("--pick and --list go with --uploaders")
    reference = args.reference
    candidates = []
    if args.repo:
        from app.hub.listing import RepoListing
        from app.lab import uploaders

        for repo in dict.fromkeys(args.repo):
            listing = RepoListing.fetch(repo, branches=False)  # listed once for every quant
            for quant in args.quant:
                candidate = uploaders.listed(listing, quant)
                if candidate is None:
                    have = ", ".join(sorted(g.quant for g in listing.gguf_groups())) or "no GGUF files"
                    raise QuantDeskError(f"{repo} has no {quant} (it has: {have})")
                candidates.append(candidate)
    if args.uploaders:
        chosen, reference = _found_uploaders(args)
        candidates += [c for c in chosen if c.label not in {k.label for k in candidates}]
    return candidates, reference


def _found_uploaders(args: argparse.Namespace) -> tuple[list[Candidate], str | None]:
    from app.errors import QuantDeskError
    from app.lab import uploaders

    reference = args.reference
    if reference is None and args.models and not args.reference_file:  # the bench's own choice: the most bits
        from app.lab.runner import plan_variants

        reference = plan_variants(args.models)[0].path
    found = uploaders.find(args.uploaders, args.quant, reference,
                           on_progress=lambda message: print(message, file=sys.stderr, flush=True))
    unknown = [pick for pick in args.pick if pick not in {c.repo_id for c in found.candidates}]
    if unknown:
        raise QuantDeskError(f"--pick: {', '.join(unknown)} {'is' if len(unknown) == 1 else 'are'} not among the "
                             f"repos found with {' or '.join(found.quants)}",
                             "quantdesk bench --uploaders BASE --quant Q --list shows them")
    use_precise = reference is None and not args.reference_file and found.precise is not None
    print(uploaders.found_text(found, use_precise), file=sys.stdout if args.list else sys.stderr, flush=True)
    chosen = [c for c in found.comparable if not args.pick or c.repo_id in args.pick]
    if not chosen and not args.list:
        raise QuantDeskError(f"none of the repos found has a {' or '.join(found.quants)} of {args.uploaders} to "
                             "compare", "see the list above for why")
    if use_precise and found.precise is not None:
        if found.precise.label not in {c.label for c in chosen}:
            chosen.insert(0, found.precise)
        reference = found.precise.label  # an origin: its path once fetched
    return chosen, reference


def _write_card(result: BenchResult, path: str | None) -> None:
    if path:
        from app.lab.card import write_card

        markdown, data = write_card(result, path)
        print(f"quant card written: {markdown} and {data}", file=sys.stderr)


def _emit(result: BenchResult, args: argparse.Namespace) -> int:
    from app.files import write_text_atomic
    from app.lab import export

    if args.json or (args.out and not args.csv and Path(args.out).suffix.lower() == ".json"):
        text = export.to_json(result) + "\n"
    elif args.csv or (args.out and Path(args.out).suffix.lower() == ".csv"):
        text = export.to_csv(result)
    else:
        text = table(result)
    if args.out:
        write_text_atomic(Path(args.out), text)  # a file it replaces stays whole if the write fails
        print(f"wrote {args.out}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    return 0


def _print_history(store: ResultStore) -> int:
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


def _estimate(v: VariantResult, metric: str, fmt: str, scale: float = 1.0, unit: str = "") -> str:
    estimate = v.estimate(metric)
    if estimate is None:
        return "n/a"
    text = format(estimate.value * scale, fmt)
    return text + unit if estimate.se is None else f"{text} ± {format(estimate.se * scale, fmt)}{unit}"


def table(result: BenchResult) -> str:
    from app.lab import report

    header = ("variant", "backend", "quant", "bpw", "load ms", "prompt tok/s", "gen tok/s", "TTFT ms", "peak MiB",
              "PPL", "PPL ratio", "mean KLD", "KLD 99%", "same top p")
    rows = []
    footnotes = []
    for v in result.variants:
        name = v.label + (" (ref)" if v.is_reference else "")
        if v.error:
            rows.append((name, v.backend or "-", v.quant, _bpw(v), *["failed"] * (len(header) - 4)))
            footnotes.append(f"{v.label}: {v.error}")
            continue
        rows.append((name, v.backend or "-", v.quant, _bpw(v), _ranged(v, "load_ms"),
                     _ranged(v, "prompt_tps", digits=1), _ranged(v, "decode_tps", digits=1), _ranged(v, "ttft_ms"),
                     _ranged(v, "peak_memory_bytes", scale=2**20), _estimate(v, "perplexity", ".2f"),
                     _estimate(v, "ppl_ratio", ".4f"), _estimate(v, "kld_mean", ".5f"), _estimate(v, "kld_p99", ".4f"),
                     _estimate(v, "same_top_p", ".2f", 100, " %")))
        reasons = dict.fromkeys(v.unavailable.values())  # one line per distinct reason
        footnotes += [f"{v.label}: {why}" for why in reasons] + [f"{v.label}: {note}" for note in v.notes]
    widths = [max(len(str(r[i])) for r in (header, *rows)) for i in range(len(header))]
    lines = ["  ".join(str(cell).ljust(w) for cell, w in zip(r, widths, strict=True)).rstrip()
             for r in (header, *rows)]
    s = result.settings
    lines.insert(1, "  ".join("-" * w for w in widths))
    lines.append("")
    windows = result.reference_file.get("chunks")
    lines.append(f"medians (min-max) of {s.reps} run(s): prompt ≈{s.prompt_tokens} tokens, {s.gen_tokens} generated; "
                 f"quality against {result.reference} as llama-perplexity --kl-divergence measures it"
                 + (f": {windows} windows of {s.ctx} tokens" if windows else "") + ", ± one standard error")
    lines += footnotes
    if len(report.ranking(result)) > 1:
        lines += ["", f"ranked by mean KLD from {result.reference}:", report.ranking_text(result)]
    for v in result.variants:
        if v.quality is not None and not v.is_reference:
            lines += ["", f"{v.label} against {result.reference}:", report.statistics_text(v.quality)]
    return "\n".join(lines) + "\n"


def _bpw(v: VariantResult) -> str:
    return "?" if v.bits_per_weight is None else f"{v.bits_per_weight:.2f}"
