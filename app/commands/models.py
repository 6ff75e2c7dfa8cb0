"""``quantdesk inspect``, ``quantdesk fit`` and ``quantdesk recommend``."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import TYPE_CHECKING, Any

from app.commands import add_command
from app.hub.resolve import BadModelArgument, load_metadata
from app.settings import CONTEXT_HELP, context_length

if TYPE_CHECKING:
    from app.hardware.profile import HardwareProfile
    from app.models.recommend import Recommendation
    from backends.chat_format.bundled import TemplateChoice

GiB = 1 << 30

CPU_MOE_HELP = ("mixture-of-experts models: keep the experts of the first N layers in system RAM and the rest of "
                "every layer on the GPU, or 'all' (llama.cpp's --n-cpu-moe / --cpu-moe)")


def cpu_moe_arg(text: str) -> int:
    """``--cpu-moe N|all`` as ``LoadSettings.cpu_moe`` (-1 for all)."""
    if text.strip().lower() == "all":
        return -1
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"--cpu-moe takes a number of layers or 'all', not {text!r}")
    return value


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    from app.hardware import add_hardware_argument

    model_help = ("a library model as `quantdesk ls` prints it (or its OWNER/REPO, with :QUANT where the library holds "
                  "several, or a unique prefix), a .gguf file, a model folder, a Hub repo (owner/name: its first "
                  "quant; owner/name@BRANCH: one EXL2/EXL3 branch) or a Hub file (owner/name/file.gguf)")
    p = add_command(subparsers, "inspect")
    p.add_argument("model", metavar="MODEL", help=model_help)
    p.add_argument("--json", action="store_true", help="print the metadata as JSON")
    p.set_defaults(func=run_inspect)

    p = add_command(subparsers, "fit")
    p.add_argument("model", metavar="MODEL", help=model_help)
    p.add_argument("--ctx", type=int, help=CONTEXT_HELP)
    p.add_argument("--gpu-layers", default="auto", help="N or auto (the most layers that fit)")
    p.add_argument("--kv-type", choices=["f16", "q8_0", "q4_0"], default="f16", help="KV cache type (default f16)")
    p.add_argument("--cpu-moe", type=cpu_moe_arg, metavar="N|all",
                   help=CPU_MOE_HELP + "; default: chosen when the model does not fit the GPU whole")
    p.add_argument("--mmproj", metavar="FILE", help="count this vision projector with the model (default: the one "
                                                    "beside a local GGUF that pairs with it)")
    add_hardware_argument(p)
    p.add_argument("--json", action="store_true", help="print the estimate as JSON")
    p.set_defaults(func=run_fit)

    p = add_command(subparsers, "recommend")
    p.add_argument("models", nargs="+", metavar="REPO_ID|PATH",
                   help="Hub repo ids (owner/name) and local files or folders; each quant in them is a candidate")
    p.add_argument("--ctx", type=int, help=f"{CONTEXT_HELP}; planned for")
    add_hardware_argument(p)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    p.set_defaults(func=run_recommend)


def _hardware(args: argparse.Namespace) -> HardwareProfile:
    from app.machine import profile_from_args

    return profile_from_args(args)


def _gib(n: int | None) -> str:
    return "?" if n is None else f"{n / GiB:.2f} GiB"


def run_inspect(args: argparse.Namespace) -> int:
    meta = load_metadata(args.model)
    summary = meta.summary()
    template = local_template(args.model)
    if template is not None:
        summary["chat_template"] = {"name": template.name, "title": template.title, "origin": template.origin}
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    for key, value in summary.items():
        if key == "quant_info" or value in (None, [], ""):
            continue
        if key == "weights_bytes":
            value = _gib(value)
        if key == "pooling":  # what the model is for, when it is no chat model
            value = ("rank: a reranker (scores passages for a question)" if value == "rank" else
                     f"{value}: an embedding model")
        if key == "sees_images":
            value = f"{value['projector']} ({value['projector_type']}, {value['image_tokens']} tokens an image)"
        if key == "chat_template":  # which template a chat gets, and where it comes from
            value = f"{value['title']} ({value['origin']})"
        if key == "recommended_sampling":  # what `quantdesk chat` and the Chat use where the user sets nothing
            key, value = "sampling", ", ".join(f"{name} {number:g}" for name, number in value.items())
        print(f"{key:18} {value}")
    return 0


def local_template(model: str) -> TemplateChoice | None:
    """The chat template a local GGUF is served with (its preset's choice, its own, its base model's, its
    family's: backends/chat_format/bundled.py), None for any other model."""
    from pathlib import Path

    from app.hub import presets
    from app.models.metadata import read_gguf_header
    from backends.chat_format import bundled

    path = Path(model)
    if path.suffix.lower() != ".gguf" or not path.is_file():
        return None
    preset = presets.for_model(path)
    chosen = str(preset.load.get("chat_template") or "") if preset is not None else ""
    try:
        return bundled.for_model(path, read_gguf_header(path)[0], chosen)
    except bundled.TemplateChoiceError:
        return bundled.for_model(path, read_gguf_header(path)[0])


def vision_part(dev: dict[str, Any]) -> str:
    return f", vision projector {_gib(dev['vision_bytes'])}" if dev.get("vision_bytes") else ""


def run_fit(args: argparse.Namespace) -> int:
    from app.models.recommend import fit_model

    gpu_layers = args.gpu_layers
    if gpu_layers != "auto":
        try:
            gpu_layers = int(gpu_layers)
        except ValueError as exc:
            raise BadModelArgument(f"--gpu-layers takes a number or 'auto', not {args.gpu_layers!r}.") from exc
    args.ctx = context_length(args.ctx)
    if args.ctx < 1:
        raise BadModelArgument("--ctx must be a positive number of tokens.")
    meta = load_metadata(args.model)
    if args.mmproj:
        from app.models.vision import with_projector

        with_projector(meta, args.mmproj)
    result = fit_model(meta, _hardware(args), args.ctx, gpu_layers, args.kv_type, label=args.model,
                       cpu_moe=args.cpu_moe)
    data = result.to_json()
    if args.json:
        print(json.dumps(data, indent=2))
        return 0
    print(f"{result.label}: {result.verdict} — {result.reason}")
    for dev in data["devices"]:
        state = f", recurrent state {_gib(dev['state_bytes'])}" if dev["state_bytes"] else ""
        print(f"  {dev['name']:24} weights {_gib(dev['weights_bytes'])}, KV {_gib(dev['kv_bytes'])}{state}, "
              f"compute {_gib(dev['compute_bytes'])}, output {_gib(dev['output_bytes'])}, other "
              f"{_gib(dev['other_bytes'])}{vision_part(dev)} = {_gib(dev['total_bytes'])}")
    if meta.projector is not None:
        print(f"  sees images: vision projector {meta.projector.file_name} ({meta.projector.projector_type}), "
              f"{data['image_tokens']} context tokens an image")
    if data["runtime"]:
        print(f"  planned for the {data['runtime']} runtime")
    if data["gpu_layers"] is not None:
        n = data["cpu_moe"]
        experts = f", experts of {n} layer{'s' if n != 1 else ''} in RAM" if n else ""
        print(f"  gpu layers {data['gpu_layers']} of {data['n_layers']}{experts}, n_ctx {data['n_ctx']}, "
              f"largest context that fits: {data['max_ctx']}")
    if data["decode_tok_s"]:
        print(f"  predicted decode: ~{data['decode_tok_s']} tok/s")
    for note in data["notes"]:
        print(f"  note: {note}")
    return 0


def _measured_here(report: Recommendation) -> dict[str, str]:
    """For each candidate the quant lab has measured on this machine, what it found (app/lab/measured)."""
    from app.lab import measured

    found = measured.find(c.label for c in report.candidates)
    return {label: m.sentence() for label, m in found.items()}


def run_recommend(args: argparse.Namespace) -> int:
    from app.hub.resolve import candidates, draft_suggestions
    from app.models.recommend import recommend

    report = recommend(candidates(args.models), _hardware(args), context_length(args.ctx))
    drafts = draft_suggestions(report)
    measured = _measured_here(report)
    if args.json:
        print(json.dumps(report.to_json() | {"drafts": {fmt: dataclasses.asdict(s) for fmt, s in drafts.items()},
                                             "measured": measured}, indent=2))
        return 0
    print(f"Formats for this machine: {', '.join(report.format_preference)} ({report.format_reason}).")
    for c in report.candidates:
        speed = f", ~{round(c.decode_tok_s, 1)} tok/s" if c.decode_tok_s else ""
        memory = _gib(c.memory_bytes) if c.memory_bytes is not None else ""
        print(f"  {c.quant:10} {c.verdict:24} {memory:>10}{speed}  {c.label}")
    for fmt, pick in report.best_per_format.items():
        print(f"Best {fmt.upper()}: {pick.label} — {pick.reason}"
              + (f"; {measured[pick.label]}" if pick.label in measured else ""))
        if fmt in drafts:
            print(f"  Draft: {drafts[fmt].name} — {drafts[fmt].reason} (--draft {drafts[fmt].path})")
    if report.load_settings:
        load = report.load_settings
        experts = f" --cpu-moe {load.cpu_moe}" if load.cpu_moe else ""
        print(f"Load settings: --gpu-layers {load.gpu_layers}{experts} --ctx {load.n_ctx} "
              f"(largest that fits: {load.max_ctx})")
    return 0
