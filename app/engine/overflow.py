"""The overflow policy: which messages of a conversation go to the model once the whole of it no longer fits the
context with room for the reply. One rule for the Chat, ``quantdesk chat`` and the server (each keeps the whole
conversation and marks what this leaves out, ``app.datatypes.ContextCut``).

It decides from the engine's own count of each candidate prompt (``count_tokens``: the model's template rendered and
tokenized in the engine host, as the generation will read it), never from an estimate, and leaves whole turns out (a
user message and the replies and tool results after it), so a tool call never loses its result. The system prompt
and the newest turn are always sent; "truncate-middle" also keeps the first exchange. A cut never shrinks from one
reply to the next (what was left out stays out) and, once needed, frees a quarter of the room more than the reply
needs, so the prompt's prefix stays the same for a few turns and the engine reuses its KV cache between cuts.

Pinned messages (``keep``) are never left out: a turn that holds one is sent whole, and the turns dropped are the
droppable ones around it. The whole turn rather than the message alone, because a turn is what the rule moves: a
pinned question without its answer would be asked again, a pinned answer without its question reads as nothing, and
a reply's tool calls never go without their results.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from app.datatypes import ContextCut, Done, Message, SamplingSettings
from app.errors import EngineError

if TYPE_CHECKING:
    from app.engine.client import EngineClientLike

NOTE_HEADER = "Summary of the earlier conversation (written when the context was full):"
SUMMARISE_PROMPT = ("You summarise conversations. Summarise the conversation below in a few short sentences: the "
                    "facts, names, numbers, decisions and open questions the rest of the conversation may need. "
                    "Write only the summary.")
EARLIER_SUMMARY = "Earlier summary"


@dataclass(frozen=True)
class Fitted:
    """What to send: the messages, and the cut that made them fit (None: the whole conversation is sent)."""

    messages: list[Message]
    cut: ContextCut | None

    def sampling_for(self, sampling: SamplingSettings) -> SamplingSettings:
        """``sampling`` for these messages: after a cut, the cached turns kept are moved rather than read again
        (SamplingSettings.cache_reuse)."""
        return dataclasses.replace(sampling, cache_reuse=True) if self.cut is not None else sampling


def reply_room(n_ctx: int, max_tokens: int) -> int:
    """The room a reply needs: its max_tokens, up to half the context (as ContextUse.near_full counts it)."""
    return min(max_tokens, n_ctx // 2)


def note_room(n_ctx: int) -> int:
    """The most tokens a compact note may take: an eighth of the context, at least 16 and at most 512."""
    return max(16, min(n_ctx // 8, 512))


def _turns(messages: Sequence[Message], lead: int) -> list[tuple[int, int]]:
    """The conversation after its ``lead`` system messages as turns: [start, end) index ranges, each from a user
    message to the next (what comes before the first user message is a turn of its own)."""
    turns: list[tuple[int, int]] = []
    start = lead
    for i in range(lead + 1, len(messages)):
        if messages[i].role == "user":
            turns.append((start, i))
            start = i
    if start < len(messages):
        turns.append((start, len(messages)))
    return turns


def with_note(messages: Sequence[Message], lead: int, note: str) -> list[Message]:
    """``messages`` with ``note`` in the system prompt (the last of the ``lead`` system messages), or as a system
    message of its own where there is none: one system message first is what every chat template accepts."""
    out = list(messages)
    if not note:
        return out
    text = f"{NOTE_HEADER}\n{note}"
    if lead:
        system = out[lead - 1]
        out[lead - 1] = dataclasses.replace(system, content=f"{system.content}\n\n{text}" if system.content else text)
    else:
        out.insert(0, Message("system", text))
    return out


def fit(engine: EngineClientLike, messages: Sequence[Message], sampling: SamplingSettings, policy: str, n_ctx: int,
        previous: ContextCut | None = None, keep: Collection[int] = ()) -> Fitted:
    """The messages to send under ``policy`` (one of app.datatypes.OVERFLOW_POLICIES), and the cut that made them
    fit. ``previous`` is the conversation's last cut (the same indices: the caller's whole conversation): what it
    left out stays out, and under "compact" its note is folded into the new one. "stop", a context not known, or a
    raw prompt: everything is sent and the engine refuses a prompt that does not fit, with its own sentence.
    An engine that cannot count tokens (a remote server) gets everything, as under "stop". ``keep``: the indices
    of pinned messages; the turns that hold them are always sent (the cut's ``kept`` says which inside its range).
    Raises EngineError (kind "context") when even the system prompt, the pinned turns and the newest turn leave no
    room for the reply."""
    messages = list(messages)
    if policy == "stop" or n_ctx <= 0 or not messages:
        return Fitted(messages, None)
    budget = n_ctx - reply_room(n_ctx, sampling.max_tokens)
    lead = 0
    while lead < len(messages) and messages[lead].role == "system":
        lead += 1
    turns = _turns(messages, lead)
    keep_first = 1 if policy == "truncate-middle" else 0
    pinned = set(keep)
    # the newest turn is always sent, and every turn that holds a pinned message
    droppable = [t for t in turns[keep_first:-1] if not any(t[0] <= i < t[1] for i in pinned)]
    prev = previous if previous is not None and previous.policy == policy else None
    options = _Options(engine, sampling, messages, lead, droppable)
    k_min = _left_out_before(prev, droppable)
    old_note = prev.note if prev is not None and k_min and policy == "compact" else ""
    try:
        first = options.count(k_min, old_note)
    except EngineError as exc:
        if exc.kind == "unavailable":  # an engine that cannot count (a remote server): all is sent, as under stop
            return Fitted(messages, None)
        raise
    if first <= budget:
        if not k_min:
            return Fitted(options.sent(0, old_note), None)
        return Fitted(options.sent(k_min, old_note),
                      _cut(policy, droppable, k_min, old_note, options.count(k_min, old_note)))
    # a new cut: under "compact" room for the note (its header counted by the placeholder)
    room = note_room(n_ctx) if policy == "compact" else 0
    placeholder = "…" if policy == "compact" else ""
    last = len(droppable)
    if options.count(last, placeholder) + room > budget:
        kept = " and ".join((["the system prompt"] if lead else [])
                            + (["the first exchange"] if keep_first and len(turns) > 1 else [])
                            + (["the pinned messages"] if pinned else []))
        raise _no_room(options.count(last, placeholder) + room, kept, n_ctx, budget)
    k = _fewest_left_out(options, k_min, placeholder, room, budget)
    if policy != "compact":
        return Fitted(options.sent(k, ""), _cut(policy, droppable, k, "", options.count(k, "")))
    note = summarise(engine, old_note, [messages[i] for a, b in droppable[k_min:k] for i in range(a, b)], sampling,
                     n_ctx, room)
    # the note came out longer than its room: leave out one turn more; still not: the note is cut (it never goes over
    # its room by more than a few tokens)
    while options.count(k, note) > budget and k < last:
        k += 1
    if options.count(k, note) > budget:
        note = note[: max(len(note) // 2, 1)]
    return Fitted(options.sent(k, note), _cut(policy, droppable, k, note, options.count(k, note)))


@dataclass
class _Options:
    """What is sent when the first ``k`` droppable turns are left out (and a note put in), and its count of tokens,
    each asked of the engine once."""

    engine: EngineClientLike
    sampling: SamplingSettings
    messages: list[Message]
    lead: int  # the system messages at the start
    droppable: list[tuple[int, int]]
    counts: dict[tuple[int, str], int] = dataclasses.field(default_factory=dict)

    def sent(self, k: int, note: str) -> list[Message]:
        out = {i for a, b in self.droppable[:k] for i in range(a, b)}
        return with_note([m for i, m in enumerate(self.messages) if i not in out], self.lead, note)

    def count(self, k: int, note: str) -> int:
        if (k, note) not in self.counts:
            self.counts[k, note] = self.engine.count_tokens(self.sent(k, note), self.sampling)
        return self.counts[k, note]


def _left_out_before(prev: ContextCut | None, droppable: list[tuple[int, int]]) -> int:
    """How many droppable turns the previous cut left out (turns it covered whole): they stay out."""
    k_min = 0
    if prev is not None and prev.dropped:
        end = prev.end
        while k_min < len(droppable) and droppable[k_min][0] >= prev.start and droppable[k_min][1] <= end:
            k_min += 1
    return k_min


def _no_room(tokens: int, kept: str, n_ctx: int, budget: int) -> EngineError:
    """The refusal when even leaving out every droppable turn does not make room for the reply."""
    return EngineError(f"the newest message does not fit the context: {f'with {kept} ' if kept else ''}it is "
                       f"{tokens:,} tokens, and the "
                       f"context of {n_ctx:,} must keep {n_ctx - budget:,} for the reply",
                       "send a shorter message, lower the reply's max tokens or load with a larger context",
                       kind="context")


def _fewest_left_out(options: _Options, k_min: int, placeholder: str, room: int, budget: int) -> int:
    """The fewest droppable turns to leave out (at least ``k_min``, and one) so that what is sent fits: three
    quarters of ``budget`` where leaving out all of them gets there, so the next replies fit too, else ``budget``."""
    def fits(k: int, target: int) -> bool:
        return options.count(k, placeholder) + room <= target

    last = len(options.droppable)
    target = budget - budget // 4 if fits(last, budget - budget // 4) else budget
    lo, hi = max(k_min, 1), last  # the smallest k that fits: fits(hi) holds
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(mid, target):
            hi = mid
        else:
            lo = mid + 1
    return hi


def _cut(policy: str, droppable: list[tuple[int, int]], k: int, note: str, tokens: int) -> ContextCut:
    """The cut that leaves out the first ``k`` droppable turns: one range, the pinned turns inside it ``kept``."""
    start, end = droppable[0][0], droppable[k - 1][1]
    out = {i for a, b in droppable[:k] for i in range(a, b)}
    kept = tuple(i for i in range(start, end) if i not in out)
    return ContextCut(policy, start, len(out), note, tokens, kept)


def transcript_line(message: Message) -> str:
    text = message.content.strip()
    if message.tool_calls:
        names = ", ".join(str(c.get("function", {}).get("name", "")) for c in message.tool_calls)
        text = f"{text} [called {names}]".strip()
    if message.images:
        text = f"[{len(message.images)} image{'s' if len(message.images) != 1 else ''}] {text}".strip()
    role = {"user": "User", "assistant": "Assistant", "tool": f"Tool {message.name}".strip(),
            "system": "System"}.get(message.role, message.role)
    return f"{role}: {text}"


def summarise(engine: EngineClientLike, previous_note: str, dropped: Sequence[Message], sampling: SamplingSettings,
              n_ctx: int, room: int, on_token: Callable[[str], None] | None = None) -> str:
    """The model's own note on ``dropped`` (and the note before it): a generation on the same engine with a
    summarising prompt, at most ``room`` tokens, thinking off, no tools or schema. What it reads is cut to fit the
    context: the oldest messages first, then the middle of what is left."""
    lines = [transcript_line(m) for m in dropped]
    head = [f"{EARLIER_SUMMARY}: {previous_note}"] if previous_note else []
    limit = n_ctx - room - 1
    note_sampling = dataclasses.replace(sampling, max_tokens=room, json_schema=None, json_prefix="", json_suffix="",
                                        tools=(), tool_choice="auto", enable_thinking=False, reasoning_budget=-1)

    def prompt(body: Sequence[str]) -> list[Message]:
        return [Message("system", SUMMARISE_PROMPT), Message("user", "\n".join(body))]

    def fits(body: Sequence[str]) -> bool:
        return engine.count_tokens(prompt(body), note_sampling) <= limit

    lo, hi = 0, len(lines)  # the fewest oldest lines to leave out
    while lo < hi:
        mid = (lo + hi) // 2
        if fits(head + lines[mid:]):
            hi = mid
        else:
            lo = mid + 1
    body = head + lines[lo:]
    while not fits(body):  # even one line is too long: keep its start and end
        text = "\n".join(body)
        if len(text) < 16:
            body = []
            break
        quarter = len(text) // 4
        body = [f"{text[:quarter]} … {text[-quarter:]}"]
    note = []
    for event in engine.generate(prompt(body), note_sampling):
        if isinstance(event, Done):
            return event.text.strip()
        if on_token is not None:
            on_token(event.text)
        note.append(event.text)
    return "".join(note).strip()
