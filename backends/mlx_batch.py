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

What is not batched is said at load (``parallel_note``, backends/mlx.py): speculative decoding (mlx-lm's
speculative_generate_step runs one sequence), vision models (mlx-vlm) and a model whose cache mlx-lm cannot batch.
Batched replies keep no prompt cache between them: each reads its whole prompt.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Generator, Sequence
from typing import Any

from app.datatypes import SamplingSettings
from backends.base import GenerationError

# The most prompt tokens one step reads per new reply: the running streams wait about that long for their next token
# while a prompt is read (backends/llama_cpp/batch.py reads prompts in chunks of the same size beside others).
PREFILL_CHUNK = 256
POLL_S = 0.05  # how often a reply waiting for its next token looks at its cancel

# What the decode thread hands a reply: a token, its log-probabilities row (numpy, when asked for) and whether it is
# the last; or the error that ended the reply.
_Out = queue.SimpleQueue["tuple[int, Any, bool] | BaseException"]


class _Reply:
    """One reply in the batch, as its thread handed it in."""

    __slots__ = ("prompt", "limit", "sampler", "chain", "logprobs", "lockstep", "out", "uid", "failure", "ended",
                 "unread")

    def __init__(self, prompt: Sequence[int], limit: int, sampler: Callable[[Any], Any],
                 processors: Sequence[Callable[[Any, Any], Any]], logprobs: bool, lockstep: bool) -> None:
        self.prompt, self.limit, self.sampler, self.logprobs = list(prompt), limit, sampler, logprobs
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

    def __init__(self, model: Any, size: int, eos: Sequence[int]) -> None:
        self._model, self.size, self._eos = model, size, tuple(eos)
        self._cond = threading.Condition()
        self._joining: list[_Reply] = []
        self._leaving: list[_Reply] = []
        self._closed = False
        self.steps = 0  # generation steps run (one forward pass of every reply decoding then)
        self.batched_steps = 0  # of them, those that decoded more than one reply
        self._thread = threading.Thread(target=self._decoding, daemon=True, name="mlx-decode")
        self._thread.start()

    def run(self, prompt: Sequence[int], limit: int, sampler: Callable[[Any], Any],
            processors: Sequence[Callable[[Any, Any], Any]], logprobs: bool,
            cancelled: threading.Event | None, lockstep: bool = False) -> Generator[tuple[int, Any], None, None]:
        """Decode ``prompt``'s reply with the others: each token and its log-probabilities row (None unless
        ``logprobs``), up to ``limit`` tokens or the end-of-text token (handed out too). Closing the iterator, or a
        cancel seen while it waits, takes the reply out at the next step.

        The decode thread does not wait for a reply's thread: it steps on while the thread reads its tokens. Where
        what the thread does with a token changes the reply's next ones (``lockstep``: a thinking budget forces
        tokens through a logits processor), each step waits until the thread comes back for its next token, as
        mlx-lm's generate_step runs the next step only when asked; so the forcing starts where it starts alone."""
        reply = _Reply(prompt, limit, sampler, processors, logprobs, lockstep)
        with self._cond:
            if self._closed:
                raise GenerationError("state", "no model is loaded")
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
                yield token, row
                if last:
                    return
                if lockstep:
                    with self._cond:
                        reply.unread = False
                        self._cond.notify_all()
        finally:
            if not reply.ended:
                with self._cond:
                    self._leaving.append(reply)
                    self._cond.notify_all()

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
                    generator.remove(gone)
                    for uid in gone:
                        del running[uid]
                for reply in joining:
                    if reply in leaving:  # stopped before it was inserted
                        continue
                    reply.uid = generator.insert([reply.prompt], [reply.limit], samplers=[reply.sampler],
                                                 logits_processors=[reply.processors()], stop_sequences=[stops])[0]
                    running[reply.uid] = reply
                if self._ready(running):
                    generator = self._step(generator, running)
        finally:
            with self._cond:
                self._closed = True
                stranded = list(running.values()) + self._joining
            for reply in stranded:
                reply.out.put(GenerationError("state", "the model was unloaded while it answered"))
            generator.close()
            mx.synchronize(generator.stream)  # nothing of this thread's stream may be left running when it ends

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
                del running[response.uid]
                continue
            row = np.asarray(response.logprobs.astype(mx.float32)) if reply.logprobs else None
            last = response.finish_reason is not None
            reply.ended, reply.unread = last, True
            reply.out.put((int(response.token), row, last))
            if last:
                del running[response.uid]
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
