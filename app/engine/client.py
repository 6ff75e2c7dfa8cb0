"""The parent side of an engine host: start it, load, stream, cancel, and turn its death into a sentence.

The client is blocking and may be shared by threads: the app makes one and hands it to the chat and to
the local server, so one model sits in memory once. Each request (load, generate, score, unload) goes to
the host as it is made, and the host serves them in that order: the host's queue is the only one. A
model loaded with ``LoadSettings.parallel`` > 1 has several generations running at once there. Its events
come back on one reader thread, which hands each to the request its id names (one at a time: always the
oldest one not finished). ``cancel(request_id)`` may be called from any thread and
stops only that request, running or still waiting; the host itself keeps track of which. Nothing here
imports an inference library; the host does that in its own process.
"""

from __future__ import annotations

import collections
import dataclasses
import io
import itertools
import logging
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, Protocol, TypeVar, cast

from app.engine import guard, protocol
from app.engine.inflight import EOF, InFlight, Reply
from app.runtimes import trials
from app.engine.protocol import (Asks, CountRequest, EmbedRequest, GenerateRequest, LoadRequest, RerankRequest,
                                 RestoreStateRequest, SaveStateRequest, ScoreRequest, ShutdownRequest, UnloadRequest)
from app.errors import BackendUnavailable, EngineCrashed, EngineError
from app.datatypes import (Done, Embedded, ErrorEvent, LoadSettings, Loaded, Progress, Prompt,
                           Reranked, SamplingSettings, Scored, StateRestored, StateSaved, Token, WindowScoring)

_log = logging.getLogger(__name__)
# What fails a new runtime build's trial (app/runtimes/trials.py) besides a crash: it cannot start, load or serve.
TRIAL_FAILURES = ("runtime", "load", "internal", "unavailable")
A = TypeVar("A")  # the event that answers a request of the protocol's table (protocol.Asks)
P = ParamSpec("P")  # the rest of a request's fields, after the id the client gives it
STDERR_LINES = 200
HELLO_TIMEOUT_S = 120  # a host starts in well under a second; a frozen build on a slow disk may take longer

# Words engines print when an allocation fails: llama.cpp/ggml, CUDA, Metal, the C++ runtime, Python.
_OOM_MARKERS = ("out of memory", "failed to allocate", "bad_alloc", "memoryerror", "cudamalloc failed",
                "insufficient memory", "unable to allocate", "cannot allocate memory", "alloc_buffer: failed")


def _listed(messages: Prompt) -> Prompt:
    """A prompt as it crosses the wire: a string as it is, messages as a list."""
    return messages if isinstance(messages, str) else list(messages)


def host_command() -> list[str]:
    if getattr(sys, "frozen", False):  # a PyInstaller build: the app binary is the host too
        return [sys.executable, "--engine-host"]
    return [sys.executable, "-m", "app.engine.host"]


def describe_exit(returncode: int | None, stderr_tail: Sequence[str], phase: str) -> EngineCrashed:
    """The sentence for a dead engine: what killed it, in which phase, and what the log said."""
    text = "\n".join(stderr_tail).lower()
    oom = any(marker in text for marker in _OOM_MARKERS)
    last = next((line.strip() for line in reversed(stderr_tail) if line.strip()), "")
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        if oom:
            message = f"the engine ran out of memory {phase}"
        elif name == "SIGKILL":
            message = f"the engine was killed (SIGKILL) {phase}"
            hint = "the system may have run out of memory; try a smaller quant or context"
            return EngineCrashed(message, hint, returncode=returncode, stderr_tail=tuple(stderr_tail), phase=phase)
        else:
            message = f"the engine crashed ({name}) {phase}"
    elif oom:
        message = f"the engine ran out of memory {phase}"
    else:
        message = f"the engine exited unexpectedly (code {returncode}) {phase}"
    hint = "try a smaller quant, a shorter context or fewer GPU layers" if oom else (f"last log line: {last}" if last else "")
    return EngineCrashed(message, hint, returncode=returncode, stderr_tail=tuple(stderr_tail), phase=phase)


