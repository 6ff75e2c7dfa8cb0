"""The OpenAI-compatible API over one already-loaded EngineClient.

``create_app(client)`` builds the ASGI app (Starlette) behind the Guard; the caller owns the client and picks where to
listen (``app.server.thread.ServerThread`` or ``quantdesk serve``). Endpoints: ``GET /v1/models``,
``POST /v1/chat/completions`` and ``POST /v1/completions`` (both streamed as server-sent events or not; chat with
tools and structured output), ``POST /v1/embeddings`` (an embedding model), ``POST /v1/rerank`` (a reranker GGUF:
llama-server's route, Jina's and Cohere's shape, TEI's with ``texts``), Anthropic's ``POST /v1/messages`` and
``POST /v1/messages/count_tokens`` (app/server/anthropic.py), OpenAI's Responses API ``POST /v1/responses`` with
``GET``/``DELETE /v1/responses/{id}`` (app/server/responses.py), and ``GET /health``; the OpenAI routes also without the
``/v1`` prefix, as llama-server serves them. Responses carry ``usage`` (with the prompt's tokens reused from the KV
cache) and a llama.cpp-style ``timings`` object, measured in the engine host where the tokens are made. A request's
``model`` picks the model (app/server/router.py, over the process's one ModelPool): the primary model, a library model
loaded on demand when allowed, or with ``serve_remotes`` a model of the user's remote connections
(app/server/gateway.py), named ``remote:CONNECTION/MODEL``. ``POST /models/unload`` with ``{"model": ID}``
(llama-server's router route, also under /v1) ejects a loaded model. ``/mcp`` serves QuantDesk's own tools to agents
over MCP's streamable HTTP (app/server/mcp.py), behind the same guard.

The engine host reads each reply into its answer, its thinking and its tool calls as it is generated
(backends/chat_format); here they only take the API's shapes: ``content``, llama-server's ``reasoning_content`` and
``tool_calls``, whole or as deltas, one server-sent event per engine event. Asked for, each token's log-probability and
its likeliest alternatives (measured in the engine host: ``Token.logprobs``) go out in OpenAI's ``logprobs`` shapes;
``n`` choices are generated one after the other on the model's engine, each its own reply.

Here the endpoints only: a chat request's turn (the model's preset, the overflow policy, the documents' passages) is
app/server/turns.py's, the JSON of the answers app/server/openai_shapes.py's.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Callable, Iterable
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from app.errors import EngineError
from app.server import anthropic, turns
from app.server.responses import ResponsesApi
from app.server.response_store import ResponseStore
from app.server.engine_queue import Job
from app.server.documents import Cited, ServerDocuments
from app.server.guard import Guard
from app.server.openai_shapes import (ChatShape, CompletionShape, Shape, encode_vector, engine_api_error, sse)
from app.server.transport import _closer, _EventStream, read_body
from app.server.router import Lease, ModelRouter, ServeSettings, model_id
from app.server.params import (OVERFLOW_HEADER, ApiError, GenerationRequest, parse_chat, parse_completion,
                               parse_embeddings, parse_rerank)
from app.server.turns import Overflow, quantdesk_field
from app.datatypes import DEFAULT_OVERFLOW, Done, Token, TokenLogprob
from app.engine.turn import ModelDefaults, with_system_prompt

if TYPE_CHECKING:
    from app.engine.client import EngineClientLike
    from app.engine.pool import ModelPool
    from app.hardware.profile import HardwareProfile
    from app.server.gateway import RemoteModels

# A streamed reply's tokens go out in chunks at most this often, the first token at once. Each chunk costs the
# engine host a pipe write, the server an event and an SSE write and the client a parse: about 0.9 ms of CPU for
# server and openai client together (tests/bench/token_loop.py --server), which on a small machine comes out of
# llama.cpp's own cores. 40 ms is 25 updates a second, smoother than reading speed; usage counts stay exact. The
# window is the engine host's (one event per chunk); remote engines never hold a piece back (backends/remote.py).
STREAM_EVERY_S = 0.040


def error_response(error: ApiError) -> JSONResponse:
    return JSONResponse(error.body(), status_code=error.status, headers=error.headers)


async def _cancel_on_disconnect(request: Request, job: Job) -> None:
    """Once the body is read, the next ASGI message is http.disconnect: the client went away."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            job.cancel()
            return



