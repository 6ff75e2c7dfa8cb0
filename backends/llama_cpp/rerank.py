"""A reranker's scores on llama.cpp's low-level API, as llama-server's ``/rerank`` makes them (tools/server).

A reranker GGUF declares rank pooling (``{arch}.pooling_type`` 4): llama.cpp runs the text, pools it (the first token
of a BERT-style model, the last of a causal one such as Qwen3-Reranker) and puts it through the classifier head
(``cls``/``cls.output``), so ``llama_get_embeddings_seq`` holds ``n_cls_out`` floats per sequence, not ``n_embd``:
llama-cpp-python's ``Llama.embed`` reads ``n_embd`` of them, past the end. The score is the first of them, as
llama-server's ``send_rerank`` takes it (Qwen3-Reranker: P("yes") after llama.cpp's softmax; a BERT cross-encoder:
its logit).

The input is llama-server's ``format_prompt_rerank``: the GGUF's rerank template (``tokenizer.chat_template.rerank``,
``{query}`` and ``{document}`` filled in, tokenized with special tokens read as such and no BOS added), else
``[BOS] query [EOS] [SEP] document [EOS]``, each special token where the vocabulary says it adds one.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING

from backends.base import GenerationError

if TYPE_CHECKING:
    from llama_cpp import Llama

POOLING_RANK = 4  # llama.h enum llama_pooling_type
TEMPLATE_KEY = "tokenizer.chat_template.rerank"


def pair_tokens(llama_cpp: ModuleType, llm: Llama, query: str, text: str) -> list[int]:
    """The tokens llama-server would score for ``query`` and ``text``."""
    template = llm.metadata.get(TEMPLATE_KEY)
    if template:
        prompt = template.replace("{query}", query).replace("{document}", text)
        return list(llm.tokenize(prompt.encode("utf-8"), add_bos=False, special=True))
    vocab = llm._model.vocab
    eos = llama_cpp.llama_vocab_eos(vocab)
    if eos == llama_cpp.LLAMA_TOKEN_NULL:
        eos = llama_cpp.llama_vocab_sep(vocab)
    tokens: list[int] = []
    if llama_cpp.llama_vocab_get_add_bos(vocab):
        tokens.append(llama_cpp.llama_vocab_bos(vocab))
    tokens += llm.tokenize(query.encode("utf-8"), add_bos=False, special=False)
    if llama_cpp.llama_vocab_get_add_eos(vocab):
        tokens.append(eos)
    if llama_cpp.llama_vocab_get_add_sep(vocab):
        tokens.append(llama_cpp.llama_vocab_sep(vocab))
    tokens += llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
    if llama_cpp.llama_vocab_get_add_eos(vocab):
        tokens.append(eos)
    return tokens


def scores(llama_cpp: ModuleType, llm: Llama, pairs: Sequence[list[int]]) -> list[float]:
    """Each token list's score, in order: as many sequences to one ``llama_decode`` as the batch holds (a non-causal
    model must see a whole sequence in one batch, so none is split), the KV cache cleared before each."""
    limit, n_seq_max = int(llm.n_batch), int(llm.context_params.n_seq_max)
    longest = max((len(p) for p in pairs), default=0)
    if longest > limit:
        raise GenerationError("context", f"the question and a passage are {longest} tokens together, but this "
                                         f"reranker reads at most {limit} at once",
                              "shorten the passage or the question")
    if any(not p for p in pairs):
        raise GenerationError("request", "the reranker was given nothing to read (no tokens)")
    out: list[float] = []
    batch: list[list[int]] = []
    for tokens in pairs:
        if batch and (sum(map(len, batch)) + len(tokens) > limit or len(batch) >= n_seq_max):
            out += _decode(llama_cpp, llm, batch)
            batch = []
        batch.append(tokens)
    if batch:
        out += _decode(llama_cpp, llm, batch)
    return out


def _decode(llama_cpp: ModuleType, llm: Llama, batch: list[list[int]]) -> list[float]:
    """One ``llama_decode`` of ``batch``'s sequences (ids 0, 1, ...) in the Llama's own batch, as ``Llama.embed`` fills
    it; each sequence's score."""
    llama_batch = llm._batch
    llama_batch.batch.n_tokens = 0
    for seq, tokens in enumerate(batch):
        llama_batch.add_sequence(tokens, seq, True)  # every token an output: llama.cpp pools over the sequence
    try:
        # an empty cache: the sequences start at position 0 (a non-causal model keeps none: a no-op there)
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(llm.ctx), True)
        rc = llama_cpp.llama_decode(llm.ctx, llama_batch.batch)
    finally:
        llama_batch.batch.n_tokens = 0
    if rc != 0:
        raise GenerationError("decode", f"llama.cpp could not rerank (llama_decode returned {rc})",
                              "see the engine log for llama.cpp's reason")
    out = []
    for seq in range(len(batch)):
        row = llama_cpp.llama_get_embeddings_seq(llm.ctx, seq)
        if not row:
            raise GenerationError("engine", "llama.cpp returned no score for a passage",
                                  "see the engine log for llama.cpp's reason")
        out.append(float(row[0]))
    return out
