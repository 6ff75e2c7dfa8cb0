"""A remote engine: any OpenAI-compatible server (llama-server, vLLM, SGLang, TGI, LM Studio, another QuantDesk)
behind the same Backend interface as a local model, so the Chat, the Lab and the local server treat it as one more
engine: the shared ``generate`` loop measures TTFT and decode tok/s here, at the client, and the server's own
figures (``usage``, llama.cpp-style ``timings``) are kept beside them, labelled.

The HTTP client is httpx, not the ``openai`` package: httpx already comes with huggingface_hub, it hands us the raw
server-sent events (so the ``timings`` that llama-server and QuantDesk add are not dropped), it never retries on its
own (a 429 with Retry-After reaches the user as a sentence instead of a silent wait), and a stream can be closed from
another thread the moment the user presses Stop.

Nothing here imports the app: the connection (URL, key, CA file, timeouts) arrives as an ``Endpoint`` built by
``app.remote``, through the engine host's load request, never through argv or the environment.
"""

from __future__ import annotations

import json
import math
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, replace
from typing import TYPE_CHECKING, Any

from app.records import from_known
from app.datatypes import (MAX_TOP_LOGPROBS, Done, Loaded, LoadSettings, Prompt, SamplingSettings, Scored, Token,
                           TokenLogprob, TopLogprob)
from backends.base import Availability, Backend, GenerationError, ReasoningText

if TYPE_CHECKING:
    import httpx

DEFAULT_TIMEOUT_S = 10.0  # connecting, and each answer that is not a stream
DEFAULT_STALL_S = 60.0  # a stream that sends nothing for this long is given up (a long prefill sends nothing)
_POLL_S = 0.05  # how often a waiting stream looks at the cancel flag
_UNBOUNDED = 1_000_000  # the shared loop's token limit while the server applies the real one
_ERROR_BODY_BYTES = 2000

# Servers that take llama.cpp's sampling extras by these names; for the rest only OpenAI's own fields are sent
# (OpenAI itself answers 400 to a field it does not know).
_LLAMA_EXTRAS = {"top_k": "top_k", "min_p": "min_p", "repeat_penalty": "repeat_penalty"}
SAMPLING_EXTRAS: dict[str, dict[str, str]] = {
    "quantdesk": _LLAMA_EXTRAS,
    "llama.cpp": _LLAMA_EXTRAS,
    "vllm": {"top_k": "top_k", "min_p": "min_p", "repeat_penalty": "repetition_penalty"},
}


@dataclass(frozen=True)
class Endpoint:
    """Where a remote model lives and how to reach it. ``api_key`` is never printed: see ``__repr__``."""

    base_url: str  # ends in /v1 (or whatever prefix the server puts before /chat/completions)
    model: str = ""
    api_key: str = ""
    ca_file: str = ""  # a CA bundle to trust besides the system's; TLS is always verified
    timeout_s: float = DEFAULT_TIMEOUT_S
    stall_s: float = DEFAULT_STALL_S
    name: str = ""  # the connection's name, for sentences

    def __repr__(self) -> str:  # keeps the key out of tracebacks, logs and reprs of requests
        key = "set" if self.api_key else "none"
        return f"Endpoint(name={self.name!r}, base_url={self.base_url!r}, model={self.model!r}, key={key})"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Endpoint:
        return from_known(cls, data)

    @property
    def label(self) -> str:
        return self.name or self.base_url


@dataclass(frozen=True)
class RemoteModel:
    id: str
    owned_by: str = ""
    n_ctx: int | None = None  # what the server says its context is, where it says


@dataclass(frozen=True)
class ServerInfo:
    """What ``GET /models`` told us: the models, the kind of server, and how long the answer took."""

    models: tuple[RemoteModel, ...]
    kind: str  # quantdesk | llama.cpp | vllm | openai-compatible
    latency_ms: float

    def model(self, model_id: str) -> RemoteModel | None:
        return next((m for m in self.models if m.id == model_id), None)


# --- HTTP -------------------------------------------------------------------------------------------


