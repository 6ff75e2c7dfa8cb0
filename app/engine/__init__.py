"""The engine: one child process per loaded model (host.py) and its parent-side client (client.py).

In detail (each module's job, read with docs/architecture.md's module map):

the engine host (``host``, child-process side), its ``protocol``, ``client.EngineClient`` (parent side), ``guard``
the crash guard (a llama.cpp host killed by a native crash while loading, in its warm-up or under a request is
started again in the next safer configuration, its rungs ``guard.RUNGS``, and the requests that waited on it
replayed; the sentence on ``Loaded.notice`` / ``Done.notice``; what worked remembered per CPU model, runtime and
quant in ``engine_guard.json`` under the data folder; a crash nothing cures said once with the engine's last lines
kept in ``engine-crash-*.log`` under the log folder; ``EngineClient`` applies it to every request, so the Chat, the
CLI, the server, the lab and the embedder have it alike), and ``pool.ModelPool``, the one pool of every loaded model
of a process (the Chat's, the server's on-demand loads, remote models at 0 bytes, ``quantdesk serve``'s ``--model``
adopted and pinned): one ``EngineClient`` each, an ``EngineClientLike`` whose calls go to its active model; one
memory budget and count (``PoolLimits``: Settings → Loaded models, or the server's settings while it serves), the
one eviction (least-recently-used idle model, with a sentence), the one idle reaper, the one ``BudgetCheck``
(``check``) and refusal (``BudgetRefused`` in ``models/budget`` words); free memory from a callable its maker hands
in (``free_memory``, e.g. ``app.machine.free_memory_bytes``), never probed by the pool itself; Eject; leases for the
server's requests; ``states`` chats that resume: the bounded on-disk cache of saved model states under the user
cache folder (keys: a Chat branch's messages, a server conversation's messages, the system prompt, a batching
model's evicted sequences; file names hash the model's path and the key; least recently used evicted past Settings'
``saved_states_mb``), and ``restore`` /
``save`` around a reply (sent by ``turn``, for the Chat, the CLI and the server); ``overflow`` the overflow policy,
one rule for the Chat, ``quantdesk chat`` and the server: which messages go to the model once a conversation no
longer fits the context with room for the reply (decided from the engine's own ``count_tokens``, whole turns left
out, the system prompt, the newest turn and the turns of pinned messages (``keep``) kept; "compact" has the model
write a note on what it leaves out, kept in the system prompt), and the ``ContextCut`` that marks it (``kept``: the
pinned messages sent from inside its range)

The engine host: one child process per loaded model (``python -m app.engine.host``; in a frozen build the app binary
with ``--engine-host``). For llama.cpp, ``EngineClient.load`` first chooses the runtime (``app.runtimes.select``)
and starts the host with ``QUANTDESK_RUNTIME_PATH`` naming that runtime's folder, which the host puts first on
``sys.path`` (PYTHONPATH would do in a source install, but a frozen app ignores it): another runtime means another
host, and one runtime's crash never touches another. It imports exactly one backend, owns the model for its whole
life on one thread (MLX requires it; llama.cpp handles are not shareable) and streams events. Out-of-memory in
llama.cpp or Metal terminates a process by design: here it only kills the host, and the parent turns the exit
(signal, code, last stderr lines) into a sentence for the user. The app makes one engine client (at its first use:
the first load, or the Server page) and hands it to the Chat (``EngineBridge``) and the local server: per model one
host, and one queue, the host's own, where chat and API requests take turns in arrival order. That client is the
process's one ``ModelPool`` (``app/engine/pool.py``): each model the Chat loads gets a host of its own and stays
loaded beside the others within the memory budget and count of Settings → Loaded models; a chat switching to a
loaded model starts no host; the least recently used idle model unloads for room (the Chat shows the sentence), idle
models unload after the TTL (the pool's one reaper, a daemon thread), a crashed host is dropped alone. Loads run on
the bridge's worker, Eject on a thread of its own; the pool's lock keeps its table, a second lock keeps loads and
unloads one at a time, so two first requests load once and a request for a model being unloaded waits and loads it
again. The local server (``app/server/router.py``) serves that same pool: the Chat's active model is its primary
(never unloaded while it serves), the Chat's other models are served by their id, and library models
(``--load-on-demand``) and remote models a request names are loaded into the pool, under its budget and count; the
Server page's budget and idle time are the pool's limits while the server runs. ``quantdesk serve`` runs the same
server over a pool of its own, its ``--model`` adopted and pinned (``--memory-budget``, ``--max-loaded``,
``--idle-ttl`` its limits). A request leases its model (an ``EngineQueue`` each) until its answer is over; the fit
check's estimate of each load counts against the budget; Eject (``POST /models/unload``, ``quantdesk eject``) stops
what the model answers first and refuses the primary.

The crash guard(``app/engine/guard.py``, applied by ``EngineClient`` to every load and request): a llama.cpp load
ends with a warm-up decode (a short batch, then one token), so a kernel that crashes on this CPU does so while
loading; a host killed by a native signal (SIGSEGV, SIGILL, SIGABRT, SIGBUS, SIGFPE; not SIGKILL, the system's
out-of-memory killer) is started again once on the next rung (today: without llama.cpp's extra buffer types), the
load or the request replayed (a reply only when none of its tokens reached the caller yet; after that the next
request revives the host), and the configuration that worked is kept per CPU model, runtime and quant. Requests that
waited on the dead host are all answered after one revival; the server's queue takes requests for a revivable engine
instead of answering 503. ``QUANTDESK_TEST_CRASH`` (``warm-up``, ``reply``, ``always``) makes a host abort in
``llama_decode`` for the tests (``backends/llama_cpp/load.py`` ``TestCrash``).
"""
