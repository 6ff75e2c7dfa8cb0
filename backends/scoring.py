"""Scoring a text the way llama.cpp's ``llama-perplexity --kl-divergence`` does (tools/perplexity/perplexity.cpp),
streamed, for the quant lab. Numpy only: the engine host runs it on a backend's logits, the parent reads the files.

Windows: the text's tokens are cut into chunks of ``n_ctx`` tokens (whole ones only: a shorter tail is left out),
each evaluated from an empty cache with its first token replaced by BOS where the model adds one. Only the second
half of each window is scored: the logits at positions ``first = n_ctx // 2`` .. ``n_ctx - 2`` predict the tokens
after them, ``n_ctx - 1 - first`` positions per chunk, so every scored token has at least ``n_ctx / 2`` tokens of
context.

The reference (``ReferenceWriter`` / ``Reference``): for every scored position, the reference model's smallest set of
likeliest tokens that leaves at most ``tail`` of its probability out (at most ``max_tokens`` of them), their
log-probabilities, the mass left out, and the log-probability of the actual next token. A variant is compared with
it one window at a time, so neither side ever holds more than one window's logits: the KL divergence is that of the
two distributions with the left-out tokens merged into one, which is smaller than the whole-vocabulary divergence by
the left-out mass times the divergence among those tokens. At the default ``tail`` of 1e-4 that is 0.02 % of the mean
KLD on a model with a real model's sure predictions, keeping 52 of 1024 tokens per position
(tests/lab/test_reference.py; at 1e-3 it was 0.2 %, and single positions' KLD moved by up to 2e-4, which the low
percentiles show). Perplexities, Δp and "same top p" do not depend on ``tail``: the actual token's log-probability
and the top token are kept exactly. As in llama-perplexity, the KL divergence leaves out the tokens the reference puts
at or below -16 nats (``FLOOR``).

Where no ``max_tokens`` tokens hold all but ``tail`` (a nearly flat distribution, as random weights give: at
Qwen2.5-0.5B's shape most of the 152k rows are unused tokens' zero rows), the reference keeps the likeliest half of
``max_tokens`` and an even sample of the rest ranked by probability, whose divergence terms stand for the whole rest
(``Kept``, ``compare_rows``): measured 1.4 % from the whole vocabulary's mean KLD there over 510 positions with the
sample spaced by id, before it was spaced by rank (merging the rest into one token instead found 27 % too little).

A reference file, little-endian:
    MAGIC, u64 header length, the header (JSON, padded with spaces to 8 bytes),
    tokens int32[n_chunks * n_ctx],
    per chunk: ids int32[entries of its positions], then log-probabilities float32[the same count],
    the index: entry offsets int64[positions + 1], chunk byte offsets int64[n_chunks], top counts int64[positions],
        the probability not among the top float64[positions], sample weights float64[positions] (0: no sample),
        log-probability of the actual token float64[positions],
    u64 index offset, MAGIC.
Each position's entries run from the likeliest token down (ties: the lower id first, as llama.cpp's argmax), then its
sample, if any, in id order.
"""

from __future__ import annotations

import json
import os
import struct
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from app.datatypes import DEFAULT_MAX_TOKENS, DEFAULT_TAIL, Scored, WindowScoring
from backends.base import Backend, GenerationError

MAGIC = b"QDKLREF1"
FORMAT_VERSION = 1
LLAMA_PERPLEXITY_MAGIC = b"_logits_"  # the file llama-perplexity --kl-divergence-base writes
# llama-perplexity's per-position KLD is sum(p_base * log(p_base / q)) over the tokens whose base log-probability is
# above -16 only (perplexity.cpp, its KL loop: ``if (p_log_base > -16.f)``), not over the whole vocabulary. The lab
# claims to compute its figures, so it leaves the same terms out (compare_rows), whether it made the reference or
# imported the tool's file. Measured on SmolLM2-135M's Q3_K_S against its F16 (tests/lab/test_real_quants.py): the
# left-out terms move single positions by up to 5e-4 (the 5 % KLD: 0.05652 over the whole vocabulary, 0.05702 as the
# tool prints it, and as the whole vocabulary less those terms gives it), while the 16-bit rounding of the tool's base
# file moves them by 1e-5.
FLOOR = -16.0
ROWS_PER_BLOCK = 32  # logit rows processed together: 32 x 152k floats is 19 MB per temporary
SAMPLE_SEED = 20261126  # where each row's sample of a flat distribution's rest starts (Kept)

# Per scored position, what a comparison gives (the reference against itself: kld 0, p_diff 0, same_top True).
POSITIONS = np.dtype([("position", "<i4"), ("nll", "<f8"), ("nll_base", "<f8"), ("kld", "<f8"),
                      ("p_diff", "<f8"), ("same_top", "?")])


