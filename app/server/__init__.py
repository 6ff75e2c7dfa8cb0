"""The local OpenAI-compatible server: ``create_app`` over a loaded EngineClient, ``ServerThread`` to run it
in-process (``quantdesk serve`` is app/commands/server.py). Qt-free; safe by default (see ``guard``).

In detail (each module's job, read with docs/architecture.md's module map):

the local OpenAI-compatible server: ``params`` checks OpenAI requests (tools, ``tool_choice``, ``response_format``,
llama-server's thinking controls, images, embeddings) into ``SamplingSettings``, ``app`` the OpenAI routes (also
without ``/v1``, as llama-server; and llama-server's ``POST /models/unload``, Eject, and its ``POST /v1/rerank`` for
a reranker GGUF in Jina's, Cohere's and TEI's shapes), ``transport`` the plumbing the API modules share (a JSON body
read within its limit, the event stream that releases its job and lease however it ends), ``anthropic`` the Messages
API and its ``count_tokens`` (the engine host renders and tokenizes the prompt: the protocol's ``CountRequest``,
``Backend.count_prompt_tokens``) on the same engines; ``responses`` OpenAI's Responses API (input items,
instructions and function tools read into the same ``GenerationRequest`` through ``params``' checks; the reply as
reasoning, message and function_call items, whole or as OpenAI's numbered events from one state machine,
``ResponseShape``) with ``response_store`` keeping responses and the conversation each closes in SQLite under the
data folder for ``previous_response_id`` (purged after Settings' ``responses_retention_days``; ``store: false``
keeps nothing); usage says the prompt's tokens the engine reused from its KV cache
(``GenerationStats.cached_tokens``, and on a reply's first ``Token`` with its prompt tokens, for Anthropic's
``message_start``); each gives the engine's answer, thinking and tool calls (read in the engine host) the API's
shapes, whole or one server-sent event per engine event (each token's log-probabilities from ``Token.logprobs`` when
asked; ``n`` choices one after the other on the same lease); ``router.py`` only routes and queues: each request's
``model`` to one of the pool's models (the primary: the pool's active one, pinned, also under its aliases and, with
``serve_any_model``, under any name that is no model here; library models loaded on demand into the pool with the
load planner's plan (``app/models/planner``, as the Chat's); remote models, ``gateway.py`` listing the remote
connections' models), one ``engine_queue.EngineQueue`` per model, a lease while a request is answered, the pool's
``BudgetRefused`` answered 503/507 in one place (``refusal_error``); the app's server gets the app's ``ModelPool``,
``quantdesk serve`` and tests one loaded client that the router adopts as a pool's pinned primary, so both evict and
refuse through the same code; a chat request's overflow policy (``"quantdesk": {"overflow": …}``, the
``X-QuantDesk-Overflow`` header, else the server's: ``quantdesk serve --overflow``, Settings' ``server_overflow``)
applied through ``app/engine/overflow.py`` before the job (chat completions and Anthropic's Messages), reported as
the response's ``quantdesk`` field and ``X-QuantDesk-Context-Dropped`` (``Overflow`` in ``app.py``); ``guard`` keeps
it local (the bind policy; Host, Origin and API key checked before every request); ``thread`` runs it on a thread
(tests, the Server page's switch); ``running`` the servers running now, each said by a record under the data folder
while it listens (its address, whether it wants a key, never the key: ``quantdesk serve`` and the Server page write
it, ``quantdesk launch`` reads it; a record whose process is gone is removed); ``agent_configs`` each coding tool's
own configuration for a served model (Claude Code's environment and ``~/.claude/settings.json``, Codex's Responses
provider in ``config.toml``, OpenCode's ``@ai-sdk/openai-compatible`` provider, Continue's ``config.yaml`` models
entry, Cline's panel values, an OpenAI client's environment), each format's source and each tool's least context
cited there, merged into the user's file after a backup (``app/files.py``); ``mcp`` QuantDesk as an MCP server: its
own tools (``hardware``, ``library``, ``fit``, ``recommend``, ``search_hub``, ``pull`` only with
``--allow-downloads``, ``chat``/``complete`` through the router and pool, the lab's ``bench``), each with its input
and output JSON schema and its failures as tool errors in sentences, built on the SDK's low-level ``Server``; served
over stdio by ``quantdesk mcp serve`` (a pool of its own, no primary, library models loaded on demand) and over
streamable HTTP at ``/mcp`` of ``app`` (the same router, guard and queues as the API); ``documents`` a chat
request's collections (``"quantdesk": {"documents": [...]}``, chat completions and Messages): the question's
passages retrieved before the job (``app/documents/retrieve.with_documents``, the question embedded through the
router's pool), the citations in the response's ``quantdesk`` field (a stream's first chunk)
"""
