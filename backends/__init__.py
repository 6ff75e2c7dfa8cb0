"""Inference backends, one module per engine, behind ``backends.base.Backend``. Qt-free.

Importing this package (or ``backends.registry``) never imports an engine library.

In detail (each module's job, read with docs/architecture.md's module map):

``base.py`` the ``Backend`` contract (with ``Availability``, ``GenerationError``) and the shared generation loop (its
types in ``app/datatypes.py``), and ``count_prompt_tokens`` (the prompt prepared as the loop prepares it, each engine's
``_count_prompt`` tokenizing as its ``_stream`` does; the KV cache's reused prefix is ``cached_tokens``); ``llama_cpp/``
(a package: ``backend.py`` the load and what a model answers besides replies, ``loop.py`` the token loop and the KV
cache's record (a ``Slot`` per sequence, ``sequences.py``: its seq_id and the tokens it holds), ``batch.py`` continuous
batching (the ``Batcher``: every sequence's tokens decoded together in one ``llama_batch`` per step, a new prompt read
in chunks beside the others' tokens, the shared cache's overflow ending one sequence), ``sampling.py`` the samplers,
``load.py`` progress, KV types and tensor overrides, ``vision.py`` libmtmd for images, ``draft.py`` speculative
decoding's guesses (a draft model, prompt lookup), ``log.py`` llama.cpp's load log read, ``rerank.py`` a reranker's
scores (rank pooling) on the low-level API, its input as llama-server's ``/rerank`` formats it, ``states.py`` a
conversation's saved state: one sequence 0's KV cache behind a header of what made it (model file, projector, runtime,
context, KV type, flash attention), its tokens and a CRC, checked before llama.cpp sees a byte); ``sequences.py`` a
batching engine's sequences (``Slot``) and which free one a prompt takes (``choose_slot``, llama-server's slot
similarity, for llama.cpp and MLX); ``states.py`` the saved-state file both engines write (magic, JSON header of what
made it and the tokens held, CRC-32, atomic write) and its checks (``StateRejected`` with the reason); ``mlx.py``
(mlx-vlm for vision models; mlx-lm's prompt cache kept between replies and cut back to the next prompt's shared prefix,
saved and restored through ``save_prompt_cache`` / ``load_prompt_cache`` inside ``states.py``'s file), ``exllamav2.py``,
``exllamav3.py`` (what they share in ``_exllama_common.py``: the probe, sampler, job loop, CUDA memory), ``remote.py``
(any OpenAI-compatible server, over httpx); ``scoring.py`` the quant lab's scoring as llama-perplexity does it (windows,
the KL reference file; numpy only); ``registry.py`` imports each lazily; ``chat_format/`` the chat-format layer every
engine, the server, the Chat and the CLI go through (see "Chat formats" below): a request to a prompt, a reply to its
thinking, answer and tool calls; ``json_schema.py`` a JSON schema as llguidance's grammar and token mask, and which
keywords it enforces (``refusal``: the one check and sentence by which the server's 400, ``quantdesk chat
--json-schema`` and the Chat refuse a schema before any token)
"""