class OpenAIServer:
    """The endpoints, over the router: the primary model's EngineQueue, and a queue per other model of the pool."""

    def __init__(self, client: ModelPool | EngineClientLike, *, max_pending: int, pool: ServeSettings | None = None,
                 stream_every_s: float = STREAM_EVERY_S, profile: HardwareProfile | None = None,
                 overflow: str = DEFAULT_OVERFLOW) -> None:
        self.stream_every_s = stream_every_s
        self.overflow = overflow  # the overflow policy of a chat request that names none (app/engine/overflow.py)
        if client.loaded is None:
            raise ValueError("the engine client has no model loaded")
        self.created = int(time.time())
        self.pool = ModelRouter(client, pool, max_pending=max_pending, profile=profile)
        self.client = self.pool.models  # the primary is the pool's active model
        self.queue = self.pool.primary_queue
        self.documents = ServerDocuments(self.pool)  # "quantdesk": {"documents": [...]} (app/server/documents.py)

    @property
    def remotes(self) -> RemoteModels | None:
        """The remote connections' models (a gateway), or None."""
        return self.pool.remotes

    @property
    def model_id(self) -> str:
        """The primary model's id. Read per request: in the app the engine is the chat's, and the chat may load
        another model (or lose its engine) while the server runs."""
        loaded = self.client.loaded
        if loaded is None:
            raise ApiError(503, "no model is loaded in the engine", type="server_error", code="model_not_loaded")
        return model_id(loaded.model_path)

    # --- plain endpoints ---

    async def models(self, request: Request) -> Response:
        cards = await asyncio.to_thread(self.pool.cards, self.created)
        return JSONResponse({"object": "list", "data": cards})

    async def model(self, request: Request) -> Response:
        wanted = request.path_params["model"]
        cards = await asyncio.to_thread(self.pool.cards, self.created)
        card = next((c for c in cards if c["id"] == wanted), None)
        if card is None:
            raise ApiError(404, f"the model {wanted[:200]!r} is not served here", param="model",
                           code="model_not_found")
        return JSONResponse(card)

    async def unload(self, request: Request) -> Response:
        """Eject: ``{"model": ID}`` as llama-server's router takes it; a reply the model is writing is stopped
        first (it ends as stopped), the primary model is refused (409)."""
        body = await read_body(request)
        wanted = body.get("model")
        if not isinstance(wanted, str) or not wanted:
            raise ApiError(400, "name the model to unload: {\"model\": \"ID\"} (GET /v1/models lists them)",
                           param="model", code="invalid_request")
        said = await asyncio.to_thread(self.pool.unload, wanted)
        return JSONResponse({"success": True, "model": wanted, "message": said})

    async def health(self, request: Request) -> Response:
        loaded = self.client.loaded
        alive = self.client.alive and loaded is not None
        return JSONResponse({"status": "ok" if alive else "engine_down",
                             "model": model_id(loaded.model_path) if loaded else None,
                             "busy": self.queue.busy, "pending": self.queue.pending,
                             **await asyncio.to_thread(self.pool.health)},
                            status_code=200 if alive else 503)

    # --- generation ---

    async def _engine_for(self, body: dict[str, Any]) -> Lease:
        """The engine for a request's ``model`` (app/server/router.py), leased until its answer is over."""
        return await asyncio.to_thread(self.pool.acquire, body.get("model"))

    async def chat_completions(self, request: Request) -> Response:
        return await self._answer(request, parse_chat, ChatShape, chat=True)

    async def completions(self, request: Request) -> Response:
        return await self._answer(request, parse_completion, CompletionShape)

    async def _answer(self, request: Request, parse: Callable[..., GenerationRequest],
                      shape: type[Shape], *, chat: bool = False) -> Response:
        body = await read_body(request)
        lease = await self._engine_for(body)
        try:
            details = lease.loaded.details
            options = {"sees_images": "vision" in details, "takes_tools": bool(details.get("tool_format"))} if chat \
                else {}
            model = await turns.defaults(lease)
            # In a worker thread: checking an image decodes it (up to 40 megapixels), which must not hold up the
            # event loop and the replies streaming to other clients.
            parsed = await asyncio.to_thread(lambda: parse(body, served_id=lease.served, n_ctx=lease.loaded.n_ctx,
                                                           recommended=model.recommended,
                                                           preset=model.preset_sampling, **options))
            parsed, report, cited = await self.turn(request, lease, parsed, model)
        except BaseException:
            lease.release()
            raise
        return await self._generate(request, lease, parsed, shape(lease.served, lease.loaded.details.get("build", "")),
                                    report, cited)

    async def turn(self, request: Request, lease: Lease, parsed: GenerationRequest, model: ModelDefaults,
                   overflow: str | None = None) -> tuple[GenerationRequest, Overflow | None, Cited | None]:
        """A request as its engine reads it (app/server/turns.py): the preset's system prompt, its overflow policy
        (``overflow``, else the body's, the header's, the server's), its documents' passages."""
        policy = overflow or turns.policy(parsed, request.headers.get(OVERFLOW_HEADER), self.overflow)
        return await asyncio.to_thread(turns.prepare, lease, parsed, model, policy, self.documents)

    async def messages(self, request: Request) -> Response:
        """Anthropic's Messages API; its errors in Anthropic's shape (app/server/anthropic.py)."""
        try:
            body = await read_body(request)
            lease = await self._engine_for(body)
        except ApiError as exc:
            return JSONResponse(anthropic.error_body(exc), status_code=exc.status, headers=exc.headers)
        try:
            model = await turns.defaults(lease)
            parsed = anthropic.parse_messages(body, served_id=lease.served, n_ctx=lease.loaded.n_ctx,
                                              takes_tools=bool(lease.loaded.details.get("tool_format")),
                                              recommended=model.recommended, preset=model.preset_sampling)
            parsed, report, cited = await self.turn(request, lease, parsed, model)
            job, first, watcher = await self.start_job(request, lease, parsed)
        except ApiError as exc:
            lease.release()
            return JSONResponse(anthropic.error_body(exc), status_code=exc.status, headers=exc.headers)
        except BaseException:
            lease.release()
            raise
        shape = anthropic.MessageShape(lease.served, quantdesk_field(report, cited))
        headers = report.headers() if report else None
        if parsed.stream:
            return _EventStream(shape.stream(first, lambda: self.next_event(job)),
                                _closer(watcher, job, lease), headers)
        try:
            event = first
            while not isinstance(event, Done):
                event = await self.next_event(job)
        except ApiError as exc:
            return JSONResponse(anthropic.error_body(exc), status_code=exc.status, headers=exc.headers)
        finally:
            watcher.cancel()
            job.cancel()
            lease.release()
        whole = shape.whole(event)
        extra = quantdesk_field(report, cited)
        return JSONResponse({**whole, "quantdesk": extra} if extra else whole, headers=headers)

    async def count_tokens(self, request: Request) -> Response:
        """Anthropic's ``/v1/messages/count_tokens``: the body of a Messages request (without ``max_tokens``), its
        prompt rendered through the model's chat template and counted by its tokenizer in the engine host, in its turn
        after the requests before it; the same figure a reply reports as input_tokens + cache_read_input_tokens."""
        try:
            body = await read_body(request)
            lease = await self._engine_for(body)
        except ApiError as exc:
            return JSONResponse(anthropic.error_body(exc), status_code=exc.status, headers=exc.headers)
        try:
            parsed = anthropic.parse_messages(body, served_id=lease.served, n_ctx=lease.loaded.n_ctx,
                                              takes_tools=bool(lease.loaded.details.get("tool_format")), counting=True)
            # the prompt a reply would read: with the preset's system prompt where the request has none
            model = await turns.defaults(lease)
            assert not isinstance(parsed.messages, str)
            messages = with_system_prompt(parsed.messages, model.system_prompt())
            try:
                with lease.queue.counted():
                    tokens = await asyncio.to_thread(lease.queue.client.count_tokens, messages, parsed.sampling)
            except EngineError as exc:
                if exc.kind != "unavailable":
                    raise engine_api_error(exc) from None
                raise ApiError(501, f"{lease.served} cannot count tokens here: {exc}", code="unavailable") from None
            except Exception as exc:
                raise engine_api_error(exc) from None
        except ApiError as exc:
            return JSONResponse(anthropic.error_body(exc), status_code=exc.status, headers=exc.headers)
        finally:
            lease.release()
        return JSONResponse({"input_tokens": tokens})

    async def embeddings(self, request: Request) -> Response:
        body = await read_body(request)
        lease = await self._engine_for(body)
        try:
            loaded, served = lease.loaded, lease.served
            if not loaded.details.get("embedding"):
                why = ("a reranker: ask /v1/rerank" if loaded.details.get("reranker") else
                       "its GGUF declares no pooling")
                raise ApiError(400, f"{served} is not an embedding model ({why})", param="model",
                               code="not_an_embedding_model")
            parsed = parse_embeddings(body, served_id=served, n_embd=loaded.details["embedding_length"])
            try:  # the engine serves it in its turn, after what the chat and other requests sent before
                with lease.queue.counted():
                    embedded = await asyncio.to_thread(lease.queue.client.embed, parsed.texts)
            except Exception as exc:
                raise engine_api_error(exc) from None
        finally:
            lease.release()
        data = [{"object": "embedding", "index": i, "embedding": encode_vector(vector, parsed.encoding_format)}
                for i, vector in enumerate(embedded.vectors)]
        return JSONResponse({"object": "list", "data": data, "model": served,
                             "usage": {"prompt_tokens": embedded.prompt_tokens,
                                       "total_tokens": embedded.prompt_tokens}})

    async def rerank(self, request: Request) -> Response:
        """llama-server's /rerank: each document scored for the query by a reranker GGUF (rank pooling), the best
        ``top_n`` first, in Jina's and Cohere's shape (``results: [{index, relevance_score}]``), or TEI's."""
        body = await read_body(request)
        lease = await self._engine_for(body)
        try:
            loaded, served = lease.loaded, lease.served
            if not loaded.details.get("reranker"):
                what = "an embedding model" if loaded.details.get("embedding") else "a chat model"
                raise ApiError(400, f"{served} is not a reranker: it is {what}, and its GGUF declares no rank "
                                    "pooling", param="model", code="not_a_reranker")
            parsed = parse_rerank(body, served_id=served)
            try:  # in its turn, after what the chat and other requests sent before
                with lease.queue.counted():
                    reranked = await asyncio.to_thread(lease.queue.client.rerank, parsed.query, parsed.documents)
            except Exception as exc:
                raise engine_api_error(exc) from None
        finally:
            lease.release()
        best = sorted(range(len(parsed.documents)), key=lambda i: -reranked.scores[i])[:parsed.top_n]
        if parsed.tei:
            return JSONResponse([{"index": i, "score": reranked.scores[i]}
                                 | ({"text": parsed.documents[i]} if parsed.return_documents else {}) for i in best])
        results = [{"index": i, "relevance_score": reranked.scores[i]}
                   | ({"document": {"text": parsed.documents[i]}} if parsed.return_documents else {}) for i in best]
        usage = {"prompt_tokens": reranked.prompt_tokens, "total_tokens": reranked.prompt_tokens}
        return JSONResponse({"model": served, "object": "list", "usage": usage, "results": results})

    async def start_job(self, request: Request, lease: Lease, parsed: GenerationRequest
                        ) -> tuple[Job, Token | Done, asyncio.Task[None]]:
        """Submit a generation to the lease's engine and wait for its first event, so that an engine refusal (a
        prompt longer than the context, a model without tool support) is a proper 400 rather than an error inside
        a 200 stream. The caller owns the job, the watcher that cancels it when the client goes, and the lease."""
        try:
            job = await lease.queue.submit(parsed.messages, parsed.sampling,
                                           self.stream_every_s if parsed.stream else None)
        except Exception as exc:
            raise engine_api_error(exc) from None
        watcher = asyncio.create_task(_cancel_on_disconnect(request, job))
        try:
            return job, await self.next_event(job), watcher
        except BaseException:
            watcher.cancel()
            job.cancel()
            raise

    async def _generate(self, request: Request, lease: Lease, parsed: GenerationRequest, shape: Shape,
                        report: Overflow | None = None, cited: Cited | None = None) -> Response:
        """Answer on the lease's engine; the lease is released once the answer is over (a stream: when it ends).
        ``report``: what an overflow policy did, in the ``quantdesk`` field (a stream's first chunk) and headers;
        ``cited``: the passages of the request's documents, in the same field."""
        try:
            job, first, watcher = await self.start_job(request, lease, parsed)
        except BaseException:
            lease.release()
            raise
        headers = report.headers() if report else None
        if parsed.stream:  # the stream owns the job, the watcher and the lease from here
            return _EventStream(self._stream(job, first, parsed, shape, request, lease, report, cited),
                                _closer(watcher, job, lease), headers)
        try:
            dones: list[Done] = []
            entries: list[list[TokenLogprob]] = []
            for index in range(parsed.n):  # the choices one after the other, on the same engine and lease
                if index:
                    watcher.cancel()
                    job.cancel()
                    job, first, watcher = await self.start_job(request, lease, parsed.choice(index))
                event, logprobs = first, list[TokenLogprob]()
                while not isinstance(event, Done):
                    logprobs.extend(event.logprobs)
                    event = await self.next_event(job)
                dones.append(event)
                entries.append(logprobs)
            whole = shape.whole_choices(dones, entries if parsed.sampling.logprobs >= 0 else None)
            extra = quantdesk_field(report, cited)
            return JSONResponse({**whole, "quantdesk": extra} if extra else whole, headers=headers)
        finally:
            watcher.cancel()
            job.cancel()
            lease.release()

    @staticmethod
    async def next_event(job: Job) -> Token | Done:
        try:
            return await job.next()
        except Exception as exc:
            raise engine_api_error(exc) from None

    async def _stream(self, job: Job, first: Token | Done, parsed: GenerationRequest, shape: Shape,
                      request: Request | None = None, lease: Lease | None = None,
                      report: Overflow | None = None, cited: Cited | None = None) -> AsyncIterator[bytes]:
        """The stream of a request's choices, one after the other, each chunk naming its choice's index; the first
        choice's job is the caller's (it closes it), a later one's is started and closed here. The first chunk
        carries what the overflow policy did (``report``) and the documents' citations (``cited``), as a whole
        response's ``quantdesk`` field."""
        logprobs = parsed.sampling.logprobs >= 0
        extra = quantdesk_field(report, cited)
        dones: list[Done] = []
        for index in range(parsed.n):
            later: tuple[Job, asyncio.Task[None]] | None = None
            try:
                if index:
                    assert request is not None and lease is not None
                    try:
                        job, first, watcher = await self.start_job(request, lease, parsed.choice(index))
                    except ApiError as exc:
                        yield sse(exc.body())
                        return
                    later = job, watcher
                opening = shape.opening(index)
                yield sse({**opening, "quantdesk": extra} if extra and not index else opening)
                event = first
                while not isinstance(event, Done):
                    chunk = shape.piece(event, index, logprobs)
                    if chunk is not None:
                        yield sse(chunk)
                    try:
                        event = await self.next_event(job)
                    except ApiError as exc:  # headers are sent: report in the stream, as OpenAI does
                        yield sse(exc.body())
                        return
                yield sse(shape.closing(event, index))
                dones.append(event)
            finally:
                if later is not None:
                    later[1].cancel()
                    later[0].cancel()
        if parsed.include_usage:
            yield sse(shape.usage_chunk_of(dones))
        yield sse("[DONE]")


