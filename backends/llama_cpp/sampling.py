"""How the token loop chooses and prints tokens: each token's bytes looked up once, llama.cpp's native sampler chain,
the greedy argmax off the logits row, and the chain held to a grammar (llguidance's token mask).

``llama_cpp`` is the runtime's module, handed in by the backend (see backends/llama_cpp/load.py): untyped here. The
samplers' ``sample`` has ``llama_sampler_sample``'s signature, so the token loop calls any of them the same way.
"""

from __future__ import annotations

import collections
import ctypes
from types import ModuleType
from typing import TYPE_CHECKING, Any

from backends import json_schema
from app.datatypes import SamplingSettings, TokenLogprob, TopLogprob
from backends.base import GenerationError
from backends.llama_cpp.draft import penalized_argmax

if TYPE_CHECKING:
    from llama_cpp import Llama


class Pieces(dict[int, bytes | None]):
    """token -> the bytes it prints, or None for an end-of-generation token; each token is asked of
    llama.cpp once, the first time it is generated (a dict hit afterwards). Special tokens print nothing,
    as in ``Llama.detokenize``, unless ``special``: tool calls are marked by special tokens in some models'
    syntax (Mistral's ``[TOOL_CALLS]``, gpt-oss's ``<|channel|>``), which the reply must then keep."""

    def __init__(self, llama_cpp: ModuleType, vocab: Any, special: bool = False) -> None:
        super().__init__()
        self._llama_cpp, self._vocab, self._special = llama_cpp, vocab, special

    def __missing__(self, token: int) -> bytes | None:
        llama_cpp, vocab = self._llama_cpp, self._vocab
        piece = None
        if not llama_cpp.llama_vocab_is_eog(vocab, token):
            buffer = ctypes.create_string_buffer(64)
            n = llama_cpp.llama_token_to_piece(vocab, token, buffer, len(buffer), 0, self._special)
            if n < 0:  # longer than the buffer: -n is its length
                buffer = ctypes.create_string_buffer(-n)
                n = llama_cpp.llama_token_to_piece(vocab, token, buffer, len(buffer), 0, self._special)
            piece = buffer.raw[:n]
        self[token] = piece
        return piece


class WithMarkers(dict[int, bytes | None]):
    """A reply's token pieces: the format's marker tokens as their text, every other token as ``base`` prints it."""

    def __init__(self, base: dict[int, bytes | None], kept: dict[int, bytes | None]) -> None:
        super().__init__(kept)
        self._base = base

    def __missing__(self, token: int) -> bytes | None:
        return self._base[token]


def sampler_chain(llama_cpp: ModuleType, llm: Llama, sampling: SamplingSettings) -> Any:
    """llama.cpp's native sampler chain, built as llama-cpp-python's ``Llama._init_sampler`` builds it
    (so a seed gives the same reply as through ``Llama.generate``): repetition penalty over the last
    ``last_n_tokens_size`` (64) generated tokens, then greedy, or top-k, top-p, min-p, temperature and a seeded draw.
    Without a seed llama.cpp draws a random one. The caller frees it (llama_sampler_free).

    The penalty sampler looks every candidate up in its table of recent tokens: over a whole vocabulary that cost
    0.21 ms a token at 49k entries, 0.46 at 152k and 0.63 at 262k (2-core EPYC), outside llama.cpp's decode counter.
    Where top-k follows, a top-k of ``top_k + last_n`` goes first, so the penalty sees only the candidates that can
    survive it: 0.06, 0.11 and 0.15 ms a token for the whole chain."""
    chain = llama_cpp.llama_sampler_chain_init(llama_cpp.llama_sampler_chain_default_params())
    add = llama_cpp.llama_sampler_chain_add
    last_n, n_vocab = llm.last_n_tokens_size, llm.n_vocab()
    if sampling.repeat_penalty != 1:
        if sampling.temperature != 0 and sampling.repeat_penalty > 1 and 0 < sampling.top_k < n_vocab - last_n:
            # A penalty above 1 only lowers the logits of at most ``last_n`` recent tokens, so the top ``top_k``
            # after it were among the top ``top_k + last_n`` before it: the same candidates reach top-k (ties aside).
            add(chain, llama_cpp.llama_sampler_init_top_k(sampling.top_k + last_n))
        add(chain, llama_cpp.llama_sampler_init_penalties(n_vocab, last_n, sampling.repeat_penalty, 0.0, 0.0))
    if sampling.temperature == 0:
        add(chain, llama_cpp.llama_sampler_init_greedy())
    else:
        add(chain, llama_cpp.llama_sampler_init_top_k(sampling.top_k))
        add(chain, llama_cpp.llama_sampler_init_top_p(sampling.top_p, 1))
        add(chain, llama_cpp.llama_sampler_init_min_p(sampling.min_p, 1))
        add(chain, llama_cpp.llama_sampler_init_temp(sampling.temperature))
        seed = llama_cpp.LLAMA_DEFAULT_SEED if sampling.seed is None else sampling.seed
        add(chain, llama_cpp.llama_sampler_init_dist(seed))
    return chain


