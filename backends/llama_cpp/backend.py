"""LlamaCppBackend: a GGUF model loaded into llama.cpp (with its vision projector, its draft), and what the model
answers besides replies: embeddings, a reranker's scores (rerank.py), the lab's logit windows, its vocabulary. The
replies themselves are the token loop's (loop.py, which this class is one of).

Saved states (states.py): a conversation's sequence written after its reply and restored before its next, and with
several sequences (``parallel``) a sequence kept before another prompt takes its cells (``_evict``: its slot given by
LRU, or the new prompt keeping under half of it, as llama-server's prompt cache does; a restore's target; the
batcher's ``make_room``), in the files the parent's cache names for it (``keep_evicted``), so a conversation whose
sequence was taken is restored by its tokens when it returns.

llama_cpp is imported inside ``load``: this module is importable (and ``probe`` answers) without it.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from copy import copy as _copy
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any

from app import files
from app.datatypes import (PROMPT_LOOKUP, Done, Embedded, Loaded, LoadSettings, Message, Prompt, Reranked,
                           SamplingSettings, StateRestored, StateSaved, Token, expert_tensor_patterns)
from backends.base import Availability, GenerationError, Reply, check_token_ids, physical_cores
from backends.states import shared_prefix
from backends.chat_format import bundled, formats
from backends.llama_cpp import load as loading
from backends.llama_cpp import log as load_log
from backends.llama_cpp import rerank as reranking
from backends.llama_cpp import states, vision
from backends.llama_cpp.draft import DraftModel, PromptLookup
from backends.llama_cpp.loop import TokenLoop
from backends.sequences import SLOT_SHARE, Slot, choose_slot, uses
from backends.llama_cpp.sampling import Pieces

if TYPE_CHECKING:
    import ctypes

    import numpy as np

    from llama_cpp import Llama

    from app.models.vision import ProjectorInfo


class LlamaCppBackend(TokenLoop):
    name = "llama.cpp"
    formats = ("gguf",)
    takes_projector = True
    structured_output = True
    reports_logprobs = True  # from each token's logits row (sampling.LogprobRecorder)

    def __init__(self) -> None:
        super().__init__()
        self._template = ""
        self._eos = ""
        self._overrides: ctypes.Array[Any] | None = None  # the tensor-placement array, alive while the model is
        self._state_identity: dict[str, Any] = {}  # what a saved state must have been made with (states.py)
        self._last_slots: dict[str, Any] = {}  # a recent reply's id -> the slot it ran in (use_sequence_of)
        self._evict_to: list[str] = []  # where a sequence another prompt takes is kept (keep_evicted)
        self._kept_as: dict[int, tuple[str, list[int]]] = {}  # a sequence -> a file holding what it holds, its tokens
        self._writing: set[str] = set()  # eviction files being written now

    @classmethod
    def probe(cls) -> Availability:
        import importlib.util

        from app.runtimes import catalog  # which llama-cpp-python builds exist; none is imported here

        runtime = os.environ.get(catalog.RUNTIME_PATH_VAR)
        if runtime:  # an engine host started for one runtime must not fall back to another llama_cpp
            if not (Path(runtime) / "llama_cpp" / "__init__.py").is_file():
                return Availability.no(f"the llama.cpp runtime in {runtime} holds no llama_cpp package",
                                       "rebuild it: quantdesk runtime build NAME")
            return Availability.ok()
        if importlib.util.find_spec("llama_cpp") is None and not any(not r.problem for r in catalog.discover()):
            return Availability.no("llama-cpp-python is not installed", "pip install 'quantdesk[llama]'")
        return Availability.ok()

    def load(self, model_path: str, settings: LoadSettings,
             on_progress: Callable[[float], None] | None = None) -> Loaded:
        try:
            import llama_cpp
        except (OSError, RuntimeError) as exc:  # llama-cpp-python raises RuntimeError for a library it cannot load
            raise GenerationError("runtime", f"the llama.cpp runtime cannot start: {exc}",
                                  "choose another runtime (quantdesk runtime ls, quantdesk runtime use NAME)") from None

        cpu_variant = loading.load_ggml_backends()  # a portable runtime's backends (app/runtimes/cpu_variants.py)
        settings.validate()
        kv_type = loading.KV_CACHE_TYPES.get(settings.kv_cache_type)
        if kv_type is None:
            raise GenerationError("settings", f"unknown KV cache type {settings.kv_cache_type!r}",
                                  f"use one of {', '.join(loading.KV_CACHE_TYPES)}")
        t0 = time.perf_counter()
        offload_supported = bool(llama_cpp.llama_supports_gpu_offload())
        projector = vision.checked_projector(model_path, settings.mmproj) if settings.mmproj else None
        if settings.draft and settings.draft != PROMPT_LOOKUP:
            loading.check_draft(model_path, settings.draft)  # a draft of another vocabulary: refused before loading
        self._pooling = loading.declared_pooling(model_path)
        kwargs = _llama_kwargs(model_path, settings, kv_type, self._pooling)
        parallel, alone = _parallel(settings, self._pooling, projector is not None)
        patterns = expert_tensor_patterns(settings.cpu_moe)
        self._overrides = loading.expert_overrides(patterns) if patterns else None
        test_crash = loading.install_test_crash(llama_cpp, settings)  # tests only: QUANTDESK_TEST_CRASH
        self._llm, log = self._open_model(llama_cpp, model_path, kwargs, settings, parallel, on_progress)
        llm = self._llm
        if projector is not None:
            try:
                self._mtmd = vision.load_projector(llm, settings, projector)
            except GenerationError:
                self.unload()
                raise
        if settings.draft:
            self._drafter = self._load_drafter(llama_cpp, llm, settings, kwargs)
            self._draft_tokens = settings.draft_tokens
        self._start_batching(llama_cpp, parallel)
        self._kept_as = {}  # (another model's files hold none of this one's sequences)
        self._shared = {}
        self._pieces = Pieces(llama_cpp, llm._model.vocab)
        self._special_pieces = Pieces(llama_cpp, llm._model.vocab, special=True)
        metadata = llm.metadata
        self._bos = self._token_text(llm.token_bos())
        self._eos = self._token_text(llm.token_eos())
        template = bundled.chosen_for_load(model_path, metadata, settings.chat_template)  # ours, said where from
        self._template = template.source
        self.tool_format = formats.tools_name(self._template)
        details = self._details(llama_cpp, settings, template, projector, cpu_variant, parallel, alone)
        self.chat_template = formats.Template.of(self._template, self._bos, self._eos)
        self._marker_tokens = {}
        try:  # refuse a broken or hostile template now, not at the first message (and analyse its format once)
            self.prepare([Message("user", "hi")], SamplingSettings())
        except GenerationError as exc:
            self.unload()
            raise GenerationError("template", f"{Path(model_path).name}: {exc.message}",
                                  "the model file's chat template cannot be used") from None
        self._warm_up(llama_cpp)
        if test_crash is not None:
            test_crash.armed = True
        self._state_identity = {
            "model": states.file_identity(model_path), "projector": states.file_identity(settings.mmproj),
            "runtime": states.runtime_identity(llama_cpp), "n_ctx": int(llm.n_ctx()),
            "kv_cache_type": settings.kv_cache_type, "flash_attention": settings.flash_attention, "swa_full": False}
        n_layers = int(llama_cpp.llama_model_n_layer(llm.model))
        devices = tuple(log.device_loads(n_layers))
        gpu_layers = sum(d.layers for d in devices if d.name != load_log.HOST)
        offloaded = log.offloaded
        if on_progress:
            on_progress(1.0)
        return Loaded(
            backend=self.name, model_path=model_path, n_ctx=int(llm.n_ctx()), n_layers=n_layers,
            gpu_layers=gpu_layers, gpu_offload_supported=offload_supported,
            memory_bytes=self.memory_in_use(), load_ms=(time.perf_counter() - t0) * 1000, details=details,
            devices=devices, offloaded_layers=offloaded[0] if offloaded else None,
            offloadable_layers=offloaded[1] if offloaded else None,
        )

    def _open_model(self, llama_cpp: ModuleType, model_path: str, kwargs: dict[str, Any], settings: LoadSettings,
                    parallel: int, on_progress: Callable[[float], None] | None) -> tuple[Llama, load_log.LoadLog]:
        """llama.cpp's model and context, with the load's progress reported, the tensors placed as asked, the
        sequences for ``parallel`` replies, and llama.cpp's load log captured (returned beside the model)."""
        try:
            with loading.reporting_load_progress(llama_cpp, kwargs, on_progress), \
                    loading.overriding_tensor_placement(llama_cpp, self._overrides), \
                    loading.choosing_extra_buffer_types(llama_cpp, settings.extra_buffer_types), \
                    loading.sequences(llama_cpp, parallel), \
                    load_log.capturing(llama_cpp) as log:
                llm = llama_cpp.Llama(**kwargs)
        except ValueError as exc:  # llama-cpp-python's "Failed to load model from file" and friends
            raise GenerationError("load", f"llama.cpp could not load {Path(model_path).name}: {exc}",
                                  "see the engine log for llama.cpp's reason") from None
        return llm, log

    def _details(self, llama_cpp: ModuleType, settings: LoadSettings, template: bundled.TemplateChoice,
                 projector: ProjectorInfo | None, cpu_variant: str | None, parallel: int,
                 alone: str) -> dict[str, Any]:
        """What the loaded model answers besides replies (``Loaded.details``): its template and where it came from,
        sizes, the runtime that ran it, parallel replies, experts in RAM, vision, embedding or reranking, the draft."""
        llm = self._llm
        assert llm is not None
        metadata = llm.metadata
        details: dict[str, Any] = {
            **template.details(), "tool_format": self.tool_format,
            "model_bytes": int(llama_cpp.llama_model_size(llm.model)),
            "n_params": int(llama_cpp.llama_model_n_params(llm.model)),
            "architecture": metadata.get("general.architecture", ""),
            "llama_cpp_path": os.path.dirname(llama_cpp.__file__ or ""),  # which runtime's llama_cpp ran
            "build": loading.build_fingerprint(llama_cpp),  # the server's system_fingerprint
            **({"cpu_variant": cpu_variant} if cpu_variant else {}),
            "parallel": parallel, **({"parallel_note": f"one reply at a time: {alone}"} if alone else {})}
        details.update(loading.experts_in_ram(metadata, settings.cpu_moe))
        if projector is not None:
            details["vision"] = {"projector": projector.file_name, "projector_type": projector.projector_type,
                                 "image_tokens": projector.image_tokens}
        if self._pooling == reranking.POOLING_RANK:  # a reranker: scores for a question, no vectors to serve
            details.update(reranker=True, pooling="rank",
                           rerank_outputs=int(llama_cpp.llama_model_n_cls_out(llm.model)),
                           rerank_template="model" if metadata.get(reranking.TEMPLATE_KEY) else "none")
        elif self._pooling:
            details.update(embedding=True, pooling=loading.pooling_name(self._pooling),
                           embedding_length=int(llm.n_embd()))
        if isinstance(self._drafter, DraftModel):
            details["draft"] = {"model": settings.draft, "model_bytes": self._drafter.model_bytes,
                                "draft_tokens": settings.draft_tokens}
        elif self._drafter is not None:
            details["draft"] = {"model": PROMPT_LOOKUP, "model_bytes": 0, "draft_tokens": settings.draft_tokens}
        return details

    def _warm_up(self, llama_cpp: ModuleType) -> None:
        """A short prompt batch and one token decoded, then forgotten: a kernel that crashes on this machine
        (llama.cpp's AMX kernels, app/engine/guard.py) does so now, while loading, and not at the user's first
        message. An embedding model's or a reranker's first request is its warm-up."""
        if self._pooling:
            return
        tokens = self._loaded().tokenize(b"Hello", add_bos=True, special=False)
        status = self._decode(llama_cpp, tokens) or self._decode(llama_cpp, tokens[-1:])
        self._forget_kv(llama_cpp)
        self._batched().leave(self._slot.seq)  # its logits row is not read: another sequence's first step need not wait
        if status:
            self.unload()
            raise GenerationError("load", f"llama.cpp failed its warm-up decode (llama_decode returned {status})",
                                  "see the engine log for llama.cpp's reason")

    def sees_images(self) -> bool:
        return self._mtmd is not None

    def _load_drafter(self, llama_cpp: ModuleType, llm: Llama, settings: LoadSettings,
                      kwargs: dict[str, Any]) -> PromptLookup | DraftModel:
        """Prompt lookup, or the draft model loaded as the model was (same context, threads, GPU layers and KV
        cache type) in its own context. Speculation rolls the model's KV cache back after a wrong guess, which a
        recurrent model's state cannot do: refused for those."""
        is_recurrent = getattr(llama_cpp, "llama_model_is_recurrent", None)
        is_hybrid = getattr(llama_cpp, "llama_model_is_hybrid", None)
        if (is_recurrent and is_recurrent(llm.model)) or (is_hybrid and is_hybrid(llm.model)):
            self.unload()
            raise GenerationError("draft", "speculative decoding needs a model whose KV cache can be cut back; this "
                                           "one keeps a recurrent state", "load it without a draft")
        if settings.draft == PROMPT_LOOKUP:
            return PromptLookup()
        if self._pooling:
            self.unload()
            raise GenerationError("draft", "an embedding model makes no replies to speculate on",
                                  "load it without a draft")
        draft_kwargs = {k: v for k, v in kwargs.items() if k not in ("progress_callback", "embedding")}
        draft_kwargs["model_path"] = settings.draft
        try:
            draft = llama_cpp.Llama(**draft_kwargs)
        except ValueError as exc:
            self.unload()
            raise GenerationError("draft", f"llama.cpp could not load the draft model {Path(settings.draft).name}: "
                                           f"{exc}", "see the engine log for llama.cpp's reason") from None
        return DraftModel(llama_cpp, draft, llm.last_n_tokens_size, settings.draft_p_min)

    def _token_text(self, token: int) -> str:
        if token < 0:
            return ""
        return self._loaded().detokenize([token], special=True).decode("utf-8", errors="replace")

    def message_content(self, message: Message, images_in_prompt: bool) -> str:
        """With images, one media marker per image ahead of the text (libmtmd puts each image where its marker is)."""
        if not images_in_prompt:
            return message.content
        return vision.content(message, vision.default_marker())

    def special_tokens(self) -> dict[str, int]:
        import llguidance
        import llama_cpp

        return self._guidance(llguidance, llama_cpp)[2]

    def generate(self, request_id: str, messages: Prompt, sampling: SamplingSettings, cancelled: threading.Event,
                 events_every_s: float | None = None) -> Iterator[Token | Done]:
        """One reply, in a sequence of its own (TokenLoop._sequence): called from several threads at once, up to
        ``parallel``, the replies decode together. llama.cpp's own timers are the context's, so they are logged for
        a model that runs one reply at a time."""
        import llama_cpp

        llm = self._loaded()
        units = None
        if self.parallel > 1:  # the prompt, to find the sequence that holds the longest prefix of it
            try:
                units = _copy(self)._prompt_units(messages, sampling)  # a copy: other threads' replies render too
            except GenerationError:
                units = None  # generate says why in its turn
        view = self._sequence(units)
        if units:  # the sequence it takes may hold another conversation: kept first, for its return
            self._evict(llama_cpp, view._slot, shared_prefix(view._slot.tokens, units))
        view._cancelled = cancelled
        self._last_slots[request_id] = view._slot
        while len(self._last_slots) > 64:
            del self._last_slots[next(iter(self._last_slots))]
        alone = self.parallel == 1
        if alone:
            llama_cpp.llama_perf_context_reset(llm.ctx)
        released = False
        try:
            events = TokenLoop.generate(view, request_id, messages, sampling, cancelled, events_every_s)
            if alone:
                yield from events
                return
            for event in events:
                if isinstance(event, Done):  # the sequence is free before its client reads the end (and returns)
                    self._release(view)
                    released = True
                yield event
        finally:
            if not released:
                self._release(view)
            if alone and self._llm is not None:
                self._log_timings(llama_cpp, self._llm, request_id)

    def use_sequence_of(self, request_id: str) -> None:
        """The next saved state is the one of the sequence ``request_id``'s reply ran in (several run at once)."""
        slot = self._last_slots.get(request_id)
        if slot is not None:
            self._slot = slot

    @staticmethod
    def _log_timings(llama_cpp: ModuleType, llm: Llama, request_id: str) -> None:
        """llama.cpp's own timers for this reply, one line in the engine log (stderr): what the engine itself
        spent, beside the stats QuantDesk shows (tests/bench/token_loop.py compares the two)."""
        perf = llama_cpp.llama_perf_context(llm.ctx)
        print(f"[{request_id}] llama.cpp timings: prompt {perf.n_p_eval} tokens in {perf.t_p_eval_ms:.3f} ms, "
              f"decode {perf.n_eval} tokens in {perf.t_eval_ms:.3f} ms", file=sys.stderr, flush=True)

    def embed(self, request_id: str, texts: Sequence[str]) -> Embedded:
        """Each text's pooled embedding, unit length; the texts go to llama.cpp together, as many sequences of one
        batch as fit (``Llama.embed``)."""
        llm = self._loaded()
        if self._pooling == reranking.POOLING_RANK:
            raise GenerationError("request", "the loaded model is a reranker: it scores passages for a question, it "
                                             "makes no embeddings", "serve a GGUF embedding model")
        if not self._pooling:
            raise GenerationError("request", "the loaded model is not an embedding model (its GGUF declares no "
                                             "pooling)", "serve a GGUF embedding model")
        t0 = time.perf_counter()
        longest = max((len(llm.tokenize(t.encode("utf-8"))) for t in texts), default=0)
        if longest > llm.n_batch:
            raise GenerationError("context", f"a text is {longest} tokens long but the model embeds at most "
                                             f"{llm.n_batch} at once", "split the text")
        vectors, tokens = llm.embed(list(texts), normalize=True, truncate=False, return_count=True)
        self._forget_slots()  # embedding cleared the cache
        return Embedded(request_id, [[float(x) for x in v] for v in vectors], int(tokens),
                        (time.perf_counter() - t0) * 1000)

    def rerank(self, request_id: str, query: str, texts: Sequence[str]) -> Reranked:
        """Each text's score for ``query`` by a reranker GGUF (rank pooling), in order, as llama-server's /rerank
        makes them (rerank.py): the question and each text in the GGUF's rerank template (else joined by the
        vocabulary's special tokens), as many pairs to one batch as fit."""
        import llama_cpp

        llm = self._loaded()
        if self._pooling != reranking.POOLING_RANK:
            kind = (f"an embedding model ({loading.pooling_name(self._pooling)} pooling)"
                    if self._pooling else "a chat model")
            raise GenerationError("request", f"the loaded model is not a reranker: it is {kind}, and its GGUF does not "
                                             "declare rank pooling", "load a GGUF reranker (pooling rank)")
        t0 = time.perf_counter()
        pairs = [reranking.pair_tokens(llama_cpp, llm, query, text) for text in texts]
        scores = reranking.scores(llama_cpp, llm, pairs)
        self._forget_slots()  # reranking cleared the cache
        return Reranked(request_id, scores, sum(map(len, pairs)), (time.perf_counter() - t0) * 1000)

    # --- saved states (backends/llama_cpp/states.py): a chat resumed from disk instead of read again

    def save_state(self, request_id: str, path: str) -> StateSaved:
        import llama_cpp

        llm = self._loaded()
        t0 = time.perf_counter()
        lock = self._batched().lock
        with lock:  # the cells copied while no decode step of another sequence runs
            tokens = list(self._kv_tokens)
            if not tokens:  # a cancelled reply's cache was emptied: nothing to keep, and nothing wrong
                return StateSaved(request_id, "", 0, 0, 0.0)
            seq = self._slot.seq
            try:
                data = states.copy(llama_cpp, llm.ctx, seq)
            except OSError as exc:
                raise GenerationError("state", f"the state could not be written to {path}: {exc}") from None
            self._kept(-1, path, ())  # what the file held is being replaced: no sequence's record names it meanwhile
        try:  # written while the other sequences decode (as _evict writes)
            size = states.write(path, self._state_identity, tokens, data)
        except OSError as exc:
            raise GenerationError("state", f"the state could not be written to {path}: {exc}") from None
        with lock:
            self._kept(seq, path, tokens)
        return StateSaved(request_id, path, len(tokens), size, (time.perf_counter() - t0) * 1000)

    def restore_state(self, request_id: str, paths: Sequence[str], messages: Prompt,
                      sampling: SamplingSettings) -> StateRestored:
        import llama_cpp

        llm = self._loaded()
        t0 = time.perf_counter()
        units = self._prompt_units(messages, sampling)
        with self._slots_lock:  # the sequence a state would go to: a free one, the least recently used
            free = [slot for slot in self._slots if not slot.busy]
            if not free:
                return StateRestored(request_id, "", 0, (time.perf_counter() - t0) * 1000, ())
            # what the KV cache already gives this prompt: in the free sequence its reply would take
            have = min(shared_prefix(choose_slot(free, units).tokens, units), len(units) - 1) if units else 0
            target = min(free, key=lambda slot: (bool(slot.tokens), slot.used))  # an empty one first
            target.busy = True
        chosen = ""
        try:
            recurrent = bool(llama_cpp.llama_model_is_recurrent(llm.model)
                             or llama_cpp.llama_model_is_hybrid(llm.model))
            best, discarded = states.best_state(paths, self._state_identity, units, have, cuttable=not recurrent)
            if best is not None:
                reuse, path, header = best
                self._slot = target
                self._evict(llama_cpp, target, 0)  # the conversation it holds is kept, for its return
                with self._batched().lock:  # no decode step of another sequence meanwhile
                    self._forget_kv(llama_cpp)
                    if self._make_room(len(header.tokens)):  # else the busy sequences fill it: the file stays
                        chosen = self._load_state(llama_cpp, path, header, discarded)
                    have = reuse if chosen else 0
        finally:
            with self._slots_lock:
                target.busy = False
                if chosen:
                    target.used = next(uses)  # the next reply for this prompt finds it by its prefix
        return StateRestored(request_id, chosen, have, (time.perf_counter() - t0) * 1000, tuple(discarded))

    def keep_evicted(self, paths: Sequence[str]) -> None:
        """The files a sequence's state is kept in before another prompt takes its cells (``_evict``), named by the
        parent's state cache (app/engine/states.py's ``evicted_keys``, under its budget); each restore offers them
        anew, and none where states are off."""
        self._evict_to = list(paths)

    def _evict(self, llama_cpp: ModuleType, slot: Slot, kept: int) -> None:
        """``slot``'s state kept in the oldest of the eviction files before a new prompt keeps only ``kept`` of its
        tokens, where that is less than SLOT_SHARE of them (llama-server's prompt cache saves a slot so, when it is
        taken by LRU or keeps under half of its context): the conversation it held is restored from there when it
        comes back (``restore_state`` compares its tokens, whatever the request's keys). A file that holds those
        tokens already (the reply's saved state, or the one it was restored from) is linked, not written again. The
        slot is the caller's (busy, or idle under the slots' lock); a failed write costs that prefix only (logged)."""
        if not self._evict_to or not slot.tokens or kept >= SLOT_SHARE * len(slot.tokens):
            return
        lock = self._batched().lock
        with lock:  # the cells copied while no decode step runs; the file chosen by one eviction at a time
            tokens = list(slot.tokens)
            had = self._kept_as.get(slot.seq)
            if had is not None and had[1] == tokens and had[0] in self._evict_to and os.path.exists(had[0]):
                return  # restored from an eviction file and not changed since: it is kept there still
            free = [path for path in self._evict_to if path not in self._writing]
            if not free:
                return
            path = _oldest(free)
            if had is not None and had[1] == tokens and _linked(had[0], path):
                self._kept(slot.seq, path, tokens)
                return
            try:
                data = states.copy(llama_cpp, self._loaded().ctx, slot.seq)
            except OSError as exc:
                _not_kept(slot.seq, tokens, path, exc)
                return
            self._writing.add(path)
            self._kept(-1, path, ())  # what it held is going: no sequence's record names it meanwhile
        try:  # written while the other sequences decode (inside a step's make_room the lock is held anyway)
            states.write(path, self._state_identity, tokens, data)
        except OSError as exc:
            _not_kept(slot.seq, tokens, path, exc)
        else:
            with lock:
                self._kept(slot.seq, path, tokens)
        finally:
            with lock:
                self._writing.discard(path)

    def _kept(self, seq: int, path: str, tokens: Sequence[int]) -> None:
        """``path`` now holds sequence ``seq``'s ``tokens`` (-1: none's); no other sequence's record names it."""
        for other, (where, _) in list(self._kept_as.items()):
            if where == path:
                del self._kept_as[other]
        if seq >= 0:
            self._kept_as[seq] = (path, list(tokens))

    def _load_state(self, llama_cpp: ModuleType, path: str, header: states.Header,
                    discarded: list[tuple[str, str]]) -> str:
        """The state at ``path`` loaded into this object's (emptied) sequence: ``path``, or "" with the reason it
        was refused added to ``discarded`` (the batcher's lock held)."""
        try:
            states.load(llama_cpp, self._loaded().ctx, path, header, self._slot.seq)
        except states.StateRejected as exc:
            discarded.append((path, str(exc)))
            self._forget_kv(llama_cpp)  # whatever half of it arrived goes
            return ""
        self._kv_tokens = list(header.tokens)  # the next prompt keeps its shared prefix of these
        self._kept(self._slot.seq, path, self._kv_tokens)
        return path

    def _make_room(self, n_tokens: int) -> bool:
        """Before a state of ``n_tokens`` is restored (the batcher's lock held): the idle sequences' prefixes leave
        the unified KV cache, each kept first, where the sequences together would not leave it room; whether it
        has room now."""
        n_ctx = self._loaded().n_ctx()
        if sum(len(slot.tokens) for slot in self._slots) + n_tokens > n_ctx:
            self._free_idle_slots()
        return sum(len(slot.tokens) for slot in self._slots) + n_tokens <= n_ctx

    def _prompt_units(self, messages: Prompt, sampling: SamplingSettings) -> list[int]:
        """The prompt as the KV cache would hold it (``_stream``'s tokens, or with images its chunks' units); []
        where no saved prefix can be used (M-RoPE images)."""
        self.reply = Reply(self.prepare(messages, sampling))
        prompt = self._engine_prompt(messages)
        images = [] if isinstance(messages, str) else [image for m in messages for image in m.images]
        if not images:
            return list(self._loaded().tokenize(prompt.encode("utf-8"), add_bos=True, special=True))
        if vision.uses_mrope(self._mtmd):
            return []
        media = vision.media_chunks(self._mtmd, prompt, images)
        try:
            return [u for _, piece, _ in vision.chunk_units(media) for u in piece]
        finally:
            vision.free_chunks(media)

    # --- scoring (the quant lab): a separate evaluation with a logit row for every token, so the chat
    # context keeps computing only the last row and its speed is untouched.

    def tokenize(self, text: str, special: bool = False) -> list[int]:
        return list(self._loaded().tokenize(text.encode("utf-8"), add_bos=True, special=special))

    def window_logits(self, tokens: Sequence[int], first: int) -> Iterator[np.ndarray[Any, Any]]:
        """One window from an empty cache, asking llama.cpp for the logit rows of positions ``first`` on only (as
        llama-perplexity does: the output layer over the whole vocabulary is a large share of a small model's work).
        Each block is a view of llama.cpp's own output buffer, valid until the next decode."""
        import numpy as np

        llm = self._loaded()
        n_vocab = llm.n_vocab()
        check_token_ids(tokens, n_vocab)
        if len(tokens) > llm.n_ctx():
            raise GenerationError("context", f"{len(tokens)} tokens to score but the context holds {llm.n_ctx()}",
                                  "load with a larger context or score fewer tokens")
        # (no-untyped-call: llama-cpp-python 0.3's Llama.reset and its context's methods carry no annotations)
        llm.reset()  # type: ignore[no-untyped-call]
        llm._ctx.kv_cache_clear()  # type: ignore[no-untyped-call]
        self._forget_slots()  # the chats' prefixes are gone from the cache
        batch = llm._batch
        try:
            for start in range(0, len(tokens), llm.n_batch):
                chunk = list(tokens[start:start + llm.n_batch])
                batch.set_batch(batch=chunk, n_past=start, logits_all=False)
                outputs = 0
                for i in range(len(chunk)):
                    wanted = start + i >= first
                    batch.batch.logits[i] = wanted
                    outputs += wanted
                if not outputs:  # llama.cpp computes the batch's last row anyway (set_batch asks for it)
                    batch.batch.logits[len(chunk) - 1] = False
                llm._ctx.decode(batch)
                if outputs:
                    logits = llm._ctx.get_logits()  # type: ignore[no-untyped-call]  # unannotated, as reset above
                    rows = np.ctypeslib.as_array(logits, shape=(outputs * n_vocab,))
                    yield rows.reshape(outputs, n_vocab)
        except RuntimeError as exc:
            raise GenerationError("decode", f"llama.cpp failed while scoring: {exc}") from None
        finally:
            # The chat's prefix reuse trusts llm.input_ids and the KV cache: leave neither half-used.
            llm._ctx.kv_cache_clear()  # type: ignore[no-untyped-call]  # unannotated, as reset above
            llm.reset()  # type: ignore[no-untyped-call]

    def logits_width(self) -> int:
        return int(self._loaded().n_vocab())

    def vocabulary(self) -> list[str]:
        import llama_cpp

        llm = self._loaded()
        vocab = llm._model.vocab
        return [llama_cpp.llama_vocab_get_text(vocab, i).decode("utf-8", "replace") for i in range(llm.n_vocab())]

    def unload(self) -> None:
        if self._drafter is not None:
            drafter, self._drafter = self._drafter, None
            drafter.close()
        if self._mtmd is not None:
            mtmd, self._mtmd = self._mtmd, None
            vision.free(mtmd)
        self._stop_batching()
        if self._llm is not None:
            llm, self._llm = self._llm, None
            llm.close()
        self._overrides = None

