"""``quantdesk preset ls | show MODEL | set MODEL ... | rm MODEL | import FILE.ini | export [FILE.ini]``: the
per-model presets (app/hub/presets.py) and llama-server's preset INI format (app/hub/preset_ini.py)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.commands import add_command
from app.datatypes import OVERFLOW_POLICIES
from app.errors import QuantDeskError

if TYPE_CHECKING:
    from app.hub.presets import ModelPreset


class PresetCommandError(QuantDeskError):
    pass


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = add_command(
        subparsers, "preset",
        description="A model's preset: the load settings (context, GPU layers, KV cache type) and chat settings "
                    "(sampling, system prompt, thinking) saved for that model and applied whenever it loads, in the "
                    "Chat, `quantdesk chat` (its flags win; --no-preset ignores it) and the server's on-demand "
                    "loads. Import and export llama-server's preset INI files (--models-preset).")
    sub = parser.add_subparsers(dest="preset_command", metavar="ACTION", required=True,
                                help="ls, show MODEL, set MODEL, rm MODEL, import FILE.ini or export [FILE.ini]")
    ls = sub.add_parser("ls", help="the models that have a preset, and what each sets")
    ls.add_argument("--json", action="store_true", help="print JSON")
    ls.set_defaults(func=run_ls)
    show = sub.add_parser("show", help="one model's preset and its runtime pin")
    show.add_argument("model", help="a model file or folder, a library model (as `quantdesk ls` prints it, its "
                                      "repo or a unique prefix), or a preset's key")
    show.add_argument("--json", action="store_true", help="print JSON")
    show.set_defaults(func=run_show)
    put = sub.add_parser("set", help="set values of a model's preset (the others stay)",
                         description="Set values of a model's preset; values not given stay as they were. "
                                     "--unset NAME forgets one (ctx, temperature, system, ...).")
    put.add_argument("model", help="a model file or folder, or a library model (as `quantdesk ls` prints it, "
                                     "its repo or a unique prefix)")
    put.add_argument("--ctx", type=int, help="context length in tokens")
    put.add_argument("--gpu-layers", type=int, help="layers on the GPU, -1 all, 0 none (default: the fit check's)")
    put.add_argument("--kv-type", choices=["f16", "q8_0", "q4_0"], help="KV cache type")
    put.add_argument("--threads", type=int, help="CPU threads")
    put.add_argument("--chat-template", metavar="NAME|FILE",
                     help="the chat template to serve the model with: a bundled one (gemma, llama3, qwen2, qwen3, "
                          "phi3, mistral, chatml) or a .jinja / tokenizer_config.json file")
    put.add_argument("--runtime", help="pin a llama.cpp runtime for this model (as `quantdesk runtime use NAME "
                                       "--model MODEL`; auto removes the pin)")
    put.add_argument("--temperature", type=float)
    put.add_argument("--top-p", type=float)
    put.add_argument("--top-k", type=int)
    put.add_argument("--min-p", type=float)
    put.add_argument("--repeat-penalty", type=float)
    put.add_argument("--max-tokens", type=int, help="most tokens per reply")
    put.add_argument("--seed", type=int)
    put.add_argument("--system", help="system prompt")
    put.add_argument("--think", action=argparse.BooleanOptionalAction, default=None,
                     help="thinking on (--think) or off (--no-think)")
    put.add_argument("--reasoning-effort", choices=["low", "medium", "high"])
    put.add_argument("--reasoning-budget", type=int, metavar="N")
    put.add_argument("--overflow", choices=OVERFLOW_POLICIES,
                     help="the overflow policy when the context is full, for chats that choose none (quantdesk chat "
                          "--overflow and a chat's own setting win)")
    put.add_argument("--unset", action="append", default=[], metavar="NAME",
                     help=f"forget a value (repeatable): {', '.join(UNSET_NAMES)}")
    put.set_defaults(func=run_set)
    rm = sub.add_parser("rm", help="forget a model's preset")
    rm.add_argument("model", help="a model file or folder, a library model (as `quantdesk ls` prints it, its "
                                      "repo or a unique prefix), or a preset's key")
    rm.set_defaults(func=run_rm)
    imp = sub.add_parser("import", help="read a llama-server preset file (--models-preset) into the models' presets",
                         description="Each section that matches a library model (by model = PATH, hf-repo, or its "
                                     "name) becomes that model's preset; every key QuantDesk has no setting for is "
                                     "named with the reason, and each section that matches no model.")
    imp.add_argument("file", help="the .ini file")
    imp.add_argument("--json", action="store_true", help="print what was imported and skipped as JSON")
    imp.set_defaults(func=run_import)
    exp = sub.add_parser("export", help="write the presets as a llama-server preset file")
    exp.add_argument("file", nargs="?", help="the .ini file to write (default: standard output)")
    exp.add_argument("--model", action="append", default=[], help="only this model's preset (repeatable)")
    exp.set_defaults(func=run_export)


# --unset names → the preset's field names.
UNSET_NAMES = {"ctx": "n_ctx", "gpu-layers": "gpu_layers", "kv-type": "kv_cache_type", "threads": "threads",
               "chat-template": "chat_template",
               "temperature": "temperature", "top-p": "top_p", "top-k": "top_k", "min-p": "min_p",
               "repeat-penalty": "repeat_penalty", "max-tokens": "max_tokens", "seed": "seed",
               "system": "system_prompt", "think": "enable_thinking", "reasoning-effort": "reasoning_effort",
               "reasoning-budget": "reasoning_budget", "overflow": "overflow"}


def _found(model: str) -> ModelPreset:
    from app.hub import presets

    preset = presets.find(model)
    if preset is None:
        problem = presets.load().problem
        raise PresetCommandError(problem or f"{model} has no preset", "" if problem else
                                 "make one with `quantdesk preset set MODEL --ctx N ...` (quantdesk preset ls)")
    return preset


def _summary(preset: ModelPreset) -> dict[str, Any]:
    from app.hub import presets
    from app.runtimes import pins

    where = presets.path_of(preset)
    pin = pins.load().for_model(where) if where else None
    return {"key": preset.key, "path": where, **preset.to_json(), "runtime_pin": pin[0] if pin else None}


def run_ls(args: argparse.Namespace) -> int:
    from app.hub import presets

    saved = presets.load()
    if saved.problem:
        print(f"warning: {saved.problem}", file=sys.stderr)
    rows = [_summary(p) for p in saved.models.values()]
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if not rows:
        print("No model has a preset (quantdesk preset set MODEL --ctx N ...).")
    for preset, row in zip(saved.models.values(), rows, strict=True):
        print(f"{preset.key}{'' if row['path'] else '  (model not found here)'}")
        print("  " + ("; ".join(preset.lines()) or "(empty)"))
    return 0


def run_show(args: argparse.Namespace) -> int:
    preset = _found(args.model)
    row = _summary(preset)
    if args.json:
        print(json.dumps(row, indent=2, ensure_ascii=False))
        return 0
    print(preset.key)
    print(f"  model: {row['path'] or 'not found here'}")
    for line in preset.lines():
        print(f"  {line}")
    if row["runtime_pin"]:
        print(f"  runtime (pinned): {row['runtime_pin']}")
    return 0


def _model_path(model: str) -> str:
    """A model given to `set`: a file or folder here, a remote model, else a library model by a name `quantdesk ls`
    prints, its repo or a unique prefix (app/hub/resolve.local_model)."""
    from app.hub.resolve import local_model

    return local_model(model)


def run_set(args: argparse.Namespace) -> int:
    from app.hub import presets

    path = _model_path(args.model)
    load = {k: v for k, v in {"n_ctx": args.ctx, "gpu_layers": args.gpu_layers, "kv_cache_type": args.kv_type,
                              "threads": args.threads, "chat_template": _chat_template(args.chat_template)
                              }.items() if v is not None}
    sampling = {k: v for k, v in {
        "temperature": args.temperature, "top_p": args.top_p, "top_k": args.top_k, "min_p": args.min_p,
        "repeat_penalty": args.repeat_penalty, "max_tokens": args.max_tokens, "seed": args.seed,
        "enable_thinking": args.think, "reasoning_effort": args.reasoning_effort,
        "reasoning_budget": args.reasoning_budget}.items() if v is not None}
    bad = [n for n in args.unset if n not in UNSET_NAMES]
    if bad:
        raise PresetCommandError(f"no setting named {', '.join(bad)} to unset", f"one of {', '.join(UNSET_NAMES)}")
    try:
        preset = presets.update(path, load_values=load, sampling=sampling, system_prompt=args.system,
                                overflow=args.overflow, unset=tuple(UNSET_NAMES[n] for n in args.unset))
    except presets.PresetError as exc:
        raise PresetCommandError(f"the preset is not saved: {exc}") from None
    if args.runtime:
        from app.runtimes import pins

        pins.pin(args.runtime, path)
    print(f"{preset.key}: " + ("; ".join(preset.lines()) or "no values left: the preset is removed"))
    return 0


def run_rm(args: argparse.Namespace) -> int:
    from app.hub import presets

    preset = _found(args.model)
    try:
        presets.remove(preset.key)
    except presets.PresetError as exc:
        raise PresetCommandError(str(exc)) from None
    print(f"removed the preset of {preset.key}")
    return 0


def run_import(args: argparse.Namespace) -> int:
    from app.hub import preset_ini, presets

    try:
        report = preset_ini.import_file(Path(args.file).expanduser())
    except (preset_ini.PresetFileError, presets.PresetError) as exc:
        raise PresetCommandError(f"nothing imported: {exc}") from None
    if args.json:
        print(json.dumps({
            "imported": [{"section": s.name, "model": s.model, "key": s.preset.key if s.preset else None,
                          "skipped": s.skipped} for s in report.imported],
            "not_imported": [{"section": s.name, "why": s.problem, "skipped": s.skipped} for s in report.unmatched],
            "notes": report.notes}, indent=2, ensure_ascii=False))
    else:
        for line in report.lines():
            print(line)
        print(f"{len(report.imported)} preset(s) imported, {len(report.unmatched)} section(s) not")
    return 0 if report.imported or not report.unmatched else 1


def run_export(args: argparse.Namespace) -> int:
    from app.hub import preset_ini, presets

    saved = presets.load()
    if saved.problem:
        raise PresetCommandError(saved.problem)
    chosen = list(saved.models.values())
    if args.model:
        chosen = [_found(m) for m in args.model]
    text, notes = preset_ini.export_text(chosen, presets.library_entries())
    if args.file:
        from app.files import write_text_atomic

        write_text_atomic(Path(args.file).expanduser(), text)
        print(f"wrote {len(chosen)} preset(s) to {args.file}", file=sys.stderr)
    else:
        sys.stdout.write(text)
    for note in notes:
        print(f"left out: {note}", file=sys.stderr)
    return 0


def _chat_template(value: str | None) -> str | None:
    """A bundled template's name as it is, a file as its absolute path; one that names neither is refused now."""
    from pathlib import Path

    from backends.chat_format import bundled

    if value is None or bundled.family(value) is not None:
        return value
    path = Path(value).expanduser()
    if not path.is_file():
        raise PresetCommandError(f"{value!r} is no bundled chat template and no file",
                                 f"one of {', '.join(bundled.names())}, or a .jinja / tokenizer_config.json file")
    return str(path.resolve())
