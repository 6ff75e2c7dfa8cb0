"""QuantDesk as an MCP server: its own tools for an agent running elsewhere (Claude Desktop, LM Studio, Cursor, an
agent built on the ``mcp`` SDK), served over stdio by ``quantdesk mcp serve`` (app/commands/mcp_serve.py) and over
streamable HTTP at ``/mcp`` on the local server (app/server/app.py, behind the same guard as the OpenAI routes).

The tools are faces of the homes that do the work, never their own version of it:

- ``hardware``: this machine's profile (``app/machine``, or the ``--hardware`` file), as ``quantdesk hw --json``;
- ``library``: the downloaded models (``app/hub/library``), each with the id ``chat`` takes;
- ``fit`` / ``recommend``: the fit check and the recommender (``app/models/recommend``) for a library model, a local
  file or folder, or a Hub repo (``app/hub/resolve``, ``app/hub/listing``), as ``quantdesk fit/recommend --json``;
- ``search_hub``: Hub search (``app/hub/search``);
- ``pull``: a verified, resumable download (``app/hub/plan`` + ``app/hub/download``), listed only when the user
  started the server with ``--allow-downloads`` (a call without it says how to turn it on);
- ``chat`` / ``complete``: a library model answers, loaded into the process's one ModelPool within its memory budget
  by the server's router (``app/server/router.py``: the same plan, budget, refusal and queue as an OpenAI request
  naming that model), the request checked by ``app/server/params.py``;
- ``bench``: the quant lab's speed run (``app/lab/runner``), bounded (a few models, short runs, no quality pass).

Each tool publishes a JSON schema for its input and for its output; a call's arguments are held to the published input
schema (jsonschema), and a result carries ``structuredContent`` (with the same JSON as text for clients that read only
text). Failures are tool errors (``isError``) in the project's own sentences (QuantDeskError, the router's ApiError);
they never end the session. The server lives here, in the server home, because ``chat`` and ``complete`` are served
requests like the OpenAI API's: the same router, pool and queues, and over HTTP the same guard and the same models
(the served primary, the pool's other models).
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread

from app.errors import QuantDeskError
from app.server import turns
from app.server.params import ApiError, GenerationRequest, parse_chat, parse_completion
from app.server.router import ModelRouter, ServeSettings, model_id
from app.server.turns import Overflow
from app.datatypes import DEFAULT_OVERFLOW, OVERFLOW_POLICIES, Done, GenerationStats

if TYPE_CHECKING:
    from mcp.server.lowlevel import Server
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
    from mcp_types import CallToolResult

log = logging.getLogger(__name__)

SERVER_NAME = "quantdesk"
DOWNLOADS_OFF = ("Downloads are off on this server: the user has to start it with --allow-downloads "
                 "(quantdesk mcp serve --allow-downloads) for an agent to fetch models.")
MAX_BENCH_MODELS = 4
MAX_GENERATED_TOKENS = 4096

INSTRUCTIONS = ("QuantDesk manages local LLMs on this machine. Ask `hardware` what the machine has, `library` which "
                "models are downloaded, `fit` or `recommend` which quant of a Hub repo or local model fits, "
                "`search_hub` to find repos, and `chat` or `complete` to have a downloaded model answer (it is "
                "loaded within the memory budget). `bench` measures the speed of downloaded models.")

# --- schemas ---------------------------------------------------------------------------------------------------

_INT_OR_NULL = {"type": ["integer", "null"]}
_NUMBER_OR_NULL = {"type": ["number", "null"]}
_STRING_OR_NULL = {"type": ["string", "null"]}


def _object(properties: dict[str, Any], required: tuple[str, ...] = (), *, closed: bool = False) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "required": list(required)}
    if closed:  # an input: an argument the tool does not take is a mistake worth saying
        schema["additionalProperties"] = False
    return schema


MODEL_NAME = {"type": "string", "minLength": 1, "maxLength": 500,
              "description": "a library model (its id as `library` lists it, its repo, a unique prefix), a local .gguf "
                             "file or model folder, a Hub "
                             "repo (owner/name; owner/name@BRANCH for one EXL2/EXL3 branch) or a Hub file "
                             "(owner/name/file.gguf)"}
CTX = {"type": "integer", "minimum": 1, "maximum": 1048576,
       "description": "context length in tokens to plan for (default: QuantDesk's setting)"}
LIBRARY_ID = {"type": "string", "minLength": 1, "maxLength": 500,
              "description": "a library model: its id as `library` lists it under `model` (or under `id`, as "
                             "`quantdesk ls` prints it), its repo (owner/name, with :QUANT where the library holds "
                             "several) or a unique prefix"}
MAX_TOKENS = {"type": "integer", "minimum": 1, "maximum": MAX_GENERATED_TOKENS,
              "description": "tokens to generate at most (default 256)"}
TEMPERATURE = {"type": "number", "minimum": 0, "maximum": 2,
               "description": "sampling temperature (default: the model's preset, else its recommendation, else "
                              "QuantDesk's)"}
OVERFLOW = {"type": "string", "enum": list(OVERFLOW_POLICIES),
            "description": "what to do once the conversation no longer fits the model's context: stop (an error), "
                           "drop-oldest, truncate-middle (keeps the first exchange) or compact (the model summarises "
                           "what it leaves out); default: the server's policy"}

FIT_OUT = _object({
    "label": {"type": "string"}, "format": {"type": "string"}, "quant": {"type": "string"},
    "verdict": {"type": "string", "description": "full GPU, partial offload, CPU only, MoE split, too large, …"},
    "reason": {"type": "string"},
    "devices": {"type": "array", "items": {"type": "object"},
                "description": "memory per device: weights, KV cache, compute, output, total (bytes)"},
    "gpu_layers": _INT_OR_NULL, "n_layers": _INT_OR_NULL, "cpu_moe": _INT_OR_NULL, "n_ctx": _INT_OR_NULL,
    "kv_type": _STRING_OR_NULL, "max_ctx": _INT_OR_NULL, "decode_tok_s": _NUMBER_OR_NULL,
    "file_bytes": _INT_OR_NULL, "bits_per_weight": _NUMBER_OR_NULL,
    "notes": {"type": "array", "items": {"type": "string"}}, "runtime": _STRING_OR_NULL,
    "image_tokens": {"type": "integer"},
}, ("label", "format", "quant", "verdict", "reason", "devices"))

_PICK = _object({"label": {"type": "string"}, "quant": {"type": "string"}, "verdict": {"type": "string"},
                 "reason": {"type": "string"}}, ("label", "quant", "verdict", "reason"))

USAGE = _object({"prompt_tokens": {"type": "integer"}, "completion_tokens": {"type": "integer"},
                 "cached_tokens": {"type": "integer"}, "decode_tokens_per_second": {"type": "number"}},
                ("prompt_tokens", "completion_tokens"))

GENERATION_OUT = _object({
    "model": {"type": "string", "description": "the model that answered"},
    "text": {"type": "string", "description": "the answer"},
    "reasoning": {"type": "string", "description": "a thinking model's thinking, apart from the answer"},
    "finish_reason": {"type": "string", "enum": ["stop", "length"]},
    "usage": USAGE,
    "overflow": {"type": "string", "description": "the overflow policy the conversation was sent under (chat)"},
    "context_dropped": {"type": "integer", "description": "earlier messages it left out (0: all were sent)"},
}, ("model", "text", "finish_reason", "usage"))


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any]
    read_only: bool = True
    open_world: bool = False  # reaches the Hub


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("hardware", "This machine",
             "This machine's CPU, memory, GPUs, free disk and the engines that can run here (as `quantdesk hw "
             "--json`): what the fit check plans with.",
             _object({}, closed=True),
             _object({"os": {"type": "string"}, "arch": {"type": "string"}, "cpu": {"type": "object"},
                      "ram_total_bytes": _INT_OR_NULL, "ram_available_bytes": _INT_OR_NULL,
                      "gpus": {"type": "array", "items": {"type": "object"}}, "disk_free_bytes": _INT_OR_NULL,
                      "backends": {"type": "array", "items": {"type": "object"}},
                      "hints": {"type": "array", "items": {"type": "string"}}},
                     ("os", "arch", "cpu", "ram_total_bytes", "gpus", "backends"))),
    ToolSpec("library", "Downloaded models",
             "The models in QuantDesk's library (downloaded, imported or linked): each with `model`, the id "
             "`chat`, `complete`, `fit` and `bench` take, its format, quant, size and where it came from.",
             _object({}, closed=True),
             _object({"models": {"type": "array", "items": _object({
                          "model": {"type": "string", "description": "the id chat/complete/fit/bench take"},
                          "id": {"type": "string"}, "name": {"type": "string"}, "path": {"type": "string"},
                          "format": {"type": "string"}, "quant": _STRING_OR_NULL, "size": {"type": "integer"},
                          "repo_id": _STRING_OR_NULL, "architecture": _STRING_OR_NULL,
                          "projector": _STRING_OR_NULL}, ("model", "id", "path", "format", "size"))},
                      "disk": _object({"models_dir": {"type": "string"}, "free_bytes": {"type": "integer"},
                                       "models": {"type": "integer"}}, ("models_dir", "free_bytes", "models"))},
                     ("models", "disk"))),
    ToolSpec("fit", "Does it fit?",
             "Memory per device for one model at a context size, and the verdict (full GPU, partial offload, CPU "
             "only, too large) with its reason, as `quantdesk fit --json`. A Hub repo is read by its headers only; "
             "nothing is downloaded.",
             _object({"model": MODEL_NAME, "ctx": CTX,
                      "kv_type": {"type": "string", "enum": ["f16", "q8_0", "q4_0"],
                                  "description": "KV cache type (default f16)"},
                      "gpu_layers": {"type": "integer", "minimum": 0, "maximum": 100000,
                                     "description": "layers on the GPU (default: the most that fit)"}},
                     ("model",), closed=True),
             FIT_OUT, open_world=True),
    ToolSpec("recommend", "Which quant fits best",
             "Which quant of one or more Hub repos, local folders or files fits this machine best, per format, with "
             "the reasons and the load settings, as `quantdesk recommend --json`.",
             _object({"models": {"type": "array", "items": MODEL_NAME, "minItems": 1, "maxItems": 8,
                                 "description": "Hub repo ids (owner/name), library model ids, local files or "
                                                "folders: every quant in them is a candidate"},
                      "ctx": CTX}, ("models",), closed=True),
             _object({"n_ctx": {"type": "integer"}, "format_preference": {"type": "array", "items": {"type": "string"}},
                      "format_reason": {"type": "string"}, "candidates": {"type": "array", "items": FIT_OUT},
                      "best_per_format": {"type": "object", "additionalProperties": _PICK},
                      "best": {"anyOf": [_PICK, {"type": "null"}]},
                      "load_settings": {"anyOf": [{"type": "object"}, {"type": "null"}]},
                      "drafts": {"type": "object", "description": "per format, a library model to draft with"},
                      "measured": {"type": "object", "additionalProperties": {"type": "string"},
                                   "description": "what the quant lab measured here, per candidate"}},
                     ("n_ctx", "candidates", "best_per_format", "best")), open_world=True),
    ToolSpec("search_hub", "Search the Hugging Face Hub",
             "Model repos on the Hugging Face Hub whose id contains the query, with their format, downloads and "
             "likes.",
             _object({"query": {"type": "string", "maxLength": 200, "description": "text to find in repo ids"},
                      "format": {"type": "string", "enum": ["gguf", "mlx", "exl2", "exl3"]},
                      "sort": {"type": "string", "enum": ["downloads", "likes", "recent"]},
                      "limit": {"type": "integer", "minimum": 1, "maximum": 50, "description": "default 10"},
                      "page": {"type": "integer", "minimum": 1, "maximum": 1000}}, ("query",), closed=True),
             _object({"results": {"type": "array", "items": _object({
                 "repo_id": {"type": "string"}, "format": {"type": "string"}, "downloads": _INT_OR_NULL,
                 "likes": _INT_OR_NULL, "last_modified": _STRING_OR_NULL, "gated": {"type": "boolean"},
                 "tags": {"type": "array", "items": {"type": "string"}}}, ("repo_id", "format"))}}, ("results",)),
             open_world=True),
    ToolSpec("pull", "Download a model",
             "Download a model from the Hub into the library, each file checked against the Hub's size and hash "
             "(a GGUF quant with all its shards and its vision projector; an interrupted download resumes when "
             "asked again). Returns the `model` id `chat` takes.",
             _object({"repo": {"type": "string", "minLength": 3, "maxLength": 200, "description": "owner/name"},
                      "quant": {"type": "string", "maxLength": 64,
                                "description": "a GGUF quant such as Q4_K_M, or an EXL2/EXL3 bit rate (4.0bpw)"},
                      "files": {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 500},
                                "maxItems": 64, "description": "these files of the repo only"},
                      "revision": {"type": "string", "maxLength": 200, "description": "branch, tag or commit"}},
                     ("repo",), closed=True),
             _object({"model": {"type": "string"}, "repo_id": {"type": "string"}, "commit": {"type": "string"},
                      "path": {"type": "string"}, "files": {"type": "array", "items": {"type": "string"}},
                      "resumed_bytes": {"type": "integer"}, "projector": _STRING_OR_NULL},
                     ("model", "repo_id", "commit", "path", "files")),
             read_only=False, open_world=True),
    ToolSpec("chat", "Chat with a local model",
             "Have a downloaded model answer a conversation. The model is loaded on first use within the memory "
             "budget (a model that does not fit is refused in words) and stays loaded for the next call.",
             _object({"model": LIBRARY_ID,
                      "messages": {"type": "array", "minItems": 1, "maxItems": 256, "items": _object({
                          "role": {"type": "string", "enum": ["system", "user", "assistant"]},
                          "content": {"type": "string", "maxLength": 1_000_000}}, ("role", "content"), closed=True)},
                      "max_tokens": MAX_TOKENS, "temperature": TEMPERATURE, "overflow": OVERFLOW},
                     ("model", "messages"), closed=True),
             GENERATION_OUT, read_only=False),
    ToolSpec("complete", "Complete a text",
             "Have a downloaded model continue a raw text (no chat template), loaded as `chat` loads it.",
             _object({"model": LIBRARY_ID, "prompt": {"type": "string", "maxLength": 1_000_000},
                      "max_tokens": MAX_TOKENS, "temperature": TEMPERATURE}, ("model", "prompt"), closed=True),
             GENERATION_OUT, read_only=False),
    ToolSpec("bench", "Measure speed",
             f"The quant lab's speed run on up to {MAX_BENCH_MODELS} downloaded models: each loaded in a fresh "
             "engine, a calibrated prompt, then tokens generated; load time, prompt and generation tokens/s, time "
             "to first token and peak memory (medians). Saved in the lab's history.",
             _object({"models": {"type": "array", "items": LIBRARY_ID, "minItems": 1, "maxItems": MAX_BENCH_MODELS},
                      "prompt_tokens": {"type": "integer", "minimum": 16, "maximum": 2048,
                                        "description": "default 128"},
                      "gen_tokens": {"type": "integer", "minimum": 1, "maximum": 256, "description": "default 32"},
                      "reps": {"type": "integer", "minimum": 1, "maximum": 3, "description": "default 1"}},
                     ("models",), closed=True),
             _object({"id": {"type": "string"}, "variants": {"type": "array", "items": _object({
                 "model": {"type": "string"}, "path": {"type": "string"}, "format": {"type": "string"},
                 "quant": {"type": "string"}, "size_bytes": {"type": "integer"}, "error": {"type": "string"},
                 "load_ms": _NUMBER_OR_NULL, "prompt_tps": _NUMBER_OR_NULL, "ttft_ms": _NUMBER_OR_NULL,
                 "decode_tps": _NUMBER_OR_NULL, "peak_memory_bytes": _NUMBER_OR_NULL},
                 ("model", "path", "error"))}}, ("id", "variants")),
             read_only=False),
)


# How a long call says how far it is: (progress, total, message), sent to the client as notifications/progress when it
# asked for them (a progress token); clients show it, and some keep a call alive while it comes.
ReportProgress = Callable[[float, float | None, str], Coroutine[Any, Any, None]]
PROGRESS_EVERY_S = 0.5


class ToolFailed(QuantDeskError):
    """A tool call that cannot be answered; its sentence goes back to the agent as a tool error."""


# --- the tools ---------------------------------------------------------------------------------------------------


class QuantDeskTools:
    """The tools over one router: the local server's (``/mcp``: its primary, its pool, its settings) or the stdio
    server's own (a pool with no primary, library models loaded on demand)."""

    def __init__(self, router: ModelRouter, *, allow_downloads: bool = False, overflow: str = DEFAULT_OVERFLOW
                 ) -> None:
        self.router = router
        self.allow_downloads = allow_downloads
        self.overflow = overflow  # the overflow policy of a `chat` call that names none (the server's)
        self._handlers: dict[str, Callable[[dict[str, Any], ReportProgress | None], Awaitable[dict[str, Any]]]] = {
            "hardware": self.hardware, "library": self.library, "fit": self.fit, "recommend": self.recommend,
            "search_hub": self.search_hub, "pull": self.pull, "chat": self.chat, "complete": self.complete,
            "bench": self.bench}

    def specs(self) -> list[ToolSpec]:
        """The tools this server lists: ``pull`` only when downloads are allowed."""
        return [t for t in TOOLS if t.name != "pull" or self.allow_downloads]

    async def call(self, name: str, arguments: dict[str, Any], progress: ReportProgress | None = None
                   ) -> dict[str, Any]:
        """The tool's structured result; ``progress`` hears how far a long one (pull, bench) is. Raises ToolFailed
        (or the homes' QuantDeskError, the router's ApiError) with the sentence the agent reads."""
        spec = next((t for t in TOOLS if t.name == name), None)
        if spec is None:
            raise ToolFailed(f"There is no tool named {name[:100]!r} here; tools/list names the tools this server has.")
        if name == "pull" and not self.allow_downloads:
            raise ToolFailed(DOWNLOADS_OFF)
        check_arguments(spec, arguments)
        return await self._handlers[name](arguments, progress)

    # --- the machine and the library ---

    async def hardware(self, args: dict[str, Any], progress: ReportProgress | None = None) -> dict[str, Any]:
        profile = await anyio.to_thread.run_sync(self.router.profile)
        return profile.to_dict()

    async def library(self, args: dict[str, Any], progress: ReportProgress | None = None) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(_library_listing)

    def _library_path(self, name: str) -> str | None:
        """A library model's path by the id ``library`` lists (the router's served id), else by a name the library
        knows it by (what `quantdesk ls` prints, its repo, a unique prefix: app/hub/resolve.library_model)."""
        from app.hub.resolve import library_model

        return dict(self.router.library_models()).get(name) or library_model(name)

    def _served_name(self, name: str) -> str:
        """The name ``chat``/``complete`` ask the router for: a name it serves as it is (the primary, its aliases, a
        loaded model, a library model's served id, a remote model), else the served id of the library's model by
        that name; a name the library does not know goes to the router, which says so."""
        from app.hub.resolve import library_model

        router = self.router
        served = {router.primary_id(), *router.settings.aliases, *(s.served for s in router.loaded_engines()),
                  *dict(router.library_models())}
        if name in served or name.startswith("remote:"):
            return name
        path = library_model(name)
        return model_id(path) if path is not None else name

    # --- fit, recommend, search ---

    async def fit(self, args: dict[str, Any], progress: ReportProgress | None = None) -> dict[str, Any]:
        def work() -> dict[str, Any]:
            from app.hub.resolve import load_metadata
            from app.models.recommend import fit_model
            from app.settings import context_length

            name = args["model"]
            meta = load_metadata(dict(self.router.library_models()).get(name) or name)  # other names: as `fit`
            result = fit_model(meta, self.router.profile(), context_length(args.get("ctx")),
                               args.get("gpu_layers", "auto"), args.get("kv_type", "f16"), label=name)
            return result.to_json()

        return await anyio.to_thread.run_sync(work)

    async def recommend(self, args: dict[str, Any], progress: ReportProgress | None = None) -> dict[str, Any]:
        def work() -> dict[str, Any]:
            import dataclasses

            from app.hub.resolve import candidates, draft_suggestions
            from app.lab import measured
            from app.models.recommend import recommend
            from app.settings import context_length

            served = dict(self.router.library_models())
            names = [served.get(n, n) for n in args["models"]]  # other names: as `quantdesk recommend` reads them
            report = recommend(candidates(names), self.router.profile(), context_length(args.get("ctx")))
            found = measured.find(c.label for c in report.candidates)
            return report.to_json() | {
                "drafts": {fmt: dataclasses.asdict(s) for fmt, s in draft_suggestions(report).items()},
                "measured": {label: m.sentence() for label, m in found.items()}}

        return await anyio.to_thread.run_sync(work)

    async def search_hub(self, args: dict[str, Any], progress: ReportProgress | None = None) -> dict[str, Any]:
        def work() -> dict[str, Any]:
            from app.hub.search import search_models

            limit = args.get("limit", 10)
            found = search_models(args["query"], fmt=args.get("format"), sort=args.get("sort", "downloads"),
                                  limit=limit, offset=(args.get("page", 1) - 1) * limit)
            return {"results": [r.to_json() for r in found]}

        return await anyio.to_thread.run_sync(work)

    # --- pull ---

    async def pull(self, args: dict[str, Any], progress: ReportProgress | None = None) -> dict[str, Any]:
        cancel = threading.Event()
        report = _Reporter(progress)

        def work() -> dict[str, Any]:
            from app.hub.download import Downloader, Progress
            from app.hub.plan import DownloadRequest

            def on_progress(p: Progress) -> None:
                report(p.done, p.total or None, f"{p.state} {p.file}".strip() + (f": {p.message}" if p.message else ""),
                       final=p.state in ("done", "failed", "paused"))

            request = DownloadRequest(repo_id=args["repo"], revision=args.get("revision", "main"),
                                      quant=args.get("quant"), files=tuple(args.get("files", ())))
            runner = Downloader(request, on_progress)
            def stop_when_cancelled() -> None:
                cancel.wait()
                runner.cancel()  # a finished download ignores it

            watcher = threading.Thread(target=stop_when_cancelled, daemon=True)
            watcher.start()
            try:
                result = runner.run()
            finally:
                cancel.set()  # ends the watcher
            self.router.library_changed()  # so that `chat` finds the new model at once
            return {"model": model_id(str(result.path)), "repo_id": result.repo_id, "commit": result.commit,
                    "path": str(result.path), "files": [f.path for f in result.files],
                    "resumed_bytes": result.resumed_bytes, "projector": result.projector or None}

        return await _cancellable(work, cancel)

    # --- chat, complete ---

    async def chat(self, args: dict[str, Any], progress: ReportProgress | None = None) -> dict[str, Any]:
        body = {"messages": args["messages"], "max_tokens": args.get("max_tokens", 256)}
        if "temperature" in args:
            body["temperature"] = args["temperature"]
        return await self._generate(args["model"], body, chat=True, overflow=args.get("overflow") or self.overflow)

    async def complete(self, args: dict[str, Any], progress: ReportProgress | None = None) -> dict[str, Any]:
        body = {"prompt": args["prompt"], "max_tokens": args.get("max_tokens", 256)}
        if "temperature" in args:
            body["temperature"] = args["temperature"]
        return await self._generate(args["model"], body, chat=False)

    async def _generate(self, model: str, body: dict[str, Any], *, chat: bool, overflow: str = "stop"
                        ) -> dict[str, Any]:
        """As the server answers a request naming ``model``: the router's lease (a library model loaded into the pool
        within the budget, when this server loads on demand), the request checked as the OpenAI API checks it and
        built as its turn (app/server/turns.py: the model's preset, the overflow policy), the model's queue in arrival
        order with every other request, then released."""
        from app.engine.turn import ModelDefaults

        model = await anyio.to_thread.run_sync(self._served_name, model)
        lease = await anyio.to_thread.run_sync(self.router.acquire, model)
        try:
            defaults = await anyio.to_thread.run_sync(ModelDefaults.of, lease.loaded.model_path)

            def parse() -> tuple[GenerationRequest, Overflow | None]:
                served, n_ctx = lease.served, lease.loaded.n_ctx
                if not chat:
                    return parse_completion(body, served_id=served, n_ctx=n_ctx, recommended=defaults.recommended,
                                            preset=defaults.preset_sampling), None
                parsed = parse_chat(body, served_id=served, n_ctx=n_ctx, recommended=defaults.recommended,
                                    preset=defaults.preset_sampling)
                parsed, report, _ = turns.prepare(lease, parsed, defaults, overflow)
                return parsed, report

            parsed, report = await anyio.to_thread.run_sync(parse)
            job = await lease.queue.submit(parsed.messages, parsed.sampling)
            try:
                event = await job.next()
                while not isinstance(event, Done):
                    event = await job.next()
            finally:
                job.cancel()  # the agent went away (the call was cancelled): the engine stops; done: nothing
        finally:
            lease.release()
        return _generation(lease.served, event, report)

    # --- bench ---

    async def bench(self, args: dict[str, Any], progress: ReportProgress | None = None) -> dict[str, Any]:
        cancel = threading.Event()
        report = _Reporter(progress)

        def work() -> dict[str, Any]:
            from app.lab.results import SPEED_METRICS, BenchSettings
            from app.lab.runner import LabProgress, run_bench

            def on_progress(p: LabProgress) -> None:
                report(p.step - 1 + (p.fraction or 0.0), p.total, f"{p.variant}: {p.message}",
                       final=p.fraction is None)
            from app.lab.store import ResultStore
            from app.models.budget import too_large

            paths: dict[str, str] = {}
            for name in dict.fromkeys(args["models"]):
                path = self._library_path(name)
                if path is None:
                    raise ToolFailed(f"{name!r} is not in the library; `library` lists the models bench can run.")
                plan = self.router.plan(path)
                if plan.fit is not None and too_large(plan.fit):
                    raise ToolFailed(f"{name} does not fit this machine ({plan.fit.reason}), so it is not benched "
                                     "here; `quantdesk bench` in a terminal runs it anyway.")
                # Each variant runs in a fresh engine beside the models this server holds: the budget counts them
                check = self.router.models.check(path, plan.estimate_bytes)
                if check is not None and not check.fits:
                    raise ToolFailed(f"{check.situation()}, so {name} is not benched now; it can be once models "
                                     "unload (after their idle time), or with a larger --memory-budget.")
                paths[path] = name
            settings = BenchSettings(prompt_tokens=args.get("prompt_tokens", 128),
                                     gen_tokens=args.get("gen_tokens", 32), reps=args.get("reps", 1), quality=False,
                                     speed=True)
            result = run_bench(list(paths), settings, labels=paths, hardware=self.router.profile(), cancel=cancel,
                               on_progress=on_progress)
            ResultStore().save(result)
            variants = []
            for v in result.variants:
                row: dict[str, Any] = {"model": v.label, "path": v.path, "format": v.format, "quant": v.quant,
                                       "size_bytes": v.size_bytes, "error": v.error}
                row.update({metric: v.figure(metric) for metric in SPEED_METRICS})
                variants.append(row)
            return {"id": result.id, "variants": variants}

        return await _cancellable(work, cancel)


