"""Models: quant names, metadata parsers (GGUF and safetensors header bytes, config.json; local files read),
the fit estimator and the quant recommender. Pure Python: nothing here loads a model or touches the network
(app.hub reads remote bytes and hands them here); tests/test_import_boundaries.py keeps it so.

In detail (each module's job, read with docs/architecture.md's module map):

pure: ``budget`` (the memory budget and "load anyway": one meaning, available RAM plus a discrete GPU's free memory or
unified memory once, and the same words for the Chat, ``chat --force``, the server and Discover's starting list), quant
names (``quants``), ``detect`` (what is at a path, and a bad file's sentence before any engine starts), ``drafts``
(whether a model can draft for another, from their vocabularies, and the library's suggestion), parsers of the header
bytes it is given (the package ``metadata/``: ``gguf.py`` the GGUF reader, ``architectures.py`` llama.cpp's
per-architecture rules reading its keys, ``safetensors.py`` safetensors, config.json and generation_config.json,
``sampling.py`` the sampling a model recommends (GGUF ``general.sampling.*``, generation_config.json) into
``ModelSampling``, bad values left out with a reason, ``model.py`` the one ``ModelMetadata`` shape; ``model_sampling``
in the package's ``__init__`` for any model reference, ``model_pooling`` what a GGUF declares it is for
(``ModelMetadata.pooling``: mean / cls / last an embedding model, rank a reranker); from local files, or read on the Hub
by ``app/hub``), every field typed and bounded through ``fields.py``; vision projectors (``vision``: a projector's
header typed, the pair check, the projector beside a model, what an image costs), the fit estimator (weights, KV cache,
recurrent state, compute per device, a vision projector; MoE experts kept in RAM; a reranker's batch as large as its
context, ``estimate.ubatch_for``; every architecture the bundled llama.cpp knows is sized or named in
``estimate.LLAMA_CPP_NOT_SIZED`` with the reason its users read), the recommender (``recommend``: typed ``FitResult``,
``Recommendation``; GGUF planned for the runtime and device a load would get; the MoE split when a MoE quant does not
fit the GPU whole); ``planner`` the one load planner, ``plan_load`` → ``LoadPlan`` (the ``LoadSettings`` to load, the
fit check's estimate and verdict, ``fits``, and its notes as typed values each face words: ``PresetApplied``,
``KvQuantized``, ``ContextLowered``, ``ParallelLowered``, ``PresetSetAside``, ``EstimatorNote``), its rules in one order
for the Chat's model bar (``ui/chat/model_bar.prefill_for``), the server's on-demand loads (``server/router.plan``) and
``quantdesk chat``/``serve`` (``commands/engine.check_fit``): the model's preset (handed in: ``app/hub`` is above) over
the wanted settings but under the flags given, the context clamped to the trained length unless held, the projector
named or beside the model, the runtime asked for or pinned, the most GPU layers and experts in RAM that fit, fewer
replies at once where their caches do not fit, a q8_0 KV cache or a shorter context where the wanted one does not
fit, a preset that does not fit set aside; no network, no ``app/hub``
"""
