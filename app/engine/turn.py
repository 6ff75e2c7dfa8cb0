"""One turn of a conversation, the same for the Chat, ``quantdesk chat`` and the server: the engine request built once
and sent once.

Built (``ModelDefaults``, ``Turn``): a value the conversation does not set is the model's preset's, then the model's
own (app/hub/presets.py, app/models/metadata: ``ModelDefaults.sampling`` through app.datatypes.choose_sampling), the
system prompt is the conversation's own else the preset's (``with_system_prompt``), tools are offered in the sampling
(``with_tools``), a message's kept images go as base64 (``encoded_images``), and ``Turn.prepare`` runs the overflow
policy (app/engine/overflow.py) and then the documents' passages (handed in as ``Passages``: app/documents lies above
this home) on the answering engine.

Sent (``send`` → ``Sent``): the conversation's saved state restored ahead of the reply where one continues it, the
reply, its state saved behind it (app/engine/states.py): the three in the engine's queue at once, in that order, their
answers taken once each whatever happens.

The faces: the Chat (app/chats/session.py builds, ui/chat/engine_bridge.py's worker prepares and sends), the server's
four chat entries (server/turns.py: chat completions, Messages, Responses, MCP ``chat``) and its queue
(server/engine_queue.py sends), ``quantdesk chat`` (commands/engine.py). Qt-free.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from app.datatypes import (ChosenSampling, ContextCut, Done, Message, ModelSampling, Prompt, SamplingSettings, Token,
                           choose_sampling)
from app.errors import QuantDeskError

if TYPE_CHECKING:
    from app.engine.client import EngineClientLike
    from app.engine.states import StateCache, StateKeys
    from app.hub.presets import ModelPreset

log = logging.getLogger(__name__)

# A turn's documents step: the messages as they will be sent and their sampling → the messages carrying the
# question's passages, and what was found (app/documents/retrieve.py's Retrieval, or a face's own report of it).
Passages = Callable[[list[Message], SamplingSettings], tuple[list[Message], Any]]


@dataclass(frozen=True)
class ModelDefaults:
    """What a turn takes from its model where the conversation says nothing: the preset the user saved for it
    (``preset``: its sampling, system prompt and overflow policy) and the sampling its file recommends."""

    recommended: ModelSampling | None = None
    preset: ModelPreset | None = None

    @classmethod
    def of(cls, model_path: str | Path | None, *, preset: bool = True) -> ModelDefaults:
        """The model's defaults, read from its file (once per file and process) and the presets file; ``preset``
        False leaves the preset out (``quantdesk chat --no-preset``). Blocking: a server reads it off its loop."""
        if not model_path:
            return cls()
        from app.hub import presets
        from app.models.metadata import model_sampling

        return cls(model_sampling(str(model_path)), presets.for_model(model_path) if preset else None)

    @property
    def preset_sampling(self) -> dict[str, Any] | None:
        """The preset's sampling values (None: no preset), for choose_sampling and the server's parsers."""
        return dict(self.preset.sampling) if self.preset is not None else None

    def sampling(self, wanted: Mapping[str, Any]) -> ChosenSampling:
        """The one order: ``wanted`` (the chat's, the flags', a request's), the preset's, the model's, QuantDesk's."""
        return choose_sampling(dict(wanted), self.recommended, self.preset_sampling)

    def system_prompt(self, own: str | None = None) -> str:
        """The conversation's own system prompt when it has one (None: it set none), else the preset's, else none."""
        if own is not None:
            return own
        return (self.preset.system_prompt or "") if self.preset is not None else ""

    def overflow(self, own: str | None, fallback: str) -> str:
        """The overflow policy: the conversation's own, else the preset's, else ``fallback`` (Settings')."""
        return own or (self.preset.overflow_policy() if self.preset is not None else None) or fallback


def with_system_prompt(messages: Sequence[Message], prompt: str) -> list[Message]:
    """``messages`` with ``prompt`` as their system message first, unless it is empty or they start with their own
    (a request's system message, a Responses request's instructions: theirs win)."""
    out = list(messages)
    if prompt and not (out and out[0].role == "system"):
        out.insert(0, Message("system", prompt))
    return out


def with_tools(sampling: SamplingSettings, tools: Sequence[dict[str, Any]], *, last_step: bool = False
               ) -> SamplingSettings:
    """``sampling`` offering ``tools`` (OpenAI function specs, in the model's own syntax at render time); after
    the last tool step allowed (``last_step``) the model is shown them still (the prompt stays as it was) but held
    to answer in words. No tools: none offered, the choice back to auto."""
    if not tools:
        return dataclasses.replace(sampling, tools=(), tool_choice="auto")
    return dataclasses.replace(sampling, tools=tuple(tools),
                               tool_choice="none" if last_step else sampling.tool_choice)


def encoded_images(images: Iterable[Any]) -> tuple[str, ...]:
    """A stored message's images (each with a ``path``: app/chats/messages) as the engine takes them, base64; one
    whose file is gone is left out (removed from the data folder by hand: the rest of the chat still goes)."""
    from app.images import to_base64

    out = []
    for image in images:
        try:
            out.append(to_base64(Path(image.path).read_bytes()))
        except OSError:
            continue
    return tuple(out)


@dataclass(frozen=True)
class Prepared:
    """What goes to the engine: the messages after the overflow policy and the documents' passages, their sampling,
    the cut that made them fit (None: all sent) and what the documents gave (None: no documents step)."""

    messages: Prompt
    sampling: SamplingSettings
    cut: ContextCut | None = None
    found: Any = None


@dataclass(frozen=True)
class Turn:
    """One reply's request as built: the conversation (the system prompt first, images encoded; a raw prompt for a
    completion), its sampling (tools in it), the overflow policy with the conversation's last cut and the indices of
    its pinned messages, the saved states' keys (None: none; the server's queue names a request's by the messages
    it sends) and the documents step."""

    messages: Prompt
    sampling: SamplingSettings
    policy: str = "stop"
    previous: ContextCut | None = None
    pinned: frozenset[int] = frozenset()
    keys: StateKeys | None = None
    passages: Passages | None = field(default=None, compare=False)

    def prepare(self, engine: EngineClientLike, n_ctx: int) -> Prepared:
        """The overflow policy, then the documents' passages in what it left (both counted by ``engine``, the one
        that answers). Raises EngineError (kind "context") when even the newest turn leaves no room for the reply."""
        messages, sampling, cut, found = self.messages, self.sampling, None, None
        if isinstance(messages, str):
            return Prepared(messages, sampling)
        if self.policy != "stop":
            from app.engine.overflow import fit

            fitted = fit(engine, messages, sampling, self.policy, n_ctx, self.previous, self.pinned)
            messages, sampling, cut = fitted.messages, fitted.sampling_for(sampling), fitted.cut
        if self.passages is not None:
            messages, found = self.passages(list(messages), sampling)
        return Prepared(messages, sampling, cut, found)

    def send(self, engine: EngineClientLike, prepared: Prepared, **options: Any) -> Sent:
        """``prepared`` (this turn's ``prepare``) sent with this turn's saved states: restore → generate → save."""
        return send(engine, prepared.messages, prepared.sampling, self.keys, **options)


_Answer = Callable[[], object]  # a saved-state request's answer, taken once (app/engine/states.py)


class Sent:
    """A turn's requests in the engine's queue: its saved state's restore (or none), the reply's events
    (``stream``), its state's save (or none). Each answer is taken once: ``restored`` before reading the stream,
    ``saved`` after it, ``close`` takes what is left (a reply that failed on the way), its failures dropped."""

    def __init__(self, stream: Iterator[Token | Done], restore: _Answer | None = None,
                 save: _Answer | None = None) -> None:
        self.stream = stream
        self._restore = restore
        self._save = save

    def restored(self) -> None:
        """The restore's answer (a refused state is logged by states); an engine that died raises, as the stream
        would."""
        answer, self._restore = self._restore, None
        if answer is not None:
            answer()

    def saved(self) -> None:
        answer, self._save = self._save, None
        if answer is not None:
            answer()

    def close(self) -> None:
        """The answers not taken yet, taken now; an engine that died is the reply's to report."""
        for take in (self.restored, self.saved):
            try:
                take()
            except QuantDeskError:
                pass

    def events(self) -> Iterator[Token | Done]:
        """restore's answer, the reply's events, save's answer; what is left taken however it ends."""
        try:
            self.restored()
            yield from self.stream
            self.saved()
        finally:
            self.close()


def _valid(sampling: SamplingSettings) -> bool:
    try:
        sampling.validate()
    except ValueError:
        return False
    return True


def send(engine: EngineClientLike, messages: Prompt, sampling: SamplingSettings, keys: StateKeys | None, *,
         request_id: str | None = None, cache: StateCache | None = None, **options: Any) -> Sent:
    """restore → generate → save, sent at once in that order (a request slipping between them costs only the reuse:
    the engine compares tokens). ``keys``: the conversation's saved states (None: none restored or saved; a raw
    prompt never has any; to a model that batches a restore goes anyway, for the sequences other conversations
    took: app/engine/states.py); ``options``: the generation's own (``on_wait``, ``events_every_s``). A request
    generate refuses (invalid sampling) gets no restore ahead of it: its refusal is in its own words. Raises what
    generate raises, with the restore's answer taken."""
    from app.engine import states

    if isinstance(messages, str) or not messages:
        keys = None
    batching = bool(messages) and states.batches(engine)
    cache = cache if cache is not None or (keys is None and not batching) else states.default_cache()
    restore = save = None
    if (keys is not None or batching) and cache is not None and _valid(sampling):
        restore = states.send_restore(engine, cache, keys, messages, sampling)
    try:
        stream = engine.generate(messages, sampling, request_id=request_id, **options)
    except BaseException:
        Sent(iter(()), restore).close()
        raise
    if keys is not None and cache is not None:
        try:
            save = states.send_save(engine, cache, keys)  # nothing, for a stopped reply
        except QuantDeskError:
            pass  # the engine died: the reply's stream says so
    return Sent(stream, restore, save)
