"""MLX's continuous batching: several replies decoded together through mlx-lm's own ``BatchGenerator``.

A model loaded with ``LoadSettings.parallel`` > 1 gets one ``Batch`` (backends/mlx.py), and the engine host then runs
up to that many replies at once, each on a thread of its own. The batch has a decode thread of its own that owns
mlx-lm's BatchGenerator, made and stepped there only (mlx-lm's generation stream is per thread, and one thread's
unfinished work must not outlive it). A reply's thread hands its prompt in (``Batch.run``: its tokens, its sampler,
its logits processors, its token limit) and reads its tokens as they come; the decode thread inserts it before its
next step, reads its prompt in chunks of ``PREFILL_CHUNK`` tokens between the others' decoding steps (so running
streams keep flowing), decodes it with the others in one forward pass per step, and takes it out when it ends, when
its thread stops reading (a stop string, max tokens, a cancel: the shared loop closes the stream) or when it fails.

Each reply keeps what it would have alone: its sampler (a seeded one draws from a key of its own, split at each token
as mlx-lm's global key is after ``mx.random.seed``, so a seed gives the text it gives alone, whoever runs beside it),
its logits processors (a grammar, the repetition penalty, forced tokens; one that raises ends its own reply with
that error and the others go on), its log-probabilities row, and on its own thread the shared loop's stop strings,
thinking budget and reading of the reply (backends/base.py), which never see where the tokens came from.

Each reply runs in one of ``size`` sequences, as llama.cpp's do (backends/sequences.py's ``choose_slot``,
llama-server's slot similarity: the free sequence holding the longest prefix of its prompt among those similar to it,
else an empty one, else the least recently used). A sequence keeps the KV cache its last reply left (mlx-lm hands a
finished or removed sequence's cache back, ``extract_cache``), so the next prompt that starts with what it holds is
inserted with that cache cut back to the shared prefix and reads only the rest (``cached_tokens``); a saved state is
written from a reply's sequence and restored into the one its prompt would take. The free sequences' caches hold
at most a context's worth of tokens together (``n_ctx``, as the one cache of a model answering alone): the least
recently used go first. A running reply's cache is its own, up to the whole context, so N replies at once hold up to
N caches.

What is not batched is said at load (``parallel_note``, backends/mlx.py): speculative decoding (mlx-lm's
speculative_generate_step runs one sequence), vision models (mlx-vlm) and a model whose cache mlx-lm cannot batch.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Generator, Sequence
from typing import Any

from app.datatypes import SamplingSettings
from backends.base import GenerationError
from backends.sequences import Slot, choose_slot, uses
from backends.states import shared_prefix

# The most prompt tokens one step reads per new reply: the running streams wait about that long for their next token
# while a prompt is read (backends/llama_cpp/batch.py reads prompts in chunks of the same size beside others).
PREFILL_CHUNK = 256
POLL_S = 0.05  # how often a reply waiting for its next token looks at its cancel

REMEMBERED_REPLIES = 64  # the latest replies' sequences, for a save that follows its reply (Batch.kept)

# What the decode thread hands a reply: a token, its log-probabilities row (numpy, when asked for) and whether it is
# the last; or the error that ended the reply.
_Out = queue.SimpleQueue["tuple[int, Any, bool] | BaseException"]


class _Reply:
    """One reply in the batch, as its thread handed it in."""

    __slots__ = ("prompt", "limit", "sampler", "chain", "logprobs", "lockstep", "out", "uid", "failure", "ended",
                 "unread", "slot", "cache", "held", "cached")

    def __init__(self, prompt: Sequence[int], limit: int, sampler: Callable[[Any], Any],
                 processors: Sequence[Callable[[Any, Any], Any]], logprobs: bool, lockstep: bool) -> None:
        self.prompt, self.limit, self.sampler, self.logprobs = list(prompt), limit, sampler, logprobs
        self.slot: Slot | None = None  # its sequence, taken when it is handed in
        self.cache: list[Any] | None = None  # the cache the sequence kept, and the tokens it holds
        self.held: list[int] = []
        self.cached = 0  # of its prompt's tokens, those that cache gave it
        self.chain = tuple(processors)
        self.lockstep = lockstep  # the next step waits until its thread has read its last token (Batch.run)
        self.unread = False  # a token was handed out and its thread has not come back for the next
        self.out: _Out = queue.SimpleQueue()
        self.uid: int | None = None  # mlx-lm's, once inserted
        self.failure: BaseException | None = None  # what a logits processor raised
        self.ended = False  # its last token was handed out

    def processors(self) -> list[Callable[[Any, Any], Any]]:
        """Its logits processors as one, for mlx-lm: an error stays this reply's (``failure``) instead of failing
        the step of every reply; none at all where it has none, so a batch of plain replies is processed as one."""
        return [self._process] if self.chain else []

    def _process(self, tokens: Any, logits: Any) -> Any:
        if self.failure is None:
            try:
                for processor in self.chain:
                    logits = processor(tokens, logits)
            except Exception as exc:  # any processor's error (a grammar's refusal): this reply's alone, said to it
                self.failure = exc
        return logits


class Batch:
    """The decode thread of one MLX model's batched replies, up to ``size`` at once (see the module's words)."""

    def __init__(self, model: Any, size: int, eos: Sequence[int], n_ctx: int) -> None:
        self._model, self.size, self._eos, self._n_ctx = model, size, tuple(eos), n_ctx
        self._cond = threading.Condition()
        self._joining: list[_Reply] = []
        self._leaving: list[_Reply] = []
        self._closed = False
        self._slots = [Slot(seq) for seq in range(size)]
        self._caches: dict[int, list[Any]] = {}  # a free sequence's seq -> the KV cache its last reply left
        self._last: dict[str, Slot] = {}  # a recent reply's id -> its sequence (kept)
        self.steps = 0  # generation steps run (one forward pass of every reply decoding then)
        self.batched_steps = 0  # of them, those that decoded more than one reply
        self._thread = threading.Thread(target=self._decoding, daemon=True, name="mlx-decode")
        self._thread.start()

    def run(self, request_id: str, prompt: Sequence[int], limit: int, sampler: Callable[[Any], Any],
            processors: Sequence[Callable[[Any, Any], Any]], logprobs: bool, cancelled: threading.Event | None,
            lockstep: bool = False) -> Generator[tuple[int, Any, int], None, None]:
        """Decode ``prompt``'s reply with the others, in a free sequence (see the module's words): each token, its
        log-probabilities row (None unless ``logprobs``) and how many of the prompt's tokens the sequence's cache
        gave, up to ``limit`` tokens or the end-of-text token (handed out too). Closing the iterator, or a cancel
        seen while it waits, takes the reply out at the next step.

        The decode thread does not wait for a reply's thread: it steps on while the thread reads its tokens. Where
        what the thread does with a token changes the reply's next ones (``lockstep``: a thinking budget forces
        tokens through a logits processor), each step waits until the thread comes back for its next token, as
        mlx-lm's generate_step runs the next step only when asked; so the forcing starts where it starts alone."""
        reply = _Reply(prompt, limit, sampler, processors, logprobs, lockstep)
        with self._cond:
            # a sequence its previous reply left a moment ago is free once the decode thread took its cache back
            while not self._closed and all(s.busy for s in self._slots):
                self._cond.wait()
            if self._closed:
                raise GenerationError("state", "no model is loaded")
            slot = reply.slot = choose_slot(self._free_slots(), reply.prompt)
            slot.busy, slot.used = True, next(uses)
            reply.cache, reply.held, slot.tokens = self._caches.pop(slot.seq, None), slot.tokens, []
            self._remember(request_id, slot)
            self._joining.append(reply)
            self._cond.notify_all()
        try:
            while True:
                try:
                    item = reply.out.get(timeout=POLL_S)
                except queue.Empty:
                    if cancelled is not None and cancelled.is_set():
                        return
                    continue
                if isinstance(item, BaseException):
                    raise item
                token, row, last = item
                yield token, row, reply.cached
                if last:
                    return
                if lockstep:
                    with self._cond:
                        reply.unread = False
                        self._cond.notify_all()
        finally:
            with self._cond:
                if not reply.ended:
                    self._leaving.append(reply)
                    self._cond.notify_all()
                # its sequence free and its cache kept before the reply counts as ended (a save follows it)
                while reply.slot is not None and reply.slot.busy and not self._closed:
                    self._cond.wait()

    def _free_slots(self) -> list[Slot]:
        return [s for s in self._slots if not s.busy]

    def _remember(self, request_id: str, slot: Slot) -> None:
        self._last[request_id] = slot
        while len(self._last) > REMEMBERED_REPLIES:
            del self._last[next(iter(self._last))]

    def kept(self, request_id: str) -> tuple[list[Any], list[int]] | None:
        """The KV cache and its tokens that ``request_id``'s reply left in its sequence (for a saved state), while the
        sequence is free and holds them; copies of the layers' caches, so that a reply taking the sequence next does
        not cut them back under the caller."""
        import copy

        with self._cond:
            slot = self._last.get(request_id)
            cache = self._caches.get(slot.seq) if slot is not None and not slot.busy else None
            if slot is None or cache is None or not slot.tokens:
                return None
            return [copy.copy(layer) for layer in cache], list(slot.tokens)

    def holding(self, tokens: Sequence[int]) -> int:
        """How many of ``tokens`` the free sequence a reply to them would take holds (0 where none is free)."""
        with self._cond:
            free = self._free_slots()
            return shared_prefix(choose_slot(free, tokens).tokens, tokens) if free else 0

    def keep(self, prompt: Sequence[int], tokens: Sequence[int], cache: list[Any]) -> bool:
        """A restored state's cache (evaluated) holding ``tokens`` into the free sequence a reply to ``prompt`` would
        take, where that reply finds it; False where no sequence is free."""
        with self._cond:
            free = self._free_slots()
            if not free:
                return False
            slot = choose_slot(free, prompt)
            slot.tokens, slot.used = list(tokens), next(uses)
            self._caches[slot.seq] = cache
            self._within_context(slot)
            return True

    def _within_context(self, newest: Slot) -> None:
        """The free sequences' caches cut to a context's worth of tokens together, the least recently used dropped
        first, ``newest`` last (the lock held)."""
        kept = sorted((s for s in self._slots if not s.busy and s.seq in self._caches),
                      key=lambda s: (s is newest, s.used))
        total = sum(len(s.tokens) for s in kept)
        for slot in kept:
            if total <= self._n_ctx:
                break
            total -= len(slot.tokens)
            slot.tokens = []
            del self._caches[slot.seq]

    def close(self) -> None:
        """End the decode thread (after its current step); a reply still in the batch ends with an error."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        if self._thread is not threading.current_thread():
            self._thread.join()

    # --- the decode thread

    def _generator(self) -> Any:
        from mlx_lm.generate import BatchGenerator

        return BatchGenerator(self._model, completion_batch_size=self.size, prefill_batch_size=self.size,
                              prefill_step_size=PREFILL_CHUNK)

    def _decoding(self) -> None:
        import mlx.core as mx
        from mlx_lm.generate import StopSequences

        stops = StopSequences([(t,) for t in self._eos])
        generator = self._generator()
        running: dict[int, _Reply] = {}
        try:
            while True:
                with self._cond:
                    while not (self._joining or self._leaving or self._closed or self._ready(running)):
                        self._cond.wait()
                    if self._closed:
                        return
                    joining, self._joining = self._joining, []
                    leaving, self._leaving = self._leaving, []
                gone = [r.uid for r in leaving if r.uid is not None and r.uid in running]
                if gone:
                    left = generator.remove(gone, return_prompt_caches=True)
                    for uid in gone:
                        self._free(running.pop(uid), *left.get(uid, (None, [])))
                for reply in joining:
                    if reply in leaving:  # stopped before it was inserted
                        self._free(reply, reply.cache, reply.held)
                        continue
                    reply.uid = self._insert(generator, reply, stops)
                    running[reply.uid] = reply
                if self._ready(running):
                    generator = self._step(generator, running)
        finally:
            with self._cond:
                self._closed = True
                stranded = list(running.values()) + self._joining
                self._caches.clear()
                self._cond.notify_all()
            for reply in stranded:
                reply.out.put(GenerationError("state", "the model was unloaded while it answered"))
            generator.close()
            mx.synchronize(generator.stream)  # nothing of this thread's stream may be left running when it ends

    @staticmethod
    def _insert(generator: Any, reply: _Reply, stops: Any) -> int:
        """Insert ``reply`` into mlx-lm's generator: with its sequence's cache cut back to the prefix it shares with
        the prompt (the prompt's rest to read; its last token at least, whose logits choose the first token), or a
        fresh cache where they share nothing or the cache cannot be cut (a recurrent layer's)."""
        from mlx_lm.models.cache import can_trim_prompt_cache, trim_prompt_cache

        prompt, cache = reply.prompt, reply.cache
        common = min(shared_prefix(reply.held, prompt), len(prompt) - 1)
        extra = len(reply.held) - common
        # (comparison-overlap: mlx-lm annotates trim_prompt_cache as returning the cache; it returns the count cut)
        if cache is None or common <= 0 or (extra and (not can_trim_prompt_cache(cache) or trim_prompt_cache(
                cache, extra) != extra)):  # type: ignore[comparison-overlap, unused-ignore]
            cache, common = None, 0
        reply.cached = common
        return int(generator.insert([prompt[common:]], [reply.limit], caches=[cache] if cache else None,
                                    all_tokens=[prompt[:common]] if cache else None, samplers=[reply.sampler],
                                    logits_processors=[reply.processors()], stop_sequences=[stops])[0])

    def _free(self, reply: _Reply, cache: list[Any] | None, tokens: Sequence[int]) -> None:
        """``reply``'s sequence is free again, keeping ``cache`` (evaluated here, on the decode thread) where it holds
        exactly ``tokens``; nothing where it does not (a failure)."""
        import mlx.core as mx

        slot = reply.slot
        if slot is None:
            return
        length = getattr(cache[0], "offset", None) if cache else None
        keep = cache is not None and bool(tokens) and (not isinstance(length, int) or length == len(tokens))
        if keep and cache is not None:
            mx.eval([layer.state for layer in cache])
        with self._cond:
            slot.tokens = list(tokens) if keep else []
            slot.busy = False
            if keep and cache is not None:
                self._caches[slot.seq] = cache
                self._within_context(slot)
            self._cond.notify_all()

    @staticmethod
    def _ready(running: dict[int, _Reply]) -> bool:
        """Whether a step may run: some reply is in the batch, and none that steps in lockstep has a token unread."""
        return bool(running) and not any(r.unread for r in running.values() if r.lockstep)

    def _step(self, generator: Any, running: dict[int, _Reply]) -> Any:
        """One step of mlx-lm's generator: every decoding reply's next token handed out, the prompt chunks read; the
        generator to go on with (a new one, where the step failed: each reply in it gets the error)."""
        import mlx.core as mx
        import numpy as np

        try:
            _, responses = generator.next()
        except Exception as exc:  # the model's forward pass failed (memory, a shape): every reply in it ends so
            for failed in running.values():
                failed.out.put(exc)
                self._free(failed, None, [])
            running.clear()
            generator.close()
            mx.synchronize(generator.stream)
            return self._generator()
        self.steps += bool(responses)
        self.batched_steps += len(responses) > 1
        for response in responses:
            reply = running.get(response.uid)
            if reply is None:
                continue
            if reply.failure is not None:
                reply.out.put(reply.failure)
                generator.remove([response.uid])
                self._free(running.pop(response.uid), None, [])
                continue
            row = np.asarray(response.logprobs.astype(mx.float32)) if reply.logprobs else None
            last = response.finish_reason is not None
            reply.ended, reply.unread = last, True
            if last:  # its sequence free (the cache kept) before its thread sees its last token
                self._free(running.pop(response.uid), response.prompt_cache, response.all_tokens or [])
            reply.out.put((int(response.token), row, last))
        return generator


def sampler(sampling: SamplingSettings) -> Callable[[Any], Any]:
    """A reply's sampler in the batch, as mlx-lm's ``make_sampler`` makes it for the reply alone; a seeded one draws
    from its own key, split at each token as ``mx.random.seed`` leaves mlx's global key to be, so that the reply's
    text is its text alone whatever others the batch samples for (the global key is theirs)."""
    from mlx_lm.sample_utils import apply_min_p, apply_top_k, apply_top_p, make_sampler

    top_p = sampling.top_p if sampling.top_p < 1 else 0.0
    if sampling.seed is None or sampling.temperature == 0:
        return make_sampler(temp=sampling.temperature, top_p=top_p, min_p=sampling.min_p, top_k=sampling.top_k)
    import mlx.core as mx

    steps: list[Callable[[Any], Any]] = []  # make_sampler's order
    if 0 < top_p < 1:
        steps.append(lambda x: apply_top_p(x, top_p))
    if sampling.min_p:
        steps.append(lambda x: apply_min_p(x, sampling.min_p, 1))
    if sampling.top_k > 0:
        steps.append(lambda x: apply_top_k(x, sampling.top_k))
    seed, scale = sampling.seed, 1.0 / sampling.temperature
    key: list[Any] = []  # made at the first token, on the decode thread

    def sample(logprobs: Any) -> Any:
        for step in steps:
            logprobs = step(logprobs)
        key[:] = mx.random.split(key[0] if key else mx.random.key(seed))
        return mx.random.categorical(logprobs * scale, key=key[1])

    return sample
