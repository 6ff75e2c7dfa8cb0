"""MLX through mlx-lm: MLX and Hugging Face safetensors folders, on Apple Silicon (Metal) or the CPU
build on Linux. A vision model (its config.json has a ``vision_config``) runs through mlx-vlm instead, when it is
installed, and takes images.

MLX keeps per-thread state (streams, the wired-memory limit): everything here runs on the engine
host's one model thread, the thread that loaded the model; a model loaded with ``LoadSettings.parallel`` > 1 decodes
its replies together on a decode thread of its own (backends/mlx_batch.py), each reply's thread reading its tokens.
"""

from __future__ import annotations

import collections
import copy
import gc
import importlib.metadata
import importlib.util
import json
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from backends import json_schema, mlx_batch, states
from backends.chat_format import formats
from backends.chat_format.template import FALLBACK_TEMPLATE
from app.datatypes import (Done, LoadSettings, Loaded, Message, PROMPT_LOOKUP, Prompt, SamplingSettings,
                           StateRestored, StateSaved, Token, TokenLogprob, TopLogprob)
from backends.base import (Availability, Backend, GenerationError, Reply, TrailingText, check_token_ids,
                           peak_rss_bytes)


class _GrammarProcessor:
    """An mlx-lm logits processor holding the reply to a grammar (backends/json_schema.TokenMask, llguidance): the
    matcher is told the tokens sampled since its last call, and the tokens it refuses get -inf (``mx.where``:
    llguidance's own MLX helper is a Metal kernel, which the Linux CPU build lacks)."""

    def __init__(self, mask: json_schema.TokenMask, n_prompt: int) -> None:
        self._mask, self._seen = mask, n_prompt

    def __call__(self, tokens: Any, logits: Any) -> Any:  # mx.array in, mx.array out (mlx-lm's processor signature)
        import mlx.core as mx

        if self._mask.stopped:  # it took the end-of-turn token: mlx-lm computes one step ahead of the loop
            return logits
        if tokens.size > self._seen:
            try:
                self._mask.take(tokens[self._seen:].tolist())
            except ValueError as exc:
                raise GenerationError("request", str(exc)) from None
            self._seen = tokens.size
        allowed = self._mask.allowed()[: logits.shape[-1]]
        return mx.where(mx.array(allowed.astype(bool)), logits, -mx.inf)