def _client(endpoint: Endpoint, *, read_timeout: float | None = None) -> httpx.Client:
    import httpx

    verify: Any = True
    if endpoint.ca_file:
        import ssl

        try:
            verify = ssl.create_default_context(cafile=endpoint.ca_file)
        except (OSError, ssl.SSLError) as exc:
            raise GenerationError("connection",
                                  f"{endpoint.label}: the CA file {endpoint.ca_file} cannot be used: {exc}",
                                  "pick a PEM file with the server's CA certificate") from None
    headers = {"Authorization": f"Bearer {endpoint.api_key}"} if endpoint.api_key else {}
    timeout = httpx.Timeout(endpoint.timeout_s, read=endpoint.timeout_s if read_timeout is None else read_timeout)
    return httpx.Client(base_url=endpoint.base_url.rstrip("/") + "/", headers=headers, timeout=timeout,
                        verify=verify, follow_redirects=False, trust_env=False)


def describe_transport_error(endpoint: Endpoint, exc: Exception) -> GenerationError:
    """A failure before any answer (refused, unknown host, TLS, timeout) as a sentence."""
    import httpx

    where = endpoint.base_url
    text = str(exc)
    if isinstance(exc, httpx.ConnectTimeout):
        return GenerationError("connection",
                               f"{endpoint.label}: no answer from {where} within {endpoint.timeout_s:g} s",
                               "check the address and that the server is running and reachable")
    if isinstance(exc, httpx.ConnectError):
        low = text.lower()
        if "certificate" in low or "ssl" in low or "tls" in low:
            return GenerationError("tls", f"{endpoint.label}: the TLS certificate of {where} could not be verified "
                                          f"({text})",
                                   "if the server uses its own CA, add that CA file to the connection; "
                                   "QuantDesk never turns verification off")
        if "name or service not known" in low or "nodename nor servname" in low or "getaddrinfo" in low:
            return GenerationError("connection", f"{endpoint.label}: the host of {where} is unknown ({text})",
                                   "check the address")
        return GenerationError("connection", f"{endpoint.label}: could not connect to {where} ({text})",
                               "is the server running? Start it, or check the address and port")
    if isinstance(exc, httpx.TimeoutException):
        return GenerationError("connection",
                               f"{endpoint.label}: {where} did not answer within {endpoint.timeout_s:g} s")
    return GenerationError("connection", f"{endpoint.label}: the connection to {where} failed ({type(exc).__name__}: "
                                         f"{text})")


def _json(data: bytes | str) -> Any:
    """A server's JSON; ValueError for anything unreadable, also for nesting deeper than Python's stack (which
    json reports as RecursionError)."""
    try:
        return json.loads(data)
    except RecursionError:
        raise ValueError("JSON nested too deeply") from None


def _count(value: Any) -> int | None:
    """A token count or a context length from a server: a whole number >= 0, else None (not a bool, not text)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _choices(payload: Any) -> list[dict[str, Any]]:
    """The choices of an answer or a stream chunk; what is not an object is left out."""
    found = payload.get("choices") if isinstance(payload, dict) else None
    return [c for c in found if isinstance(c, dict)] if isinstance(found, list) else []


def _logprob(value: Any) -> float | None:
    """A token's log-probability from a server: a finite number, else None (a JSON integer may be huge)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _token_text(entry: dict[str, Any]) -> tuple[str, tuple[int, ...]] | None:
    """An entry's token text and bytes (the bytes a server sends when they are a byte list, else the text's)."""
    token = entry.get("token")
    if not isinstance(token, str):
        return None
    raw = entry.get("bytes")
    if isinstance(raw, list) and len(raw) <= 256 and all(isinstance(b, int) and 0 <= b < 256 for b in raw):
        return token, tuple(raw)
    return token, tuple(token.encode("utf-8"))