class EngineClientLike(Protocol):
    """An engine as the chat bridge (app/ui/chat/engine_bridge.py) and the local server (app/server) use it:
    EngineClient, or a test double with the same calls and events."""

    @property
    def loaded(self) -> Loaded | None: ...  # the model the host holds (None: none, or the host died)
    @property
    def alive(self) -> bool: ...
    @property
    def revivable(self) -> bool: ...  # dead, but the crash guard starts it again on the next request
    @property
    def pid(self) -> int | None: ...
    def start(self) -> Any: ...
    def load(self, model_path: str | Path, settings: LoadSettings | None = None, *, backend: str | None = None,
             on_progress: Callable[[float], None] | None = None) -> Loaded: ...
    def generate(self, messages: Prompt, sampling: SamplingSettings | None = None, request_id: str | None = None,
                 on_wait: Callable[[int], None] | None = None, events_every_s: float | None = None
                 ) -> Iterator[Token | Done]: ...
    def call(self, kind: Callable[Concatenate[str, P], Asks[A]], *args: P.args, **kwargs: P.kwargs) -> A: ...
    def send(self, kind: Callable[Concatenate[str, P], Asks[A]], *args: P.args, **kwargs: P.kwargs
             ) -> Callable[[], A]: ...
    def embed(self, texts: Sequence[str]) -> Embedded: ...
    def rerank(self, query: str, texts: Sequence[str]) -> Reranked: ...
    def count_tokens(self, messages: Prompt, sampling: SamplingSettings | None = None) -> int: ...
    def save_state(self, path: str | Path) -> StateSaved: ...
    def send_save_state(self, path: str | Path) -> Callable[[], StateSaved]: ...
    def restore_state(self, paths: Sequence[str], messages: Prompt,
                      sampling: SamplingSettings | None = None) -> StateRestored: ...
    def send_restore_state(self, paths: Sequence[str], messages: Prompt, sampling: SamplingSettings | None = None,
                           evict_to: Sequence[str] = ()) -> Callable[[], StateRestored]: ...
    def cancel(self, request_id: str | None = None) -> None: ...
    def close(self) -> None: ...


def keep_base_template(model_path: str | Path) -> None:
    """For a GGUF that carries no chat template: the template of the model it was made from, read from the Hub
    (app/hub/chat_templates.py) and kept beside the file, where the engine host's choice reads it
    (backends/chat_format/bundled.py; the host never reaches the Hub). Asked once: the answer is kept, "none" too;
    offline, or where the Hub cannot be reached, nothing is kept and the model gets its family's template."""
    import json
    import logging

    from app.errors import QuantDeskError
    from app.files import write_text_atomic
    from app.hub import chat_templates
    from app.models.metadata import read_gguf_header
    from backends.chat_format import bundled

    path = Path(model_path)
    if path.suffix.lower() != ".gguf" or not path.is_file() or bundled.read_kept(path) is not None:
        return
    try:
        metadata = read_gguf_header(path)[0]
    except Exception:  # noqa: BLE001 - a header we cannot read is the engine's to refuse, in its words
        return
    if metadata.get("tokenizer.chat_template"):
        return
    try:
        record = chat_templates.find(metadata, chat_templates.library_repo(path))
    except QuantDeskError as exc:
        logging.getLogger(__name__).info("no base model's chat template for %s: %s", path.name, exc.message)
        return
    if not record.get("chat_template") and not record.get("tried"):
        return  # the file names no repo and the library knows none: nothing was asked, nothing to keep
    try:
        write_text_atomic(bundled.kept_path(path), json.dumps(record, ensure_ascii=False))
    except OSError as exc:  # a folder that is not ours to write (a Hugging Face cache, a read-only disk)
        logging.getLogger(__name__).info("the chat template for %s cannot be kept beside it: %s", path.name, exc)


@dataclasses.dataclass(frozen=True)
class _Guarded:
    """A llama.cpp load, as asked, and the crash guard's rung it runs on: what a revival loads again."""

    model_path: str
    settings: LoadSettings
    backend: str | None
    runtime: str | None
    rung: str
    lib_dir: Path | None  # the runtime's libraries: whether it has CPU variants to fall back on


def _runtime_of(choice: Any) -> Any:
    """The catalog's runtime a choice loads on: its previous build where a trial sent it there."""
    from app.runtimes import catalog

    if choice is None or not choice.name:
        return None
    site = choice.runtime_env.get(catalog.RUNTIME_PATH_VAR)
    return catalog.read_folder(Path(site).parent, "user") if site else catalog.find(choice.name)


def _on_previous_build(choice: Any, trial: trials.Trial) -> Any:
    """``choice`` on the runtime's previous build (a model whose trial on the new one failed)."""
    return dataclasses.replace(choice, runtime_env=trial.fallback.host_env(),
                               reason=f"{choice.reason} (its previous build)")


