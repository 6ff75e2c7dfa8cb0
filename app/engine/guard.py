"""The crash guard: an engine host killed by a native crash (a signal from llama.cpp's kernels) while it loads, warms
up or serves a request is started again once in a safer configuration, the request is replayed, the user is told in
one sentence what happened and what changed, and the configuration that worked is remembered for this CPU model,
runtime and quant type, so the next load goes straight to it.

Why: llama.cpp's AMX kernels crash (SIGSEGV in ``ggml_backend_amx_mul_mat``) on the first decode of real Q4_1 and
Q4_K_M weights on some Sapphire-Rapids-class Xeons (https://github.com/ggml-org/llama.cpp/issues/20824, closed as
stale without a fix). Weights reach those kernels only through llama.cpp's "extra buffer types" (the AMX buffer and
the CPU repack), which ``llama_model_params.use_extra_bufts = false`` turns off (``LoadSettings.extra_buffer_types``).
A load ends with a warm-up decode (backends/llama_cpp/backend.py), so such a crash happens while loading, before the
user's message.

The rungs, safest last (``RUNGS``): llama.cpp's defaults; without its extra buffer types; then, for a portable runtime
(app/runtimes/cpu_variants.py), its most basic CPU variant as well (x86-64 with SSE2: no kernel of a newer instruction
set). Only llama.cpp loads have rungs; a crash of another engine, a kill (SIGKILL: the system out of memory) or a
crash on the last rung is said as before, once, with the engine log's last lines kept in a file the sentence names
(``uncured``).

What was learned lives in ``engine_guard.json`` under the user data folder (written atomically): ``quantdesk hw`` and
the Hardware page show it, ``quantdesk runtime forget`` and the Hardware page forget it. Qt-free; imports no engine.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
import signal
import threading
from dataclasses import dataclass
from pathlib import Path

from app import paths
from app.datatypes import LoadSettings
from app.errors import EngineCrashed
from app.files import write_text_atomic
from app.records import from_known

FILE_NAME = "engine_guard.json"
DEFAULT = "default"
NO_EXTRA_BUFFER_TYPES = "no-extra-buffer-types"
BASIC_CPU_VARIANT = "basic-cpu-variant"
RUNGS = (DEFAULT, NO_EXTRA_BUFFER_TYPES, BASIC_CPU_VARIANT)
RUNG_WORDS = {
    DEFAULT: "llama.cpp's defaults",
    NO_EXTRA_BUFFER_TYPES: "without llama.cpp's extra buffer types (its CPU repack and AMX kernels)",
    BASIC_CPU_VARIANT: "on the runtime's most basic CPU variant, without llama.cpp's extra buffer types",
}
# Signals a bug in native code dies of; SIGKILL is the system's (out of memory) and SIGTERM/SIGINT someone's wish.
NATIVE_CRASHES = frozenset({signal.SIGSEGV, signal.SIGILL, signal.SIGABRT, signal.SIGBUS, signal.SIGFPE})
CRASH_LOG_LINES = 200

_lock = threading.Lock()  # one read-modify-write of the file at a time in this process


@dataclass(frozen=True)
class Key:
    """What a configuration is learned for: the same crash is expected of the same kernels on the same CPU."""

    cpu: str  # the CPU's model name
    runtime: str  # the llama.cpp runtime and its llama-cpp-python version: "cpu 0.3.36"
    quant: str  # the model's quant type: "Q4_K_M"

    def words(self) -> str:
        runtime = self.runtime or "llama.cpp"
        return f"{self.quant or 'this quant'} on {self.cpu or 'this CPU'} with the {runtime} runtime"


@dataclass(frozen=True)
class Learned:
    cpu: str
    runtime: str
    quant: str
    rung: str
    crash: str = ""  # what happened the first time: "the engine crashed (SIGSEGV) while loading x.gguf"
    learned_at: str = ""  # ISO date and time

    @property
    def key(self) -> Key:
        return Key(self.cpu, self.runtime, self.quant)

    def words(self) -> str:
        """One line for `quantdesk hw` and the Hardware page."""
        when = self.learned_at[:10] or "earlier"
        return f"{self.key.words()}: {RUNG_WORDS.get(self.rung, self.rung)}, since {self.crash or 'a crash'} ({when})"


def store_path() -> Path:
    return paths.data_dir() / FILE_NAME


def learned() -> list[Learned]:
    """Everything learned on this machine; an unreadable file counts as nothing learned (it is rewritten next time)."""
    try:
        rows = json.loads(store_path().read_text(encoding="utf-8")).get("learned", [])
    except (OSError, ValueError, AttributeError):
        return []
    found = []
    for row in rows if isinstance(rows, list) else []:
        try:
            entry = from_known(Learned, row)
        except TypeError:  # a row missing a field another version did not write: skipped
            continue
        if entry.rung in RUNGS:
            found.append(entry)
    return found


def _write(rows: list[Learned]) -> None:
    write_text_atomic(store_path(), json.dumps({"learned": [dataclasses.asdict(r) for r in rows]}, indent=2) + "\n")


def rung_for(key: Key | None) -> str:
    """The rung a load starts on: the one learned for ``key``, else llama.cpp's defaults."""
    if key is None:
        return DEFAULT
    return next((entry.rung for entry in learned() if entry.key == key), DEFAULT)