def _logprob_entries(logprobs: Any) -> list[TokenLogprob] | None:
    """A stream chunk's ``logprobs`` as entries: the chat shape's ``content`` list (also llama-server's completions),
    or the completions API's parallel lists; None where the chunk carries none, and what is malformed left out."""
    if not isinstance(logprobs, dict):
        return None
    entries: list[TokenLogprob] = []
    content = logprobs.get("content")
    if isinstance(content, list):
        for entry in content[:4096]:
            spelled = _token_text(entry) if isinstance(entry, dict) else None
            value = _logprob(entry.get("logprob")) if spelled is not None else None
            if spelled is None or value is None:
                continue
            tops = entry.get("top_logprobs")
            top: list[TopLogprob] = []
            for alternative in tops[:MAX_TOP_LOGPROBS] if isinstance(tops, list) else ():
                named = _token_text(alternative) if isinstance(alternative, dict) else None
                score = _logprob(alternative.get("logprob")) if named is not None else None
                if named is not None and score is not None:
                    top.append(TopLogprob(-1, named[0], score, named[1]))
            entries.append(TokenLogprob(-1, spelled[0], value, spelled[1], tuple(top)))
        return entries
    tokens, values, tops = logprobs.get("tokens"), logprobs.get("token_logprobs"), logprobs.get("top_logprobs")
    if not isinstance(tokens, list) or not isinstance(values, list):
        return None
    for i, (token, value) in enumerate(zip(tokens[:4096], values, strict=False)):
        score = _logprob(value)
        if not isinstance(token, str) or score is None:
            continue
        alternatives = tops[i] if isinstance(tops, list) and i < len(tops) and isinstance(tops[i], dict) else {}
        scored = [(t, _logprob(v)) for t, v in list(alternatives.items())[:MAX_TOP_LOGPROBS] if isinstance(t, str)]
        entries.append(TokenLogprob(-1, token, score, tuple(token.encode("utf-8")),
                                    tuple(TopLogprob(-1, t, v, tuple(t.encode("utf-8"))) for t, v in scored
                                          if v is not None)))
    return entries


def _server_message(body: bytes) -> str:
    """The message inside an error body (OpenAI's ``{"error": {"message"}}``, FastAPI's ``detail``), else the text."""
    text = body[:_ERROR_BODY_BYTES].decode("utf-8", "replace").strip()
    try:
        data = _json(text)
    except ValueError:
        return text[:300]
    if isinstance(data, dict):
        error = data.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])[:300]
        if isinstance(error, str):
            return error[:300]
        if data.get("detail"):
            return str(data["detail"])[:300]
        if data.get("message"):
            return str(data["message"])[:300]
    return text[:300]


def describe_status(endpoint: Endpoint, status: int, body: bytes, headers: dict[str, str],
                    served: tuple[str, ...] = ()) -> GenerationError:
    """An HTTP error answer as a sentence; the server's own message is quoted (it never holds our key)."""
    said = _server_message(body)
    quoted = f": {said}" if said else ""
    if status in (401, 403):
        hint = "set the connection's API key" if not endpoint.api_key else "check the connection's API key"
        what = "asks for an API key" if status == 401 and not endpoint.api_key else "refused the API key"
        return GenerationError("auth", f"{endpoint.label} {what} ({status}{quoted})", hint)
    if status == 404:
        others = f" (it serves: {', '.join(served[:8])})" if served else ""
        return GenerationError("model", f"{endpoint.label} does not serve the model {endpoint.model!r}{others}"
                                        f" ({status}{quoted})", "pick one of the models the server lists")
    if status == 429:
        retry = headers.get("retry-after", "").strip()
        when = f"; it asks to retry after {retry} s" if retry else ""
        return GenerationError("busy", f"{endpoint.label} is busy (429{quoted}){when}", "try again in a moment")
    if status >= 500:
        return GenerationError("server", f"{endpoint.label} failed with {status}{quoted}",
                               "the server's own log says more")
    return GenerationError("request", f"{endpoint.label} refused the request ({status}{quoted})")


def _models_from(data: Any) -> tuple[tuple[RemoteModel, ...], str]:
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise ValueError("not an OpenAI model list")
    models, owners = [], set()
    for item in data["data"]:
        if not isinstance(item, dict) or not isinstance(item.get("id"), str):
            continue
        owned_by = str(item.get("owned_by") or "")
        owners.add(owned_by.lower())
        raw_meta = item.get("meta")
        meta = raw_meta if isinstance(raw_meta, dict) else {}
        n_ctx = _count(item.get("max_model_len") or meta.get("n_ctx") or meta.get("n_ctx_train"))
        models.append(RemoteModel(item["id"], owned_by, n_ctx or None))
    kind = "openai-compatible"
    if "quantdesk" in owners:
        kind = "quantdesk"
    elif "vllm" in owners:
        kind = "vllm"
    elif "llamacpp" in owners or "me" in owners:  # llama-server; llama-cpp-python's server says "me"
        kind = "llama.cpp"
    return tuple(models), kind


