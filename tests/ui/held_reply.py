"""A reply held part-way, so that a test can stop, eject or kill it mid-reply however late the UI thread gets there.

The tiny model writes 1,500 tokens in a second or two, and the UI thread, re-rendering a growing bubble on a busy
machine, can see its first tokens only after the reply ended: a Stop or an Eject then finds nothing to stop and the
test waits for a ``done`` that was sent before it looked (seen in CI). ``HeldReply`` stops the engine host (SIGSTOP)
from the bridge's worker thread as the reply's first tokens reach it; ``release`` lets it go on (SIGCONT), and
``release(hold_again=True)`` stops it again at the next tokens. A SIGKILL ends a stopped process as it ends a
running one."""

from __future__ import annotations

import os
import signal

from PySide6.QtCore import Qt


class HeldReply:
    def __init__(self, bridge) -> None:
        self._bridge = bridge
        self._armed = True
        self._stopped: int | None = None
        # Direct: run on the worker thread as it gets the tokens, not when the busy UI thread gets round to them.
        bridge._worker.tokens_pending.connect(self._hold, Qt.ConnectionType.DirectConnection)

    def _hold(self) -> None:
        if self._armed and (pid := self._bridge.engine_pid) is not None:
            self._armed = False
            os.kill(pid, signal.SIGSTOP)
            self._stopped = pid

    def release(self, *, hold_again: bool = False) -> None:
        """Let the host go on (a cancel or an eject sent meanwhile waits in its pipe and is read first thing)."""
        self._armed = hold_again
        if self._stopped is not None:
            pid, self._stopped = self._stopped, None
            try:
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                pass  # killed while held: nothing to go on

    def __enter__(self) -> HeldReply:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._armed = False
        self.release()  # whatever happened, no host is left stopped for the teardown to wait on