# llguidance's tokenizer, the vocabulary's end-of-generation tokens, its special tokens by text
GuidanceVocabulary = tuple[Any, frozenset[int], dict[str, int]]


def guidance_tokenizer(llguidance: ModuleType, llama_cpp: ModuleType, vocab: Any, n_vocab: int) -> GuidanceVocabulary:
    """llguidance's view of a llama.cpp vocabulary, its end-of-generation tokens (``<|im_end|>`` as well as
    ``<|endoftext|>``) and its special tokens by text (which a grammar must name as tokens), as
    ``llguidance.llamacpp.lltokenizer_from_vocab`` builds it (every token's bytes, control tokens marked with a leading
    0xff, llama.cpp's own tokenizer for text) but with llama_vocab_get_attr: that helper still calls the deprecated
    llama_token_get_attr."""
    buffer = ctypes.create_string_buffer(16 * 1024)
    tokens: list[bytes] = []
    end_of_turn: list[int] = []
    special: dict[str, int] = {}
    for token in range(n_vocab):
        n = llama_cpp.llama_token_to_piece(vocab, token, buffer, len(buffer), 0, True)
        piece = buffer.raw[:max(n, 0)]
        attr = llama_cpp.llama_vocab_get_attr(vocab, token)
        if attr & llama_cpp.LLAMA_TOKEN_ATTR_CONTROL or (attr & llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED
                                                         and piece.startswith(b"<") and piece.endswith(b">")):
            piece = b"\xff" + piece
            special[piece[1:].decode("utf-8", "replace")] = token
        tokens.append(piece)
        if llama_cpp.llama_vocab_is_eog(vocab, token):
            end_of_turn.append(token)
    tokenize = ctypes.cast(llama_cpp.llama_cpp._lib.llama_tokenize, ctypes.c_void_p).value
    return (llguidance.LLTokenizer.from_llamacpp(tokens=tokens, vocab_ptr=vocab, tokenize_fptr=tokenize,
                                                 eos_token=end_of_turn, slices=None), frozenset(end_of_turn), special)


class LogitsRows:
    """numpy views of a context's logits rows (``llama_get_logits_ith``), the last one kept while llama.cpp's pointer
    stays (every token of a reply alone): ``np.ctypeslib.as_array`` makes a ctypes array type and an array interface
    each time, ~30 µs of Python a token with the caches cold after a decode."""

    def __init__(self, llama_cpp: ModuleType, ctx: Any, n_vocab: int) -> None:
        import numpy as np

        self._lib, self._ctx, self._n_vocab, self._np = llama_cpp, ctx, n_vocab, np
        self._address: int | None = None
        self._view: Any = None

    def __call__(self, idx: int) -> Any:
        pointer = self._lib.llama_get_logits_ith(self._ctx, idx)
        address = ctypes.cast(pointer, ctypes.c_void_p).value
        if address != self._address:
            self._view, self._address = self._np.ctypeslib.as_array(pointer, shape=(self._n_vocab,)), address
        return self._view


class GreedySampler:
    """Greedy decoding with llama.cpp's repetition penalty, read off the logits row itself: the argmax, and only when
    that token is among the last ``last_n`` generated the row again with their penalty (float32, ``logit <= 0``
    multiplied, else divided, as ``llama_sampler_penalties_apply`` does). ``llama_sampler_sample`` fills a candidate
    array of the whole vocabulary and looks every candidate up in the penalty's table: ~0.7 ms a token at 152k
    entries on a laptop CPU, outside llama.cpp's decode counter. Same token, first maximum on ties, as the chain's
    greedy sampler picks."""

    def __init__(self, llama_cpp: ModuleType, llm: Llama, repeat_penalty: float) -> None:
        import numpy as np

        self._row, self._np = LogitsRows(llama_cpp, llm.ctx, llm.n_vocab()), np
        self._penalty = np.float32(repeat_penalty)
        self._recent: collections.deque[int] = collections.deque(maxlen=llm.last_n_tokens_size)

    def sample(self, _chain: Any, _ctx: Any, idx: int) -> int:
        """``llama_sampler_sample``'s signature, so the token loop calls either the same way: ``idx`` is the batch
        row whose logits choose (-1: the last; speculative decoding verifies a row per guess)."""
        logits = self._row(idx)
        token = int(logits.argmax())
        if self._penalty != 1 and token in self._recent:  # a penalty lowers only recent tokens: the rest stand
            token = penalized_argmax(self._np, logits, self._recent, self._penalty)
        self._recent.append(token)
        return token

    def accept(self, token: int) -> None:
        """A token chosen elsewhere (forced): it counts for the repetition penalty as a sampled one does."""
        self._recent.append(token)