def list_models(endpoint: Endpoint) -> ServerInfo:
    """``GET /models``: what the endpoint serves, which kind of server it is, and the round trip in ms."""
    import httpx

    t0 = time.perf_counter()
    try:
        with _client(endpoint) as client:
            response = client.get("models")
    except httpx.HTTPError as exc:
        raise describe_transport_error(endpoint, exc) from None
    latency = (time.perf_counter() - t0) * 1000
    if response.status_code != 200:
        raise describe_status(endpoint, response.status_code, response.content, dict(response.headers))
    try:
        models, kind = _models_from(_json(response.content))
    except ValueError:
        raise GenerationError("protocol", f"{endpoint.label}: {endpoint.base_url}/models did not answer with an "
                                          "OpenAI model list", "is this the server's /v1 address?") from None
    return ServerInfo(models, kind, latency)


# --- streaming --------------------------------------------------------------------------------------


_END = object()


def _as_chunk(whole: Any) -> dict[str, Any]:
    """A whole (not streamed) completion in the shape of one stream chunk: the reply arrives as one piece."""
    if not isinstance(whole, dict):
        raise ValueError("not a JSON object")
    choices = []
    for choice in _choices(whole):
        message = choice.get("message")
        text = message.get("content") if isinstance(message, dict) else choice.get("text")
        choices.append({"index": 0, "delta": {"content": text}, "text": text,
                        "finish_reason": choice.get("finish_reason")})
    return {"choices": choices, "usage": whole.get("usage"), "timings": whole.get("timings")}


class _Stream:
    """One streamed chat completion, read on its own thread so that a Stop closes it at once and a stalled server
    is noticed: ``events()`` yields each parsed SSE payload and checks ``cancelled`` every few milliseconds."""

    def __init__(self, endpoint: Endpoint, path: str, body: dict[str, Any],
                 served: Callable[[], tuple[str, ...]]) -> None:
        self._endpoint = endpoint
        self._path = path
        self._body = body
        self._served = served
        self._queue: queue.Queue[Any] = queue.Queue()
        self._client: httpx.Client | None = None
        self._response: httpx.Response | None = None
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._read, name="remote-stream", daemon=True)

    def _read(self) -> None:
        import httpx

        endpoint = self._endpoint
        try:
            self._client = client = _client(endpoint, read_timeout=endpoint.stall_s)
            with client.stream("POST", self._path, json=self._body) as response:
                self._response = response
                if response.status_code != 200:
                    body = response.read()
                    served = self._served() if response.status_code == 404 else ()
                    self._queue.put(describe_status(endpoint, response.status_code, body, dict(response.headers),
                                                    served))
                    return
                if response.headers.get("content-type", "").startswith("application/json"):
                    self._queue.put(_as_chunk(_json(response.read())))  # a server that does not stream
                    return
                finished = False  # a finish_reason arrived: a missing [DONE] after it loses nothing
                for line in response.iter_lines():
                    if not line.startswith("data:"):
                        continue  # comments, event names, keep-alives
                    data = line[5:].strip()
                    if data == "[DONE]":
                        return
                    try:
                        payload = _json(data)
                    except ValueError:
                        payload = None
                    if not isinstance(payload, dict):
                        self._queue.put(GenerationError("protocol", f"{endpoint.label} sent an unreadable event: "
                                                                    f"{data[:120]!r}"))
                        return
                    finished = finished or any(c.get("finish_reason") for c in _choices(payload))
                    self._queue.put(payload)
            if not finished:
                self._queue.put(GenerationError("stream", f"{endpoint.label} ended the reply without finishing it",
                                                "the server may have restarted; the reply so far is kept"))
        except ValueError:
            self._queue.put(GenerationError("protocol", f"{endpoint.label} answered with unreadable JSON"))
        except httpx.ReadTimeout:
            self._queue.put(GenerationError("stalled", f"{endpoint.label} sent nothing for {endpoint.stall_s:g} s, "
                                                       "so the reply was given up",
                                            "the server may be overloaded; a longer stall limit can be set on the "
                                            "connection"))
        except (httpx.RemoteProtocolError, httpx.ReadError):
            if not self._closed.is_set():
                self._queue.put(GenerationError("stream", f"{endpoint.label} closed the connection in the middle of "
                                                          "the reply", "the server may have stopped or restarted; "
                                                                       "the reply so far is kept"))
        except httpx.HTTPError as exc:
            if not self._closed.is_set():
                self._queue.put(describe_transport_error(endpoint, exc))
        except GenerationError as exc:
            self._queue.put(exc)
        finally:
            self._queue.put(_END)

    def events(self, cancelled: threading.Event | None) -> Iterator[dict[str, Any]]:
        self._thread.start()
        try:
            while True:
                try:
                    item = self._queue.get(timeout=_POLL_S)
                except queue.Empty:
                    if cancelled is not None and cancelled.is_set():
                        return
                    continue
                if item is _END:
                    return
                if isinstance(item, GenerationError):
                    raise item
                yield item
        finally:
            self.close()

    def close(self) -> None:
        """Stop reading: the server sees the connection close and stops generating.

        The reader thread may be blocked in recv() on the socket; closing a socket from another thread does not
        wake it on Linux (and the connection stays open until it returns), so the socket is shut down first."""
        self._closed.set()
        stream = self._response.extensions.get("network_stream") if self._response is not None else None
        sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:  # already closed by the server
                pass
        for closable in (self._response, self._client):
            if closable is not None:
                try:
                    closable.close()
                except Exception:  # closing from this thread while the reader is inside it: it ends either way
                    pass


