"""The requests one engine host process has been sent and not finished, oldest first, and which of them each event
the host writes belongs to (app/engine/client.py's reader thread hands it over; the thread that made the request takes
it). The host serves them in that order, several generations at once where its model batches them."""

from __future__ import annotations

import collections
import queue
import subprocess
import threading
from collections.abc import Callable
from typing import Any

from app.datatypes import Done, GenerationStats
from app.engine import protocol

EOF = object()  # the host's event stream ended: it died, or was shut down


class Reply:
    """One request the host has been sent and has not finished: the event reader queues its events here,
    the thread that made the request takes them."""

    def __init__(self, request_id: str, phase: str, host: InFlight) -> None:
        self.request_id = request_id
        self.phase = phase  # for the sentence if the host dies while serving it
        self.host = host
        self.events: queue.SimpleQueue[Any] = queue.SimpleQueue()  # the host's events, then EOF if it ends
        self.abandoned = False  # its reader stopped reading (a generation closed early): events are dropped
        self.counts = True  # one of the requests a caller waits behind (a saved state's save or restore is not)
        self.started = False  # the host has sent an event for it: it runs (several may, on a batching host)


class InFlight:
    """The requests one host process has been sent and not finished, oldest first. The host serves them in
    that order, several generations at once where its model batches them: an event belongs to the request its id
    names (one without an id, a load's progress, to the oldest)."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc
        self._changed = threading.Condition()
        self._replies: collections.deque[Reply] = collections.deque()
        self.ended = False  # the host's event stream is over: it died, or was shut down
        self.phase_at_end = "while starting"
        self.hello: queue.SimpleQueue[Any] = queue.SimpleQueue()  # the Hello, or EOF

    def add(self, reply: Reply, send: Callable[[], None]) -> int:
        """Queue ``reply`` and ``send`` its request, in one step so that this order is the pipe's; returns
        how many requests are ahead of it (those a user waits behind: a saved state's save or restore is brief
        and rides with its generation)."""
        with self._changed:
            if self.ended:
                raise EOFError
            ahead = sum(r.counts for r in self._replies)
            self._replies.append(reply)
            try:
                send()
            except BaseException:
                self._replies.remove(reply)
                raise
            return ahead

    def deliver(self, event: Any) -> bool:
        """Hand an event to the request it belongs to; False if it belongs to none."""
        if isinstance(event, protocol.Hello):
            self.hello.put(event)
            return True
        with self._changed:
            head = self._replies[0] if self._replies else None
            if head is None:
                return False
            request_id = getattr(event, "request_id", head.request_id)
            reply = head if request_id == head.request_id else next(
                (r for r in self._replies if r.request_id == request_id), None)
            if reply is None:
                return False
            reply.started = True
            if isinstance(event, protocol.FINAL_EVENTS):
                self._replies.remove(reply)
                self._changed.notify_all()
        if not reply.abandoned:
            reply.events.put(event)
        return True

    def end_waiting(self, request_id: str) -> bool:
        """End a request the host has not started (one behind the oldest that the host has sent nothing for) here and
        now, as cancelled: its caller gets the Done at once instead of when its turn comes. The host was told too;
        its own Done for it, in its turn, is dropped. False if no such request waits."""
        with self._changed:
            waiting = next((r for i, r in enumerate(self._replies)
                            if i and r.request_id == request_id and not r.started), None)
            if waiting is None or waiting.abandoned:
                return False
            waiting.abandoned = True
        waiting.events.put(Done(request_id, "", GenerationStats(0, 0.0, 0.0, 0, 0.0, "cancelled", 0)))
        return True

    def end(self) -> None:
        """The host's stream ended: every request still waiting learns it."""
        with self._changed:
            self.ended = True
            if self._replies:
                self.phase_at_end = self._replies[0].phase
            elif self.phase_at_end == "while starting" and not self.hello.empty():
                self.phase_at_end = "while idle"
            replies = list(self._replies)
            self._replies.clear()
            self._changed.notify_all()
        self.hello.put(EOF)
        for reply in replies:
            reply.events.put(EOF)

    def wait_idle(self) -> None:
        with self._changed:
            self._changed.wait_for(lambda: not self._replies or self.ended)