def _guard_key(model_path: str | Path, choice: Any, found: Any) -> guard.Key:
    """The crash guard's key for a llama.cpp load: this CPU's model, the runtime with its llama-cpp-python version,
    the file's quant type (read from its header, which the load has read already)."""
    from app import machine
    from app.errors import ModelFileError
    from app.models import metadata

    try:
        info = metadata.read_model(model_path).quant
        quant = info.quant if info else ""
    except (OSError, ModelFileError):
        quant = ""
    runtime = f"{choice.name} {found.version}" if found is not None and found.version else choice.name
    return guard.Key(machine.profile().cpu.model, runtime, quant)


class EngineClient:
    """One engine host process at a time. Use as a context manager, or call ``close()``."""

    _ids = itertools.count(1)

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self._env = env
        self._proc: subprocess.Popen[bytes] | None = None
        self._inflight: InFlight | None = None
        self._stderr: collections.deque[str] = collections.deque(maxlen=STDERR_LINES)
        self._write_lock = threading.Lock()
        # Requests are sent under this lock; a load that needs a fresh host holds new ones back meanwhile.
        self._submitting = threading.Condition()
        self._replacing = False
        self._runtime_env: dict[str, str] = {}  # the llama.cpp runtime the host imports (app/runtimes)
        self.loaded: Loaded | None = None
        # The crash guard (app/engine/guard.py): the llama.cpp model loaded, to load again on a safer rung when the
        # host dies under a request; and, per dead host, what its revival gave (the sentence, or the crash that stands).
        self._guarded: _Guarded | None = None
        self._revive_lock = threading.Lock()
        self._revived: tuple[InFlight, str | EngineCrashed] | None = None

    # --- process ---

    def start(self) -> EngineClient:
        """Start the host and wait for its hello; a host that died is replaced by a fresh one (the model must
        be loaded again). Raises EngineError if the host speaks another protocol version, EngineCrashed if it
        dies on the way."""
        if self.alive:
            return self
        if self._proc is not None:
            self._stop_host()
            self.loaded = None
        env = dict(os.environ if self._env is None else self._env)
        env.update(self._runtime_env)
        root = str(Path(__file__).resolve().parents[2])  # the host imports app/ and backends/ from here
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
        self._proc = subprocess.Popen(host_command(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                      stderr=subprocess.PIPE, env=env, bufsize=0)
        # Per process: a dead host's end-of-stream must not reach its successor's requests.
        self._inflight = InFlight(self._proc)
        self._events_reader = threading.Thread(target=self._read_events, args=(self._proc, self._inflight),
                                               daemon=True, name="engine-events")
        self._events_reader.start()
        self._stderr_reader = threading.Thread(target=self._read_stderr, args=(self._proc,), daemon=True,
                                               name="engine-stderr")
        self._stderr_reader.start()
        self._expect_hello(self._inflight)
        return self

    def _expect_hello(self, inflight: InFlight) -> None:
        try:
            hello = inflight.hello.get(timeout=HELLO_TIMEOUT_S)
        except queue.Empty:
            self.close()
            raise EngineError(f"the engine did not start within {HELLO_TIMEOUT_S} s", "see the engine log",
                              kind="protocol") from None
        if hello is EOF:
            raise self._crashed(inflight)
        try:
            protocol.check_hello(hello)
        except protocol.ProtocolMismatch as exc:
            self.close()
            raise EngineError(f"{exc}: the app and its engine come from different QuantDesk versions",
                              "reinstall QuantDesk", kind="protocol") from None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    @property
    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def stderr_tail(self) -> list[str]:
        return list(self._stderr)

    # Each reader closes its own pipe at the end of the stream; close() never does, so that no pipe is
    # closed under a reader still draining the host's last output. The pipes are unbuffered (bufsize=0, for
    # stdin's sake), and an unbuffered file reads a line one byte per system call: the readers put a buffer
    # in front (a read returns whatever has arrived, so nothing waits for a full buffer).

    def _read_events(self, proc: subprocess.Popen[bytes], inflight: InFlight) -> None:
        # started with stdout=PIPE and bufsize=0: the pipe is a raw FileIO (typeshed says IO[bytes])
        with io.BufferedReader(cast(io.FileIO, proc.stdout)) as lines:  # closes the pipe too
            for line in lines:
                try:
                    event = protocol.decode_event(line)
                except ValueError:
                    self._stderr.append(f"[quantdesk] unreadable engine event: {line[:200]!r}")
                    continue
                if not inflight.deliver(event):
                    self._stderr.append(f"[quantdesk] engine event for no request: {line[:200]!r}")
        inflight.end()

    def _read_stderr(self, proc: subprocess.Popen[bytes]) -> None:
        with io.BufferedReader(cast(io.FileIO, proc.stderr)) as lines:  # a raw FileIO, as stdout
            for raw in lines:
                self._stderr.append(raw.decode("utf-8", "replace").rstrip("\n"))

    def _send(self, message: dict[str, Any]) -> None:
        """Write one request line (its wire form: see protocol.encode)."""
        try:
            with self._write_lock:
                stdin = self._proc.stdin if self._proc is not None else None
                if stdin is None:  # closed meanwhile
                    raise BrokenPipeError
                stdin.write(protocol.encode(message))
                stdin.flush()
        except (BrokenPipeError, OSError):
            raise self._crashed(self._inflight) from None

    def _crashed(self, inflight: InFlight | None) -> EngineCrashed:
        proc = inflight.proc if inflight else self._proc
        returncode = proc.wait(timeout=10) if proc else None
        self._stderr_reader.join(timeout=2)  # let it drain the dying process's last lines
        return describe_exit(returncode, self.stderr_tail(), inflight.phase_at_end if inflight else "while idle")

    def _submit(self, request: Asks[Any], phase: str, *, replace_dead: bool = False) -> tuple[Reply, int]:
        """Send a request now; its reply, and how many requests are ahead of it in the host's queue. A host
        is started if none was, or (``replace_dead``) if the last one died; a host that died of a native crash under
        a llama.cpp model is revived first on the crash guard's next rung (``_revive``)."""
        dead = self._inflight
        if not replace_dead and dead is not None and dead.ended and self._guarded is not None:
            self._revive(dead)
        with self._submitting:
            self._submitting.wait_for(lambda: not self._replacing)
            if self._proc is None or (replace_dead and not self.alive):
                self.start()
            return self._add(request, phase)

    def _add(self, request: Asks[Any], phase: str) -> tuple[Reply, int]:
        if self._inflight is None:  # closed meanwhile: no host to send it to
            raise self._crashed(None)
        reply = Reply(request.id, phase, self._inflight)
        reply.counts = not isinstance(request, (SaveStateRequest, RestoreStateRequest))
        try:
            return reply, reply.host.add(reply, lambda: self._send(protocol.wire(request)))
        except EOFError:
            raise self._crashed(reply.host) from None

    def _next_event(self, reply: Reply) -> Any:
        event = reply.events.get()
        if event is EOF:
            reply.events.put(EOF)  # every later call sees the death too
            raise self._crashed(reply.host)
        return event

    @property
    def revivable(self) -> bool:
        """The host died of a native crash under a llama.cpp model with a safer configuration left: the next request
        revives it there (the crash guard) instead of failing. The server's queue takes requests meanwhile. True too
        while a revival runs: the host is then replaced (for a moment there is none), and a request waits for it."""
        if self._revive_lock.locked():
            return True
        proc, guarded = self._proc, self._guarded
        return (proc is not None and guarded is not None and guard.safer(guarded.rung, guarded.lib_dir) is not None
                and guard.is_native_signal(proc.poll()))

    def _revive(self, dead: InFlight) -> str:
        """The host died under a request: load its model again on the crash guard's next rung and return the
        sentence; raises the crash where nothing safer is left (said once: every request that waited on the dead host
        gets the same outcome, whichever of them got here first)."""
        with self._revive_lock:
            if self._revived is not None and self._revived[0] is dead:
                outcome = self._revived[1]
            else:
                crash = self._crashed(dead)
                guarded = self._guarded
                safer = (guard.safer(guarded.rung, guarded.lib_dir)
                         if guarded is not None and guard.is_native_crash(crash) else None)
                try:
                    if guarded is None or safer is None:
                        raise guard.uncured(crash, "serving a request") if guard.is_native_crash(crash) else crash
                    outcome = self._load(guarded.model_path, guarded.settings, backend=guarded.backend,
                                         on_progress=None, runtime=guarded.runtime, start_rung=safer,
                                         after=crash).notice
                except EngineCrashed as final:
                    outcome = final
                self._revived = (dead, outcome)
        if isinstance(outcome, EngineCrashed):
            raise outcome
        return outcome

    def _replayed(self, reply: Reply, request: Asks[Any], phase: str) -> tuple[Reply, str]:
        """``request`` sent again after its host died under it, once the host is revived (``_revive``, which
        raises where it cannot be); the new reply and the crash guard's sentence."""
        if self._guarded is None:
            raise self._crashed(reply.host)
        notice = self._revive(reply.host)
        return self._submit(request, phase)[0], notice

    # --- requests ---

    def load(self, model_path: str | Path, settings: LoadSettings | None = None, *, backend: str | None = None,
             on_progress: Callable[[float], None] | None = None, runtime: str | None = None) -> Loaded:
        """Load a model (the host imports the backend now). Raises ModelFileError for a bad path before
        any engine work, BackendUnavailable, EngineError (the engine refused, and lives), EngineCrashed.
        llama.cpp loads run on the runtime app.runtimes chooses (``runtime`` names one for this load), in the
        configuration the crash guard learned for it; a native crash while loading is retried in a safer one
        (app/engine/guard.py), and ``Loaded.notice`` says so."""
        self._guarded = None  # the model loaded before is no longer the one to revive, even if this load fails
        return self._load(model_path, settings, backend=backend, on_progress=on_progress, runtime=runtime)

    def _load(self, model_path: str | Path, settings: LoadSettings | None, *, backend: str | None,
              on_progress: Callable[[float], None] | None, runtime: str | None, start_rung: str | None = None,
              after: EngineCrashed | None = None) -> Loaded:
        """``load``, from ``start_rung`` on when the host died under a request (``after``: that crash)."""
        from app.models.detect import ModelRef, detect_model
        from app.remote import connections
        from backends import registry

        options: dict[str, Any] = {}
        ref: connections.RemoteModelRef | ModelRef
        if connections.is_remote_ref(model_path):
            ref = connections.RemoteModelRef(str(model_path))
            options = {"endpoint": connections.Connections().endpoint_for(ref.path).to_dict()}
        else:
            ref = detect_model(model_path)
        settings = settings or LoadSettings()
        if settings.mmproj:  # a projector that does not pair is refused here, before any engine work
            from app.models import metadata, vision

            vision.check_pair(metadata.read_model(ref.path), vision.read_projector(settings.mmproj))
        name = backend or registry.backend_for_format(ref.format)
        status = registry.status(name)
        if not status.availability.available:
            raise BackendUnavailable(f"{name} cannot run here: {status.availability.reason}",
                                     status.availability.hint)
        if ref.format not in status.formats:
            raise BackendUnavailable(f"{name} does not run {ref.format} models",
                                     f"it runs {', '.join(status.formats)}")
        choice = None
        if name == "llama.cpp":
            from app import machine

            choice = machine.runtime_choice(ref.path, runtime)  # this process's probe of the machine
            if not choice.name:
                raise BackendUnavailable(choice.reason)
            if not settings.chat_template:
                keep_base_template(ref.path)  # a GGUF without a template: its base model's, from the Hub, once
        trial, trial_notice = (trials.on_trial(choice.name, ref.path) if choice is not None else None), ""
        if trial is not None and (reason := trials.failed_before(trial, ref.path)):
            choice, trial = _on_previous_build(choice, trial), None  # it failed before: the previous build stays
            trial_notice = f"This model loads on the {choice.name} runtime's previous build: the new one failed its " \
                           f"trial with it ({reason}); quantdesk runtime rollback {choice.name} puts the previous " \
                           "build back for every model."
        try:
            loaded, key, rung, after, lib_dir = self._load_on_rungs(ref, name, settings, options, choice, on_progress,
                                                                    start_rung, after)
        except (EngineCrashed, EngineError) as failed:
            if trial is None or (isinstance(failed, EngineError) and failed.kind not in TRIAL_FAILURES):
                raise
            trials.record(trial, ref.path, False, failed.message)
            choice = _on_previous_build(choice, trial)
            trial_notice = (f"{trial.words()[0].upper()}{trial.words()[1:]} failed its trial with this model "
                            f"({failed.message}), so it loads on the previous build, as it will until a new build or "
                            f"quantdesk runtime rollback {choice.name}.")
            _log.warning("%s", trial_notice)
            loaded, key, rung, after, lib_dir = self._load_on_rungs(ref, name, settings, options, choice, on_progress,
                                                                    start_rung, None)
        else:
            if trial is not None:
                trials.record(trial, ref.path, True)
        notice = ""
        if key is not None and after is not None:
            guard.remember(key, rung, after.message)
            notice = guard.recovered_sentence(after, key, rung)
            _log.warning("%s", notice)
        elif key is not None and rung != guard.DEFAULT:
            notice = guard.applied_sentence(key, rung)
        notice = " ".join(n for n in (trial_notice, notice) if n)
        self.loaded = loaded = dataclasses.replace(loaded, notice=notice)
        self._guarded = _Guarded(str(model_path), settings, backend, runtime, rung, lib_dir) if key is not None else None
        return loaded

    def _load_on_rungs(self, ref: Any, name: str, settings: LoadSettings, options: dict[str, Any], choice: Any,
                       on_progress: Callable[[float], None] | None, start_rung: str | None,
                       after: EngineCrashed | None) -> tuple[Loaded, guard.Key | None, str, EngineCrashed | None,
                                                             Path | None]:
        """The load on the crash guard's rungs, from the learned (or given) one down: what loaded, the guard's key,
        the rung it loaded on, the crash that sent it there (or ``after``), the runtime's libraries."""
        runtime = _runtime_of(choice)
        key = _guard_key(ref.path, choice, runtime) if choice is not None else None
        lib_dir = runtime.lib_dir if runtime is not None else None
        rung = start_rung or guard.rung_for(key)
        while True:
            try:
                loaded = self._load_on(ref, name, guard.apply(settings, rung), options, choice, on_progress,
                                       guard.host_env(rung, lib_dir))
                return loaded, key, rung, after, lib_dir
            except EngineCrashed as crash:
                safer = guard.safer(rung, lib_dir) if key is not None and guard.is_native_crash(crash) else None
                if safer is None:
                    if after is None and not guard.is_native_crash(crash):
                        raise
                    raise guard.uncured(crash, f"loading {ref.path}",
                                        f"{guard.RUNG_WORDS[rung]}" if after is not None else "") from None
                after, rung = crash, safer

    def _load_on(self, ref: Any, name: str, settings: LoadSettings, options: dict[str, Any], choice: Any,
                 on_progress: Callable[[float], None] | None, rung_env: dict[str, str]) -> Loaded:
        """One load request on the host for ``choice``'s runtime (a fresh host where the running one has another
        backend or runtime, or died; ``rung_env``: what the crash guard's rung adds to its environment), its
        progress to ``on_progress``."""
        runtime_env = {**choice.env, **rung_env} if choice is not None else {}
        request = LoadRequest(f"l{next(self._ids)}", name, str(ref.path), settings, options)
        phase = f"while loading {ref.display_name}"
        if (self.loaded is not None and self.loaded.backend != name) or \
                (self._proc is not None and runtime_env != self._runtime_env):
            # one backend and one runtime per host process: another gets a fresh host
            reply, _ = self._submit_to_fresh_host(request, phase, runtime_env)
        else:
            self._runtime_env = runtime_env  # the same as the running host's, or the one to start
            reply, _ = self._submit(request, phase, replace_dead=True)
        while True:
            event = self._next_event(reply)
            if isinstance(event, Progress):
                if on_progress:
                    on_progress(event.fraction)
            elif isinstance(event, Loaded):
                if choice is not None:
                    event = dataclasses.replace(event, runtime=choice.name, runtime_reason=choice.reason)
                return event
            elif isinstance(event, ErrorEvent):
                raise EngineError(event.message, event.hint, kind=event.kind)

    def _submit_to_fresh_host(self, request: Asks[Any], phase: str, runtime_env: dict[str, str]
                              ) -> tuple[Reply, int]:
        """Let the requests already sent finish, replace the host (on ``runtime_env``'s llama.cpp runtime),
        and send ``request`` first to the new one."""
        with self._submitting:
            self._submitting.wait_for(lambda: not self._replacing)
            self._replacing = True
        try:
            if self._inflight is not None:
                self._inflight.wait_idle()
            self._stop_host()
            self.loaded = None
            self._runtime_env = runtime_env
            self.start()
        except BaseException:
            with self._submitting:
                self._replacing = False
                self._submitting.notify_all()
            raise
        with self._submitting:
            self._replacing = False
            self._submitting.notify_all()
            return self._add(request, phase)

    def generate(self, messages: Prompt, sampling: SamplingSettings | None = None, request_id: str | None = None,
                 on_wait: Callable[[int], None] | None = None, events_every_s: float | None = None
                 ) -> Iterator[Token | Done]:
        """Send a generation now and stream its Token events, then one Done. It runs once the requests before
        it are through (``on_wait`` is told how many there are, if any). Closing the iterator early cancels
        the generation. Bad sampling settings raise here, before anything is sent. ``events_every_s``: how
        often the host hands out tokens (None: the backend's own window; see Backend.generate)."""
        sampling = sampling or SamplingSettings()
        try:
            sampling.validate()
        except ValueError as exc:
            raise EngineError(str(exc), kind="settings") from None
        request = GenerateRequest(request_id or f"r{next(self._ids)}", _listed(messages), sampling, events_every_s)
        reply, ahead = self._submit(request, protocol.row_of(request).phase)
        if ahead and on_wait is not None:
            on_wait(ahead)
        return self._events(reply, request)

    def _events(self, reply: Reply, request: GenerateRequest) -> Iterator[Token | Done]:
        finished = False
        delivered = False  # a reply that crashed before its first token is replayed whole on the revived host
        notice = ""
        try:
            while True:
                try:
                    event = self._next_event(reply)
                except EngineCrashed:
                    if delivered:
                        raise  # half a reply is not replayed: the next request revives the host
                    reply, notice = self._replayed(reply, request, reply.phase)
                    continue
                if isinstance(event, Token):
                    delivered = True
                    yield event
                elif isinstance(event, Done):
                    finished = True
                    yield dataclasses.replace(event, notice=notice) if notice else event
                    return
                elif isinstance(event, ErrorEvent):
                    finished = True
                    raise EngineError(event.message, event.hint, kind=event.kind)
        except EngineCrashed:
            finished = True
            raise
        finally:
            if not finished:  # the consumer stopped early: stop the engine too, and drop the rest
                reply.abandoned = True
                self.cancel(reply.request_id)

    def score(self, *, text: str | None = None, tokens: Sequence[int] | None = None, max_tokens: int | None = None,
              windows: WindowScoring | None = None, on_progress: Callable[[float], None] | None = None) -> Scored:
        """Score plain text or given token ids with the loaded model (the quant lab's quality pass); ``windows``
        scores llama-perplexity's windows against a reference or writes one (backends.scoring), reporting the
        fraction done to ``on_progress``. Raises EngineError with kind 'unavailable' where the backend exposes no
        logits, 'cancelled' when ``cancel`` stopped it."""
        if windows is None and (text is None) == (tokens is None):
            raise ValueError("score takes text or tokens, not both")
        request = ScoreRequest(f"s{next(self._ids)}", text, list(tokens) if tokens is not None else None, max_tokens,
                               windows)
        reply, _ = self._submit(request, protocol.row_of(request).phase)
        return self._answer_replayed(reply, request, on_progress)

    def call(self, kind: Callable[Concatenate[str, P], Asks[A]], *args: P.args, **kwargs: P.kwargs) -> A:
        """A request of the protocol's table (``kind``: its class, made here with a fresh id and ``args``), sent now;
        its answer, or its ErrorEvent as an EngineError. Replayed once on the revived host where the host died under
        it (the crash guard). E.g. ``client.call(RerankRequest, query, texts)``."""
        return self.send(kind, *args, **kwargs)()

    def send(self, kind: Callable[Concatenate[str, P], Asks[A]], *args: P.args, **kwargs: P.kwargs
             ) -> Callable[[], A]:
        """``call``'s request sent now, its answer waited for when the returned call is made (the server sends a
        saved state's restore right ahead of its generation and its save right behind it)."""
        request = kind(f"{getattr(kind, 'op', 'q')}{next(self._ids)}", *args, **kwargs)
        reply, _ = self._submit(request, protocol.row_of(request).phase)
        return lambda: self._answer_replayed(reply, request)

    def _answer_replayed(self, reply: Reply, request: Asks[A], on_progress: Callable[[float], None] | None = None
                         ) -> A:
        """``_answer``, with ``request`` sent again once to the revived host where its host died under it."""
        answer: type[A] = protocol.answer_of(type(request))
        try:
            return self._answer(reply, answer, on_progress)
        except EngineCrashed:
            reply, _notice = self._replayed(reply, request, reply.phase)  # the sentence is in ``loaded.notice``
            return self._answer(reply, answer, on_progress)

    def _answer(self, reply: Reply, answer: type[A], on_progress: Callable[[float], None] | None = None) -> A:
        """The one event that answers a request (``answer``), or its ErrorEvent as an EngineError; the request's
        progress on the way goes to ``on_progress``."""
        while True:
            event = self._next_event(reply)
            if isinstance(event, answer):
                return event
            if isinstance(event, ErrorEvent):
                raise EngineError(event.message, event.hint, kind=event.kind)
            if isinstance(event, Progress):
                if on_progress:
                    on_progress(event.fraction)
            elif isinstance(event, protocol.FINAL_EVENTS):  # the end of the request, but not its answer
                raise EngineError(f"the engine answered {reply.request_id} with {type(event).__name__}, "
                                  f"not {answer.__name__}", kind="protocol")

    def embed(self, texts: Sequence[str]) -> Embedded:
        """Embeddings of ``texts`` from a loaded embedding model, in order. Raises EngineError (kind 'request' for a
        model that makes none, 'context' for a text longer than the model takes)."""
        return self.call(EmbedRequest, list(texts))

    def rerank(self, query: str, texts: Sequence[str]) -> Reranked:
        """Each of ``texts`` scored for ``query`` by a loaded reranker (rank pooling), in order. Raises EngineError
        (kind 'request' for a model that is no reranker, 'context' for a query and text longer than it takes)."""
        return self.call(RerankRequest, query, list(texts))

    def count_tokens(self, messages: Prompt, sampling: SamplingSettings | None = None) -> int:
        """How many tokens ``messages`` is as a generation with ``sampling`` would render it (the model's chat
        template, its tools and thinking switch) and tokenize it; in its turn, after the requests sent before, and
        without touching the KV cache. Raises EngineError (kind 'unavailable' where the engine cannot tokenize: a
        remote server)."""
        return self.call(CountRequest, _listed(messages), sampling or SamplingSettings()).prompt_tokens

    def save_state(self, path: str | Path) -> StateSaved:
        """Have the host write its KV cache's state, with the tokens it holds, to ``path`` (app/engine/states.py
        names it); in its turn, after the requests sent before. EngineError (kind 'unavailable' for an engine that
        cannot, 'state' when the cache is empty or the write failed)."""
        return self.send_save_state(path)()

    def send_save_state(self, path: str | Path) -> Callable[[], StateSaved]:
        """``save_state`` sent now, its answer waited for when the returned call is made: the server sends it right
        behind a generation, so the state saved is that reply's, whatever is sent next."""
        return self.send(SaveStateRequest, str(path))

    def restore_state(self, paths: Sequence[str], messages: Prompt,
                      sampling: SamplingSettings | None = None) -> StateRestored:
        """Offer the host saved states for ``messages`` (rendered and tokenized as a generation with ``sampling``
        would be): it restores the one sharing the longest token prefix with them, where that beats its KV cache,
        and names the files it refused. Nothing is generated."""
        return self.send_restore_state(paths, messages, sampling)()

    def send_restore_state(self, paths: Sequence[str], messages: Prompt, sampling: SamplingSettings | None = None,
                           evict_to: Sequence[str] = ()) -> Callable[[], StateRestored]:
        """``restore_state`` sent now (the server sends it right ahead of the generation it is for), its answer
        waited for when the returned call is made; ``evict_to``: where a batching host keeps the sequences other
        conversations take from now on (RestoreStateRequest)."""
        return self.send(RestoreStateRequest, [str(p) for p in paths], _listed(messages),
                         sampling or SamplingSettings(), [str(p) for p in evict_to])

    def cancel(self, request_id: str | None = None) -> None:
        """Stop a generation (thread-safe): ``request_id``'s, or whichever runs when None. The stream then
        ends with a Done whose stop reason is 'cancelled' and which keeps the text so far; a request
        still waiting for its turn ends so at once, and never runs. The host keeps track: a cancel may
        even arrive before the generation it names."""
        if self.alive:
            try:
                self._send(protocol.wire(protocol.CancelRequest(request_id or "*")))
            except EngineCrashed:
                return  # the generating thread reports the death
            if request_id is not None and self._inflight is not None:
                self._inflight.end_waiting(request_id)

    def unload(self) -> None:
        self._guarded = None
        if self.alive:
            request = UnloadRequest(f"u{next(self._ids)}")
            reply, _ = self._submit(request, protocol.row_of(request).phase)
            self._next_event(reply)
        self.loaded = None

    def close(self, timeout: float = 5.0) -> None:
        """Shut the host down; kill it if it does not go in time. Idempotent."""
        self._guarded = None  # closed on purpose: nothing to revive
        self._stop_host(timeout)

    def _stop_host(self, timeout: float = 5.0) -> None:
        """``close`` without forgetting what the crash guard would revive: a host replaced while it is revived
        (``start``, ``_submit_to_fresh_host``) must leave the requests waiting on the dead one their revival."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.poll() is None:
            try:
                with self._write_lock:
                    if proc.stdin is not None:
                        proc.stdin.write(protocol.encode(ShutdownRequest()))
                        proc.stdin.close()
            except OSError:
                pass
            try:
                proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        try:
            if proc.stdin is not None:
                proc.stdin.close()
        except OSError:
            pass
        for reader in (self._events_reader, self._stderr_reader):  # the host is gone: they are at the end
            reader.join(timeout=2)

    def __enter__(self) -> EngineClient:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.close()
