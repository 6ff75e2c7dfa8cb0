"""The reply's token loop on llama.cpp's low-level API: the prompt brought into the KV cache (reusing the prefix it
already holds, images included), then a one-token decode and the sampler's choice, token after token, or with
speculative decoding a batch of guesses verified at once. The loaded model's state the loop works on is declared here;
LlamaCppBackend (backends/llama_cpp/backend.py) loads it.

Several replies run the same loop at once, each on its own thread and in its own sequence of one unified KV cache (a
``Slot``: its ``seq_id`` and the tokens it holds): every decode goes through the Batcher (batch.py), which decodes the
sequences' tokens together in one step. One reply alone is the case of one slot.

``llama_cpp`` is the runtime's module, imported where the loop starts and handed on: untyped here (see load.py).
"""

from __future__ import annotations

import codecs
import collections
import functools
import threading
from copy import copy as _copy
from collections.abc import Callable, Generator, Iterator, Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from backends import json_schema
from app.datatypes import Prompt, SamplingSettings
from backends.base import Backend, GenerationError
from backends.llama_cpp import sampling as samplers
from backends.llama_cpp import vision
from backends.llama_cpp.batch import NO_SLOT, Batcher
from backends.llama_cpp.draft import DraftModel, PromptLookup
from backends.llama_cpp.rerank import POOLING_RANK
from backends.sequences import Slot, choose_slot, uses
from backends.states import shared_prefix

if TYPE_CHECKING:
    from llama_cpp import Llama

Sample = Callable[[Any, Any, int], int]  # llama_sampler_sample(chain, ctx, row)'s signature
Accept = Callable[[int], None]  # a token taken without sampling (forced): the sampler's state follows it
# The shortest run of cached tokens moved to a new position rather than evaluated again (_reuse_shifted): llama-server's
# --cache-reuse, whose own examples use 256; shorter here, as a cut leaves turns of a few dozen tokens on a small model.
CACHE_REUSE_MIN = 16