def _not_kept(seq: int, tokens: Sequence[int], path: str, exc: OSError) -> None:
    print(f"the state of sequence {seq} ({len(tokens)} tokens) could not be kept in {path}: {exc}", file=sys.stderr,
          flush=True)


def _oldest(paths: Sequence[str]) -> str:
    """Of the eviction files, one that does not exist yet, else the least recently written (or restored)."""
    def age(path: str) -> float:
        try:
            return os.stat(path).st_mtime
        except OSError:
            return float("-inf")

    return min(paths, key=age)


def _linked(source: str, path: str) -> bool:
    """``path`` made a second name of ``source`` (no copy), the newest of the eviction files (and the state's most
    recent use); False where that cannot be (the file is gone, or the file system has no hard links)."""
    try:
        if source != path:
            files.link_atomic(Path(source), Path(path))
        os.utime(path)
    except OSError:
        return False
    return True


def _llama_kwargs(model_path: str, settings: LoadSettings, kv_type: int, pooling: int) -> dict[str, Any]:
    """llama_cpp.Llama's arguments for ``settings`` (``pooling``: the model's declared pooling, 0 for none)."""
    kwargs: dict[str, Any] = dict(
        model_path=model_path, n_ctx=settings.n_ctx, n_gpu_layers=settings.gpu_layers,
        n_threads=settings.threads or physical_cores(), use_mmap=settings.mmap,
        type_k=kv_type, type_v=kv_type, verbose=True,  # llama.cpp's log goes to the host's stderr
        # Sliding-window layers get a window-sized cache, as llama-server does by default and as
        # app/models/estimate.py assumes; llama-cpp-python's own default (swa_full=True) sizes them
        # for the full context, several times the memory on Gemma-style models.
        swa_full=False,
    )
    if settings.flash_attention is not None:
        kwargs["flash_attn"] = settings.flash_attention
    if pooling:  # an embedding model: llama.cpp pools as its metadata says (mean, CLS, last, ...)
        kwargs["embedding"] = True
    if pooling == reranking.POOLING_RANK:  # a question and a passage read in one batch (rerank.py), up to
        from app.models.estimate import RERANK_UBATCH  # the fit check's figure; imported here, not at the probe

        kwargs["n_batch"] = kwargs["n_ubatch"] = min(settings.n_ctx, RERANK_UBATCH)  # the context
    return kwargs



def _parallel(settings: LoadSettings, pooling: int, projector: bool) -> tuple[int, str]:
    """How many sequences the context is made for, and why one where more were asked ("" when as asked): speculative
    decoding and images are served one reply at a time (their own batches and positions), an embedding model or a
    reranker batches its texts itself."""
    if settings.parallel <= 1:
        return 1, ""
    if pooling:
        return 1, "an embedding model or a reranker batches its texts itself"
    if settings.draft:
        return 1, "speculative decoding verifies one sequence's guesses"
    if projector:
        return 1, "a model that sees images reads them in one sequence"
    return settings.parallel, ""