class _Reporter:
    """Progress from the work's threads (the call's worker, a download's progress pump) handed to the call's event
    loop, waiting until it is sent: at most every PROGRESS_EVERY_S unless a step ends, and only forward (MCP's
    progress must increase). Made on the event loop; nothing when the client asked for no progress."""

    def __init__(self, progress: ReportProgress | None) -> None:
        import anyio.lowlevel

        self._progress = progress
        self._token = anyio.lowlevel.current_token()
        self._last = -PROGRESS_EVERY_S
        self._sent: float | None = None
        self._lock = threading.Lock()

    def __call__(self, done: float, total: float | None, message: str, *, final: bool = False) -> None:
        import time

        import anyio.from_thread

        with self._lock:
            now = time.monotonic()
            if self._progress is None or (now - self._last < PROGRESS_EVERY_S and not final) or \
                    (self._sent is not None and done <= self._sent):
                return
            self._last, self._sent = now, done
            try:
                anyio.from_thread.run(self._progress, done, total, message, token=self._token)
            except Exception:  # the session may be gone; the work goes on (its cancel comes from the call)
                log.debug("progress not sent", exc_info=True)


def check_arguments(spec: ToolSpec, arguments: dict[str, Any]) -> None:
    """The arguments against the tool's published input schema; the first problem in words."""
    import jsonschema

    validator = jsonschema.Draft202012Validator(spec.input_schema)
    problem = jsonschema.exceptions.best_match(validator.iter_errors(arguments))
    if problem is not None:
        where = ".".join(str(p) for p in problem.absolute_path)
        raise ToolFailed(f"The arguments do not fit {spec.name}'s input schema: "
                         + (f"{where}: " if where else "") + f"{problem.message}.")


