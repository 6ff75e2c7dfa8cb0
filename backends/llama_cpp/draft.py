"""Where llama.cpp's speculative decoding gets its guesses: a draft model of the same vocabulary, or prompt lookup.

Both answer ``propose(history, n)``: up to ``n`` tokens that may follow ``history`` (the prompt and the reply so far).
The model then checks them all in one batch (LlamaCppBackend's speculative loop); the drafter only guesses, so a bad
guess costs speed, never correctness.
"""

from __future__ import annotations

import array
from collections.abc import Sequence
from types import ModuleType
from typing import Any


def penalized(np: ModuleType, logits: Any, penalty: Any) -> Any:
    """llama.cpp's repetition penalty on these logits: float32, ``logit <= 0`` multiplied, else divided, as
    ``llama_sampler_penalties_apply`` does (``penalty`` a float32, so the arithmetic is llama.cpp's to the bit)."""
    return np.where(logits <= 0, logits * penalty, logits / penalty)


def penalized_argmax(np: ModuleType, logits: Any, recent: Sequence[int], penalty: Any) -> int:
    """The argmax of a logits row after llama.cpp's repetition penalty on the ``recent`` tokens; the row is left as
    it was (the penalized entries put back: a copy of a 152k-entry row cost more than the rest of the token)."""
    ids = np.fromiter(set(recent), dtype=np.int64)
    kept = logits[ids]
    logits[ids] = penalized(np, kept, penalty)
    try:
        return int(logits.argmax())
    finally:
        logits[ids] = kept


def _top10_probability(np: ModuleType, logits: Any, token: int) -> float:
    """``token``'s probability after a softmax over the row's ten largest logits (0 when it is not among them)."""
    top = np.partition(logits, -10)[-10:]
    if logits[token] < top[0]:
        return 0.0
    return float(1.0 / np.exp(top - logits[token]).sum())


class PromptLookup:
    """Prompt-lookup decoding: the tokens that followed the latest earlier occurrence of the history's last
    ``max_ngram`` (else fewer, down to ``min_ngram``) tokens, as llama-cpp-python's ``LlamaPromptLookupDecoding`` and
    llama.cpp's ngram lookup guess them. Pays off where the reply repeats its prompt (edits, summaries with quotes,
    code), or itself: a match close to the end (a loop) is continued with its period. The search is ``bytes.rfind``
    over the history as int32s: C speed, no per-token Python scan."""

    def __init__(self, max_ngram: int = 3, min_ngram: int = 1) -> None:
        self._max_ngram, self._min_ngram = max_ngram, min_ngram
        self._tokens = array.array("i")
        self._item = self._tokens.itemsize

    def start(self, prompt: Sequence[int], repeat_penalty: float = 1.0) -> None:
        self._tokens = array.array("i", prompt)

    def propose(self, history: Sequence[int], n: int) -> list[int]:
        tokens = self._tokens
        if len(history) > len(tokens):  # the reply so far: only ever appended to
            tokens.extend(history[len(tokens):])
        size = self._item
        haystack = tokens.tobytes()
        for ngram in range(min(self._max_ngram, len(tokens) - 1), self._min_ngram - 1, -1):
            needle = haystack[-ngram * size:]
            end = len(haystack) - size  # the match must end before the history's last token
            while True:
                at = haystack.rfind(needle, 0, end)
                if at < 0:
                    break
                if at % size == 0:  # a whole-token match, not one across two tokens' bytes
                    first = at // size + ngram
                    guesses = tokens[first:first + n].tolist()
                    period = len(tokens) - first  # the history repeats itself with this period since the match
                    while len(guesses) < n:  # the match runs into the present: the repetition goes on
                        guesses.append(guesses[len(guesses) - period])
                    return guesses
                end = at + len(needle) - 1
        return []

    def close(self) -> None:
        self._tokens = array.array("i")