def remember(key: Key, rung: str, crash: str) -> Learned:
    entry = Learned(key.cpu, key.runtime, key.quant, rung, crash,
                    dt.datetime.now().astimezone().isoformat(timespec="seconds"))
    with _lock:
        _write([e for e in learned() if e.key != key] + [entry])
    return entry


def forget() -> int:
    """Forget everything learned; how many configurations that was."""
    with _lock:
        count = len(learned())
        store_path().unlink(missing_ok=True)
    return count


def apply(settings: LoadSettings, rung: str) -> LoadSettings:
    """``settings`` as the rung loads them."""
    if rung in (NO_EXTRA_BUFFER_TYPES, BASIC_CPU_VARIANT):
        return dataclasses.replace(settings, extra_buffer_types=False)
    return settings


def host_env(rung: str, lib_dir: Path | None) -> dict[str, str]:
    """What the engine host's environment adds on this rung for the runtime in ``lib_dir``."""
    from app.runtimes import cpu_variants

    return cpu_variants.basic_env(lib_dir) if rung == BASIC_CPU_VARIANT and lib_dir is not None else {}


def safer(rung: str, lib_dir: Path | None = None) -> str | None:
    """The next rung down for the runtime in ``lib_dir``, None on its last one (a runtime without CPU variants has
    no basic one to go to)."""
    index = RUNGS.index(rung) if rung in RUNGS else len(RUNGS) - 1
    for candidate in RUNGS[index + 1:]:
        if candidate != BASIC_CPU_VARIANT or host_env(candidate, lib_dir):
            return candidate
    return None


def is_native_signal(returncode: int | None) -> bool:
    """A process's exit status is a death by a native crash's signal."""
    return returncode is not None and returncode < 0 and -returncode in {int(s) for s in NATIVE_CRASHES}


def is_native_crash(crash: EngineCrashed) -> bool:
    return is_native_signal(crash.returncode)


def recovered_sentence(crash: EngineCrashed, key: Key, rung: str) -> str:
    """What happened and what changed, once, after the safer configuration answered."""
    return (f"{crash.message[0].upper()}{crash.message[1:]}; QuantDesk started it again "
            f"{RUNG_WORDS[rung]}, and it works: this is remembered for {key.words()} "
            "(quantdesk hw shows it; quantdesk runtime forget forgets it).")


def applied_sentence(key: Key, rung: str) -> str:
    """Said when a load goes straight to a learned configuration."""
    return f"Loaded {RUNG_WORDS[rung]}, as learned after an engine crash with {key.words()}."


def keep_log(crash: EngineCrashed, what: str) -> Path | None:
    """The engine log's last lines in a file of their own under the log folder; None where it cannot be written."""
    stamp = dt.datetime.now().strftime("%Y%m%d-%H%M%S-%f")
    path = paths.log_dir() / f"engine-crash-{stamp}.log"
    lines = [f"QuantDesk: {crash.message} ({what}); exit {crash.returncode}", "--- the engine's last lines ---",
             *crash.stderr_tail[-CRASH_LOG_LINES:]]
    try:
        write_text_atomic(path, "\n".join(lines) + "\n")
    except OSError:
        return None
    return path


def uncured(crash: EngineCrashed, what: str, tried: str = "") -> EngineCrashed:
    """The crash said once, with its log kept: no safer configuration left, or none for this engine."""
    log = keep_log(crash, what)
    message = crash.message + (f", also {tried}" if tried else "")
    where = f"the engine's last lines are in {log}" if log else ""
    hint = "; ".join(p for p in (crash.hint, where) if p)
    return EngineCrashed(message, hint, returncode=crash.returncode, stderr_tail=crash.stderr_tail, phase=crash.phase)