async def _api_error(request: Request, exc: ApiError) -> Response:
    return error_response(exc)


async def _http_error(request: Request, exc: HTTPException) -> Response:
    kind = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, "http_error")
    return error_response(ApiError(exc.status_code, str(exc.detail), code=kind))


async def _unexpected_error(request: Request, exc: Exception) -> Response:
    return error_response(engine_api_error(exc))


def create_app(client: ModelPool | EngineClientLike, *, api_key: str | None = None, allowed_hosts: Iterable[str] = (),
               allowed_origins: Iterable[str] = (), max_pending: int = 32, serve_remotes: bool = False,
               pool: ServeSettings | None = None, on_ready: Callable[[OpenAIServer], None] | None = None,
               stream_every_s: float = STREAM_EVERY_S, profile: HardwareProfile | None = None,
               allow_downloads: bool = False, response_store: ResponseStore | None = None,
               overflow: str = DEFAULT_OVERFLOW) -> Starlette:
    """The ASGI app over ``client``: the app's ModelPool (its active model the primary), or an EngineClient with a
    model loaded (the primary, pinned; the caller closes it).

    ``allowed_hosts``: extra names the Host header may carry (loopback names and the address a connection
    arrived on always pass). ``allowed_origins``: web origins allowed to call the API from a browser.
    ``max_pending``: requests running or waiting (per model) beyond which the server answers 503.
    ``serve_remotes``: also serve the models of the user's remote connections (a gateway; app/server/gateway.py).
    ``pool``: on-demand loads of library models, the pool's memory budget, count and idle unload while it serves, load
    anyway (app/server/router.py); its ``serve_remotes`` is set from the argument of that name. ``profile``: the
    machine the fit check plans for (HardwareProfile; by default probed once, when first needed).
    ``stream_every_s``: how often a streamed reply's tokens go out (0: each token in its own chunk).
    ``allow_downloads``: the MCP tools at ``/mcp`` (app/server/mcp.py) include ``pull``.
    ``response_store``: where the Responses API keeps responses (by default, opened at its first use under the user
    data folder, app/server/response_store.py).
    ``overflow``: the overflow policy of a chat request that names none (app/engine/overflow.py).
    """
    settings = pool or ServeSettings()
    settings = dataclasses.replace(settings, serve_remotes=serve_remotes or settings.serve_remotes)
    server = OpenAIServer(client, max_pending=max_pending, pool=settings, stream_every_s=stream_every_s,
                          profile=profile, overflow=overflow)
    responses = ResponsesApi(server, response_store)

    from app.server.mcp import HttpEndpoint, QuantDeskTools  # the MCP SDK, imported when a server is made

    mcp = HttpEndpoint(QuantDeskTools(server.pool, allow_downloads=allow_downloads, overflow=overflow))

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        server.queue.start()
        server.pool.start()
        if on_ready:
            on_ready(server)
        try:
            async with mcp.running():
                yield
        finally:
            await asyncio.to_thread(server.queue.close)
            await asyncio.to_thread(server.pool.close)
            responses.close()
            server.documents.close()

    openai_routes = [("/models", server.models, "GET"), ("/models/{model:path}", server.model, "GET"),
                     ("/chat/completions", server.chat_completions, "POST"),
                     ("/completions", server.completions, "POST"), ("/embeddings", server.embeddings, "POST"),
                     # llama-server's four names of its reranking route (with /v1 and without, as every route here)
                     ("/rerank", server.rerank, "POST"), ("/reranking", server.rerank, "POST"),
                     ("/models/unload", server.unload, "POST"),  # llama-server's router route, for its clients
                     ("/responses", responses.create, "POST"), ("/responses/{response_id}", responses.retrieve, "GET"),
                     ("/responses/{response_id}", responses.delete, "DELETE")]
    # llama-server answers the OpenAI routes without /v1 too, and clients configured with a bare base URL use them
    routes = [Route(prefix + path, endpoint, methods=[method])
              for prefix in ("/v1", "") for path, endpoint, method in openai_routes]
    routes += [Route("/v1/messages", server.messages, methods=["POST"]),
               Route("/v1/messages/count_tokens", server.count_tokens, methods=["POST"]),
               Route("/health", server.health, methods=["GET"]),
               Route("/mcp", mcp.asgi)]  # QuantDesk's own tools over MCP's streamable HTTP (app/server/mcp.py)
    app = Starlette(routes=routes, lifespan=lifespan,
                    middleware=[Middleware(Guard, api_key=api_key, allowed_hosts=allowed_hosts,
                                           allowed_origins=allowed_origins)],
                    # Starlette calls each handler with its key's class, which its ExceptionHandler type (a handler of
                    # any Exception) cannot say: a handler of a subclass is refused by its stubs, not by Starlette.
                    exception_handlers={ApiError: _api_error, HTTPException: _http_error,  # type: ignore[dict-item]
                                        Exception: _unexpected_error})
    app.state.openai = server
    return app
