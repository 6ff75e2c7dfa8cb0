"""Chats that resume instantly: the on-disk cache of the engine's saved states, and the two calls around a reply.

After a reply the engine host writes its KV cache's state with the tokens it holds to a file this cache names
(``save``); before the next reply of that conversation (the Chat reopened, switched back to, the app restarted; a
server request continuing a conversation) the host is offered the files of that conversation's branch and
restores the one whose tokens share the longest prefix with the new prompt (``restore``), so only the rest is
read. The host checks each file's header (model file, runtime, context, KV type, checksum: backends/states.py,
each engine's identity in backends/llama_cpp/states.py and backends/mlx.py) and compares tokens, never names: a
file it refuses is deleted here with a line in the log.

Keys: a conversation's branch in the Chat (``chat_key``: the conversation and one of its messages, so every branch
has its own states), a run of messages for the server (``prefix_keys``: a request that continues a stored
conversation names the state saved after the reply it continues), and the system prompt (``system_key``: a new
chat with the same system prompt starts from a state holding it, the shared prefix cache). A file's name is the
hash of the model's path and the key; one file may have several names (hard links: no second copy on disk).

A model that decodes several conversations at once (llama.cpp's ``parallel`` sequences) keeps one more kind: when a
sequence's cells go to another conversation (its sequence taken, or freed to make room in the shared KV cache), the
engine host first saves that sequence's state to the oldest of ``EVICTED`` files this cache names for the model
(``evicted_keys``; a hard link where the reply's saved state holds it already), and every restore offers them beside
the request's own keys: a returning conversation is served from its evicted sequence by its tokens, whatever its
keys (a raw prompt, a client that sends its history back changed). They are ordinary states, under the same budget.

The cache is bounded (Settings → ``saved_states_mb``): after each save (and each restore that offered the evicted
sequences' files, which the engine writes itself), the least recently used files go until the rest fit. "Used" is
the file's modification time, set when it is written or restored.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from app import paths
from app.datatypes import Loaded, Message, Prompt, SamplingSettings, StateRestored, StateSaved
from app.errors import EngineCrashed, EngineError

log = logging.getLogger(__name__)

SUFFIX = ".qdstate"
BACKENDS = ("llama.cpp", "mlx")  # the engines that save and restore states (the others answer "unavailable")
EVICTED = 8  # the files a model that decodes several sequences keeps its evicted sequences' states in
EVICTING = ("llama.cpp",)  # the engines whose sequences share one KV cache and keep those taken (keep_evicted)


class StateEngine(Protocol):
    """What the calls here need of an engine: EngineClient, or the pool (its active model)."""

    @property
    def loaded(self) -> Loaded | None: ...
    def send_save_state(self, path: str | Path) -> Callable[[], StateSaved]: ...
    def send_restore_state(self, paths: Sequence[str], messages: Prompt, sampling: SamplingSettings | None = None,
                           evict_to: Sequence[str] = ()) -> Callable[[], StateRestored]: ...


@dataclass(frozen=True)
class StateKeys:
    """Where a reply's state comes from and goes: the keys to restore from, most specific first (only files that
    exist are offered, and the engine compares their tokens), the key its state is saved under after the reply,
    and the extra names it gets (the system prompt's)."""

    restore: tuple[str, ...]
    save: str
    aliases: tuple[str, ...] = ()
    # Keys whose states the new one makes redundant: a Chat branch's earlier states (the newest holds their tokens
    # and more; restoring cuts it back to what a prompt shares with it), deleted once it is written.
    supersedes: tuple[str, ...] = ()


def chat_key(conversation_id: int, message_id: int) -> str:
    """A Chat conversation's state after ``message_id`` (a reply): each branch ends in its own messages."""
    return f"chat:{conversation_id}:{message_id}"


def _digest(messages: Sequence[Message]) -> str:
    """The messages as the next request repeats them. The thinking is left out: clients seldom send it back, and
    the template decides whether the model sees it; the engine compares the tokens anyway."""
    h = hashlib.sha256()
    for m in messages:
        h.update(json.dumps([m.role, m.content, list(m.images), [list(c) if isinstance(c, (list, tuple)) else c
                                                                 for c in m.tool_calls], m.tool_call_id, m.name],
                            default=str, ensure_ascii=False).encode("utf-8"))
        h.update(b"\x00")
    return h.hexdigest()


def prefix_keys(messages: Sequence[Message]) -> tuple[str, ...]:
    """A request's conversation and each shorter run of its first messages, longest first: the state saved after
    the reply a request continues is found under one of them."""
    return tuple(f"messages:{_digest(messages[:n])}" for n in range(len(messages), 0, -1))


def system_key(messages: Sequence[Message]) -> str | None:
    """The key of a conversation's system prompt (None without one): chats that start with it share its prefix."""
    return f"system:{_digest(messages[:1])}" if messages and messages[0].role == "system" else None


def evicted_keys() -> tuple[str, ...]:
    """The keys of the files a batching engine keeps the sequences other conversations took in (see the module's
    words); which one it writes next is its choice (the oldest)."""
    return tuple(f"evicted:{n}" for n in range(EVICTED))


def server_keys(messages: Sequence[Message]) -> StateKeys:
    """A server request's keys: the state after its reply is saved under its messages (the request continuing the
    conversation repeats them, then the reply and a new message), so it restores from its shorter prefixes."""
    system = system_key(messages)
    prefixes = prefix_keys(messages)
    return StateKeys(prefixes[1:] + ((system,) if system else ()), prefixes[0], (system,) if system else ())


def chat_keys(conversation_id: int, branch: Sequence[int], reply_id: int, messages: Sequence[Message],
              others: Sequence[int] = ()) -> StateKeys:
    """A Chat reply's keys: the states saved after the messages of its branch (newest first), then after the
    conversation's ``others`` (its other branches' tips: a regenerated reply or an edited message shares their
    prefix), the reply's own after it, and the system prompt's. The branch's own earlier states are superseded."""
    system = system_key(messages)
    mine = tuple(chat_key(conversation_id, m) for m in reversed(branch))
    theirs = tuple(chat_key(conversation_id, m) for m in sorted(set(others) - set(branch) - {reply_id}, reverse=True))
    return StateKeys(mine + theirs + ((system,) if system else ()), chat_key(conversation_id, reply_id),
                     (system,) if system else (), mine)


class StateCache:
    """The saved states under the user cache folder, bounded by ``limit_bytes`` (by default Settings'
    ``saved_states_mb``, read at each save so a change holds at once)."""

    def __init__(self, folder: Path | None = None, limit_bytes: Callable[[], int] | None = None) -> None:
        self.folder = folder if folder is not None else paths.cache_dir() / "states"
        self._limit = limit_bytes or _settings_limit
        self._lock = threading.Lock()

    @property
    def limit_bytes(self) -> int:
        return self._limit()

    def path(self, model_path: str, key: str) -> Path:
        name = hashlib.sha256(f"{model_path}\x00{key}".encode()).hexdigest()[:40]
        return self.folder / f"{name}{SUFFIX}"

    def existing(self, model_path: str, keys: Sequence[str]) -> list[str]:
        """The files saved under ``keys`` for this model, in the keys' order, each once."""
        found: list[str] = []
        seen: set[tuple[int, int]] = set()
        for key in keys:
            path = self.path(model_path, key)
            try:
                stat = path.stat()
            except OSError:
                continue
            if (stat.st_dev, stat.st_ino) not in seen:
                seen.add((stat.st_dev, stat.st_ino))
                found.append(str(path))
        return found

    def used(self, path: str | Path) -> None:
        """A state was restored: it is now the most recently used."""
        try:
            os.utime(path)
        except OSError:
            pass

    def saved(self, path: str | Path, aliases: Sequence[Path] = (), supersedes: Sequence[Path] = ()) -> None:
        """The engine wrote ``path``: name it under ``aliases`` where those have no state yet (hard links, no copy),
        delete the states it ``supersedes``, then make room."""
        for old in supersedes:
            if old != Path(path):
                old.unlink(missing_ok=True)
        for alias in aliases:
            if not alias.exists():
                try:
                    os.link(path, alias)
                except OSError:
                    pass  # a file system without hard links: the state keeps its one name
        self.evict()

    def discard(self, path: str | Path, reason: str) -> None:
        """A state the engine refused: a line in the log, and the file goes (it would be refused again)."""
        log.warning("saved chat state %s discarded: %s", path, reason)
        Path(path).unlink(missing_ok=True)

    def _files(self) -> list[tuple[Path, os.stat_result]]:
        try:
            entries = [p for p in self.folder.iterdir() if p.suffix == SUFFIX]
        except OSError:
            return []
        found = []
        for p in entries:
            try:
                found.append((p, p.stat()))
            except OSError:
                continue
        return found

    def total_bytes(self) -> int:
        """The disk the states take (a file with several names counted once)."""
        return sum({(s.st_dev, s.st_ino): s.st_size for _, s in self._files()}.values())

    def count(self) -> int:
        """How many states are kept (a file with several names counted once)."""
        return len({(s.st_dev, s.st_ino) for _, s in self._files()})

    def evict(self) -> list[Path]:
        """Delete the least recently used states until the rest fit the limit; the names deleted."""
        limit = self.limit_bytes
        with self._lock:
            by_inode: dict[tuple[int, int], list[tuple[Path, os.stat_result]]] = {}
            for p, s in self._files():
                by_inode.setdefault((s.st_dev, s.st_ino), []).append((p, s))
            groups = sorted(by_inode.values(), key=lambda names: names[0][1].st_mtime_ns)
            total = sum(names[0][1].st_size for names in groups)
            gone: list[Path] = []
            for names in groups:
                if total <= limit:
                    break
                for p, _ in names:
                    p.unlink(missing_ok=True)
                    gone.append(p)
                total -= names[0][1].st_size
            return gone

    def clear(self) -> None:
        for p, _ in self._files():
            p.unlink(missing_ok=True)


def _settings_limit() -> int:
    from app import settings

    return settings.load().saved_states_mb * 1024 * 1024


_default: StateCache | None = None
_default_lock = threading.Lock()


def default_cache() -> StateCache:
    """This process's cache of saved states (the Chat's and the server's), under the user cache folder."""
    global _default
    with _default_lock:
        if _default is None or _default.folder != paths.cache_dir() / "states":  # tests move the cache folder
            _default = StateCache()
        return _default


def _supported(engine: Any) -> str | None:
    """The loaded model's path when its engine saves states, else None (a remote model, ExLlama, a test double)."""
    loaded = getattr(engine, "loaded", None)
    if loaded is None or loaded.backend not in BACKENDS or not hasattr(engine, "send_save_state"):
        return None
    return str(loaded.model_path)


def batches(engine: Any) -> bool:
    """Whether the loaded model decodes several conversations at once in sequences of one KV cache, which take each
    other's cells (llama.cpp's; MLX's batch keeps a cache per sequence)."""
    loaded = getattr(engine, "loaded", None)
    return (loaded is not None and loaded.backend in EVICTING
            and int(loaded.details.get("parallel", 1) or 1) > 1)


def send_restore(engine: StateEngine, cache: StateCache, keys: StateKeys | None, messages: Prompt,
                 sampling: SamplingSettings | None = None) -> Callable[[], StateRestored | None] | None:
    """``restore``'s request sent now (ahead of the generation it is for), its answer taken by the call returned;
    None when nothing was sent. To a model that batches it goes with every request (``keys`` None: a raw prompt, or
    a face that keeps no states of its own), offering the evicted sequences' files too and naming where the engine
    keeps the next ones (none while states are off)."""
    model = _supported(engine)
    if model is None:
        return None
    batching = batches(engine)
    if cache.limit_bytes <= 0:
        if not batching:
            return None
        return _sent_restore(engine, cache, [], messages, sampling, [])  # the engine keeps no evicted sequence
    evicted = evicted_keys() if batching else ()
    found = cache.existing(model, [*(keys.restore if keys is not None else ()), *evicted])
    if not batching:
        return _sent_restore(engine, cache, found, messages, sampling, None) if found else None
    return _sent_restore(engine, cache, found, messages, sampling, [str(cache.path(model, k)) for k in evicted])


def _sent_restore(engine: StateEngine, cache: StateCache, found: list[str], messages: Prompt,
                  sampling: SamplingSettings | None, evict_to: list[str] | None) -> Callable[[], StateRestored | None]:
    """The restore request sent (``evict_to`` None: to an engine of one sequence, which keeps no evicted ones)."""
    answer = (engine.send_restore_state(found, messages, sampling) if evict_to is None
              else engine.send_restore_state(found, messages, sampling, evict_to))

    def finish() -> StateRestored | None:
        try:
            restored = answer()
        except EngineCrashed:
            raise
        except EngineError as exc:  # the engine refused the request: the reply reads the conversation as before
            log.warning("saved chat states not restored: %s", exc)
            return None
        for path, reason in restored.discarded:
            cache.discard(path, reason)
        if restored.path:
            cache.used(restored.path)
        if evict_to:
            cache.evict()  # the evicted sequences' files the engine wrote since count against the budget now
        return restored

    return finish


def restore(engine: StateEngine, cache: StateCache, keys: StateKeys, messages: Prompt,
            sampling: SamplingSettings | None = None) -> StateRestored | None:
    """Offer the engine the states saved under ``keys`` for ``messages``; what it restored (None: nothing was
    offered, or the engine cannot). Files it refused are discarded with a log line. An engine that dies raises."""
    finish = send_restore(engine, cache, keys, messages, sampling)
    return finish() if finish is not None else None


def send_save(engine: StateEngine, cache: StateCache, keys: StateKeys) -> Callable[[], StateSaved | None] | None:
    """``save``'s request sent now (right behind the reply whose state it keeps), its answer taken by the call
    returned; None when nothing was sent."""
    model = _supported(engine)
    if model is None or cache.limit_bytes <= 0:
        return None
    path = cache.path(model, keys.save)
    answer = engine.send_save_state(path)

    def finish() -> StateSaved | None:
        try:
            saved = answer()
        except EngineCrashed:
            raise
        except EngineError as exc:  # nothing to save (a cancelled reply), or the disk refused it
            log.warning("the chat's state was not saved: %s", exc)
            return None
        if not saved.path:  # the cache held nothing (a cancelled reply)
            return None
        cache.saved(path, [cache.path(model, a) for a in keys.aliases],
                    [cache.path(model, k) for k in keys.supersedes])
        return saved

    return finish


def save(engine: StateEngine, cache: StateCache, keys: StateKeys) -> StateSaved | None:
    """Have the engine write its state under ``keys.save``; what it wrote (None: states are off, the engine cannot,
    or the write failed, which is logged). An engine that dies raises."""
    finish = send_save(engine, cache, keys)
    return finish() if finish is not None else None


def describe(cache: StateCache) -> dict[str, Any]:
    """The cache's figures for Settings: its folder, how many states, their size and the limit."""
    return {"folder": str(cache.folder), "states": cache.count(), "bytes": cache.total_bytes(),
            "limit_bytes": cache.limit_bytes}