class MlxBackend(Backend):
    name = "mlx"
    formats = ("mlx", "safetensors")
    # Through llguidance (backends/json_schema.py), as llama.cpp: it runs on any CPU (Rust, numpy masks) and needs
    # no torch, unlike outlines and xgrammar; see docs/architecture.md.
    structured_output = True
    # mlx-lm's generate_step hands each token's log-probabilities over with it (after the logits processors: the
    # repetition penalty and a grammar count); not for vision models (mlx-vlm) nor speculation
    reports_logprobs = True

    def __init__(self) -> None:
        # Any: a model of whichever architecture the folder names (mlx-lm's or mlx-vlm's nn.Module), a tokenizer
        # (mlx-lm's TokenizerWrapper, or the processor's Hugging Face one) and a processor (transformers'), all read
        # through the attributes their libraries forward.
        self._model: Any = None
        self._tokenizer: Any = None
        self._processor: Any = None  # mlx-vlm's processor, for a vision model
        self._forced: collections.deque[int] = collections.deque()  # tokens to write next (Backend.force)
        self._n_ctx = 0
        # llguidance's view of the tokenizer ("ll"), built at the first structured reply (~1 s); a dict shared by the
        # copies that answer batched replies (generate)
        self._shared: dict[str, Any] = {}
        self._batch: mlx_batch.Batch | None = None  # the replies decoded together (LoadSettings.parallel > 1)
        self._cancelled: threading.Event | None = None  # a batched reply's cancel, on its copy (generate)
        self._request_id = ""  # a batched reply's id, on its copy
        self._saving = ""  # the reply whose sequence the next save_state writes (use_sequence_of)
        self._draft_model: Any = None  # speculative decoding's draft (LoadSettings.draft), same vocabulary
        self._draft_tokens = 0
        # The previous reply's prompt cache (mlx-lm's per-layer KV caches) and the tokens it holds: the next prompt
        # that starts with them evaluates only the rest (_reuse_cache). None while a reply uses it or after a failure.
        self._cache: list[Any] | None = None
        self._cache_tokens: list[int] = []
        self._state_identity: dict[str, Any] = {}  # what a saved state must have been made with (backends/states.py)

    @classmethod
    def probe(cls) -> Availability:
        if sys.platform == "win32":
            return Availability.no("MLX does not run on Windows", "use a GGUF model with llama.cpp")
        if importlib.util.find_spec("mlx") is None or importlib.util.find_spec("mlx_lm") is None:
            hint = "pip install 'quantdesk[mlx]'" + (" (installs mlx[cpu] on Linux)" if sys.platform == "linux" else "")
            return Availability.no("mlx-lm is not installed", hint)
        return Availability.ok()

    def load(self, model_path: str, settings: LoadSettings,
             on_progress: Callable[[float], None] | None = None) -> Loaded:
        import mlx.core as mx
        import mlx_lm

        settings.validate()
        t0 = time.perf_counter()
        folder = Path(model_path)
        if settings.draft == PROMPT_LOOKUP:
            raise GenerationError("draft", "MLX has no prompt-lookup decoding (mlx-lm speculates with a draft model "
                                           "only)", "give a smaller MLX model of the same vocabulary as the draft")
        if settings.draft:
            from app.models import drafts

            problem = drafts.check_draft(folder, settings.draft)  # before either loads
            if problem:
                raise GenerationError("draft", problem, "a draft must come from the same model family, with the "
                                                        "same tokenizer")
        try:
            config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
            if "vision_config" in config:
                self._load_vision(folder)
            else:
                loaded = mlx_lm.load(str(folder))  # (model, tokenizer), and the config when asked for
                self._model, self._tokenizer = loaded[0], loaded[1]
        except (OSError, ValueError, KeyError) as exc:
            raise GenerationError("load", f"mlx-lm could not load {folder.name}: {exc}") from None
        source = getattr(self._tokenizer, "chat_template", None) or ""
        if self._processor is not None and getattr(self._processor, "chat_template", None):
            source = self._processor.chat_template
        self.tool_format = formats.tools_name(source)
        self.chat_template = formats.Template.of(source or FALLBACK_TEMPLATE, self._tokenizer.bos_token or "",
                                                 self._tokenizer.eos_token or "")
        try:  # refuse a broken or hostile template now, not at the first message
            self.prepare([Message("user", "hi")], SamplingSettings())
            if self._processor is not None:
                self._render([Message("user", "hi")])
        except GenerationError:
            self.unload()
            raise
        self._n_ctx = settings.n_ctx
        self._cache, self._cache_tokens = None, []  # another model's, if any
        self._state_identity = _state_identity(folder)
        draft_details = self._load_draft(settings) if settings.draft else {}
        parallel, alone = self._parallel(settings)
        if parallel > 1:
            self._batch = mlx_batch.Batch(self._model, parallel, self._tokenizer.eos_token_ids, settings.n_ctx)
        if on_progress:
            on_progress(1.0)
        quant = config.get("quantization") or {}
        gpu = mx.default_device() == mx.gpu
        n_layers = int(config.get("num_hidden_layers", 0))
        return Loaded(
            backend=self.name, model_path=model_path, n_ctx=settings.n_ctx, n_layers=n_layers,
            gpu_layers=n_layers if gpu else 0, gpu_offload_supported=gpu,
            memory_bytes=self.memory_in_use(), load_ms=(time.perf_counter() - t0) * 1000,
            details={"bits": quant.get("bits"), "group_size": quant.get("group_size"), "tool_format": self.tool_format,
                     "architecture": config.get("model_type", ""), "device": str(mx.default_device()),
                     **({"vision": _vision_details(config)} if self._processor else {}), **draft_details,
                     "parallel": parallel, "kv_unified": False,  # a KV cache per sequence (mlx_batch)
                     **({"parallel_note": f"one reply at a time: {alone}"} if alone else {})},
        )

    def _parallel(self, settings: LoadSettings) -> tuple[int, str]:
        """How many replies decode together (backends/mlx_batch.py), and why one where more were asked ("" when as
        asked): mlx-lm batches neither speculation nor mlx-vlm's vision models, nor a cache that cannot merge."""
        if settings.parallel <= 1:
            return 1, ""
        if settings.draft:
            return 1, "speculative decoding verifies one sequence's guesses"
        if self._processor is not None:
            return 1, "mlx-vlm answers a vision model's requests one at a time"
        from mlx_lm.models.cache import make_prompt_cache

        unbatched = sorted({type(c).__name__ for c in make_prompt_cache(self._model) if not hasattr(c, "merge")})
        if unbatched:
            return 1, f"mlx-lm cannot batch this model's cache ({', '.join(unbatched)})"
        return settings.parallel, ""

    @property
    def parallel(self) -> int:
        return self._batch.size if self._batch is not None else 1

    def use_sequence_of(self, request_id: str) -> None:
        self._saving = request_id

    def generate(self, request_id: str, messages: Prompt, sampling: SamplingSettings, cancelled: threading.Event,
                 events_every_s: float | None = None) -> Iterator[Token | Done]:
        """The shared loop (Backend.generate); where replies are batched, on a copy of this backend for the reply
        (called from several threads at once, up to ``parallel``): its reply, its forced tokens and its cancel are
        the copy's, the model, the tokenizer and the batch are shared."""
        if self._batch is None:
            return super().generate(request_id, messages, sampling, cancelled, events_every_s)
        view = copy.copy(self)
        view._forced = collections.deque()
        view._cancelled, view._request_id = cancelled, request_id
        return Backend.generate(view, request_id, messages, sampling, cancelled, events_every_s)

    def _load_draft(self, settings: LoadSettings) -> dict[str, Any]:
        """The draft model beside the model, for mlx-lm's speculative_generate_step; speculation rewinds the KV
        caches after a wrong guess, which a model with a recurrent or rotating cache cannot (mlx-lm refuses it)."""
        import mlx_lm
        from mlx_lm.models.cache import can_trim_prompt_cache, make_prompt_cache

        if self._processor is not None:
            self.unload()
            raise GenerationError("draft", "speculative decoding does not run with mlx-vlm's vision models",
                                  "load it without a draft")
        if not can_trim_prompt_cache(make_prompt_cache(self._model)):
            self.unload()
            raise GenerationError("draft", "speculative decoding needs a KV cache that can be cut back; this model's "
                                           "cannot", "load it without a draft")
        try:
            self._draft_model = mlx_lm.load(settings.draft)[0]
        except (OSError, ValueError, KeyError) as exc:
            self.unload()
            raise GenerationError("draft", f"mlx-lm could not load the draft model {Path(settings.draft).name}: "
                                           f"{exc}") from None
        self._draft_tokens = settings.draft_tokens
        from app.models.drafts import model_size

        return {"draft": {"model": settings.draft, "draft_tokens": settings.draft_tokens,
                          "model_bytes": model_size(settings.draft)}}

    def _load_vision(self, folder: Path) -> None:
        """A vision model through mlx-vlm: the model and its processor (image processor and tokenizer)."""
        if importlib.util.find_spec("mlx_vlm") is None:
            raise GenerationError("unavailable", f"{folder.name} is an MLX vision model: it needs mlx-vlm",
                                  "pip install 'quantdesk[mlx-vision]'")
        from mlx_vlm.utils import load

        self._model, self._processor = load(str(folder))
        self._tokenizer = getattr(self._processor, "tokenizer", self._processor)
        _keep_tokenizer_options_from_images(self._processor)

    def sees_images(self) -> bool:
        return self._processor is not None

    def _render(self, messages: Prompt) -> str:
        """The prompt: a raw one as it is, a conversation as the chat format rendered it; a vision model's through
        its processor, whose template places each image (content parts), read by the same chat format after."""
        if isinstance(messages, str):
            return messages
        if self._processor is None:
            if self.reply.prepared is None:
                raise GenerationError("state", "the conversation was not prepared through the chat format")
            return self.reply.prepared.prompt
        try:
            parts = [{"role": m.role, "content": [{"type": "image"} for _ in m.images]
                      + [{"type": "text", "text": m.content}]} for m in messages]
            renderer = self._processor if getattr(self._processor, "chat_template", None) else self._tokenizer
            return str(renderer.apply_chat_template(parts, add_generation_prompt=True, tokenize=False))
        except Exception as exc:  # transformers renders in jinja2's sandbox: SecurityError and friends
            if type(exc).__name__ == "SecurityError":
                message = f"the chat template tried to reach Python internals and was refused ({exc})"
            else:
                message = f"the chat template failed: {type(exc).__name__}: {exc}"
            raise GenerationError("template", message) from None

    def _stream(self, messages: Prompt, sampling: SamplingSettings) -> Iterator[str]:
        """mlx-lm's token loop without its per-token bookkeeping: ``generate_step`` and the tokenizer's
        streaming detokenizer driven directly, as ``stream_generate`` drives them (same sampler, same text),
        minus the response object, timings and peak-memory query it makes for every token."""
        import mlx.core as mx
        import numpy as np
        from mlx_lm.generate import generate_step, generation_stream, wired_limit
        from mlx_lm.sample_utils import make_logits_processors, make_sampler

        if self._model is None:
            raise GenerationError("state", "no model is loaded")
        if self._processor is not None:
            if sampling.logprobs >= 0:
                raise GenerationError("request", "an MLX vision model does not report its tokens' log-probabilities",
                                      "ask without logprobs")
            yield from self._stream_vision(messages, sampling)
            return
        tokens = self._prompt_ids(messages)
        if len(tokens) >= self._n_ctx:
            raise GenerationError("context", f"the conversation is {len(tokens)} tokens long but the context "
                                             f"holds {self._n_ctx}", "start a new chat or load with a larger context")
        self.reply.prompt_tokens = len(tokens)
        if sampling.seed is not None and self._batch is None:  # a batched reply draws from its own (mlx_batch.sampler)
            mx.random.seed(sampling.seed)
        sampler = make_sampler(temp=sampling.temperature, top_p=sampling.top_p if sampling.top_p < 1 else 0.0,
                               min_p=sampling.min_p, top_k=sampling.top_k)
        processors = make_logits_processors(
            repetition_penalty=sampling.repeat_penalty if sampling.repeat_penalty != 1 else None)
        grammar = self.reply_grammar(sampling)
        if grammar is not None:  # first, so the penalty sees only what the grammar allows
            processors.insert(0, self._grammar(grammar, len(tokens)))
        self._forced.clear()
        processors.insert(0, self._forcing)
        detokenizer = self._tokenizer.detokenizer
        eos = self._tokenizer.eos_token_ids
        self.mark_prefill_start()
        # The shared loop stops at max_tokens itself; the limit here is the context's.
        limit = min(sampling.max_tokens + 1, self._n_ctx - len(tokens))
        if self._draft_model is not None and grammar is None and sampling.logprobs < 0:
            self._cache, self._cache_tokens = None, []  # speculation keeps two caches of its own (the draft's)
            yield from self._speculate(tokens, limit, sampler, processors)
            return
        if self._batch is not None:  # forced tokens only where a thinking budget may force them (processors[0])
            yield from self._batched(tokens, limit, sampling, processors if sampling.reasoning_budget >= 0
                                     else processors[1:])
            return
        cache, reuse = self._reuse_cache(tokens)
        self.reply.cached_tokens = reuse
        if reuse:  # the processors see the whole prompt, as in a fresh run (the repetition penalty's window)
            prefix = mx.array(tokens[:reuse])
            processors = [processors[0], *(_after(prefix, p) for p in processors[1:])]  # [0]: _forcing, no tokens
        fed = list(tokens)  # what the cache holds once the loop stops: the prompt and each token handed out
        try:
            # (list-item: mlx-lm annotates wired_limit's streams as mx.Stream and passes its thread-local one
            # itself; unused-ignore: where mlx-lm is not installed)
            with wired_limit(self._model, [generation_stream]):  # type: ignore[list-item, unused-ignore]
                for token, logprobs in generate_step(mx.array(tokens[reuse:]), self._model, max_tokens=limit,
                                                     sampler=sampler, logits_processors=processors,
                                                     prompt_cache=cache):
                    # mlx-lm evaluates a token (its step for the next) before it hands it out: it is in the cache
                    fed.append(int(token))
                    if sampling.logprobs >= 0:
                        self._record_logprobs(int(token), np.asarray(logprobs.astype(mx.float32)), sampling.logprobs)
                    if token in eos:
                        break
                    detokenizer.add_token(token)
                    yield detokenizer.last_segment
        finally:  # kept for the next prompt only when the cache holds exactly these tokens (not after a failure)
            if _cache_length(cache) in (len(fed), None):
                self._cache, self._cache_tokens = cache, fed
        yield from _held_back(detokenizer)

    def _batched(self, tokens: list[int], limit: int, sampling: SamplingSettings,
                 processors: list[Callable[[Any, Any], Any]]) -> Iterator[str]:
        """The reply's tokens from the batch (backends/mlx_batch.py), decoded with the others', in a sequence whose
        cache may hold a prefix of its prompt (``cached_tokens``)."""
        assert self._batch is not None
        detokenizer = self._tokenizer.detokenizer
        eos = self._tokenizer.eos_token_ids
        steps = self._batch.run(self._request_id, tokens, limit, mlx_batch.sampler(sampling), processors,
                                sampling.logprobs >= 0, self._cancelled, lockstep=sampling.reasoning_budget >= 0)
        try:
            for token, row, cached in steps:
                self.reply.cached_tokens = cached
                if row is not None:
                    self._record_logprobs(token, row, sampling.logprobs)
                if token in eos:
                    break
                detokenizer.add_token(token)
                yield detokenizer.last_segment
        finally:
            steps.close()  # the reply leaves the batch at its next step
        yield from _held_back(detokenizer)

    def _reuse_cache(self, tokens: list[int]) -> tuple[list[Any], int]:
        """The previous reply's prompt cache for ``tokens`` and how many of them it already holds: cut back
        (``trim_prompt_cache``) to the prefix they share, or a new cache where they share none or it cannot be cut
        (a recurrent layer's). One token is always left to evaluate: its logits choose the reply's first."""
        from mlx_lm.models.cache import can_trim_prompt_cache, make_prompt_cache, trim_prompt_cache

        cache, held = self._cache, self._cache_tokens
        self._cache, self._cache_tokens = None, []  # in use: the reply's loop puts it back
        common = min(states.shared_prefix(held, tokens), len(tokens) - 1)
        if cache is None or common == 0:
            return make_prompt_cache(self._model), 0
        extra = len(held) - common
        # (comparison-overlap: mlx-lm annotates trim_prompt_cache as returning the cache; it returns the count cut)
        if extra and (not can_trim_prompt_cache(cache)
                      or trim_prompt_cache(cache, extra) != extra):  # type: ignore[comparison-overlap, unused-ignore]
            return make_prompt_cache(self._model), 0
        return cache, common

    # --- saved states: mlx-lm's prompt cache (save_prompt_cache's safetensors) in backends/states.py's container

    def save_state(self, request_id: str, path: str) -> StateSaved:
        from mlx_lm.models.cache import save_prompt_cache

        if self._model is None:
            raise GenerationError("state", "no model is loaded")
        t0 = time.perf_counter()
        # batched: what the reply before it left in its sequence (use_sequence_of)
        kept = self._batch.kept(self._saving) if self._batch is not None else (self._cache, self._cache_tokens)
        if kept is None or kept[0] is None or not kept[1]:  # nothing held (vision, speculation, a failure)
            return StateSaved(request_id, "", 0, 0, 0.0)
        cache, tokens = kept[0], list(kept[1])
        try:
            with _scratch(path) as scratch:  # mlx writes to a name; its bytes then go into the container
                save_prompt_cache(scratch, cache, {"quantdesk_tokens": str(len(tokens))})
                size = states.write(path, self._state_identity, tokens, Path(scratch).read_bytes())
        except OSError as exc:
            raise GenerationError("state", f"the state could not be written to {path}: {exc}") from None
        return StateSaved(request_id, path, len(tokens), size, (time.perf_counter() - t0) * 1000)

    def restore_state(self, request_id: str, paths: Sequence[str], messages: Prompt,
                      sampling: SamplingSettings) -> StateRestored:
        from mlx_lm.models.cache import can_trim_prompt_cache

        if self._model is None:
            raise GenerationError("state", "no model is loaded")
        t0 = time.perf_counter()
        if self._processor is not None or self._draft_model is not None:  # their replies keep no prompt cache
            return StateRestored(request_id, "", 0, 0.0, ())
        self.reply = Reply(self.prepare(messages, sampling))
        tokens = self._prompt_ids(messages)
        if self._batch is not None:  # what the sequence this prompt's reply would take holds
            have = min(self._batch.holding(tokens), len(tokens) - 1)
        else:
            have = (min(states.shared_prefix(self._cache_tokens, tokens), len(tokens) - 1)
                    if self._cache is not None else 0)
        trimmable = self._cache is None or can_trim_prompt_cache(self._cache)
        # a recurrent layer's cache cannot be cut back to the shared prefix
        best, discarded = states.best_state(paths, self._state_identity, tokens, have, cuttable=trimmable)
        chosen = ""
        if best is not None:
            reuse, path, header = best
            try:
                cache = self._load_state(path, header)
            except states.StateRejected as exc:
                discarded.append((path, str(exc)))
            else:  # the next reply cuts it to the prefix
                if self._batch is None:
                    self._cache, self._cache_tokens = cache, list(header.tokens)
                    chosen, have = path, reuse
                elif self._batch.keep(tokens, header.tokens, _evaluated(cache)):
                    chosen, have = path, reuse
        return StateRestored(request_id, chosen, have, (time.perf_counter() - t0) * 1000, tuple(discarded))

    def _load_state(self, path: str, header: states.Header) -> list[Any]:
        """The prompt cache of a state whose header and identity were checked: its bytes against their CRC, then
        mlx-lm's loader, then the cache's length against the tokens the header names."""
        from mlx_lm.models.cache import load_prompt_cache

        data = states.read_data(path, header)
        try:
            with _scratch(path) as scratch:
                Path(scratch).write_bytes(data)
                cache, metadata = load_prompt_cache(scratch, return_metadata=True)  # type: ignore[no-untyped-call, unused-ignore]
        except OSError as exc:
            raise states.StateRejected(f"it cannot be read: {exc}") from None
        except Exception as exc:  # mlx's loader: RuntimeError, ValueError, KeyError for a file it cannot read
            raise states.StateRejected(f"mlx-lm could not read it ({type(exc).__name__}: {exc})") from None
        held = _cache_length(cache)
        if metadata.get("quantdesk_tokens") != str(len(header.tokens)) or held not in (len(header.tokens), None):
            raise states.StateRejected(f"its cache holds {held} tokens where its header names {len(header.tokens)}")
        return list(cache)

    def _record_logprobs(self, token: int, row: Any, top: int) -> None:
        """The chosen token's log-probability and its ``top`` likeliest alternatives (Backend.reply.logprobs), from
        the row mlx-lm sampled from (float32, numpy); a token the grammar refused (-inf) as the lowest float, as
        llama-server writes a probability of 0, since JSON has no infinity. The bytes are the token's decoded text's."""
        import numpy as np

        row = row.reshape(-1)
        lowest = float(np.finfo(np.float32).min)

        def text(t: int) -> str:
            return str(self._tokenizer.decode([t]))

        best: Any = ()
        if top:
            n = min(top, row.shape[0])
            best = np.argpartition(-row, n - 1)[:n]
            best = best[np.argsort(-row[best], kind="stable")]
        alternatives = tuple(TopLogprob(int(t), (piece := text(int(t))), max(float(row[t]), lowest),
                                        tuple(piece.encode("utf-8"))) for t in best)
        piece = text(token)
        self.reply.logprobs.append(TokenLogprob(int(token), "", max(float(row[token]), lowest),
                                                tuple(piece.encode("utf-8")), alternatives))

    def _speculate(self, tokens: list[int], limit: int, sampler: Callable[[Any], Any],
                   processors: list[Callable[[Any, Any], Any]]) -> Iterator[str]:
        """mlx-lm's speculative_generate_step: the draft guesses ``draft_tokens`` tokens with the same sampler, the
        model checks them in one pass and keeps them while its own sampled token is the guess. Each token says
        whether it was the draft's (``from_draft``); a round ends with one of the model's own, so the guesses of a
        round are min(draft_tokens, tokens left), as mlx-lm drafts them."""
        import mlx.core as mx
        from mlx_lm.generate import generation_stream, speculative_generate_step, wired_limit

        detokenizer = self._tokenizer.detokenizer
        eos = self._tokenizer.eos_token_ids
        k, produced, round_start = self._draft_tokens, 0, 0
        # (list-item: mlx-lm annotates wired_limit's streams as mx.Stream and passes its thread-local one itself;
        # unused-ignore: where mlx-lm is not installed)
        with wired_limit(self._model, [generation_stream]):  # type: ignore[list-item, unused-ignore]
            steps = speculative_generate_step(mx.array(tokens), self._model, self._draft_model, num_draft_tokens=k,
                                              max_tokens=limit, sampler=sampler, logits_processors=processors)
            try:
                for token, _, from_draft in steps:
                    produced += 1
                    self.reply.accepted_tokens += bool(from_draft)
                    if not from_draft:  # the model's own token ends a round
                        self.reply.verify_passes += 1
                        self.reply.drafted_tokens += min(k, limit - round_start)
                        round_start = produced
                    if token in eos:
                        break
                    detokenizer.add_token(token)
                    yield detokenizer.last_segment
            finally:
                steps.close()  # rewinds mlx-lm's caches
                if produced > round_start:  # a round cut short (end of text, max tokens, cancel): its guesses count
                    self.reply.verify_passes += 1
                    self.reply.drafted_tokens += min(k, limit - round_start)
        yield from _held_back(detokenizer)

    def _stream_vision(self, messages: Prompt, sampling: SamplingSettings) -> Iterator[str]:
        """A vision model's tokens through mlx-vlm's ``stream_generate`` (it encodes the images and merges their
        features into the prompt), images decoded and checked by app/images first."""
        if sampling.json_schema is not None or (sampling.tools and sampling.tool_choice == "required"):
            raise GenerationError("request", "structured output is not available for MLX vision models (mlx-vlm "
                                             "takes no logits processor)", "use a GGUF of the model with llama.cpp")
        from mlx_vlm.generate import stream_generate
        from PIL import Image

        from app import images as image_files

        pictures = []
        for n, encoded in enumerate([] if isinstance(messages, str) else [i for m in messages for i in m.images], 1):
            try:
                width, height, rgb = image_files.decode_rgb(image_files.from_base64(encoded))
            except image_files.ImageError as exc:
                raise GenerationError("image", f"image {n}: {exc.message}") from None
            pictures.append(Image.frombytes("RGB", (width, height), rgb))
        prompt = self._render(messages)
        self.mark_prefill_start()
        try:
            # (arg-type: mlx-vlm annotates ``image`` as paths only; its process_image takes PIL images as well)
            for result in stream_generate(
                    self._model, self._processor, prompt, image=pictures or None,  # type: ignore[arg-type, unused-ignore]
                    max_tokens=min(sampling.max_tokens + 1, self._n_ctx), temperature=sampling.temperature,
                    top_p=sampling.top_p, top_k=sampling.top_k or None, min_p=sampling.min_p, seed=sampling.seed,
                    repetition_penalty=sampling.repeat_penalty if sampling.repeat_penalty != 1 else None):
                self.reply.prompt_tokens = result.prompt_tokens
                if result.prompt_tokens >= self._n_ctx:
                    raise GenerationError("context", f"the conversation is {result.prompt_tokens} tokens long but "
                                                     f"the context holds {self._n_ctx}",
                                          "start a new chat or load with a larger context")
                yield result.text
        except ValueError as exc:  # mlx-vlm's sentence for a prompt and images it cannot put together
            raise GenerationError("image", f"mlx-vlm could not take the prompt: {exc}") from None

    def force(self, text: str) -> None:
        self._forced.extend(self._tokenizer.encode(text, add_special_tokens=False))

    def _forcing(self, _tokens: Any, logits: Any) -> Any:
        """A logits processor that, while tokens are forced (Backend.force), leaves only the next of them possible.
        mlx-lm computes a token ahead of the one it hands out, so the forcing starts one token after it is asked."""
        if not self._forced:
            return logits
        import mlx.core as mx

        token = self._forced.popleft()
        allowed = mx.arange(logits.shape[-1]) == token
        return mx.where(allowed, logits, mx.array(-float("inf"), dtype=logits.dtype))

    def _grammar(self, grammar: tuple[str, str], n_prompt: int) -> _GrammarProcessor:
        """The reply's grammar (Backend.reply_grammar) as a logits processor, advanced past the generation prompt it
        starts with."""
        self._guidance()
        lark, generation_prompt = grammar
        primed = list(self._tokenizer.encode(generation_prompt, add_special_tokens=False)) if generation_prompt \
            else None
        try:
            mask = json_schema.TokenMask(self._shared["ll"], lark, self._n_vocab(),
                                         frozenset(self._tokenizer.eos_token_ids), primed)
        except ValueError as exc:
            raise GenerationError("request", str(exc)) from None
        return _GrammarProcessor(mask, n_prompt)

    def _n_vocab(self) -> int:
        return int(self._model.args.vocab_size) if hasattr(self._model, "args") else len(self._tokenizer._tokenizer)

    def _guidance(self) -> None:
        try:
            import llguidance.hf
        except ImportError:
            raise GenerationError("request", "structured output on MLX needs llguidance, which is not installed",
                                  "pip install 'quantdesk[mlx]'") from None
        if "ll" not in self._shared:
            self._shared["ll"] = llguidance.hf.from_tokenizer(self._tokenizer._tokenizer, n_vocab=self._n_vocab(),
                                                              eos_token=sorted(self._tokenizer.eos_token_ids))

    def special_tokens(self) -> dict[str, int]:
        """The tokenizer's added tokens marked special, which llguidance's Hugging Face view marks as tokens."""
        added = getattr(self._tokenizer._tokenizer, "added_tokens_decoder", {}) if self._tokenizer is not None else {}
        return {token.content: index for index, token in added.items() if getattr(token, "special", False)}

    # --- scoring (the quant lab): the model called directly on the tokens gives every position's logits.

    SCORE_CHUNK = 512  # tokens per forward pass; a KV cache carries the context across chunks

    def _prompt_ids(self, messages: Prompt) -> list[int]:
        prompt = self._render(messages)
        bos = self._tokenizer.bos_token
        # As mlx_lm.stream_generate does for a string prompt: no second BOS if the template wrote one.
        return list(self._tokenizer.encode(prompt, add_special_tokens=bos is None or not prompt.startswith(bos)))

    def _count_prompt(self, messages: Prompt) -> int:
        if self._model is None:
            raise GenerationError("state", "no model is loaded")
        if self._processor is not None:  # mlx-vlm counts a vision model's prompt with its images only as it runs
            return super()._count_prompt(messages)
        return len(self._prompt_ids(messages))

    def tokenize(self, text: str, special: bool = False) -> list[int]:
        """A Hugging Face tokenizer reads added special tokens in any text: ``special`` changes nothing here."""
        if self._model is None:
            raise GenerationError("state", "no model is loaded")
        return list(self._tokenizer.encode(text))

    def next_token_logits(self, tokens: Sequence[int]) -> Any:
        import mlx.core as mx
        import numpy as np
        from mlx_lm.models.cache import make_prompt_cache

        if self._model is None:
            raise GenerationError("state", "no model is loaded")
        check_token_ids(tokens, self.logits_width())
        cache = make_prompt_cache(self._model)
        rows = []
        for start in range(0, len(tokens), self.SCORE_CHUNK):
            chunk = mx.array(list(tokens[start:start + self.SCORE_CHUNK]))[None]
            logits = self._model(chunk, cache=cache)[0].astype(mx.float32)
            mx.eval(logits)
            rows.append(np.array(logits))
        return np.concatenate(rows, axis=0)

    def logits_width(self) -> int:
        if self._model is None:
            raise GenerationError("state", "no model is loaded")
        return getattr(getattr(self._model, "args", None), "vocab_size", None) or len(self.vocabulary())

    def vocabulary(self) -> list[str]:
        if self._model is None:
            raise GenerationError("state", "no model is loaded")
        by_text = self._tokenizer.get_vocab()
        texts = [""] * (max(by_text.values(), default=-1) + 1)
        for text, index in by_text.items():
            texts[index] = text
        return texts

    def memory_in_use(self) -> dict[str, int]:
        import mlx.core as mx

        memory = {"cpu": peak_rss_bytes()}
        if mx.default_device() == mx.gpu:
            memory["gpu0"] = int(mx.get_active_memory())
        return memory

    def peak_memory_bytes(self) -> int:
        import mlx.core as mx

        # On Metal the model lives in unified memory outside the RSS figure; on the CPU build both count it.
        return max(peak_rss_bytes(), int(mx.get_peak_memory()))

    def unload(self) -> None:
        if self._batch is not None:
            batch, self._batch = self._batch, None
            batch.close()
        if self._model is not None:
            import mlx.core as mx

            self._model = self._tokenizer = self._processor = self._draft_model = None
            self._cache, self._cache_tokens = None, []
            gc.collect()
            mx.clear_cache()