class RemoteBackend(Backend):
    """A model served by an OpenAI-compatible endpoint. ``load`` checks that the endpoint answers and serves the
    model; each generation is one streamed ``/chat/completions`` (``/completions`` for a raw prompt)."""

    name = "remote"
    formats = ("remote",)
    structured_output = True  # forwarded as response_format: the remote server holds the reply to the schema
    # asked of the server and passed on as it gives them (OpenAI's shapes, llama-server's); a server that gives
    # none fails the request in words at its first text
    reports_logprobs = True
    # Every piece goes out as it arrives: a network stream can stall at any moment, and a piece held back for
    # the next one would wait out the stall (a local engine's next token is never more than a token away).
    COALESCE_S = 0.0

    def __init__(self, endpoint: dict[str, Any] | Endpoint | None = None) -> None:
        self.endpoint = endpoint if isinstance(endpoint, Endpoint) or endpoint is None else Endpoint.from_dict(endpoint)
        self.server: ServerInfo | None = None
        self._cancelled: threading.Event | None = None
        self._server_stats: dict[str, Any] = {}
        self._completion_tokens: int | None = None
        self._max_tokens = SamplingSettings.max_tokens
        self._finish_reason = ""

    @classmethod
    def probe(cls) -> Availability:
        import importlib.util

        if importlib.util.find_spec("httpx") is None:
            return Availability.no("httpx is not installed", "pip install httpx")
        return Availability.ok()

    def load(self, model_path: str, settings: LoadSettings,
             on_progress: Callable[[float], None] | None = None) -> Loaded:
        if self.endpoint is None:
            raise GenerationError("load", "no endpoint was given for the remote model")
        t0 = time.perf_counter()
        info = list_models(self.endpoint)
        served = info.model(self.endpoint.model)
        if served is None:
            names = ", ".join(m.id for m in info.models[:8]) or "nothing"
            raise GenerationError("model", f"{self.endpoint.label} does not serve the model {self.endpoint.model!r} "
                                           f"(it serves: {names})", "pick one of the models the server lists")
        self.server = info
        n_ctx = served.n_ctx or settings.n_ctx
        if on_progress:
            on_progress(1.0)
        return Loaded(backend=self.name, model_path=model_path, n_ctx=n_ctx, n_layers=0, gpu_layers=0,
                      gpu_offload_supported=False, memory_bytes={}, load_ms=(time.perf_counter() - t0) * 1000,
                      details={"endpoint": self.endpoint.base_url, "connection": self.endpoint.name,
                               "model": served.id, "server_kind": info.kind, "latency_ms": round(info.latency_ms, 1),
                               "context_from": "server" if served.n_ctx else "settings"})

    def memory_in_use(self) -> dict[str, int]:
        return {}  # the model's memory is on another machine

    def peak_memory_bytes(self) -> int:
        return 0

    def no_logits_reason(self) -> str:
        return ("n/a: an OpenAI-compatible endpoint returns at most the top few log-probabilities of tokens it chose "
                "itself, never whole next-token distributions")

    def score(self, request_id: str, *, text: str | None = None, tokens: Sequence[int] | None = None,
              max_tokens: int | None = None) -> Scored:
        """Perplexity's input from the server itself: ``/completions`` with ``echo`` and ``logprobs`` gives the
        log-probability of each token of ``text`` as the server tokenized it (vLLM, and llama-cpp-python's server
        started with logits_all, answer this). Scoring given token ids or asking for whole distributions (KL) cannot
        be done remotely."""
        if self.endpoint is None or self.server is None:
            raise GenerationError("state", "no model is loaded")
        if text is None or tokens is not None:
            raise GenerationError("unavailable", self.no_logits_reason())
        import httpx

        endpoint = self.endpoint
        t0 = time.perf_counter()
        if max_tokens is not None:  # the server tokenizes: send about enough text (English runs ~4 characters a token)
            text = text[: max_tokens * 4]
        body = {"model": endpoint.model, "prompt": text, "max_tokens": 1, "echo": True, "logprobs": 1,
                "temperature": 0.0}
        try:
            with _client(endpoint, read_timeout=endpoint.stall_s) as client:
                response = client.post("completions", json=body)
        except httpx.HTTPError as exc:
            raise describe_transport_error(endpoint, exc) from None
        if response.status_code != 200:
            error = describe_status(endpoint, response.status_code, response.content, dict(response.headers))
            raise GenerationError("unavailable", f"n/a: {endpoint.label} returned no prompt log-probabilities "
                                                 f"({error.message})")
        try:
            logprobs = _json(response.content)["choices"][0]["logprobs"]
            offsets, values = logprobs["text_offset"], logprobs["token_logprobs"]
            if not (isinstance(offsets, list) and isinstance(values, list)):
                raise TypeError("not lists")
        except (ValueError, KeyError, IndexError, TypeError):
            raise GenerationError("unavailable", f"n/a: {endpoint.label} returned no prompt log-probabilities "
                                                 "(its answer has no echoed logprobs)") from None
        # The echo holds the prompt's tokens and then the one generated token; the first token has no value.
        prompt = [v for offset, v in zip(offsets, values, strict=False) if _count(offset) is not None
                  and offset < len(text)]
        scored = [v for v in map(_logprob, prompt[1:]) if v is not None]
        if max_tokens is not None:
            scored = scored[: max(max_tokens - 1, 0)]
        if len(scored) < 1:
            raise GenerationError("unavailable", f"n/a: {endpoint.label} returned no prompt log-probabilities")
        return Scored(request_id, [], scored, 0, (time.perf_counter() - t0) * 1000)

    def _body(self, messages: Prompt, sampling: SamplingSettings) -> tuple[str, dict[str, Any]]:
        assert self.endpoint is not None and self.server is not None
        max_tokens = self._max_tokens
        served = self.server.model(self.endpoint.model)
        if served is not None and served.n_ctx:
            max_tokens = min(max_tokens, served.n_ctx)  # no reply outgrows the context; some servers refuse more
        body: dict[str, Any] = {
            "model": self.endpoint.model, "stream": True, "stream_options": {"include_usage": True},
            "temperature": sampling.temperature, "top_p": sampling.top_p, "max_tokens": max_tokens,
        }
        if sampling.seed is not None:
            body["seed"] = sampling.seed
        if sampling.stop:
            body["stop"] = list(sampling.stop)
        if sampling.json_schema is not None:
            if sampling.json_prefix or sampling.json_suffix:  # a forced tool call in a local model's own syntax
                raise GenerationError("request", "a remote model cannot be held to a local tool-call syntax")
            # The server's own constrained decoding (llama-server, vLLM and OpenAI take OpenAI's response_format).
            body["response_format"] = {"type": "json_schema",
                                       "json_schema": {"name": "reply", "schema": sampling.json_schema, "strict": True}}
        for ours, theirs in SAMPLING_EXTRAS.get(self.server.kind, {}).items():
            body[theirs] = getattr(sampling, ours)
        # Thinking controls only when asked for: OpenAI-compatible servers differ in what extra fields they accept.
        kwargs = dict(sampling.chat_template_kwargs)
        if sampling.enable_thinking is not None:
            kwargs.setdefault("enable_thinking", sampling.enable_thinking)
        if kwargs:
            body["chat_template_kwargs"] = kwargs
        if sampling.reasoning_effort:
            body["reasoning_effort"] = sampling.reasoning_effort
        if sampling.reasoning_budget >= 0:
            body["reasoning_budget_tokens"] = sampling.reasoning_budget  # llama-server's name
        if isinstance(messages, str):
            if sampling.logprobs >= 0:
                body["logprobs"] = sampling.logprobs
            return "completions", {**body, "prompt": messages}
        if sampling.logprobs >= 0:
            body.update(logprobs=True, top_logprobs=sampling.logprobs)
        return "chat/completions", {**body, "messages": [{"role": m.role, "content": m.content} for m in messages]}

    def _stream(self, messages: Prompt, sampling: SamplingSettings) -> Iterator[str]:
        if self.endpoint is None or self.server is None:
            raise GenerationError("state", "no model is loaded")
        endpoint = self.endpoint
        path, body = self._body(messages, sampling)
        chat = path == "chat/completions"
        self._server_stats, self._completion_tokens = {}, None
        stream = _Stream(endpoint, path, body, lambda: tuple(m.id for m in list_models(endpoint).models))
        self.mark_prefill_start()
        for payload in stream.events(self._cancelled):
            self._note_usage(payload)
            for choice in _choices(payload):
                reason = choice.get("finish_reason")
                self._finish_reason = reason if isinstance(reason, str) and reason else self._finish_reason
                delta = choice.get("delta")
                if chat and isinstance(delta, dict):
                    # a thinking model's reasoning, under llama-server's and DeepSeek's name or vLLM's / Ollama's
                    thought = delta.get("reasoning_content") or delta.get("reasoning")
                    if isinstance(thought, str) and thought:
                        yield ReasoningText(thought)
                part = (delta.get("content") if isinstance(delta, dict) else None) if chat else choice.get("text")
                if sampling.logprobs >= 0:
                    entries = _logprob_entries(choice.get("logprobs"))
                    if entries is None and isinstance(part, str) and part:
                        raise GenerationError("request", f"the remote server ({self.server.kind or 'unknown kind'}) "
                                                         "gives no log-probabilities for this model",
                                              "ask without logprobs")
                    self.reply.logprobs.extend(entries or ())
                if isinstance(part, str) and part:
                    yield part

    def _note_usage(self, payload: dict[str, Any]) -> None:
        usage = payload.get("usage")
        if isinstance(usage, dict):
            if (prompt_tokens := _count(usage.get("prompt_tokens"))) is not None:
                self.reply.prompt_tokens = prompt_tokens
            details = usage.get("prompt_tokens_details")  # OpenAI's and llama-server's: what its KV cache held
            if isinstance(details, dict) and (cached := _count(details.get("cached_tokens"))) is not None:
                self.reply.cached_tokens = cached
            if (completion_tokens := _count(usage.get("completion_tokens"))) is not None:
                self._completion_tokens = completion_tokens
        timings = payload.get("timings")
        if isinstance(timings, dict):
            self._server_stats = {k: v for k, v in timings.items()
                                  if isinstance(v, int | float) and not isinstance(v, bool)}

    def generate(self, request_id: str, messages: Prompt, sampling: SamplingSettings,
                 cancelled: threading.Event, events_every_s: float | None = None) -> Iterator[Token | Done]:
        """The shared loop, with the server's own counts and timings folded into the Done.

        The server stops at ``max_tokens`` itself; the loop here is not told the limit, because a chunk may carry
        several tokens (counting chunks would stop early) and the last events, which a loop stopping early would
        never read, carry the server's ``usage`` and ``timings``."""
        self._cancelled = cancelled
        self._max_tokens = sampling.max_tokens
        self._finish_reason = ""
        try:
            for event in super().generate(request_id, messages, replace(sampling, max_tokens=_UNBOUNDED), cancelled,
                                         events_every_s):
                if isinstance(event, Done):
                    stats = event.stats
                    if self._completion_tokens is not None and stats.stop_reason != "cancelled":
                        stats = replace(stats, generated_tokens=self._completion_tokens)
                    if stats.stop_reason == "eos" and self._finish_reason == "length":
                        stats = replace(stats, stop_reason="length")
                    event = replace(event, stats=replace(stats, server=dict(self._server_stats) or None))
                yield event
        finally:
            self._cancelled = None

    def unload(self) -> None:
        self.server = None