class ReferenceError(ValueError):
    """A reference file that cannot be used; the message says why in words."""


class VocabularyMismatch(ReferenceError):
    """The model's token ids do not mean what the reference's do."""


def scored_per_chunk(n_ctx: int) -> int:
    return n_ctx - 1 - n_ctx // 2


def chunk_count(n_tokens: int, n_ctx: int, chunks: int = 0) -> int:
    """How many whole windows of ``n_ctx`` tokens the text gives (at most ``chunks`` when that is set)."""
    whole = n_tokens // n_ctx
    return min(whole, chunks) if chunks else whole


# --- the arithmetic on one block of logit rows ---------------------------------------------------------


def _log_normalizer(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: the log of the softmax's denominator (float64: summed in double, as llama.cpp's log_softmax), the
    row's exp(x - max) as float32, and its sum (so ``shifted / total`` is the distribution)."""
    top = rows.max(axis=1, keepdims=True)
    shifted = np.exp(rows - top)
    total = shifted.sum(axis=1, dtype=np.float64)
    return top[:, 0].astype(np.float64) + np.log(total), shifted, total


@dataclass(frozen=True)
class Kept:
    """What the reference keeps of one position's distribution: ``top`` likeliest tokens (likeliest first, ties by
    id), then, where those could not hold all but ``tail`` of the probability within ``max_tokens``, an even sample
    of the other tokens (``weight``: how many of them each sampled one stands for; 0 for none); their
    log-probabilities, and ``rest``, the probability of every token not among the top."""

    ids: np.ndarray
    logprobs: np.ndarray
    rest: float
    top: int
    weight: float = 0.0


