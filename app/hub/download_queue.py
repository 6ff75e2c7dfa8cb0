"""A queue of downloads (Qt-free), run one at a time on a worker thread: pause, resume, cancel, and every state
change to an observer (the Downloads page forwards it as a signal)."""

from __future__ import annotations

import functools
import shutil
import threading
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

from app.hub.download import STAGING_DIR_NAME, Downloader, DownloadResult, Progress, Settings
from app.hub.errors import DownloadPaused
from app.hub.plan import DownloadRequest
from app.settings import models_dir


@dataclass
class DownloadTask:
    id: int
    request: DownloadRequest
    state: str = "queued"  # queued | running | paused | done | failed | cancelled
    progress: Progress | None = None
    result: DownloadResult | None = None
    error: BaseException | None = None
    _finished: threading.Event = field(default_factory=threading.Event, repr=False)
    _runner: Downloader | None = field(default=None, repr=False)

    def wait(self, timeout: float | None = None) -> bool:
        return self._finished.wait(timeout)


class DownloadManager:
    """A queue of downloads run one at a time on a worker thread, which ends when the queue is empty (the next
    enqueue or resume starts another). Observers get every Progress and every state change through
    ``on_progress(task)`` (called on the worker thread; a GUI adapter forwards it as a signal)."""

    def __init__(self, on_progress: Callable[[DownloadTask], None] | None = None,
                 settings: Settings | None = None) -> None:
        self._on_progress = on_progress
        self._settings = settings
        self._queue: deque[DownloadTask] = deque()  # guarded by the lock, as the worker's coming and going is
        self._lock = threading.Lock()
        self._tasks: list[DownloadTask] = []
        self._next_id = 1
        self._worker: threading.Thread | None = None

    @property
    def tasks(self) -> list[DownloadTask]:
        with self._lock:
            return list(self._tasks)

    def enqueue(self, request: DownloadRequest) -> DownloadTask:
        with self._lock:
            task = DownloadTask(id=self._next_id, request=request)
            self._next_id += 1
            self._tasks.append(task)
            self._submit(task)
        self._notify(task)
        return task

    def pause(self, task: DownloadTask) -> None:
        self._stop(task, discard=False)

    def cancel(self, task: DownloadTask) -> None:
        self._stop(task, discard=True)

    def resume(self, task: DownloadTask) -> DownloadTask:
        """Queue a paused or failed task again (its partial files are picked up)."""
        if task.state in ("paused", "failed"):
            with self._lock:
                task.state, task.error = "queued", None
                task._finished.clear()
                self._submit(task)
            self._notify(task)
        return task

    def _submit(self, task: DownloadTask) -> None:
        """Queue ``task`` (the lock held); start a worker when none is running."""
        self._queue.append(task)
        if self._worker is None:
            self._worker = threading.Thread(target=self._work, name="download-queue", daemon=True)
            self._worker.start()

    def _stop(self, task: DownloadTask, discard: bool) -> None:
        with self._lock:
            runner = task._runner
            if task.state == "queued":
                task.state = "cancelled" if discard else "paused"
                task._finished.set()
        if runner is not None:
            runner.cancel() if discard else runner.pause()
        elif discard:
            shutil.rmtree(models_dir() / STAGING_DIR_NAME / task.request.key(), ignore_errors=True)
        self._notify(task)

    def shutdown(self, timeout: float = 5.0) -> None:
        """Pause what is queued or running (partial files kept) and wait for the worker to end."""
        for task in self.tasks:
            if task.state in ("queued", "running"):
                self.pause(task)
        with self._lock:
            worker = self._worker
        if worker is not None:
            worker.join(timeout)

    def _notify(self, task: DownloadTask) -> None:
        if self._on_progress is not None:
            self._on_progress(task)

    def _work(self) -> None:
        while True:
            with self._lock:
                if not self._queue:
                    self._worker = None  # idle: the next enqueue or resume starts another
                    return
                task = self._queue.popleft()
                if task.state != "queued":
                    continue
                task.state = "running"
                task._runner = Downloader(task.request, functools.partial(self._progress, task), self._settings)
            try:
                task.result = task._runner.run()
                task.state = "done"
            except DownloadPaused as exc:
                task.state = "cancelled" if task._runner._discard else "paused"
                task.error = exc
            except Exception as exc:  # noqa: BLE001 - the task carries the error to the UI
                task.state, task.error = "failed", exc
            finally:
                task._runner = None
                task._finished.set()
                self._notify(task)

    def _progress(self, task: DownloadTask, progress: Progress) -> None:
        task.progress = progress
        self._notify(task)
