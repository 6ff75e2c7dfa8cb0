"""Regression test for the PySide6 6.12.0 + CPython 3.11 interpreter abort ("bool_dealloc").

That pairing aborts after a few hundred ``Signal.emit`` calls; token streaming reaches that in
seconds. pyproject.toml pins PySide6 below 6.12 on Python 3.11. The storm runs in a child process so
an abort fails this test instead of killing the whole session.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

STORM = textwrap.dedent(
    """
    import sys
    from PySide6.QtCore import QCoreApplication, QObject, QThread, Signal, Slot

    N = 100_000

    class Source(QObject):
        token = Signal(str, int, float, bool)
        finished = Signal()

        @Slot()
        def run(self):
            for i in range(N):
                self.token.emit("tok", i, i * 0.5, bool(i % 2))
            self.finished.emit()

    class Sink(QObject):
        def __init__(self):
            super().__init__()
            self.count = 0
            self.odd = 0

        @Slot(str, int, float, bool)
        def on_token(self, text, index, value, flag):
            self.count += 1
            self.odd += flag

    app = QCoreApplication(sys.argv)
    # Direct emissions on the GUI thread...
    sink = Sink()
    source = Source()
    source.token.connect(sink.on_token)
    source.run()
    # ...and queued ones from a worker thread, as the engine client sends tokens.
    worker_sink = Sink()
    worker_source = Source()
    thread = QThread()
    worker_source.moveToThread(thread)
    worker_source.token.connect(worker_sink.on_token)
    worker_source.finished.connect(app.quit)
    thread.started.connect(worker_source.run)
    thread.start()
    app.exec()
    thread.quit()
    thread.wait()
    print(sink.count, sink.odd, worker_sink.count, worker_sink.odd)
    """
)


def test_hundred_thousand_signals_do_not_abort_the_interpreter():
    result = subprocess.run([sys.executable, "-c", STORM], capture_output=True, text=True, timeout=240,
                            env={**__import__("os").environ, "QT_QPA_PLATFORM": "offscreen"})
    assert result.returncode == 0, f"interpreter died ({result.returncode}): {result.stderr[-2000:]}"
    assert result.stdout.split() == ["100000", "50000", "100000", "50000"]
