"""A served chat request's turn: the one preamble of chat completions, completions, Anthropic's Messages, the
Responses API and the MCP ``chat`` tool, on app/engine/turn.py's builder.

For the leased model, ``defaults`` reads its preset and recommended sampling (``ModelDefaults``: each parser fills what
a request leaves out from them), and ``prepare`` builds the turn: the preset's system prompt where the request has no
system message of its own, the request's overflow policy (``policy``: the body's ``"quantdesk": {"overflow": …}``, the
``X-QuantDesk-Overflow`` header, else the server's; the preset's is the Chat's and the CLI's, not an API client's, whose
requests are served whole or refused unless it or the server asks otherwise) and its documents' passages, counted by the
answering engine in its turn. What the policy did and what the documents gave go back as ``Overflow`` and
``documents.Cited``, for the response's ``quantdesk`` field and headers (``quantdesk_field``).
"""

from __future__ import annotations

import asyncio
import dataclasses
from typing import TYPE_CHECKING, Any

from app.datatypes import ContextCut
from app.engine.turn import ModelDefaults, Turn, with_system_prompt
from app.errors import EngineError
from app.server.openai_shapes import engine_api_error
from app.server.params import DROPPED_HEADER, OVERFLOW_HEADER, ApiError, GenerationRequest, overflow_choice

if TYPE_CHECKING:
    from app.server.documents import Cited, ServerDocuments
    from app.server.router import Lease


@dataclasses.dataclass(frozen=True)
class Overflow:
    """What a chat request's overflow policy did, as the response reports it: the ``quantdesk`` field and the
    ``X-QuantDesk-Overflow`` / ``X-QuantDesk-Context-Dropped`` headers (0 when everything was sent)."""

    policy: str
    cut: ContextCut | None

    def field(self) -> dict[str, Any]:
        cut = self.cut
        out: dict[str, Any] = {"overflow": self.policy, "context_dropped": cut.dropped if cut else 0}
        if cut is not None:
            out.update(dropped_from=cut.start, mark=cut.words(), prompt_tokens=cut.prompt_tokens)
            if cut.note:
                out["note"] = cut.note
        return out

    def headers(self) -> dict[str, str]:
        return {OVERFLOW_HEADER: self.policy, DROPPED_HEADER: str(self.cut.dropped if self.cut else 0)}


def quantdesk_field(report: Overflow | None, cited: Cited | None) -> dict[str, Any] | None:
    """A response's ``quantdesk`` field: what the overflow policy did and the documents' citations; None: neither."""
    if report is None and cited is None:
        return None
    return {**(report.field() if report else {}), **(cited.field() if cited else {})}


async def defaults(lease: Lease) -> ModelDefaults:
    """The leased model's preset and recommended sampling, read in a worker thread (its header once per file and
    process, the presets file each time): the event loop keeps streaming other replies."""
    return await asyncio.to_thread(ModelDefaults.of, lease.loaded.model_path)


def policy(parsed: GenerationRequest, header: str | None, server: str) -> str:
    """A chat request's overflow policy: its body's, else its header's, else the server's."""
    return parsed.overflow or overflow_choice({}, header) or server


def prepare(lease: Lease, parsed: GenerationRequest, model: ModelDefaults, overflow: str = "stop",
            documents: ServerDocuments | None = None
            ) -> tuple[GenerationRequest, Overflow | None, Cited | None]:
    """The request as its engine reads it (blocking: run it in a worker thread): the preset's system prompt, the
    messages under ``overflow`` (under "stop" as they came, and no report), the passages of the collections it names
    (``documents``: the server's database; None refuses nothing and adds none). A conversation that cannot fit is a
    400 in llama-server's words; a collection that is not there a 400 naming it."""
    if isinstance(parsed.messages, str):  # a completion's raw prompt: its sampling only
        return parsed, None, None
    messages = with_system_prompt(parsed.messages, model.system_prompt())
    names: tuple[str, ...] = ()
    passages = None
    if parsed.documents and documents is not None:
        names, passages = documents.passages(lease, parsed.documents)
    try:
        with lease.queue.counted():  # the engine counts in its turn, after the requests sent before
            prepared = Turn(messages, parsed.sampling, overflow, passages=passages).prepare(
                lease.queue.client, lease.loaded.n_ctx)
    except EngineError as exc:
        if exc.kind == "context":  # even the newest turn leaves no room for the reply: no policy helps
            raise ApiError(400, f"the request exceeds the available context size: {exc}", param="messages",
                           code="context_length_exceeded") from None
        raise engine_api_error(exc) from None
    except ApiError:
        raise
    except Exception as exc:
        raise engine_api_error(exc) from None
    cited = None
    if passages is not None:
        from app.server.documents import Cited

        cited = Cited(names, prepared.found)
    report = Overflow(overflow, prepared.cut) if overflow != "stop" else None
    return dataclasses.replace(parsed, messages=prepared.messages, sampling=prepared.sampling), report, cited