async def _cancellable(work: Callable[[], dict[str, Any]], cancel: threading.Event) -> dict[str, Any]:
    """``work`` on a worker thread; a cancelled call (the agent's cancel, the session gone) sets ``cancel`` for the work
    to stop at its next check."""
    try:
        return await anyio.to_thread.run_sync(work, abandon_on_cancel=True)
    except BaseException:
        cancel.set()
        raise


def _library_listing() -> dict[str, Any]:
    from app.hub.library import Library

    library = Library()
    models = [e.to_json() | {"model": model_id(e.path)} for e in library.entries()]
    return {"models": models, "disk": library.disk_usage()}


def _generation(served: str, done: Done, report: Overflow | None = None) -> dict[str, Any]:
    stats: GenerationStats = done.stats
    out: dict[str, Any] = {"model": served, "text": done.text,
                           "finish_reason": "length" if stats.stop_reason == "length" else "stop",
                           "usage": {"prompt_tokens": stats.prompt_tokens, "completion_tokens": stats.generated_tokens,
                                     "cached_tokens": stats.cached_tokens,
                                     "decode_tokens_per_second": round(stats.decode_tps, 2)}}
    if done.reasoning:
        out["reasoning"] = done.reasoning
    if report is not None:
        out.update(overflow=report.policy, context_dropped=report.cut.dropped if report.cut else 0)
    return out