def _held_back(detokenizer: Any) -> Iterator[str]:
    """The end of the sequence or of the context: the streaming detokenizer's held-back rest (text without a token)."""
    detokenizer.finalize()
    if rest := detokenizer.last_segment:
        yield TrailingText(rest)


def _after(prefix: Any, processor: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    """A logits processor handed the prompt's cached ``prefix`` before the tokens mlx-lm gives it (only the part it
    evaluates), so that it sees what it would in a fresh run."""
    import mlx.core as mx

    return lambda tokens, logits: processor(mx.concatenate([prefix, tokens]), logits)


def _evaluated(cache: list[Any]) -> list[Any]:
    """A loaded cache's arrays computed here, before another thread (the batch's decode thread) uses them."""
    import mlx.core as mx

    mx.eval([layer.state for layer in cache])
    return cache


def _state_identity(folder: Path) -> dict[str, Any]:
    """What a saved prompt cache must have been made with: the model folder (its config and weights files: path,
    size, modification time, a hash of each one's header) and the mlx and mlx-lm versions (their cache layout)."""
    names = sorted(p.name for p in folder.iterdir() if p.suffix == ".safetensors" or p.name == "config.json")
    return {"model": {name: states.file_identity(str(folder / name)) for name in names},
            "runtime": {"mlx": importlib.metadata.version("mlx"), "mlx_lm": importlib.metadata.version("mlx-lm")}}


class _scratch:
    """A temporary ``.safetensors`` name beside ``path`` (the same disk), removed afterwards: mlx saves and loads
    by file name."""

    def __init__(self, path: str) -> None:
        self._folder = os.path.dirname(os.path.abspath(path))

    def __enter__(self) -> str:
        os.makedirs(self._folder, exist_ok=True)  # the cache's folder, before its first state
        fd, self._name = tempfile.mkstemp(suffix=".safetensors", prefix=".mlx-state-", dir=self._folder)
        os.close(fd)
        return self._name

    def __exit__(self, *_: object) -> None:
        try:
            os.remove(self._name)
        except OSError:
            pass


def _cache_length(cache: list[Any]) -> int | None:
    """The tokens a prompt cache holds, where its layers say (a KV cache's offset); None where they do not."""
    offset = getattr(cache[0], "offset", None) if cache else None
    return int(offset) if isinstance(offset, int) else None


def _vision_details(config: dict[str, Any]) -> dict[str, Any]:
    """What the model bar and the CLI say about an MLX vision model: mlx-vlm runs it; a fixed-size vision tower's
    image takes (side / patch)² tokens (0 where the config does not say)."""
    vision = config.get("vision_config") or {}
    size, patch = vision.get("image_size"), vision.get("patch_size")
    tokens = (size // patch) ** 2 if isinstance(size, int) and isinstance(patch, int) and patch else 0
    return {"projector": "mlx-vlm", "projector_type": config.get("model_type", ""), "image_tokens": tokens}


# Tokenizer options mlx-vlm hands to every processor call; transformers 5 image processors refuse them
# (https://github.com/Blaizzy/mlx-vlm/issues/870, fixed there for PaliGemma only, not LLaVA in 0.7.10).
_TOKENIZER_OPTIONS = ("padding", "padding_side", "add_special_tokens", "truncation", "max_length")


def _keep_tokenizer_options_from_images(processor: Any) -> None:
    image_processor = getattr(processor, "image_processor", None)
    if image_processor is not None:
        processor.image_processor = _ImagesOnly(image_processor)


class _ImagesOnly:
    """An image processor that drops the tokenizer's options before the call (see _TOKENIZER_OPTIONS)."""

    def __init__(self, inner: Any) -> None:
        self._inner = inner

    def __call__(self, images: Any, *args: Any, **kwargs: Any) -> Any:
        return self._inner(images, *args, **{k: v for k, v in kwargs.items() if k not in _TOKENIZER_OPTIONS})

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)
