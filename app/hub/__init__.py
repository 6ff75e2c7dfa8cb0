"""The Hugging Face Hub side of QuantDesk: one repo's listing (listing.py), search (search.py), verified resumable
downloads (download.py), the local model library (library.py); every call through config.py. Qt-free; the CLI
faces are app/commands/hub.py.

In detail (each module's job, read with docs/architecture.md's module map):

Hub access, all through ``config`` (endpoint, token, offline refusal, error sentences): ``listing.RepoListing`` (one
repo: ``model_info`` and refs fetched once per request, files and branches sorted into quants by one rule for GGUF,
MLX and EXL2/EXL3, projectors kept apart and listed with the quants of their folder, F16 first), ``remote`` (header
bytes by HTTP Range), ``search`` (also a base model's quantizations, by the Hub's ``base_model:quantized:`` tag),
``discover`` (the Discover page's data, Qt-free); downloads in three steps: ``plan`` (what to fetch, pinned to a
commit; a GGUF's projector with it, the pair checked from the two headers first), ``download`` (one verified,
resumable transfer; into the library, or into another home's folder such as the quant lab's cache, unregistered),
``download_queue`` (one at a time, pause/resume/cancel); ``library`` the local library (``Library.matches``: the one
rule for a library model as a user names it: what ``quantdesk ls`` prints, its name, ``OWNER/REPO`` with ``:QUANT``,
its path, else a unique prefix; several models for one name are refused listing them); ``resolve`` (a model as a
user names it: ``local_model`` the path to load — a local file or folder, ``remote:…``, else a library model by that
rule — for ``quantdesk chat``/``serve``/``bench``/``preset``/``docs add --embed-model`` and the MCP tools; a local
file or folder, a library model (a name in the Hub's form only as a whole name, so it never hides a Hub repo:
``hub_form``), ``owner/name``, ``owner/name@BRANCH`` or ``owner/name/file.gguf`` read to its metadata, and every
quant of the names given as the recommender's candidates, with the library's draft suggestion: one reading for
``quantdesk inspect``/``fit``/``recommend`` and the MCP tools ``fit``/``recommend``); ``formats`` (which format,
quant and architecture a repo or a local file is, for the Hub and the library); ``errors`` (each with a sentence and
a hint); ``updates`` (has a downloaded model's repo changed its files, and how: one ``model_info`` per repo at most
daily, a changed GGUF's header compared key by key; an update is a ``plan`` request with ``update_of``, fetching
only what differs); ``chat_templates`` the chat template of the model a GGUF without one was made from (the repos
its header names, the library's repo and its card's ``base_model``; ``chat_template.jinja``, else
``tokenizer_config.json``), which ``app/engine/client.py``'s ``keep_base_template`` keeps beside the file at load
time for the engine host's choice (``backends/chat_format/bundled.py``); ``presets`` the per-model presets (a
model's load and chat settings, keyed by its library identity: ``REPO/FILE``, else its path;
``<config>/model_presets.json``, written atomically; applied by the Chat's prefill and replies, ``quantdesk chat``,
the server's on-demand plans and its requests' sampling) and ``preset_ini`` llama-server's preset INI format
(``--models-preset``) read into them and written from them
"""