class DraftModel:
    """A smaller model of the same vocabulary, loaded beside the model in the same engine host (its own context and
    KV cache), guessing greedily: its argmax, token after token, with the reply's repetition penalty applied as the
    model's sampler applies it (over the last ``last_n`` tokens of the reply), or it would guess the repeats the model
    is kept from. It stops at a guess it is less sure of than ``p_min`` (the guess's probability among its ten
    likeliest tokens, as llama.cpp's common_speculative_gen_draft reads its top-10 sampler), so a draft that knows
    little costs one draft decode a token rather than a round of wrong guesses. Its KV cache follows the history the
    way the model's does: the prefix it already holds is kept, the rest decoded."""

    def __init__(self, llama_cpp: ModuleType, llm: Any, last_n: int, p_min: float) -> None:
        import numpy as np

        self._lib, self._llm, self._np = llama_cpp, llm, np
        self._n_vocab = llm.n_vocab()
        self._last_n = last_n
        self._p_min = p_min
        self._n_prompt, self._penalty = 0, np.float32(1.0)
        self._kv: list[int] = []
        self._next = (llama_cpp.llama_token * 1)()
        self._one = llama_cpp.llama_batch_get_one(self._next, 1)

    @property
    def model_bytes(self) -> int:
        return int(self._lib.llama_model_size(self._llm.model))

    def start(self, prompt: Sequence[int], repeat_penalty: float = 1.0) -> None:
        """Bring the draft's cache to the prompt (with the model's prompt processing, so the first guess is quick)."""
        self._n_prompt, self._penalty = len(prompt), self._np.float32(repeat_penalty)
        self._sync(prompt)

    def propose(self, history: Sequence[int], n: int) -> list[int]:
        lib, ctx, np = self._lib, self._llm.ctx, self._np
        if n <= 0 or not self._sync(history):
            return []
        guesses: list[int] = []
        reply = list(history[self._n_prompt:])
        while True:
            logits = np.ctypeslib.as_array(lib.llama_get_logits_ith(ctx, -1), shape=(self._n_vocab,))
            token = int(logits.argmax())
            recent = (reply + guesses)[-self._last_n:]
            if self._penalty != 1 and token in recent:  # as sampling.GreedySampler
                token = penalized_argmax(np, logits, recent, self._penalty)
            if self._p_min > 0 and _top10_probability(np, logits, token) < self._p_min:
                return guesses
            guesses.append(token)
            if len(guesses) == n:
                return guesses
            self._next[0] = guesses[-1]
            if lib.llama_decode(ctx, self._one) != 0:
                self._forget()
                return guesses
            self._kv.append(guesses[-1])

    def _sync(self, history: Sequence[int]) -> bool:
        """Decode what of ``history`` the draft's cache lacks (at least its last token, whose logits guess next)."""
        lib, ctx, kv = self._lib, self._llm.ctx, self._kv
        reuse = 0
        for a, b in zip(kv, history, strict=False):
            if a != b:
                break
            reuse += 1
        reuse = min(reuse, len(history) - 1)
        if reuse < len(kv):
            if reuse and lib.llama_memory_seq_rm(lib.llama_get_memory(ctx), -1, reuse, -1):
                del kv[reuse:]
            else:
                self._forget()
                reuse = 0
        n_batch = self._llm.n_batch
        for start in range(reuse, len(history), n_batch):
            chunk = list(history[start:start + n_batch])
            ids = (lib.llama_token * len(chunk))(*chunk)
            if lib.llama_decode(ctx, lib.llama_batch_get_one(ids, len(chunk))) != 0:
                self._forget()  # the draft fails quietly: the model goes on without guesses
                return False
            kv.extend(chunk)
        return True

    def _forget(self) -> None:
        self._lib.llama_memory_clear(self._lib.llama_get_memory(self._llm.ctx), True)
        self._kv = []

    def close(self) -> None:
        llm, self._llm = self._llm, None
        if llm is not None:
            llm.close()