def error_sentence(exc: BaseException) -> str:
    """What the agent reads for a failed call: the project's sentence, never a traceback."""
    if isinstance(exc, ApiError):
        return exc.message
    if isinstance(exc, QuantDeskError):
        return str(exc)
    if isinstance(exc, ValueError):  # the homes' checks of values (bench settings, a search's format)
        return str(exc)
    log.exception("an MCP tool failed unexpectedly")
    return f"QuantDesk could not answer: internal error ({type(exc).__name__}); the log file has the details."


# --- the MCP server ----------------------------------------------------------------------------------------------


def build_server(tools: QuantDeskTools) -> Server[Any]:
    """The MCP server (the SDK's low-level Server: the schemas are ours, written out above) over ``tools``."""
    import mcp_types as types
    from mcp.server.lowlevel import Server

    from app import __version__

    async def list_tools(ctx: Any, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(
            name=t.name, title=t.title, description=t.description, input_schema=t.input_schema,
            output_schema=t.output_schema,
            annotations=types.ToolAnnotations(title=t.title, read_only_hint=t.read_only, open_world_hint=t.open_world,
                                              destructive_hint=False)) for t in tools.specs()])

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> CallToolResult:
        async def progress(done: float, total: float | None, message: str) -> None:
            await ctx.session.report_progress(done, total, message)  # sent only when the client gave a progress token

        try:
            result = await tools.call(params.name, dict(params.arguments or {}), progress)
        except Exception as exc:  # any tool's failure is a tool error in words the agent reads, never a lost session
            return types.CallToolResult(content=[types.TextContent(type="text", text=error_sentence(exc))],
                                        is_error=True)
        return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(result))],
                                    structured_content=result)

    return Server(SERVER_NAME, version=__version__, title="QuantDesk", instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(tools: QuantDeskTools) -> None:
    """Serve ``tools`` over this process's stdin and stdout until the client closes them. The SDK's transport claims
    fd 1 for the protocol and points it at stderr, so a print (or an engine host's output) cannot corrupt it."""
    from mcp.server.stdio import stdio_server

    server = build_server(tools)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


class HttpEndpoint:
    """``/mcp`` on the local server: the SDK's streamable HTTP transport as an ASGI app (``asgi``), its sessions run
    from the server's lifespan (``running``). The local server's Guard stands in front of it as in front of every
    route (Host, Origin, API key), so the SDK's own DNS-rebinding check is left off: it would not know the hosts and
    origins the user allowed."""

    def __init__(self, tools: QuantDeskTools) -> None:
        from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager

        self.manager: StreamableHTTPSessionManager = StreamableHTTPSessionManager(build_server(tools))
        self.asgi = StreamableHTTPASGIApp(self.manager)

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[None]:
        async with self.manager.run():
            yield


def run_stdio(settings: ServeSettings, *, allow_downloads: bool = False, overflow: str | None = None) -> None:
    """``quantdesk mcp serve``: the tools over stdin/stdout until the client closes them, with a pool of this
    process's own and no primary model: library models load on demand into it (``settings``: ServeSettings with
    load_on_demand, its budget, count and idle unload), and every model it loaded is unloaded at the end."""
    from app.engine.pool import ModelPool, PoolLimits
    from app.models.budget import free_memory_bytes

    made: list[ModelRouter] = []  # the pool's budget starts from what the router's machine profile says is free
    pool = ModelPool(PoolLimits(max_loaded=None), free_memory=lambda: free_memory_bytes(made[0].profile()))
    router = ModelRouter(pool, settings)
    made.append(router)
    router.start()
    try:
        if overflow is None:
            from app.settings import load

            overflow = load().server_overflow
        anyio.run(serve_stdio, QuantDeskTools(router, allow_downloads=allow_downloads, overflow=overflow))
    finally:
        router.close()
        router.primary_queue.close()  # never started: no primary here
        pool.close()