def keep(logprobs: np.ndarray, mass: np.ndarray, tail: float, max_tokens: int,
         rng: np.random.Generator | None = None) -> Kept:
    """One row: the smallest set of likeliest tokens leaving at most ``tail`` of the mass out, if ``max_tokens``
    suffice; else (a nearly flat distribution, as random weights give) the likeliest half of ``max_tokens`` and an
    even sample of the rest, whose divergence terms stand for the whole rest (``compare_rows``). The sample starts
    at a point ``rng`` draws for each row, so no token stands for the rest at every position (its error then
    averages out over the positions; the same ids everywhere were 4 % off at Qwen2.5-0.5B's shape)."""
    vocab = logprobs.shape[0]
    wanted = mass >= tail / vocab  # everything below holds less than ``tail`` in total
    candidates = np.flatnonzero(wanted)
    left_out = float(mass[~wanted].sum(dtype=np.float64)) if candidates.size < vocab else 0.0
    if candidates.size > max_tokens:  # the likeliest max_tokens; of equal ones, the lower ids (candidates ascend)
        values = mass[candidates]
        kth = np.partition(values, candidates.size - max_tokens)[candidates.size - max_tokens]
        above, equal = candidates[values > kth], candidates[values == kth]
        chosen = np.concatenate([above, equal[:max_tokens - len(above)]])
        left_out += float(mass[candidates].sum(dtype=np.float64) - mass[chosen].sum(dtype=np.float64))
        candidates = np.sort(chosen)
    values = logprobs[candidates]
    order = np.lexsort((candidates, -values))
    ids = candidates[order]
    p = mass[ids].astype(np.float64)
    after = np.append(np.cumsum(p[::-1])[::-1][1:], 0.0) + left_out  # the mass left out if the set ended there
    if after[-1] <= tail:
        k = int(np.argmax(after <= tail)) + 1
        return Kept(ids[:k].astype(np.int32), logprobs[ids[:k]].astype(np.float32), float(after[k - 1]), k)
    top = ids[:max(max_tokens // 2, 1)]
    others = np.ones(vocab, dtype=bool)
    others[top] = False
    rest_ids = np.flatnonzero(others)
    m = min(max_tokens - len(top), len(rest_ids))
    start = rng.random() if rng is not None else 0.5
    # Evenly spaced in the rest ranked by the reference's probability (ties by id), not by id: each sampled token
    # stands for tokens about as likely as itself, so the sample's sum varies far less (on SmolLM2's Q3_K_S, with
    # a tenth of the quant's probability beyond the likeliest 2048 tokens, spacing by id put its median KLD 1.1 %
    # from llama-perplexity's, by rank 0.2 %).
    ranked = rest_ids[np.argsort(-mass[rest_ids], kind="stable")]
    picks = ((np.arange(m) + start) * (len(rest_ids) / m)).astype(np.int64)
    sample = np.sort(ranked[picks]) if m else rest_ids[:0]
    kept = np.concatenate([top, sample])
    return Kept(kept.astype(np.int32), logprobs[kept].astype(np.float32),
                float(mass[rest_ids].sum(dtype=np.float64)), len(top), len(rest_ids) / m if m else 0.0)


def reference_rows(rows: np.ndarray, next_tokens: np.ndarray, tail: float, max_tokens: int,
                   rng: np.random.Generator | None = None) -> tuple[list[Kept], np.ndarray]:
    """A block of the reference's logit rows: what each row keeps, and the log-probability of each actual token."""
    lse, shifted, total = _log_normalizer(rows)
    picked = rows[np.arange(len(rows)), next_tokens].astype(np.float64) - lse
    kept = []
    for r in range(len(rows)):
        mass = shifted[r] * np.float32(1.0 / total[r])
        kept.append(keep(rows[r] - np.float32(lse[r]), mass, tail, max_tokens, rng))
    return kept, picked


@dataclass(frozen=True)
class ReferenceBlock:
    """The reference's entries for consecutive positions: ``offsets`` index ``ids`` / ``logprobs`` (len rows + 1);
    per row its ``top`` count, ``rest`` and sample ``weight`` (Kept), and the actual token's log-probability."""

    ids: np.ndarray
    logprobs: np.ndarray
    offsets: np.ndarray
    rest: np.ndarray
    top: np.ndarray
    weight: np.ndarray
    logprob_next: np.ndarray

    @classmethod
    def of(cls, kept: Sequence[Kept], logprob_next: np.ndarray) -> ReferenceBlock:
        offsets = np.concatenate([[0], np.cumsum([len(k.ids) for k in kept])]).astype(np.int64)
        return cls(np.concatenate([k.ids for k in kept]), np.concatenate([k.logprobs for k in kept]), offsets,
                   np.array([k.rest for k in kept]), np.array([k.top for k in kept], dtype=np.int64),
                   np.array([k.weight for k in kept]), np.asarray(logprob_next, dtype=np.float64))

    def rows(self, start: int, stop: int) -> ReferenceBlock:
        a, b = int(self.offsets[start]), int(self.offsets[stop])
        return ReferenceBlock(self.ids[a:b], self.logprobs[a:b], self.offsets[start:stop + 1] - a,
                              self.rest[start:stop], self.top[start:stop], self.weight[start:stop],
                              self.logprob_next[start:stop])


def compare_rows(rows: np.ndarray, next_tokens: np.ndarray, reference: ReferenceBlock) -> np.ndarray:
    """A block of a variant's logit rows against the reference's entries for the same positions, with
    llama-perplexity's per-position figures (POSITIONS, without ``position``): the variant's and the reference's
    negative log-likelihood of the actual token, KL(reference || variant), Δp = p(token) - p_base(token), and
    whether both put the same token on top.

    KL over the kept top tokens is exact. The rest: where the reference kept all but ``tail`` of its probability,
    the rest is one merged token (the KL of the two merged distributions: a little smaller than the whole, by the
    rest's mass times the divergence within it); where it kept a sample of the rest instead, KL = Σ_all
    (q - p + p log(p/q)) (the q - p add up to 0 over the vocabulary), whose terms are each ≥ 0 and second-order, so
    the sample's sum times its weight stands for the rest's without the first-order noise a sample of p log(p/q)
    would carry.

    As llama-perplexity, the divergence leaves out the p log(p/q) terms of the tokens the reference puts at or below
    FLOOR. Their q - p stay in the sampled sum, against their mass in ``rest``: so the q of tens of thousands of
    such tokens still cancels against their p, where leaving the tokens out altogether made the sample's noise."""
    n = len(rows)
    lse = _log_normalizer(rows)[0]
    out = np.zeros(n, dtype=POSITIONS)
    out["nll"] = lse - rows[np.arange(n), next_tokens].astype(np.float64)
    out["nll_base"] = -reference.logprob_next
    counts = np.diff(reference.offsets)
    starts = reference.offsets[:-1]
    owner = np.repeat(np.arange(n), counts)
    sampled = np.arange(len(reference.ids)) - np.repeat(starts, counts) >= np.repeat(reference.top, counts)
    variant = rows[owner, reference.ids].astype(np.float64) - lse[owner]
    base = reference.logprobs.astype(np.float64)
    p, q = np.exp(base), np.exp(variant)
    log_ratio = np.where(base > FLOOR, base - variant, 0.0)  # at or below FLOOR: no part in the divergence
    head = np.add.reduceat(np.where(sampled, 0.0, p * log_ratio), starts)
    variant_rest = np.maximum(1.0 - np.add.reduceat(np.where(sampled, 0.0, q), starts), 1e-300)
    rest = reference.rest
    merged = np.where(rest > 0, rest * (np.log(np.maximum(rest, 1e-300)) - np.log(variant_rest)), 0.0)
    terms = np.add.reduceat(np.where(sampled, q - p + p * log_ratio, 0.0), starts)
    out["kld"] = head + np.where(reference.weight > 0, rest - variant_rest + reference.weight * terms, merged)
    out["p_diff"] = np.exp(-out["nll"]) - np.exp(-out["nll_base"])
    out["same_top"] = rows.argmax(axis=1) == reference.ids[starts]
    return out


def self_rows(logprob_next: np.ndarray) -> np.ndarray:
    """The reference's own positions: its log-likelihoods, and nothing between it and itself."""
    out = np.zeros(len(logprob_next), dtype=POSITIONS)
    out["nll"] = out["nll_base"] = -logprob_next
    out["same_top"] = True
    return out


# --- the reference file ------------------------------------------------------------------------------


def _padded(data: bytes) -> bytes:
    return data + b" " * (-len(data) % 8)


class ReferenceWriter:
    """Writes a reference file one chunk at a time (only that chunk's entries are held), to ``path``.part, renamed
    into place by ``close`` so a reader never sees half a file."""

    def __init__(self, path: str | Path, header: dict[str, Any], tokens: np.ndarray) -> None:
        self.path = Path(path)
        self.part = self.path.with_name(self.path.name + ".part")
        self.n_ctx = int(header["n_ctx"])
        self.n_chunks = int(header["n_chunks"])
        self.header = dict(header, format=FORMAT_VERSION, first=self.n_ctx // 2)
        self._file: BinaryIO = open(self.part, "wb")  # noqa: SIM115 - closed by close() or abort()
        text = _padded(json.dumps(self.header, ensure_ascii=False).encode("utf-8"))
        self._file.write(MAGIC + struct.pack("<Q", len(text)) + text)
        self._file.write(_padded(np.ascontiguousarray(tokens, dtype="<i4").tobytes()))
        self._chunk_offsets: list[int] = []
        self._index: list[np.ndarray] = []  # per chunk: its positions' entry counts, top counts, rest, weight, next

    def add_chunk(self, kept: Sequence[Kept], logprob_next: np.ndarray) -> None:
        self._chunk_offsets.append(self._file.tell())
        self._file.write(np.concatenate([k.ids for k in kept]).astype("<i4").tobytes())
        self._file.write(np.concatenate([k.logprobs for k in kept]).astype("<f4").tobytes())
        self._index.append(np.array([(len(k.ids), k.top, k.rest, k.weight, nxt) for k, nxt in zip(
            kept, logprob_next, strict=True)], dtype=np.float64))

    def close(self) -> Path:
        if len(self._chunk_offsets) != self.n_chunks:
            raise ReferenceError(f"the reference holds {len(self._chunk_offsets)} of {self.n_chunks} chunks")
        index = self._file.tell()
        table = np.concatenate(self._index)
        offsets = np.concatenate([[0], np.cumsum(table[:, 0].astype(np.int64))])
        for array, dtype in ((offsets, "<i8"), (self._chunk_offsets, "<i8"), (table[:, 1], "<i8"),
                             (table[:, 2], "<f8"), (table[:, 3], "<f8"), (table[:, 4], "<f8")):
            self._file.write(np.asarray(array).astype(dtype).tobytes())
        self._file.write(struct.pack("<Q", index) + MAGIC)
        self._file.close()
        os.replace(self.part, self.path)
        return self.path

    def abort(self) -> None:
        self._file.close()
        self.part.unlink(missing_ok=True)


class Reference:
    """A reference file, memory-mapped: chunks are read as they are needed, so a reference larger than RAM works
    (slowly). Raises ReferenceError, in words, for a file that is not one or is damaged."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            with open(self.path, "rb") as f:
                head = f.read(8)
            data = np.memmap(self.path, dtype=np.uint8, mode="r") if head == MAGIC else None
        except (OSError, ValueError) as exc:
            raise ReferenceError(f"{self.path.name} cannot be read: {exc}") from None
        if data is None:
            raise ReferenceError(f"{self.path.name} is not a QuantDesk KL reference file")
        self._data: np.ndarray = data
        if len(data) < 32 or bytes(data[-8:]) != MAGIC:
            raise ReferenceError(f"{self.path.name} is cut short or damaged (it does not end as a reference does)")
        (length,) = struct.unpack("<Q", bytes(data[8:16]))
        try:
            self.header: dict[str, Any] = json.loads(bytes(data[16:16 + length]).decode("utf-8"))
            self.n_ctx = int(self.header["n_ctx"])
            self.n_chunks = int(self.header["n_chunks"])
            self.n_vocab = int(self.header["n_vocab"])
            version = int(self.header["format"])
        except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
            raise ReferenceError(f"{self.path.name} has an unreadable header ({exc})") from None
        if version != FORMAT_VERSION:
            raise ReferenceError(f"{self.path.name} is a reference of format {version}; this QuantDesk reads format "
                                 f"{FORMAT_VERSION}", "make the reference again with this version")
        if self.n_ctx < 16 or self.n_ctx % 2 or self.n_chunks < 1 or self.n_vocab < 2:
            raise ReferenceError(f"{self.path.name} has an impossible header (n_ctx {self.n_ctx}, "
                                 f"{self.n_chunks} chunks, {self.n_vocab} tokens)")
        self.first = self.n_ctx // 2
        self.per_chunk = scored_per_chunk(self.n_ctx)
        self.positions = self.n_chunks * self.per_chunk
        tokens_at = 16 + length
        (index,) = struct.unpack("<Q", bytes(data[-16:-8]))
        sizes = (8 * (self.positions + 1), 8 * self.n_chunks, *(8 * self.positions,) * 4)
        if tokens_at + 4 * self.n_chunks * self.n_ctx > index or index + sum(sizes) + 16 != len(data):
            raise ReferenceError(f"{self.path.name} is cut short or damaged (its parts do not add up)")
        self.tokens: np.ndarray = np.frombuffer(data, dtype="<i4", count=self.n_chunks * self.n_ctx, offset=tokens_at)
        parts: list[np.ndarray] = []
        at = index
        for size, dtype in zip(sizes, ("<i8", "<i8", "<i8", "<f8", "<f8", "<f8"), strict=True):
            parts.append(np.frombuffer(data, dtype=dtype, count=size // 8, offset=at))
            at += size
        self.offsets, self.chunk_offsets, self.top, self.rest, self.weight, self.logprob_next = parts
        if (self.offsets[0] != 0 or np.any(np.diff(self.offsets) < 1) or np.any(self.top < 1)
                or np.any(self.top > np.diff(self.offsets)) or np.any(self.tokens < 0)
                or np.any(self.tokens >= self.n_vocab)):
            raise ReferenceError(f"{self.path.name} is damaged (its index or tokens are out of range)")

    @property
    def vocabulary(self) -> list[str] | None:
        vocabulary = self.header.get("vocabulary")
        return vocabulary if isinstance(vocabulary, list) else None

    def window(self, chunk: int) -> np.ndarray:
        return np.asarray(self.tokens[chunk * self.n_ctx:(chunk + 1) * self.n_ctx])

    def chunk(self, chunk: int) -> ReferenceBlock:
        a, b = chunk * self.per_chunk, (chunk + 1) * self.per_chunk
        offsets = np.asarray(self.offsets[a:b + 1])
        entries = int(offsets[-1] - offsets[0])
        at = int(self.chunk_offsets[chunk])
        if at + 8 * entries > len(self._data) - 16:
            raise ReferenceError(f"{self.path.name} is damaged (chunk {chunk} runs past its end)")
        ids = np.frombuffer(self._data, dtype="<i4", count=entries, offset=at)
        if entries and (int(ids.min()) < 0 or int(ids.max()) >= self.n_vocab):
            raise ReferenceError(f"{self.path.name} is damaged (chunk {chunk} names tokens outside the vocabulary)")
        values = np.frombuffer(self._data, dtype="<f4", count=entries, offset=at + 4 * entries)
        return ReferenceBlock(ids, values, offsets - offsets[0], np.asarray(self.rest[a:b]),
                              np.asarray(self.top[a:b]), np.asarray(self.weight[a:b]),
                              np.asarray(self.logprob_next[a:b]))

    def own_positions(self) -> np.ndarray:
        """The reference model's own per-position figures (POSITIONS), as the pass that made the file gave them."""
        out = self_rows(np.asarray(self.logprob_next))
        out["position"] = np.tile(np.arange(self.first, self.first + self.per_chunk), self.n_chunks)
        return out

    def coverage(self) -> dict[str, float]:
        """How much of the reference's probability its entries hold: the mean left-out mass, the share of
        positions where ``max_tokens`` stopped the set before ``tail`` was reached, and the mean entries kept."""
        return {"mean_left_out": float(np.mean(self.rest)), "capped_share": float(np.mean(self.weight > 0)),
                "mean_tokens": float(self.offsets[-1]) / self.positions}

    def close(self) -> None:
        """Let go of the file: the mapping closes once no array taken from it is left (closing it under one would
        crash the process), so a caller may keep what it read."""
        self._data = self.tokens = np.zeros(0, dtype=np.uint8)
        self.offsets = self.chunk_offsets = self.top = self.rest = self.weight = self.logprob_next = np.zeros(0)


def vocabulary_check(reference: Sequence[str] | None, variant: Sequence[str], reference_width: int,
                     variant_width: int) -> str:
    """"" when the variant's token ids mean what the reference's do, else the sentence saying where they differ.
    A variant may have more ids (padding rows a conversion adds), never fewer."""
    if variant_width < reference_width:
        return (f"this model has {variant_width} tokens, the reference {reference_width}: the token ids do not mean "
                "the same thing")
    if reference is None:  # an imported llama-perplexity file names no token texts: only the sizes are checked
        return ""
    for index in range(min(len(reference), len(variant))):
        if reference[index] != variant[index]:
            return (f"this model does not share the reference's vocabulary (token {index} is {variant[index]!r}, "
                    f"not {reference[index]!r})")
    return ""


# --- llama-perplexity's --kl-divergence-base file -------------------------------------------------------


@dataclass(frozen=True)
class LlamaPerplexityBase:
    """The header of a file ``llama-perplexity --kl-divergence-base`` wrote: "_logits_", u32 n_ctx, i32 n_vocab,
    i32 n_chunk, int32 tokens[n_chunk * n_ctx], then per chunk ``n_ctx - 1 - n_ctx/2`` rows of
    ``nv = 2 * ((n_vocab + 1) / 2) + 4`` uint16: a row's first two floats are its scale and minimum log-probability,
    then one 16-bit step per token (perplexity.cpp, log_softmax with a uint16 output)."""

    path: Path
    n_ctx: int
    n_vocab: int
    n_chunks: int
    tokens_at: int

    @property
    def row_width(self) -> int:
        return 2 * ((self.n_vocab + 1) // 2) + 4

    @classmethod
    def open(cls, path: str | Path) -> LlamaPerplexityBase:
        path = Path(path)
        with open(path, "rb") as f:
            head = f.read(20)
        if len(head) < 20 or head[:8] != LLAMA_PERPLEXITY_MAGIC:
            raise ReferenceError(f"{path.name} is not a llama-perplexity --kl-divergence-base file")
        n_ctx, n_vocab, n_chunks = struct.unpack("<Iii", head[8:20])
        base = cls(path, n_ctx, n_vocab, n_chunks, 20)
        if n_ctx < 4 or n_vocab < 2 or n_chunks < 1:
            raise ReferenceError(f"{path.name} has an impossible header (n_ctx {n_ctx}, {n_vocab} tokens, "
                                 f"{n_chunks} chunks)")
        expected = 20 + 4 * n_chunks * n_ctx + 2 * n_chunks * scored_per_chunk(n_ctx) * base.row_width
        if path.stat().st_size != expected:
            raise ReferenceError(f"{path.name} should be {expected} bytes for its header, not {path.stat().st_size}: "
                                 "cut short or damaged")
        return base

    def convert(self, out: str | Path, header: dict[str, Any], tail: float = DEFAULT_TAIL,
                max_tokens: int = DEFAULT_MAX_TOKENS, on_progress: Callable[[float], None] | None = None) -> Path:
        """The same reference as a QuantDesk reference file, one chunk in memory at a time."""
        data = np.memmap(self.path, dtype=np.uint8, mode="r")
        tokens = np.frombuffer(data, dtype="<i4", count=self.n_chunks * self.n_ctx, offset=self.tokens_at)
        if np.any(tokens < 0) or np.any(tokens >= self.n_vocab):
            raise ReferenceError(f"{self.path.name} is damaged (tokens outside its vocabulary)")
        writer = ReferenceWriter(out, dict(header, n_ctx=self.n_ctx, n_chunks=self.n_chunks, n_vocab=self.n_vocab,
                                           tail=tail, max_tokens=max_tokens), tokens)
        per_chunk, first = scored_per_chunk(self.n_ctx), self.n_ctx // 2
        rows_at = self.tokens_at + 4 * self.n_chunks * self.n_ctx
        rng = np.random.default_rng(SAMPLE_SEED)
        try:
            for chunk in range(self.n_chunks):
                raw = np.frombuffer(data, dtype="<u2", count=per_chunk * self.row_width,
                                    offset=rows_at + 2 * chunk * per_chunk * self.row_width)
                raw = raw.reshape(per_chunk, self.row_width)
                params = raw[:, :4].copy().view("<f4")  # scale, minimum log-probability
                window = tokens[chunk * self.n_ctx:(chunk + 1) * self.n_ctx]
                next_tokens = window[first + 1:]
                sets, picked = [], np.empty(per_chunk)
                for r in range(per_chunk):
                    logprobs = params[r, 0] * raw[r, 4:4 + self.n_vocab].astype(np.float32) + params[r, 1]
                    # A token at or below FLOOR takes no part in the tool's divergence (compare_rows leaves its
                    # term out too), and where it was clamped to its row's minimum the row holds no real value for
                    # it. So every token above FLOOR is kept where max_tokens allows (the tool's sum exactly, no
                    # rest); else the likeliest are chosen, and a merged rest weighed, by the mass above FLOOR.
                    counted = np.where(logprobs > FLOOR, np.exp(logprobs), 0)
                    kept = keep(logprobs, counted, 0.0, max_tokens, rng)
                    if kept.weight:
                        kept = keep(logprobs, counted, tail, max_tokens, rng)
                    if kept.weight:
                        # A sampled rest needs the mass the sample stands for, as stored, clamped tokens included:
                        # rest - variant_rest + weight * Σ (q - p) cancels only then. (Their mass once left the rest
                        # while the sample kept them and their divergence terms: SmolLM2's Q4_K_M read 0.0025 high
                        # on the median, every KLD percentile 2-19 %. With them out of the sample too, the sample's q
                        # stood alone for some 40,000 tokens a position: single positions off by 1e-4.)
                        kept = keep(logprobs, np.exp(logprobs), tail, max_tokens, rng)
                    sets.append(kept)
                    picked[r] = float(logprobs[next_tokens[r]])
                writer.add_chunk(sets, picked)
                if on_progress:
                    on_progress((chunk + 1) / self.n_chunks)
            return writer.close()
        except BaseException:
            writer.abort()
            raise


# --- the driver the engine host runs --------------------------------------------------------------------


WindowLogits = Callable[[Sequence[int], int], Iterable[Any]]


def score_windows(scoring: WindowScoring, *, tokenize: Callable[[str], list[int]], text: str | None,
                  window_logits: WindowLogits, vocabulary: Callable[[], list[str]], logits_width: int,
                  cancelled: Callable[[], bool], on_progress: Callable[[float], None]) -> tuple[int, int]:
    """Score windows of ``text`` (writing a reference) or of the reference's tokens (comparing with it), one window's
    logits at a time; the per-position figures go to ``scoring.positions_out``. Returns (windows, positions).

    ``window_logits(tokens, first)`` yields float32 blocks of logit rows for positions ``first`` .. end of one window
    evaluated from an empty cache. Raises ReferenceError for a bad reference or vocabulary, InterruptedError when
    ``cancelled()`` turns true (checked between windows)."""
    scoring.validate()
    start_token = tokenize("")[:1]  # BOS where the model adds one (llama-perplexity puts it at every window's start)
    reference: Reference | None = None
    writer: ReferenceWriter | None = None
    try:
        if scoring.reference_path:
            reference = _checked_reference(scoring, vocabulary, logits_width)
            n_chunks, width = reference.n_chunks, reference.n_vocab
            windows: Iterator[np.ndarray] = (reference.window(c) for c in range(n_chunks))
        else:
            tokens, n_chunks = _text_tokens(scoring, tokenize, text)
            width = logits_width
            writer = _reference_writer(scoring, tokens, n_chunks, width, vocabulary)
            windows = (tokens[c * scoring.n_ctx:(c + 1) * scoring.n_ctx] for c in range(n_chunks))
        first = scoring.n_ctx // 2
        per_chunk = scored_per_chunk(scoring.n_ctx)
        positions = np.zeros(n_chunks * per_chunk, dtype=POSITIONS)
        rng = np.random.default_rng(SAMPLE_SEED)  # the same text makes the same reference
        for chunk, window in enumerate(windows):
            if cancelled():
                raise InterruptedError("scoring was stopped")
            ids = [int(t) for t in window]
            if start_token:
                ids[0] = start_token[0]
            next_tokens = np.asarray(window[first + 1:], dtype=np.int64)
            block_ref = reference.chunk(chunk) if reference is not None else None
            out = positions[chunk * per_chunk:(chunk + 1) * per_chunk]
            sets, picked = _score_window(scoring, window_logits(ids, first), out, width, next_tokens, block_ref, rng)
            out["position"] = np.arange(first, first + per_chunk)
            if writer is not None:
                writer.add_chunk(sets, np.concatenate(picked))
            on_progress((chunk + 1) / n_chunks)
        if writer is not None:
            writer.close()
            writer = None
        np.save(scoring.positions_out, positions)
        return n_chunks, len(positions)
    finally:
        if writer is not None:
            writer.abort()
        if reference is not None:
            reference.close()


def _checked_reference(scoring: WindowScoring, vocabulary: Callable[[], list[str]], logits_width: int) -> Reference:
    """The reference a comparison reads, opened and checked against this run's windows and the model's vocabulary
    (closed again when it does not fit)."""
    reference = Reference(scoring.reference_path)
    try:
        if reference.n_ctx != scoring.n_ctx:
            raise ReferenceError(f"the reference was made with windows of {reference.n_ctx} tokens, not "
                                 f"{scoring.n_ctx}")
        problem = vocabulary_check(reference.vocabulary, vocabulary(), reference.n_vocab, logits_width)
        if problem:
            raise VocabularyMismatch(problem)
    except BaseException:
        reference.close()
        raise
    return reference


def _text_tokens(scoring: WindowScoring, tokenize: Callable[[str], list[int]],
                 text: str | None) -> tuple[np.ndarray, int]:
    """A new reference's text as tokens, cut to whole windows, and how many windows that is."""
    if text is None:
        raise ReferenceError("a new reference needs the text to score")
    tokens = np.asarray(tokenize(text), dtype=np.int32)
    n_chunks = chunk_count(len(tokens), scoring.n_ctx, scoring.chunks)
    if n_chunks < 1:
        raise ReferenceError(f"the text is {len(tokens)} tokens long: a window needs {scoring.n_ctx}")
    return tokens[:n_chunks * scoring.n_ctx], n_chunks


def _reference_writer(scoring: WindowScoring, tokens: np.ndarray, n_chunks: int, width: int,
                      vocabulary: Callable[[], list[str]]) -> ReferenceWriter:
    """The writer of a new reference file, its header saying what made it."""
    header = dict(scoring.description, n_ctx=scoring.n_ctx, n_chunks=n_chunks, n_vocab=width,
                  tail=scoring.tail, max_tokens=scoring.max_tokens, vocabulary=vocabulary()[:width],
                  created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))
    return ReferenceWriter(scoring.reference_out, header, tokens)


def _score_window(scoring: WindowScoring, logits: Iterable[Any], out: np.ndarray, width: int,
                  next_tokens: np.ndarray, block_ref: ReferenceBlock | None,
                  rng: np.random.Generator) -> tuple[list[Kept], list[np.ndarray]]:
    """One window's logit rows scored into ``out``: compared with the reference's chunk ``block_ref``, or (no
    reference) against the text itself, with what a new reference keeps of each row (its sets and picked
    log-probabilities)."""
    per_chunk = len(out)
    sets: list[Kept] = []
    picked: list[np.ndarray] = []
    done = 0
    for rows in logits:
        for a in range(0, len(rows), ROWS_PER_BLOCK):
            # Only the reference's width takes part; the window's last row predicts nothing.
            block = rows[a:a + ROWS_PER_BLOCK, :width][:max(0, per_chunk - done)]
            span = slice(done, done + len(block))
            if block_ref is not None:
                out[span] = compare_rows(block, next_tokens[span], block_ref.rows(span.start, span.stop))
            elif len(block):
                s, p = reference_rows(block, next_tokens[span], scoring.tail, scoring.max_tokens, rng)
                sets += s
                picked.append(p)
                out[span] = self_rows(p)
            done = span.stop
    if done != per_chunk:
        raise RuntimeError(f"the engine gave {done} scored rows for a window of {per_chunk}")
    return sets, picked


def score(backend: Backend, request_id: str, windows: WindowScoring, *, text: str | None,
          cancelled: Callable[[], bool], on_progress: Callable[[float], None]) -> Scored:
    """The engine host's windowed ``score`` request on ``backend``: ``score_windows`` with its failures as the
    GenerationError the host answers with (kind 'vocabulary', 'reference', 'cancelled' or 'request')."""
    started = time.perf_counter()
    width = backend.logits_width()  # an engine without logits says so here, in its own words
    try:
        n_windows, n_positions = score_windows(
            windows, tokenize=lambda t: backend.tokenize(t, special=windows.special), text=text,
            window_logits=backend.window_logits,
            vocabulary=backend.vocabulary, logits_width=width, cancelled=cancelled, on_progress=on_progress)
    except ReferenceError as exc:
        raise GenerationError("vocabulary" if isinstance(exc, VocabularyMismatch) else "reference", str(exc)) from None
    except InterruptedError:
        raise GenerationError("cancelled", "scoring was stopped") from None
    except ValueError as exc:
        raise GenerationError("request", str(exc)) from None
    return Scored(request_id, [], [], width, (time.perf_counter() - started) * 1000, n_windows, n_positions,
                  backend.peak_memory_bytes())