class GuidedSampler:
    """The native sampler chain held to a grammar (backends/json_schema.TokenMask, llguidance): before each token the
    tokens the grammar refuses get a logit of -inf, then the chain chooses as always: llama.cpp's "grammar first"
    order, with a mask that costs tens of microseconds instead of a grammar walk over the vocabulary. The candidates
    live in one array allocated per reply, filled from the logits with numpy; the chain and the matcher are told the
    token taken, as ``llama_sampler_sample`` tells the chain."""

    def __init__(self, llama_cpp: ModuleType, llm: Llama, chain: Any, mask: json_schema.TokenMask) -> None:
        import numpy as np

        self._lib, self._chain, self._mask = llama_cpp, chain, mask
        n_vocab = llm.n_vocab()
        self._n_vocab, self._row = n_vocab, LogitsRows(llama_cpp, llm.ctx, n_vocab)
        self._data = (llama_cpp.llama_token_data * n_vocab)()
        self._view = np.ctypeslib.as_array(self._data)  # id, logit, p: numpy fills the C array in place
        self._ids = np.arange(n_vocab, dtype=np.int32)
        self._all = llama_cpp.llama_token_data_array(self._data, n_vocab, -1, False)
        self._np = np

    def sample(self, _chain: Any, _ctx: Any, idx: int) -> int:
        """``llama_sampler_sample``'s signature, so the token loop calls either the same way (``idx``: the batch row,
        a sequence's own where several decode together)."""
        lib, np, view = self._lib, self._np, self._view
        view["id"] = self._ids
        view["logit"] = self._row(idx)
        view["p"] = 0.0
        view["logit"][self._mask.allowed() == 0] = -np.inf
        self._all.size, self._all.selected, self._all.sorted = self._n_vocab, -1, False
        lib.llama_sampler_apply(self._chain, ctypes.byref(self._all))
        token = int(view["id"][self._all.selected])
        try:
            self._mask.take([token])
        except ValueError as exc:
            raise GenerationError("request", str(exc)) from None
        lib.llama_sampler_accept(self._chain, token)
        return token

    def accept(self, token: int) -> None:
        """A token chosen elsewhere (forced): the grammar and the chain take it as a sampled one."""
        try:
            self._mask.take([token])
        except ValueError as exc:
            raise GenerationError("request", str(exc)) from None
        self._lib.llama_sampler_accept(self._chain, token)


class LogprobRecorder:
    """Each chosen token's log-probability and its ``top`` likeliest alternatives, from the logits row it was chosen
    on (the model's distribution before the sampler's temperature and cut-offs, as llama-server reports it): a
    log-softmax of the row in numpy, the alternatives by argpartition. Made only when a request asks
    (SamplingSettings.logprobs), and wrapped around the loop's ``sample`` and ``accept``, so a reply that does not ask
    costs nothing. Entries go to ``out`` (Backend.reply.logprobs) with the token's bytes; the shared loop adds the
    text the token released."""

    def __init__(self, llama_cpp: ModuleType, llm: Llama, pieces: dict[int, bytes | None], top: int,
                 out: list[TokenLogprob]) -> None:
        import numpy as np

        self._lib, self._row, self._np = llama_cpp, LogitsRows(llama_cpp, llm.ctx, llm.n_vocab()), np
        self._n_vocab, self._vocab = llm.n_vocab(), llm._model.vocab
        self._pieces, self._top, self._out = pieces, top, out
        self._special: dict[int, bytes] = {}

    def _bytes(self, token: int) -> bytes:
        """What the token prints; an end-of-generation token (which prints nothing) as its special text."""
        piece = self._pieces[token]
        if piece is not None:
            return piece
        if token not in self._special:
            buffer = ctypes.create_string_buffer(256)
            n = self._lib.llama_token_to_piece(self._vocab, token, buffer, len(buffer), 0, True)
            self._special[token] = buffer.raw[:max(n, 0)]
        return self._special[token]

    def record(self, token: int, idx: int = -1) -> None:
        np = self._np
        row = self._row(idx).astype(np.float64)
        peak = row.max()
        norm = peak + np.log(np.exp(row - peak).sum())
        top: tuple[TopLogprob, ...] = ()
        if self._top:
            n = min(self._top, self._n_vocab)
            best = np.argpartition(-row, n - 1)[:n]
            best = best[np.argsort(-row[best], kind="stable")]
            top = tuple(TopLogprob(int(t), (b := self._bytes(int(t))).decode("utf-8", "ignore"),
                                   float(row[t] - norm), tuple(b)) for t in best)
        piece = self._bytes(token)
        self._out.append(TokenLogprob(token, "", float(row[token] - norm), tuple(piece), top))

    def sample(self, inner: Any) -> Any:
        """``inner`` (a ``llama_sampler_sample``-like sampler) recording what it chooses."""
        def sample(chain: Any, ctx: Any, idx: int) -> int:
            token = int(inner(chain, ctx, idx))
            self.record(token, idx)
            return token
        return sample

    def accept(self, inner: Any) -> Any:
        """``inner`` (a forced token's accept) recording the forced token on the row it replaced."""
        def accept(token: int) -> None:
            inner(token)
            self.record(token)
        return accept
