"""Continuous batching: the decode steps that several sequences of one llama.cpp context share.

Each reply runs its token loop (loop.py) on a thread of its own, in a sequence (``seq_id``) of one unified KV cache.
Where the loop would call ``llama_decode`` it hands its tokens to the Batcher instead: the next step decodes every
sequence's pending tokens in one ``llama_batch`` (each its own positions, its last token's logits row), and each loop
then samples from its own row (``llama_get_logits_ith``). A step runs as soon as every sequence that took part in the
last one has read its row and handed in its next tokens (or left): a sequence that joins waits for that step at most,
one that is still rendering its prompt holds nobody up. A new prompt is read in chunks of at most ``PREFILL_CHUNK``
tokens while other sequences decode (the whole ``n_batch`` when it is alone), so running streams keep flowing.

One sequence alone is the same loop: its step is ``llama_batch_get_one`` as before (no positions to fill, and an
image's M-RoPE positions stay llama.cpp's to count), decoded on its own thread without waiting for anyone.

A step the cache has no room for (the sequences together outgrow the unified cache) first asks the backend to free
idle sequences' cached prefixes (``make_room``; each saved first where the saved-state cache asked it to: backend.py);
if it still does not fit, one sequence's tokens leave the step with llama.cpp's status 1 and its cells leave the cache
at once, a new prompt's chunk first, else the longest sequence's, so one reply ends with its error and the others go
on. ``llama_decode`` checks the room for the whole batch before it
computes anything (its status 1 leaves the cache as it was), so the retry is exact.

Which thread runs a step matters to llama.cpp's OpenMP build (the wheels link libgomp): its barriers between graph
nodes are OpenMP barriers, and libgomp keeps a team of worker threads per thread that calls in. Run on the thread of
the sequence that handed in last (a different one at most steps), several teams lived at once; once they outnumber
the cores libgomp throttles their spin-wait and each barrier sleeps and wakes: SmolLM2, 4 streams, ~1000 voluntary
context switches in the engine host per step, against 3 with every step on one thread. So every step runs on one
decode thread of its own (one team, as llama.cpp's own loop has): on a quiet machine (load average 1.2) the 4 clients
of tests/bench/batching.py got 201.9 tok/s against llama.cpp's own batched decode's 214.1 (0.94), where the callers'
threads got 157.6 (0.74). On an oversubscribed machine (load average 9) a spinning team collapses, as llama.cpp's own
decode does there (3-14 tok/s against 67-79 with throttled teams): ``QUANTDESK_DECODE_ON_CALLERS=1`` runs each step
on its caller's thread again, and the benchmark prints that row beside the default.

``llama_cpp`` is the runtime's module, handed in (see load.py): untyped here.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import Any

# The most prompt tokens one step reads for a sequence while others decode: a step then costs the running streams
# about one prompt chunk's time (llama-server's default --batch-size splits prompts at 2048; a smaller chunk keeps a
# CPU's streams flowing while an agent's 10k-token prompt is read).
PREFILL_CHUNK = 256
NO_SLOT = 1  # llama_decode's status when the KV cache has no room for the batch
DECODE_ON_CALLERS = "QUANTDESK_DECODE_ON_CALLERS"  # "1": each step on its caller's thread (see the module's words)


class _DecodeThread:
    """The thread every batched step runs on (one OpenMP team: see the module's words). A step is handed over and
    back through two plain locks, one released by each side, not a queue and an Event: those cost a token ~35 µs of
    Python right after a decode, with cold caches, where two lock operations cost a few. One step at a time: callers
    hold the batcher's lock."""

    def __init__(self) -> None:
        self._go, self._done = threading.Lock(), threading.Lock()
        self._go.acquire()
        self._done.acquire()
        self._work: Callable[[], int] | None = None
        self._outcome: int | BaseException = 0
        threading.Thread(target=self._serve, daemon=True, name="llama-decode").start()

    def run(self, work: Callable[[], int]) -> int:
        self._work = work
        self._go.release()
        self._done.acquire()
        if isinstance(self._outcome, BaseException):
            raise self._outcome
        return self._outcome

    def close(self) -> None:
        self._work = None
        self._go.release()

    def _serve(self) -> None:
        while True:
            self._go.acquire()
            work = self._work
            if work is None:
                return
            try:
                self._outcome = work()
            except BaseException as exc:  # raised again by the caller waiting for it; this thread serves the next step
                self._outcome = exc
            self._done.release()


class _Entry:
    __slots__ = ("seq", "tokens", "cancelled", "status", "row")

    def __init__(self, seq: int, tokens: Sequence[int], cancelled: threading.Event | None) -> None:
        self.seq, self.tokens, self.cancelled = seq, tokens, cancelled
        self.status: int | None = None
        self.row = -1


class Batcher:
    """The shared decode steps of one llama.cpp context with ``n_seq_max`` sequences (see the module's words)."""

    def __init__(self, llama_cpp: ModuleType, ctx: Any, n_batch: int, n_seq_max: int,
                 make_room: Callable[[], bool] = lambda: False) -> None:
        self._lib, self._ctx, self.n_batch, self.n_seq_max = llama_cpp, ctx, n_batch, n_seq_max
        self._memory = llama_cpp.llama_get_memory(ctx)
        self._aborting: threading.Event | None = None  # the one prompt's cancel that may abort this step
        # alive while llama.cpp may call it; installed for a lone prompt only (see aborting)
        self._abort_cb = llama_cpp.ggml_abort_callback(lambda _data: self.should_abort())
        self._no_abort_cb = llama_cpp.ggml_abort_callback()  # NULL: no callback
        self.make_room = make_room
        self._batch = llama_cpp.llama_batch_init(n_batch, 0, 1) if n_seq_max > 1 else None
        self._one = (llama_cpp.llama_token * 1)()  # sequence 0's next token, alone: llama.cpp counts its position
        self._one_batch = llama_cpp.llama_batch_get_one(self._one, 1)
        # Every batched step runs on one thread of its own, one OpenMP team (see the module's words)
        self._decoder = _DecodeThread() if n_seq_max > 1 and os.environ.get(DECODE_ON_CALLERS) != "1" else None
        self._cond = threading.Condition()
        self._pending: list[_Entry] = []
        self._holding: set[int] = set()  # sequences of the last step whose logits rows are not read yet
        self._active: set[int] = set()  # sequences between join and leave
        self.steps = 0  # decode steps run (several sequences' tokens each, where they ran together)
        self.batched_steps = 0  # of them, those with more than one sequence

    @property
    def lock(self) -> threading.Condition:
        """Held by a step while llama.cpp runs it: what else touches the context (a saved state) takes it too."""
        return self._cond

    def should_abort(self) -> bool:
        event = self._aborting
        return bool(event is not None and event.is_set())

    def active(self) -> int:
        with self._cond:
            return len(self._active)

    def join(self, seq: int) -> None:
        with self._cond:
            self._active.add(seq)

    def leave(self, seq: int) -> None:
        """``seq`` takes part in no more steps (its reply ended): the others need not wait for it."""
        with self._cond:
            self._active.discard(seq)
            self._holding.discard(seq)
            self._cond.notify_all()

    def chunk(self) -> int:
        """How many prompt tokens a sequence hands in at a time: all n_batch alone, PREFILL_CHUNK beside others."""
        with self._cond:
            return self.n_batch if len(self._active) <= 1 else min(self.n_batch, PREFILL_CHUNK)

    def decode(self, seq: int, tokens: Sequence[int], cancelled: threading.Event | None = None) -> tuple[int, int]:
        """Decode ``tokens`` (at most n_batch) after what ``seq`` holds, in the next step: llama_decode's status and
        the batch row of the last token's logits, valid until this sequence hands in its next tokens."""
        entry = _Entry(seq, tokens, cancelled)
        with self._cond:
            self._pending.append(entry)
            self._holding.discard(seq)
            while entry.status is None:
                if self._holding or not self._pending:
                    self._cond.wait()
                    continue
                self._step()
                self._cond.notify_all()
        return entry.status, entry.row

    def _step(self) -> None:
        """One llama_decode of the pending entries that fit in n_batch (the lock held)."""
        taken: list[_Entry] = []
        size = 0
        for entry in self._pending:
            if not taken or size + len(entry.tokens) <= self.n_batch:
                taken.append(entry)
                size += len(entry.tokens)
        self._pending = [e for e in self._pending if e not in taken]
        status = self._run(taken)
        if status == NO_SLOT and self.make_room():
            status = self._run(taken)
        while status == NO_SLOT and len(taken) > 1:  # one sequence leaves the step with the error, the rest go on
            out = self._to_drop(taken)
            out.status = NO_SLOT
            taken.remove(out)
            # its cells go now, not when its thread gets to it: the next step must not find the cache full again
            self._lib.llama_memory_seq_rm(self._memory, out.seq, -1, -1)
            status = self._run(taken)
        for entry in taken:
            entry.status = status
        self._holding = {e.seq for e in taken if status == 0}
        self.steps += 1
        self.batched_steps += len(taken) > 1

    def _to_drop(self, taken: list[_Entry]) -> _Entry:
        prompts = [e for e in taken if len(e.tokens) > 1]
        if prompts:
            return max(prompts, key=lambda e: len(e.tokens))
        pos_max = self._lib.llama_memory_seq_pos_max
        return max(taken, key=lambda e: int(pos_max(self._memory, e.seq)))

    def _run(self, taken: list[_Entry]) -> int:
        lib = self._lib
        # a lone prompt can be stopped inside llama.cpp (the abort callback costs a Python call per graph node, so
        # only for prompts, and never where another sequence's tokens share the step)
        aborting = taken[0].cancelled if len(taken) == 1 and len(taken[0].tokens) > 1 else None
        if len(taken) == 1 and taken[0].seq == 0:
            entry = taken[0]
            entry.row = -1
            if len(entry.tokens) == 1:  # a reply's next token: the one-token batch made once
                self._one[0] = entry.tokens[0]
                batch = self._one_batch
            else:
                ids = (lib.llama_token * len(entry.tokens))(*entry.tokens)  # referenced until llama_decode returns
                batch = lib.llama_batch_get_one(ids, len(entry.tokens))
        else:
            assert self._batch is not None, "several sequences in a context made for one"
            batch = self._batch
            token, pos, n_seq_id, seq_id, logits = batch.token, batch.pos, batch.n_seq_id, batch.seq_id, batch.logits
            pos_max = lib.llama_memory_seq_pos_max
            k = 0
            for entry in taken:
                start = int(pos_max(self._memory, entry.seq)) + 1
                for i, t in enumerate(entry.tokens):
                    token[k] = t
                    pos[k] = start + i
                    n_seq_id[k] = 1
                    seq_id[k][0] = entry.seq
                    logits[k] = False
                    k += 1
                logits[k - 1] = True
                entry.row = k - 1
            batch.n_tokens = k
        if aborting is None:  # a token step: nothing to install (a context manager per token costs ~10 µs, cold)
            return self._on_decoder(lambda: int(lib.llama_decode(self._ctx, batch)))
        with self.aborting(aborting):
            return self._on_decoder(lambda: int(lib.llama_decode(self._ctx, batch)))

    def _on_decoder(self, work: Callable[[], int]) -> int:
        """``work()`` on the decode thread, where there is one (several sequences), else here. Even a sequence alone
        decodes there: on its own thread it saved a hand-over a token, but once the decode thread's team existed a
        second team made libgomp throttle both (a single stream after batched ones: 78 tok/s against 131)."""
        return work() if self._decoder is None else self._decoder.run(work)

    @contextlib.contextmanager
    def aborting(self, cancelled: threading.Event | None) -> Iterator[None]:
        """While inside, ``cancelled`` stops llama.cpp's computation between graph nodes (a prompt's, or an image's
        encoding: one sequence's work alone); a Python call per node would cost each generated token far more than
        the token loop, so never while tokens are generated."""
        if cancelled is None or self._aborting is not None:  # none, or already installed around this
            yield
            return
        self._aborting = cancelled
        self._lib.llama_set_abort_callback(self._ctx, self._abort_cb, None)
        try:
            yield
        finally:
            self._lib.llama_set_abort_callback(self._ctx, self._no_abort_cb, None)
            self._aborting = None

    def close(self) -> None:
        with self._cond:  # never while a step is handed over
            decoder, self._decoder = self._decoder, None
        if decoder is not None:
            decoder.close()
        if self._batch is not None:
            batch, self._batch = self._batch, None
            self._lib.llama_batch_free(batch)
