"""``quantdesk chat``: talk to a model in the terminal, or answer one prompt (optionally as JSON, optionally held
to a JSON Schema)."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from collections.abc import Collection
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from app.commands import add_command
from app.errors import EngineError
from app.commands.models import CPU_MOE_HELP, cpu_moe_arg
from app.settings import CONTEXT_HELP, context_length
from app.settings import load as app_settings
from backends import json_schema
from app.datatypes import (DEFAULT_DRAFT_P_MIN, DEFAULT_DRAFT_TOKENS, PROMPT_LOOKUP, REASONING_EFFORTS,
                           OVERFLOW_POLICIES, SAMPLING_KNOBS, ChosenSampling, ContextCut, ContextUse, Done,
                           GenerationStats, LoadSettings, Message,
                           SamplingSettings, Token)
from app.models.metadata import model_sampling

if TYPE_CHECKING:
    from app.datatypes import Loaded
    from app.engine.client import EngineClient
    from app.hub.presets import ModelPreset


MODEL_HELP = ("a library model as `quantdesk ls` prints it (or its OWNER/REPO, with :QUANT where the library holds "
              "several, or a unique prefix), a .gguf file, a model folder (MLX, safetensors) or "
              "remote:CONNECTION/MODEL")


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = add_command(subparsers, "chat",
                    description="Chat with a model in its own engine process. Without --prompt it is "
                                "interactive: /reset clears the history, /exit or Ctrl-D quits, "
                                "Ctrl-C stops a reply.")
    p.add_argument("model", help=MODEL_HELP)
    p.add_argument("--backend", help="engine to use (default: follows from the format)")
    p.add_argument("--runtime", help="llama.cpp runtime for this run (quantdesk runtime ls; default: the pinned or "
                                     "automatic choice)")
    p.add_argument("--ctx", type=int, help=CONTEXT_HELP)
    p.add_argument("--gpu-layers", type=int,
                   help="layers to offload to the GPU, -1 all (default: the model's preset, else all), 0 none")
    p.add_argument("--threads", type=int, help="CPU threads (default: physical cores)")
    p.add_argument("--kv-type", choices=["f16", "q8_0", "q4_0"],
                   help="KV cache type (default: the model's preset, else f16)")
    p.add_argument("--cpu-moe", type=cpu_moe_arg, default=0, metavar="N|all", help=CPU_MOE_HELP)
    p.add_argument("--image", action="append", default=[], metavar="FILE",
                   help="attach a PNG, JPEG or WebP image to the first message (repeatable); needs a vision model")
    p.add_argument("--mmproj", metavar="FILE",
                   help="the vision projector to load with a GGUF model (default: the mmproj file beside it that "
                        "pairs with it)")
    p.add_argument("--chat-template", metavar="NAME|FILE",
                   help="the chat template to serve a GGUF with: a bundled one (gemma, llama3, qwen2, qwen3, phi3, "
                        "mistral, chatml) or a .jinja / tokenizer_config.json file (default: the model's preset, "
                        "else the model file's own, else its base model's, else its family's)")
    add_force_arguments(p)
    p.add_argument("--prompt", help="answer this once and exit")
    p.add_argument("--system", help="system prompt")
    p.add_argument("--max-tokens", type=int, help="most tokens per reply (default: the model's preset, else 512)")
    # The sampling flags default to the model's recommendation (GGUF general.sampling.*, generation_config.json),
    # else QuantDesk's own value: app.datatypes.choose_sampling.
    p.add_argument("--temperature", type=float,
                   help="sampling temperature, 0 always picks the likeliest token (default: the model's, else 0.8)")
    p.add_argument("--top-p", type=float,
                   help="nucleus sampling: keep this much probability (default: the model's, else 0.95)")
    p.add_argument("--top-k", type=int,
                   help="sample among this many likeliest tokens, 0 all (default: the model's, else 40)")
    p.add_argument("--min-p", type=float,
                   help="drop tokens less likely than this times the likeliest one (default: the model's, else 0.05)")
    p.add_argument("--repeat-penalty", type=float,
                   help="discourage tokens already in the conversation, 1 off (default: the model's, else 1.1)")
    p.add_argument("--seed", type=int, help="sampling seed, for replies that repeat exactly (default: random)")
    p.add_argument("--stop", action="append", default=[], help="stop string (repeatable)")
    p.add_argument("--json", action="store_true",
                   help="with --prompt: print one JSON object with the text, the thinking and the stats")
    p.add_argument("--json-schema", metavar="FILE", help="answer with JSON valid against the JSON Schema in FILE "
                                                         "(held by the engine's grammar; a thinking model thinks "
                                                         "first)")
    p.add_argument("--overflow", choices=OVERFLOW_POLICIES,
                   help="once the conversation no longer fits the context: stop (the engine refuses the message), "
                        "drop-oldest (leave out the oldest turns; the system prompt stays), truncate-middle (also "
                        "keep the first exchange), compact (the model writes a note on the turns it leaves out); "
                        "each cut is said on stderr (default: the overflow setting, stop unless changed)")
    add_thinking_arguments(p)
    add_draft_arguments(p)
    add_tool_arguments(p)
    p.add_argument("--docs", metavar="NAME[,NAME]",
                   help="answer from these document collections (quantdesk docs ls): each question retrieves their "
                        "passages into the prompt, and the reply's citations follow it ([1] guide.pdf, page 3)")
    p.add_argument("--no-preset", action="store_true",
                   help="ignore the model's preset (quantdesk preset show MODEL); without it the preset's values "
                        "apply where no flag is given")
    p.set_defaults(func=run)


def add_tool_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("tools (MCP)", "The model may call the tools of MCP servers added with quantdesk mcp "
                                            "add; each call is shown and asked for first (y: once, a: always this "
                                            "tool, n: deny, and the model is told).")
    g.add_argument("--tools", metavar="SERVER[,SERVER]", help="the MCP servers whose tools the model sees")
    g.add_argument("--allow-tools", action="store_true", help="run every tool call without asking")
    g.add_argument("--max-tool-steps", type=int, default=8, metavar="N",
                   help="replies with tool calls in one turn before the model must answer (default 8)")
    g.add_argument("--tool-choice", default="auto", metavar="auto|required|none|TOOL",
                   help="auto: the model decides (default); required or a tool's name (SERVER__TOOL): its first "
                        "reply in a turn must call one (held by the engine's grammar), later ones decide; none: no "
                        "calls")


def add_thinking_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("thinking models", "A model that thinks before it answers (Qwen3, DeepSeek R1, gpt-oss "
                                                "...) shows its thinking dimmed, then the answer.")
    g.add_argument("--think", action=argparse.BooleanOptionalAction, default=None,
                   help="ask the model to think first, or (--no-think) to answer straight away; templates without "
                        "the switch ignore it (default: as the model's chat template does)")
    g.add_argument("--reasoning-effort", choices=[e for e in REASONING_EFFORTS if e],
                   help="how long a model with an effort setting (gpt-oss) thinks (default: its template's)")
    g.add_argument("--reasoning-budget", type=int, metavar="N",
                   help="close the thinking after N tokens, the way the model's format closes it, so it answers; "
                        "0 = no thinking (default: no budget)")
    g.add_argument("--chat-template-kwargs", type=template_kwargs_arg, default={}, metavar="JSON",
                   help='further variables for the chat template, a JSON object such as \'{"enable_thinking": '
                        'false}\' (as llama-server takes them; they win over --think)')
    g.add_argument("--hide-thinking", action="store_true",
                   help="leave the thinking out of the printed reply (the model still thinks, the stats count it, "
                        "--json keeps it)")


def template_kwargs_arg(text: str) -> dict[str, Any]:
    """``--chat-template-kwargs JSON`` as SamplingSettings.chat_template_kwargs: a JSON object, or argparse's
    usage error with a sentence saying what is wrong."""
    example = 'a JSON object such as \'{"enable_thinking": false}\''
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"{text!r} is not valid JSON ({exc}); give {example}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{text!r} is JSON but not an object; give {example}")
    return value


def add_draft_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--draft", metavar=f"PATH|{PROMPT_LOOKUP}",
                   help="speculative decoding: a smaller model of the same vocabulary (a .gguf for llama.cpp, a model "
                        f"folder for MLX) guesses tokens the model checks several at a time, or '{PROMPT_LOOKUP}' "
                        "(llama.cpp) guesses them from the prompt and the reply so far; the reply stays the model's")
    p.add_argument("--draft-tokens", type=int, default=DEFAULT_DRAFT_TOKENS, metavar="N",
                   help=f"tokens guessed per check with --draft (default {DEFAULT_DRAFT_TOKENS})")
    p.add_argument("--draft-p-min", type=float, default=DEFAULT_DRAFT_P_MIN, metavar="P",
                   help="a llama.cpp draft model stops guessing at a token it gives less than this probability "
                        f"(0 to 1; default {DEFAULT_DRAFT_P_MIN}, as llama-server's)")


def draft_setting(args: argparse.Namespace) -> str:
    """--draft as LoadSettings.draft: prompt lookup, or the draft model's absolute path (the engine host may run
    elsewhere than this directory)."""
    if not args.draft or args.draft == PROMPT_LOOKUP:
        return args.draft or ""
    from app.hub.resolve import BadModelArgument, local_model

    try:
        path: Path | None = Path(local_model(args.draft)).expanduser()  # a file or folder, or a library model
    except BadModelArgument:
        path = None
    if path is None or not path.exists():
        raise EngineError(f"the draft model {args.draft} does not exist", f"give a file or folder, a library model "
                                                                         f"(quantdesk ls), or '{PROMPT_LOOKUP}'",
                          kind="settings")
    return str(path.resolve())


def draft_note(settings: LoadSettings) -> str:
    """What the fit check leaves out with a draft model, said before the load (the draft loads beside the model)."""
    if not settings.draft or settings.draft == PROMPT_LOOKUP:
        return ""
    from app.models.budget import gib
    from app.models.drafts import model_size

    size = model_size(settings.draft)
    shown = gib(size) if size >= 2**30 else f"{size / 2**20:.0f} MiB"
    return f"the draft model ({shown}) loads beside the model; the fit check counted the model alone"


FORCE_HELP = ("load the model even when the fit check says it does not fit this machine (the memory budget): "
              "the system may swap or run out of memory, which ends the engine process")


def add_force_arguments(p: argparse.ArgumentParser, force_help: str = FORCE_HELP) -> None:
    from app.hardware import add_hardware_argument

    p.add_argument("--force", action="store_true", help=force_help)
    add_hardware_argument(p)


def check_fit(model: str, settings: LoadSettings, args: argparse.Namespace, *, given: Collection[str] = (),
              preset: Any = None, find_projector: bool = False) -> LoadSettings:
    """The settings to load ``model`` with, from the one load planner (app/models/planner.py) as the Chat's: the flags
    ``given`` held as they are, the model's ``preset``, its projector (the one named, else with ``find_projector`` the
    one beside it), the runtime asked for (--runtime) or pinned, the most GPU layers that fit, a q8_0 KV cache or a
    shorter context where the default context does not fit; what it changed said on stderr. A model that does not fit
    this machine is refused in words, or with --force loaded anyway with the risk said on stderr. A remote model is
    left to its server, one whose header cannot be read to the engine (it says what is wrong with it)."""
    from app.machine import profile_from_args
    from app.models.budget import fit_refusal, fit_warning
    from app.models.planner import ContextLowered, KvQuantized, ParallelLowered, PresetSetAside, plan_load
    from app.remote.connections import is_remote_ref

    if is_remote_ref(model):
        return preset.apply_load(settings, tuple(given)) if preset is not None else settings
    plan = plan_load(model, profile_from_args(args), settings, given=given, preset=preset,
                     find_projector=find_projector, runtime=getattr(args, "runtime", None))
    if not getattr(args, "json", False):
        for note in plan.notes:
            if isinstance(note, ContextLowered | KvQuantized | ParallelLowered | PresetSetAside):  # what it changed
                print(f"note: {note.words()}", file=sys.stderr)
    if plan.fits or plan.fit is None:
        return plan.settings
    name = Path(model).name
    if not args.force:
        raise EngineError(fit_refusal(name, plan.fit.reason, "--force"), kind="fit")
    print(fit_warning(name, plan.fit.reason), file=sys.stderr)
    return plan.settings


def stats_line(stats: GenerationStats, n_ctx: int = 0) -> str:
    """The figures of one reply; with the loaded context ``n_ctx``, how much of it the conversation now holds."""
    line = f"{stats.decode_tps:.1f} tok/s · TTFT {stats.ttft_ms:.0f} ms"
    if stats.reasoning_tokens:  # a thinking model: its thinking apart, and when the answer began
        line = f"{line} · thinking {stats.reasoning_tokens} tokens in {_duration(stats.reasoning_ms)}"
        if stats.first_answer_ms:
            line = f"{line} · answer from {_duration(stats.first_answer_ms)}"
    if n_ctx > 0:
        use = ContextUse.after(stats, n_ctx)
        line = f"{line} · ctx {use.used:,}/{n_ctx:,} ({use.share:.0%})"
    line = (f"{line} · prompt {stats.prompt_tps:.1f} tok/s ({stats.prompt_tokens} tokens) · "
            f"{stats.generated_tokens} tokens · {stats.stop_reason}")
    server_tps = (stats.server or {}).get("predicted_per_second")
    if server_tps:  # a remote engine: ours are measured here, the server's own figure beside them
        line = f"{line} · server says {server_tps:.1f} tok/s"
    if stats.acceptance_rate is not None:
        line = f"{line} · {speculation_words(stats)}"
    return line


def _duration(ms: float) -> str:
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


OVERFLOW_WORDS = {
    "drop-oldest": "the oldest turns are left out (--overflow drop-oldest)",
    "truncate-middle": "the turns after the first exchange are left out (--overflow truncate-middle)",
    "compact": "the model compacts the oldest turns into a note (--overflow compact)",
}


def context_warning(stats: GenerationStats, n_ctx: int, max_tokens: int, policy: str = "stop") -> str:
    """Said when the context is nearly full ("" before then): what is left, and what happens when it is full."""
    use = ContextUse.after(stats, n_ctx)
    if not use.near_full(max_tokens):
        return ""
    then = (f"when it is full {OVERFLOW_WORDS[policy]}" if policy in OVERFLOW_WORDS else
            "when it is full the engine refuses the next message: start a new chat (/reset) or load with a larger "
            "context (--ctx)")
    return (f"the context is nearly full: {use.left:,} of {n_ctx:,} tokens left (the next reply may take up to "
            f"{max_tokens:,}); {then}")


def cut_words(cut: ContextCut) -> str:
    """The stderr line that marks a cut: what was left out (and the model's note)."""
    words = f"{cut.words()}; {cut.prompt_tokens:,} tokens sent"
    return f"{words}. The note: {cut.note}" if cut.note else words


def cut_off_note(done: Done) -> str:
    """Said when the reply ran out of tokens while the model was still thinking: it never answered."""
    if done.stats.stop_reason != "length" or not done.stats.reasoning_tokens or done.stats.first_answer_ms:
        return ""
    return ("the reply ended inside the thinking, before any answer: raise --max-tokens, or bound the thinking with "
            "--reasoning-budget N")


def speculation_words(stats: GenerationStats) -> str:
    """Speculative decoding's figures in words: the share of guesses kept, and tokens per pass of the model."""
    return (f"draft accepted {stats.accepted_tokens}/{stats.draft_tokens} ({stats.acceptance_rate:.0%}), "
            f"{stats.tokens_per_pass:.2f} tokens per pass")


def _wanted(args: argparse.Namespace) -> dict[str, Any]:
    """The sampling the command line asks for; a sampling flag not given is None (the model's preset's, else the
    model's, else QuantDesk's), and the other settings are there only when given (else the preset's or the
    default)."""
    knobs = {"temperature": args.temperature, "top_p": args.top_p, "top_k": args.top_k, "min_p": args.min_p,
             "repeat_penalty": args.repeat_penalty}
    others = {"max_tokens": args.max_tokens, "seed": args.seed, "stop": tuple(args.stop) or None,
              "json_schema": _schema_file(args.json_schema), "enable_thinking": args.think,
              "reasoning_effort": args.reasoning_effort, "reasoning_budget": args.reasoning_budget,
              "chat_template_kwargs": args.chat_template_kwargs or None}
    return {**knobs, **{k: v for k, v in others.items() if v is not None}}


def sampling_words(chosen: ChosenSampling) -> str:
    """The values the model recommended, as the line after the load says them ("" where none was used)."""
    names = {"temperature": "temperature", "top_p": "top-p", "top_k": "top-k", "min_p": "min-p",
             "repeat_penalty": "repeat penalty"}
    parts = []
    for source, words in (("preset", "sampling from the model's preset"), ("model", "sampling from the model")):
        used = [f"{names[k]} {getattr(chosen.settings, k):g}" for k in SAMPLING_KNOBS if chosen.sources[k] == source]
        if used:
            parts.append(f"{words}: {', '.join(used)}")
    return "; ".join(parts)


def _schema_file(path: str | None) -> dict[str, Any] | None:
    """The JSON Schema in ``path``, or a sentence saying why it cannot be used."""
    if path is None:
        return None
    try:
        schema = json.loads(Path(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise EngineError(f"cannot read the JSON schema {path}: {exc.strerror or exc}", kind="settings") from None
    except ValueError as exc:
        raise EngineError(f"{path} is not valid JSON: {exc}", kind="settings") from None
    if not isinstance(schema, dict):
        raise EngineError(f"{path} holds no JSON Schema object", "a schema is a JSON object such as "
                                                                 '{"type": "object", ...}', kind="settings")
    problem = json_schema.refusal(schema)  # the server's check and sentence, before any engine starts
    if problem:
        raise EngineError(f"{path}: {problem}", kind="settings")
    return schema


def styled(stream: TextIO) -> bool:
    """Whether ``stream`` takes ANSI styles: a terminal, unless NO_COLOR is set (no-color.org) or it is dumb."""
    return stream.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"


FAINT, RESET = "\033[2m", "\033[0m"


class ReplyPrinter:
    """Writes a reply as it streams: the thinking (faint on a terminal; elsewhere under a "Thinking:" header, the
    answer under "Answer:"; or left out), then the answer. Each part's leading whitespace and the thinking's trailing
    whitespace are dropped: the formats put line breaks around the thinking block."""

    def __init__(self, out: TextIO, *, show_thinking: bool = True, styles: bool = False) -> None:
        self.out, self.show_thinking, self.styles = out, show_thinking, styles
        self.part = ""  # what is being written: "", "thinking" or "answer"
        self.held = ""  # whitespace at the end of the thinking so far, written only if more thinking follows

    def token(self, event: Token) -> None:
        if event.reasoning and self.show_thinking:
            self._thinking(event.reasoning)
        if event.text:
            self._answer(event.text)
        self.out.flush()

    def _thinking(self, text: str) -> None:
        if self.part != "thinking":
            text = text.lstrip()
            if not text:
                return
            if self.part == "answer":  # thinking again after some answer (a model that thinks between steps)
                self.out.write("\n\n")
            self.out.write(FAINT if self.styles else "Thinking:\n")
            self.part, self.held = "thinking", ""
        body = text.rstrip()
        if body:
            self.out.write(self.held + body)
            self.held = ""
        self.held += text[len(body):]

    def _answer(self, text: str) -> None:
        if self.part != "answer":
            text = text.lstrip()
            if not text:
                return
            if self.part == "thinking":
                self.out.write(f"{RESET}\n\n" if self.styles else "\n\nAnswer:\n")
            self.part = "answer"
        self.out.write(text)

    def finish(self) -> None:
        """After the reply, also one cut short by Ctrl-C: the terminal's style back to normal."""
        if self.part == "thinking" and self.styles:
            self.out.write(RESET)
        self.part = ""
        self.out.flush()


class Conversation:
    """The history ``quantdesk chat`` keeps, the overflow policy that chooses what of it the model reads, and the
    documents whose passages go with each question (--docs: app/commands/chat_docs.py; None: none)."""

    def __init__(self, history: list[Message], policy: str, n_ctx: int, docs: Any = None) -> None:
        self.history = history
        self.base = list(history)
        self.policy = policy
        self.n_ctx = n_ctx
        self.docs = docs
        self.cut: ContextCut | None = None

    def reset(self) -> None:
        self.history[:] = self.base
        self.cut = None

    def to_send(self, client: EngineClient, sampling: SamplingSettings, quiet: bool = False
                ) -> tuple[list[Message], SamplingSettings]:
        """What the model reads of the history, and the sampling for it: the turn's overflow policy, then the
        documents' passages in what it left (app/engine/turn.py ``Turn.prepare``, as the Chat's); a new cut is said
        on stderr (a compact note as the model writes it would be another stream: it is said whole, after)."""
        from app.engine.turn import Turn

        passages = self.docs.passages(client) if self.docs is not None else None
        fitted = Turn(self.history, sampling, self.policy, self.cut, passages=passages).prepare(client, self.n_ctx)
        if fitted.cut is not None and (self.cut is None or fitted.cut.dropped != self.cut.dropped) and not quiet:
            print(f"note: {cut_words(fitted.cut)}", file=sys.stderr)
        self.cut = fitted.cut or self.cut
        if self.docs is not None:
            self.docs.found(fitted.found)
        assert not isinstance(fitted.messages, str)
        return list(fitted.messages), fitted.sampling


def _turn(client: EngineClient, conversation: Conversation, sampling: SamplingSettings, printer: ReplyPrinter | None,
          tools: Any = None, quiet: bool = False) -> Done:
    """One user turn: its reply, and with --tools the tool loop's replies after it (app/commands/chat_tools.py),
    each reading what the conversation sends (``Conversation.to_send``: the overflow policy, the passages)."""
    def answer(chosen: SamplingSettings) -> Done:
        return _reply(client, *conversation.to_send(client, chosen, quiet), printer)

    return answer(sampling) if tools is None else tools.turn(answer, conversation.history, sampling)


def _reply(client: EngineClient, history: list[Message], sampling: SamplingSettings,
           printer: ReplyPrinter | None) -> Done:
    """Stream one reply (to ``printer``, if any); Ctrl-C cancels it and keeps what was generated."""
    from app.engine.turn import send

    stream = send(client, history, sampling, None).stream  # a terminal chat keeps no saved states
    done = None
    try:
        while done is None:
            try:
                for event in stream:
                    if isinstance(event, Done):
                        done = event
                    elif printer is not None:
                        printer.token(event)
            except KeyboardInterrupt:
                client.cancel()  # the stream goes on to a Done with stop reason 'cancelled'
    finally:
        if printer is not None:
            printer.finish()
    return done


def _printer(args: argparse.Namespace) -> ReplyPrinter:
    return ReplyPrinter(sys.stdout, show_thinking=not args.hide_thinking, styles=styled(sys.stdout))


def _after_reply(done: Done, n_ctx: int, max_tokens: int, policy: str = "stop", docs: Any = None) -> None:
    """The end of a printed reply: its line ends, the citations of the passages it was given follow (--docs), the
    stats (and why there is no answer, if so, and a context nearly full) go to stderr."""
    print()
    if docs is not None:
        docs.print_citations()
    print(stats_line(done.stats, n_ctx), file=sys.stderr)
    if done.notice:  # the engine crashed under this reply, which was replayed in a safer configuration
        print(f"note: {done.notice}", file=sys.stderr)
    if note := cut_off_note(done):
        print(f"note: {note}", file=sys.stderr)
    if warning := context_warning(done.stats, n_ctx, max_tokens, policy):
        print(f"warning: {warning}", file=sys.stderr)


def run(args: argparse.Namespace) -> int:
    from app.engine.client import EngineClient
    from app.hub.resolve import local_model

    from app.engine.turn import ModelDefaults, with_system_prompt

    args.model = local_model(args.model)  # a library model by name: its path (a path, a remote model: as given)
    images = _read_images(args.image)
    preset = None if args.no_preset else model_preset(args.model)
    defaults = ModelDefaults(preset=preset)  # the model's own sampling joins once it is loaded
    settings, given = load_settings(args)
    wanted = _wanted(args)  # reads --json-schema: a bad file is a sentence before any engine starts
    try:
        defaults.sampling(wanted).settings.validate()  # the model's own values are bounded when read
        settings.validate()
        # The projector loads only with images: a text chat need not hold it.
        settings = check_fit(args.model, settings, args, given=given, preset=preset, find_projector=bool(images))
        settings.validate()
    except ValueError as exc:
        raise EngineError(str(exc), kind="settings") from None
    if images and not settings.mmproj:
        raise EngineError(f"{Path(args.model).name} does not see images: no vision projector (mmproj GGUF) that "
                          "pairs with it lies beside it", "pass --mmproj FILE, or chat without --image", kind="vision")
    history = with_system_prompt([], defaults.system_prompt(args.system))
    policy = defaults.overflow(args.overflow, app_settings().overflow)
    tools = _start_tools(args)  # before the load: a server that cannot start is said before the model loads
    docs = _start_documents(args)  # a collection that is not there is said before the model loads
    if (note := draft_note(settings)) and not args.json:
        print(note, file=sys.stderr)
    if preset is not None and not args.json:
        print(f"the model's preset applies ({preset.key}; --no-preset ignores it)", file=sys.stderr)
    with EngineClient() as client, _closing(tools), _closing(docs):
        loaded = client.load(args.model, settings, backend=args.backend, runtime=args.runtime)
        defaults = dataclasses.replace(defaults, recommended=model_sampling(loaded.model_path))
        chosen = defaults.sampling(wanted)
        sampling = chosen.settings
        if not args.json:
            print(loaded_summary(loaded), file=sys.stderr)
            if loaded.notice:  # the crash guard's sentence (app/engine/guard.py)
                print(f"note: {loaded.notice}", file=sys.stderr)
            if words := sampling_words(chosen):
                print(words, file=sys.stderr)
        conversation = Conversation(history, policy, loaded.n_ctx, docs)
        if docs is not None:
            docs.loaded(loaded.n_ctx)
        if tools is not None:
            sampling = tools.prepare(loaded, sampling)
        if args.prompt is not None:
            history.append(Message("user", args.prompt, images))
            done = _turn(client, conversation, sampling, None if args.json else _printer(args), tools, args.json)
            if args.json:
                runs = {"tool_runs": tools.described()} if tools is not None else {}
                cut = {"context_cut": conversation.cut.to_dict()} if conversation.cut else {}
                cited = docs.described() if docs is not None else {}
                print(json.dumps({**_json_result(loaded, done), "sampling": chosen.described(), **runs,
                                  "overflow": policy, **cut, **cited}, indent=2))
            else:
                _after_reply(done, loaded.n_ctx, sampling.max_tokens, policy, docs)
            return 0
        return _interactive(client, conversation, sampling, _printer(args), images, tools, docs)


def model_preset(model: str) -> ModelPreset | None:
    """The model's preset (app/hub/presets.py), None when it has none; an unreadable presets file is said on stderr
    and counts as none."""
    from app.hub import presets

    saved = presets.load()
    if saved.problem:
        print(f"warning: {saved.problem}; no preset applies", file=sys.stderr)
        return None
    return presets.for_model(model)


def load_settings(args: argparse.Namespace) -> tuple[LoadSettings, tuple[str, ...]]:
    """The load settings of ``quantdesk chat``'s flags (each given, else the default), and the names of those given:
    the load planner keeps them over the model's preset and its own choices."""
    given = {"n_ctx": args.ctx, "gpu_layers": args.gpu_layers, "threads": args.threads,
             "kv_cache_type": args.kv_type, "cpu_moe": args.cpu_moe or None, "mmproj": args.mmproj or None,
             "draft": draft_setting(args) or None,
             "draft_tokens": args.draft_tokens if args.draft_tokens != DEFAULT_DRAFT_TOKENS else None,
             "draft_p_min": args.draft_p_min if args.draft_p_min != DEFAULT_DRAFT_P_MIN else None,
             "chat_template": getattr(args, "chat_template", None) or None}
    settings = LoadSettings(n_ctx=context_length(args.ctx), **{k: v for k, v in given.items()
                                                               if v is not None and k != "n_ctx"})
    return settings, tuple(k for k, v in given.items() if v is not None)


def _read_images(paths: list[str]) -> tuple[str, ...]:
    """The --image files, checked from their headers (app/images) and base64-encoded for the engine."""
    from pathlib import Path

    from app import images
    from app.errors import ModelFileError

    encoded = []
    for path in paths:
        try:
            data = Path(path).read_bytes()
        except OSError as exc:
            raise ModelFileError(f"cannot read the image {path}: {exc.strerror}") from None
        try:
            images.image_info(data)
        except images.ImageError as exc:
            raise images.ImageError(f"{path}: {exc.message}") from None
        encoded.append(images.to_base64(data))
    return tuple(encoded)


def loaded_summary(loaded: Loaded) -> str:
    """What loaded where: a remote model's server; for llama.cpp the runtime, its GPU and the layers on it, then a
    line per device; the experts kept in RAM."""
    from app.runtimes import report

    if loaded.backend == "remote":
        d = loaded.details
        return (f"loaded {d.get('model')} from {d.get('connection')} ({d.get('server_kind')} server at "
                f"{d.get('endpoint')}, {d.get('latency_ms', 0):.0f} ms away) · context {loaded.n_ctx}")
    experts = ""
    if loaded.details.get("experts_in_ram"):
        n = loaded.details["experts_in_ram"]
        experts = f" · experts of {n} layer{'s' if n != 1 else ''} in RAM"
    if not loaded.devices:
        where = f"{loaded.gpu_layers}/{loaded.n_layers} layers on the GPU" if loaded.gpu_offload_supported \
            else "CPU only (this build of the engine cannot use a GPU)"
        return "\n".join([f"loaded {loaded.model_path} with {loaded.backend} in {loaded.load_ms:.0f} ms · "
                          f"context {loaded.n_ctx} · {where}{experts}", *template_lines(loaded)])
    vision = loaded.details.get("vision")
    if vision:
        tokens = f", {vision['image_tokens']} tokens an image" if vision.get("image_tokens") else ""
        experts += f" · sees images ({vision['projector']}{tokens})"
    lines = [f"loaded {loaded.model_path} in {loaded.load_ms:.0f} ms · {report.placement(loaded)} · "
             f"context {loaded.n_ctx}{experts}"]
    if loaded.runtime:
        lines.append(f"  runtime {loaded.runtime}: {loaded.runtime_reason}")
    lines += [f"  {line}" for line in report.device_lines(loaded)]
    return "\n".join(lines + template_lines(loaded))


def template_lines(loaded: Loaded) -> list[str]:
    """Which chat template the model is served with and where it came from, and its tool format."""
    d = loaded.details
    if not d.get("chat_template_origin"):
        return []
    tools = {"": "", "generic": " · tools: the generic JSON format (the template shows none)"}.get(
        d.get("tool_format", ""), f" · tools: {d.get('tool_format')}")
    return [f"  chat template: {d.get('chat_template_title')} ({d['chat_template_origin']}){tools}"]


def _json_result(loaded: Loaded, done: Done) -> dict[str, Any]:
    s = done.stats
    calls = {"tool_calls": [dataclasses.asdict(c) for c in done.tool_calls]} if done.tool_calls else {}
    return {
        "text": done.text, "reasoning": done.reasoning, **calls,
        "prompt_tokens": s.prompt_tokens, "completion_tokens": s.generated_tokens,
        "reasoning_tokens": s.reasoning_tokens, "reasoning_ms": s.reasoning_ms, "first_answer_ms": s.first_answer_ms,
        "ttft_ms": s.ttft_ms, "prompt_ms": s.prompt_ms, "prompt_tps": s.prompt_tps, "decode_ms": s.decode_ms,
        "decode_tps": s.decode_tps, "stop_reason": s.stop_reason, "peak_memory_bytes": s.peak_memory_bytes,
        "context_used": ContextUse.after(s, loaded.n_ctx).used,
        "backend": loaded.backend, "model": loaded.model_path, "n_ctx": loaded.n_ctx, "load_ms": loaded.load_ms,
        "gpu_layers": loaded.gpu_layers, "gpu_offload_supported": loaded.gpu_offload_supported,
        "experts_in_ram": loaded.details.get("experts_in_ram", 0),
        "vision": loaded.details.get("vision"),
        "chat_template": loaded.details.get("chat_template"),
        "chat_template_origin": loaded.details.get("chat_template_origin"),
        "tool_format": loaded.details.get("tool_format"),
        "server_timings": s.server,
        "draft": loaded.details.get("draft"), "draft_tokens": s.draft_tokens, "accepted_tokens": s.accepted_tokens,
        "acceptance_rate": s.acceptance_rate, "verify_passes": s.verify_passes, "tokens_per_pass": s.tokens_per_pass,
        "runtime": loaded.runtime, "runtime_reason": loaded.runtime_reason,
        "notice": done.notice or loaded.notice,
        "offloaded_layers": loaded.offloaded_layers, "offloadable_layers": loaded.offloadable_layers,
        "devices": [dataclasses.asdict(d) for d in loaded.devices],
    }


def _interactive(client: EngineClient, conversation: Conversation, sampling: SamplingSettings, printer: ReplyPrinter,
                 images: tuple[str, ...] = (), tools: Any = None, docs: Any = None) -> int:
    history = conversation.history
    while True:
        try:
            line = input("> ")
        except (EOFError, KeyboardInterrupt):
            print()
            return 0
        if line.strip() in ("/exit", "/quit"):
            return 0
        if line.strip() == "/reset":
            conversation.reset()
            print("(history cleared)", file=sys.stderr)
            continue
        if not line.strip():
            continue
        history.append(Message("user", line, images))
        images = ()  # the images go with the first message
        done = _turn(client, conversation, sampling, printer, tools)
        # with its thinking, as the Chat sends it: the model's template decides whether the model sees it again;
        # a turn stopped during its tool calls left its calls and their answers in the history already
        if not done.tool_calls:
            history.append(Message("assistant", done.text, reasoning=done.reasoning))
        _after_reply(done, conversation.n_ctx, sampling.max_tokens, conversation.policy, docs)


# --- tools (MCP): the tool loop of app/mcp/loop.py in the terminal


def _start_tools(args: argparse.Namespace) -> Any:
    """With --tools: the named servers connected (a command not confirmed yet is shown and asked for), else None."""
    if not args.tools:
        return None
    from app.commands.chat_tools import TerminalTools

    return TerminalTools.start(args)


def _start_documents(args: argparse.Namespace) -> Any:
    """With --docs: the named collections (app/commands/chat_docs.py), else None."""
    if not args.docs:
        return None
    from app.commands.chat_docs import TerminalDocuments

    return TerminalDocuments.start(args)


class _closing:
    """Closes the tool servers (their processes), or the documents (their store and embedding engine), when the
    chat ends, however it ends."""

    def __init__(self, tools: Any) -> None:
        self.tools = tools

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        if self.tools is not None:
            self.tools.close()