class TokenLoop(Backend):
    """The token loop and the KV cache's record of what it holds, for LlamaCppBackend. A reply runs on a copy of the
    loaded backend (``_sequence``) with a slot of its own: what one reply keeps (its prepared request, its counts, its
    forced tokens, its cancel) is the copy's, the model and the caches of token pieces are shared."""

    def __init__(self) -> None:
        self._llm: Llama | None = None
        self._bos = ""  # the model's BOS text: where llama.cpp adds the token itself, the prompt's is dropped
        self._cancelled: threading.Event | None = None
        self._slots = [Slot(0)]  # the KV cache's sequences (LoadSettings.parallel of them)
        self._slot = self._slots[0]  # the one this object's replies and saved states use
        self._slots_lock = threading.Lock()
        self._batcher: Batcher | None = None
        self._row = -1  # the batch row of the last decode's logits (several sequences share a step)
        self._shared: dict[str, Any] = {}  # what a reply's copy builds once for every reply (llguidance's vocabulary)
        self._pieces: dict[int, bytes | None] = {}
        self._special_pieces: dict[int, bytes | None] = {}  # special tokens as text: the format's markers
        self._marker_tokens: dict[str, int | None] = {}  # a format marker's text -> its special token, if it is one
        self._forced: collections.deque[int] = collections.deque()  # tokens to write next (Backend.force)
        self._mtmd: Any = None  # the vision projector's mtmd context (llama.cpp tools/mtmd), when one is loaded
        self._pooling = 0  # an embedding model's pooling (llama.h enum llama_pooling_type); 0 for a chat model
        self._drafter: PromptLookup | DraftModel | None = None  # speculative decoding's guesses (LoadSettings.draft)
        self._draft_tokens = 0

    @property
    def _kv_tokens(self) -> list[int]:
        """What this object's sequence of the KV cache holds."""
        return self._slot.tokens

    @_kv_tokens.setter
    def _kv_tokens(self, tokens: list[int]) -> None:
        self._slot.tokens = tokens

    @property
    def parallel(self) -> int:
        """How many replies decode together (each in its own sequence)."""
        return len(self._slots)

    def _loaded(self) -> Llama:
        if self._llm is None:
            raise GenerationError("state", "no model is loaded")
        return self._llm

    def _batched(self) -> Batcher:
        if self._batcher is None:
            raise GenerationError("state", "no model is loaded")
        return self._batcher

    def _start_batching(self, llama_cpp: ModuleType, parallel: int) -> None:
        """The KV cache's ``parallel`` sequences and the decode steps they share (the context was made for them)."""
        llm = self._loaded()
        self._slots = [Slot(seq) for seq in range(parallel)]
        self._slot = self._slots[0]
        self._batcher = Batcher(llama_cpp, llm.ctx, llm.n_batch, parallel, make_room=self._free_idle_slots)

    def _forget_slots(self) -> None:
        """Every sequence's record emptied: the KV cache was cleared (an embedding, a reranking, a scoring pass)."""
        for slot in self._slots:
            slot.tokens = []

    def _stop_batching(self) -> None:
        if self._batcher is not None:
            batcher, self._batcher = self._batcher, None
            batcher.close()
        self._slots = [Slot(0)]
        self._slot = self._slots[0]

    def _sequence(self, units: Sequence[int] | None) -> TokenLoop:
        """A copy of this backend for one reply, in the free slot ``choose_slot`` picks for ``units`` (the prompt,
        where known; llama-server's slot similarity): so a conversation that comes back finds its turns in the cache
        while others run."""
        with self._slots_lock:
            free = [slot for slot in self._slots if not slot.busy]
            if not free:
                raise GenerationError("busy", f"all {len(self._slots)} sequences of the model are busy")
            slot = choose_slot(free, units)
            slot.busy = True
            slot.used = next(uses)
        view = _copy(self)
        view._slot = slot
        view._forced = collections.deque()
        view._row = -1
        return view

    def _release(self, view: TokenLoop) -> None:
        with self._slots_lock:
            view._slot.busy = False

    def _free_idle_slots(self) -> bool:
        """The batcher's ``make_room``: the cached prefixes of the sequences no reply runs in leave the KV cache, each
        kept first where states are (``_evict``) (called with the batcher's lock held: inside a step, or a restore
        making room); whether any cells were freed."""
        import llama_cpp

        memory = llama_cpp.llama_get_memory(self._loaded().ctx)
        freed = False
        with self._slots_lock:
            for slot in self._slots:
                if not slot.busy and slot.tokens:
                    self._evict(llama_cpp, slot, 0)
                    llama_cpp.llama_memory_seq_rm(memory, slot.seq, -1, -1)
                    slot.tokens = []
                    freed = True
        return freed

    def _evict(self, llama_cpp: ModuleType, slot: Slot, kept: int) -> None:
        """Before ``slot`` keeps only ``kept`` of its tokens for another prompt: LlamaCppBackend saves its state where
        the saved-state cache asked it to (backend.py); nothing here."""

    def _render(self, messages: Prompt) -> str:
        if isinstance(messages, str):
            return messages
        if self.reply.prepared is None:
            raise GenerationError("state", "the conversation was not prepared through the chat format")
        return self.reply.prepared.prompt

    def _format_pieces(self, llama_cpp: ModuleType) -> dict[int, bytes | None] | None:
        """The special tokens this reply's format is written with (gpt-oss's ``<|channel|>``, Mistral's
        ``[TOOL_CALLS]``, a ``<think>`` that is a control token): each as its text, where llama.cpp would print a
        special token as nothing, as llama-server keeps a format's preserved tokens. None when there are none."""
        prepared = self.reply.prepared
        if prepared is None:
            return None
        llm = self._loaded()
        texts = {*prepared.preserved_tokens, prepared.thinking_start_tag, *prepared.thinking_end_tags}
        vocab = llm._model.vocab
        kept: dict[int, bytes | None] = {}
        for text in (t.strip() for t in texts):
            if not text:
                continue
            if text not in self._marker_tokens:
                ids = llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)
                special = len(ids) == 1 and llama_cpp.llama_vocab_get_attr(vocab, ids[0]) & (
                    llama_cpp.LLAMA_TOKEN_ATTR_CONTROL | llama_cpp.LLAMA_TOKEN_ATTR_USER_DEFINED)
                self._marker_tokens[text] = ids[0] if special and not llama_cpp.llama_vocab_is_eog(vocab, ids[0]) \
                    else None
            token = self._marker_tokens[text]
            if token is not None:
                kept[token] = self._special_pieces[token]
        return kept or None

    def force(self, text: str) -> None:
        self._forced.extend(self._loaded().tokenize(text.encode("utf-8"), add_bos=False, special=True))

    def _decode(self, llama_cpp: ModuleType, tokens: Sequence[int]) -> int:
        """Evaluate ``tokens`` after what this sequence holds, in the batcher's steps (n_batch at a time alone, in
        smaller chunks beside other sequences); llama_decode's status. The last token's logits row is ``_row``."""
        batcher = self._batched()
        seq, cancelled = self._slot.seq, self._cancelled
        start = 0
        while start < len(tokens):
            chunk = tokens[start:start + batcher.chunk()]
            status, self._row = batcher.decode(seq, chunk, cancelled)
            if status != 0:
                return status
            self._kv_tokens.extend(chunk)
            start += len(chunk)
        return 0

    def _forget_kv(self, llama_cpp: ModuleType) -> None:
        """This sequence's cells leave the KV cache (the other sequences' stay)."""
        with self._batched().lock:  # never while a step of the other sequences runs
            llama_cpp.llama_memory_seq_rm(llama_cpp.llama_get_memory(self._loaded().ctx), self._slot.seq, -1, -1)
            self._kv_tokens = []

    def _keep_prefix(self, llama_cpp: ModuleType, reuse: int) -> int:
        """Cut the KV cache back to its first ``reuse`` cells; how many it keeps (0 when it was emptied instead:
        nothing to reuse, or a recurrent model's state that cannot be cut back)."""
        memory = llama_cpp.llama_get_memory(self._loaded().ctx)
        if reuse and llama_cpp.llama_memory_seq_rm(memory, self._slot.seq, reuse, -1):
            del self._kv_tokens[reuse:]
            return reuse
        self._forget_kv(llama_cpp)
        return 0

    def _common_prefix(self, units: Sequence[int]) -> int:
        """How many of ``units`` the KV cache already holds, leaving at least one to decode (its logits pick the
        first token)."""
        return min(shared_prefix(self._kv_tokens, units), len(units) - 1)

    def _reuse_shifted(self, llama_cpp: ModuleType, tokens: Sequence[int], n_past: int) -> int:
        """llama-server's cache reuse (``--cache-reuse``, server-context.cpp): after the common prefix, each run of
        at least ``CACHE_REUSE_MIN`` tokens the KV cache holds further on that comes next in the prompt is moved to
        its new position (``llama_memory_seq_rm`` the cells between, ``llama_memory_seq_add`` the run's positions;
        llama.cpp re-rotates the keys), instead of evaluated again: what an overflow policy's cut leaves, the system
        prompt and the turns after the ones left out. Only where the memory can shift (not a recurrent or hybrid
        model's state; images take ``_prefill_media``); one token at least is left to decode. How many of the
        prompt's tokens the cache then holds, in order."""
        cache = self._kv_tokens
        last = len(tokens) - 1
        if n_past >= last or len(cache) - n_past < CACHE_REUSE_MIN:
            return n_past
        llm = self._loaded()
        memory = llama_cpp.llama_get_memory(llm.ctx)
        # llama.cpp says a recurrent state "can shift" (its positions), but it cannot lose the cells between
        is_recurrent = getattr(llama_cpp, "llama_model_is_recurrent", None)
        is_hybrid = getattr(llama_cpp, "llama_model_is_hybrid", None)
        if not llama_cpp.llama_memory_can_shift(memory) or (is_recurrent and is_recurrent(llm.model)) or (
                is_hybrid and is_hybrid(llm.model)):
            return n_past
        head_c = head_p = n_past
        kept = cache[:n_past]
        while head_c < len(cache) and head_p < last:
            n = 0
            while head_c + n < len(cache) and head_p + n < last and cache[head_c + n] == tokens[head_p + n]:
                n += 1
            if n >= CACHE_REUSE_MIN:
                if not llama_cpp.llama_memory_seq_rm(memory, self._slot.seq, head_p, head_c):
                    self._forget_kv(llama_cpp)
                    return 0
                llama_cpp.llama_memory_seq_add(memory, self._slot.seq, head_c, head_c + n, head_p - head_c)
                kept.extend(cache[head_c:head_c + n])
                head_c += n
                head_p += n
            else:
                head_c += 1
        if head_p > n_past:
            self._kv_tokens = kept  # the cells from head_p on are what _keep_prefix removes next
        return head_p

    def _prefill(self, llama_cpp: ModuleType, tokens: list[int], shift: bool = False) -> int:
        """Bring the KV cache to ``tokens``, reusing the longest prefix it already holds (the earlier turns
        of a chat), as ``Llama.generate`` does; llama_decode's status. Cancel can interrupt a prompt read alone through
        the abort callback (Batcher.aborting)."""
        with self._batched().lock:  # the cache's cells change: never while a step of the other sequences runs
            reuse = self._common_prefix(tokens)
            if shift:  # a prompt an overflow policy cut (SamplingSettings.cache_reuse)
                reuse = self._reuse_shifted(llama_cpp, tokens, reuse)
            reuse = self.reply.cached_tokens = self._keep_prefix(llama_cpp, reuse)
        return self._decode(llama_cpp, tokens[reuse:])

    def _prefill_media(self, llama_cpp: ModuleType, chunks: Any) -> int:
        """Bring the KV cache to a prompt with images, reusing the longest prefix it already holds (an image is
        named in ``_kv_tokens`` by a marker per position made from its id, so the earlier turns of a chat with the
        same images are neither re-encoded nor decoded again); text chunks are decoded, each image encoded by the
        projector and its embeddings decoded; llama_decode's status. Models with M-RoPE (Qwen-VL: an image's
        positions are not one per cell) start from an empty cache each time."""
        llm = self._loaded()
        pieces = vision.chunk_units(chunks)
        units = [u for _, piece, _ in pieces for u in piece]
        reuse = 0
        if not vision.uses_mrope(self._mtmd):
            reuse = self._common_prefix(units)
            start = 0
            for _, piece, is_text in pieces:  # never into the middle of an image: it is evaluated whole
                if not is_text and start < reuse < start + len(piece):
                    reuse = start
                start += len(piece)
        reuse = self.reply.cached_tokens = self._keep_prefix(llama_cpp, reuse)
        with self._batched().aborting(self._cancelled):  # images are served alone (one sequence): see load
            position = 0
            for index, (chunk, piece, is_text) in enumerate(pieces):
                end = position + len(piece)
                if end > reuse:
                    if is_text:
                        status = self._decode(llama_cpp, piece[max(reuse - position, 0):])
                    else:
                        status = vision.eval_image(llama_cpp, self._mtmd, llm, chunk, position,
                                                   index == len(pieces) - 1)
                        if status == 0:
                            self._kv_tokens.extend(piece)
                    if status != 0:
                        return status
                position = end
        return 0

    def _engine_prompt(self, messages: Prompt) -> str:
        """The rendered prompt as it is tokenized: without the template's BOS text where llama.cpp adds the BOS token
        itself (the model's vocabulary asks for one), as llama-server drops it (common_chat_templates_apply's
        add_bos). A model that adds none keeps the text: SmolLM2's BOS is ``<|im_start|>``, its first turn's marker,
        which dropping lost from every prompt."""
        prompt = self._render(messages)
        if self._bos and prompt.startswith(self._bos) and self._loaded()._model.add_bos_token():
            return prompt[len(self._bos):]
        return prompt

    def _count_prompt(self, messages: Prompt) -> int:
        """As ``_stream`` counts the prompt: its tokens, or with images the positions of its text and image chunks."""
        prompt = self._engine_prompt(messages)
        images = [] if isinstance(messages, str) else [image for m in messages for image in m.images]
        if not images:
            return len(self._loaded().tokenize(prompt.encode("utf-8"), add_bos=True, special=True))
        media = vision.media_chunks(self._mtmd, prompt, images)
        try:
            return int(vision.n_positions(media))
        finally:
            vision.free_chunks(media)

    def _stream(self, messages: Prompt, sampling: SamplingSettings) -> Iterator[str]:
        """The token loop on llama.cpp's low-level API: llama_decode on a one-token batch, the native
        sampler chain, and each token's bytes looked up once per model."""
        import llama_cpp

        llm = self._loaded()
        self._refuse_pooling_models()
        prompt = self._engine_prompt(messages)
        images = [] if isinstance(messages, str) else [image for m in messages for image in m.images]
        media = vision.media_chunks(self._mtmd, prompt, images) if images else None  # text and image chunks
        tokens = [] if media else llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True)
        n_prompt = len(tokens)
        n_ctx = llm.n_ctx()
        batcher, seq = self._batched(), self._slot.seq
        chain = None
        try:
            if media:
                n_prompt = vision.n_positions(media)
            if n_prompt >= n_ctx:
                raise GenerationError("context", f"the conversation is {n_prompt} tokens long but the context "
                                                 f"holds {n_ctx}", "start a new chat or load with a larger context")
            self.reply.prompt_tokens = n_prompt
            ctx = llm.ctx
            kept = self._format_pieces(llama_cpp)
            pieces = samplers.WithMarkers(self._pieces, kept) if kept else self._pieces
            self._forced.clear()
            decode = batcher.decode
            utf8 = codecs.getincrementaldecoder("utf-8")(errors="replace").decode
            sample, accept, chain, mask = self._sampling(llama_cpp, llm, sampling, pieces)
            # guesses of text replies only, and not where each token's log-probabilities are asked
            drafter = self._drafter if not media and mask is None and sampling.logprobs < 0 else None
            self.mark_prefill_start()
            batcher.join(seq)
            status = (self._prefill_media(llama_cpp, media) if media
                      else self._prefill(llama_cpp, tokens, sampling.cache_reuse))
            if drafter is not None and status == 0:
                drafter.start(tokens, sampling.repeat_penalty)
                failed = yield from self._speculate(llama_cpp, drafter, tokens, sample, accept, chain, pieces, utf8)
                if failed is None:
                    return
                status = failed
            n_past = n_prompt
            kv_tokens = self._kv_tokens
            forced = self._forced
            row = self._row
            while status == 0:  # (after speculation status is its failing one: not entered)
                if forced:  # a thinking budget ran out: its closing tag, whatever the model would sample
                    token = forced.popleft()
                    accept(token)
                else:
                    token = sample(chain, ctx, row)
                piece = pieces[token]
                if piece is None:  # end of generation
                    return
                yield utf8(piece)
                n_past += 1
                if n_past >= n_ctx:
                    return  # context full: end the reply rather than fail the next decode
                status, row = decode(seq, (token,))
                if status == 0:
                    kv_tokens.append(token)
            if self._cancelled is not None and self._cancelled.is_set():
                self._forget_kv(llama_cpp)  # an aborted decode leaves the KV cache half-written
                return
            self._forget_kv(llama_cpp)
            raise self._decode_failed(status, n_ctx)
        finally:
            batcher.leave(seq)
            if chain is not None:
                llama_cpp.llama_sampler_free(chain)
            if media:
                vision.free_chunks(media)

    def _refuse_pooling_models(self) -> None:
        """An embedding model or a reranker makes no replies: said before anything is decoded."""
        if self._pooling == POOLING_RANK:
            raise GenerationError("request", "the loaded model is a reranker: it scores passages, it makes no replies",
                                  "ask /v1/rerank, or load a chat model")
        if self._pooling:
            raise GenerationError("request", "the loaded model is an embedding model: it makes embeddings, not replies",
                                  "ask /v1/embeddings, or load a chat model")

    def _sampling(self, llama_cpp: ModuleType, llm: Any, sampling: SamplingSettings,
                  pieces: Any) -> tuple[Sample, Accept, Any, Any]:
        """The reply's sample and accept: the argmax off the logits row where no chain is needed, else llama.cpp's
        sampler chain (its handle, which the caller frees), under the grammar's token mask where there is one, and
        recording each token's log-probabilities only when asked (the plain loop stays as it is)."""
        sample: Sample = llama_cpp.llama_sampler_sample
        accept: Accept
        chain = None
        grammar = self.reply_grammar(sampling)
        mask = self._token_mask(llama_cpp, grammar) if grammar is not None else None
        if mask is None and sampling.temperature == 0:
            greedy = samplers.GreedySampler(llama_cpp, llm, sampling.repeat_penalty)
            sample, accept = greedy.sample, greedy.accept
        else:
            chain = samplers.sampler_chain(llama_cpp, llm, sampling)
            accept = functools.partial(llama_cpp.llama_sampler_accept, chain)
        try:
            if mask is not None and chain is not None:
                guided = samplers.GuidedSampler(llama_cpp, llm, chain, mask)
                sample, accept = guided.sample, guided.accept
            if sampling.logprobs >= 0:
                recorder = samplers.LogprobRecorder(llama_cpp, llm, pieces, sampling.logprobs, self.reply.logprobs)
                sample, accept = recorder.sample(sample), recorder.accept(accept)
        except BaseException:
            if chain is not None:
                llama_cpp.llama_sampler_free(chain)  # the caller never got its handle
            raise
        return sample, accept, chain, mask

    def _decode_failed(self, status: int, n_ctx: int) -> GenerationError:
        """Why a decode failed, in words: the shared cache full of the other sequences' tokens, else llama.cpp's."""
        if status == NO_SLOT and self.parallel > 1:
            return GenerationError("context", f"the KV cache the model's {self.parallel} sequences share "
                                              f"({n_ctx} tokens) is full: this reply ends here, the others go on",
                                   "send it again when fewer requests run, or load with a larger context")
        return GenerationError("decode", f"llama.cpp failed while generating (llama_decode returned {status})",
                               "see the engine log for llama.cpp's reason")

    def _speculate(self, llama_cpp: ModuleType, drafter: PromptLookup | DraftModel, prompt: list[int], sample: Sample,
                   accept: Accept, chain: Any, pieces: dict[int, bytes | None],
                   utf8: Callable[[bytes], str]) -> Generator[str, None, int | None]:
        """The token loop with speculation: after each token the drafter guesses up to ``draft_tokens`` more, the
        model decodes the token and the guesses in one batch with logits for every row, and the sampler chooses on
        each row in turn as it would have one token at a time (greedy: the argmax; else the same chain, whose seeded
        draw advances once per token), so the reply is the model's own: each guess is kept while it is the token
        the model chose, and the first choice that differs ends the round as the next token (after all the guesses,
        the last row's choice is a token for free). The rejected guesses leave the KV cache. Returns None at the
        end of the reply, else llama_decode's failing status."""
        llm = self._loaded()
        ctx = llm.ctx
        n_ctx, batch, kv = llm.n_ctx(), llm._batch, self._kv_tokens
        memory = llama_cpp.llama_get_memory(ctx)
        history = list(prompt)  # the prompt and every token yielded since: what the drafter guesses after
        token = sample(chain, ctx, -1)
        while True:
            piece = pieces[token]
            if piece is None:  # end of generation
                return None
            yield utf8(piece)
            history.append(token)
            if len(history) >= n_ctx:
                return None  # context full: end the reply rather than fail the next decode
            # no guesses while tokens are forced (Backend.force): the next one is not the model's choice
            guesses = [] if self._forced else drafter.propose(history, min(self._draft_tokens, n_ctx - len(history)))
            row_tokens = [token, *guesses]
            start = len(kv)
            batch.set_batch(row_tokens, n_past=start, logits_all=True)
            status = int(llama_cpp.llama_decode(ctx, batch.batch))
            if status != 0:
                return status
            kv.extend(row_tokens)
            self.reply.verify_passes += 1
            self.reply.drafted_tokens += len(guesses)
            kept = 0
            if self._forced:
                token = self._forced.popleft()
                accept(token)
            else:
                for row, guess in enumerate(guesses):
                    token = sample(chain, ctx, row)
                    if token != guess:
                        break
                    kept += 1
                else:
                    token = sample(chain, ctx, len(guesses))
            self.reply.accepted_tokens += kept
            if kept < len(guesses):  # the rejected guesses' cells go, in the cache and in its record
                if not llama_cpp.llama_memory_seq_rm(memory, -1, start + 1 + kept, -1):
                    self._forget_kv(llama_cpp)
                    raise GenerationError("decode", "llama.cpp could not take rejected draft tokens back out of "
                                                    "the KV cache", "load the model without a draft")
                del kv[start + 1 + kept:]
            for guess in guesses[:kept]:
                piece = pieces[guess]
                if piece is None:
                    return None
                yield utf8(piece)
                history.append(guess)
                if len(history) >= n_ctx:
                    return None

    def _token_mask(self, llama_cpp: ModuleType, grammar: tuple[str, str]) -> json_schema.TokenMask:
        """The reply's grammar (Backend.reply_grammar) on llguidance's view of this model's vocabulary (built at the
        first structured reply, about a second at 150k tokens, then kept with the model), advanced past the
        generation prompt the grammar starts with."""
        try:
            import llguidance
        except ImportError:
            raise GenerationError("request", "structured output needs llguidance, which is not installed",
                                  "pip install 'quantdesk[llama]'") from None
        tokenizer, ends, _ = self._guidance(llguidance, llama_cpp)
        llm = self._loaded()
        lark, generation_prompt = grammar
        primed = llm.tokenize(generation_prompt.encode("utf-8"), add_bos=False, special=True) \
            if generation_prompt else None
        try:
            return json_schema.TokenMask(tokenizer, lark, llm.n_vocab(), ends, primed)
        except ValueError as exc:
            raise GenerationError("request", str(exc)) from None

    def _guidance(self, llguidance: ModuleType, llama_cpp: ModuleType) -> samplers.GuidanceVocabulary:
        shared = self._shared  # one dict for the backend and every reply's copy of it
        if "guidance" not in shared:
            llm = self._loaded()
            shared["guidance"] = samplers.guidance_tokenizer(llguidance, llama_cpp, llm._model.vocab, llm.n_vocab())
        vocabulary: samplers.GuidanceVocabulary = shared["guidance"]
        return vocabulary
