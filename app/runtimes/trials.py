"""Trial before a runtime becomes the default: a runtime built (or rebuilt, or built from another llama-cpp-python
version with ``quantdesk runtime build NAME --version V``) replaces the one of its name only for the models whose
trial load and warm-up on it succeeded. Until then, and after a failure, a model loads on the previous build.

- ``keep_previous``: when a build replaces a runtime folder, the folder it replaces is kept as
  ``runtimes/.previous/NAME`` (the two last builds of each runtime: the one in use and the one before).
- A runtime is *on trial* for a model while it has a previous build and no trial of that model on it succeeded yet.
  The trial is the model's load itself: it runs in an engine host (a child) and ends with the warm-up decode
  (backends/llama_cpp/backend.py), so a build that crashes or cannot load the model fails it there;
  ``app/engine/client.py`` then loads the model on the previous build and says so. Each outcome is kept per model
  in the runtime folder's ``trials.json``.
- ``rollback``: the previous build back in place (a command and a click), the newer one kept as the previous.

Qt-free; imports no engine.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from app.files import write_text_atomic
from app.runtimes import catalog

TRIALS = "trials.json"


class RollbackError(Exception):
    pass


def previous(name: str) -> catalog.Runtime | None:
    """The build a runtime replaced, as a runtime (its folder name is the runtime's name)."""
    folder = catalog.previous_folder(name)
    return catalog.read_folder(folder, "user") if (folder / catalog.MANIFEST).is_file() else None


def keep_previous(final: Path) -> None:
    """Before a new build takes ``final``'s place: the build there becomes the runtime's previous one (the one before
    it goes)."""
    if not final.exists():
        return
    kept = catalog.previous_folder(final.name)
    kept.parent.mkdir(parents=True, exist_ok=True)
    if kept.exists():
        shutil.rmtree(kept, ignore_errors=True)
    os.replace(final, kept)


def _records(runtime: catalog.Runtime) -> dict[str, dict[str, object]]:
    folder = runtime.folder
    try:
        found = json.loads((folder / TRIALS).read_text(encoding="utf-8")) if folder is not None else {}
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


@dataclass(frozen=True)
class Trial:
    runtime: catalog.Runtime  # the new build, on trial
    fallback: catalog.Runtime  # its previous build: what the model loads on until the trial succeeded

    def words(self) -> str:
        return (f"the new {self.runtime.name} runtime (llama-cpp-python {self.runtime.version or '?'}, built "
                f"{self.runtime.built_at[:10] or 'lately'})")


def on_trial(name: str, model_path: str | Path) -> Trial | None:
    """The trial a load of ``model_path`` on runtime ``name`` is, None where there is none (no previous build to fall
    back on, or the model passed its trial on this build already). A failed trial stays failed: the model goes on
    loading on the previous build until a new build or a rollback."""
    runtime = catalog.find(name)
    if runtime is None or runtime.origin != "user":
        return None
    before = previous(name)
    if before is None or before.problem:
        return None
    record = _records(runtime).get(str(Path(model_path).resolve()))
    if isinstance(record, dict) and record.get("ok"):
        return None
    return Trial(runtime, before)


def failed_before(trial: Trial, model_path: str | Path) -> str:
    """Why the model's trial on this build failed before ("" where it has not been tried)."""
    record = _records(trial.runtime).get(str(Path(model_path).resolve()))
    return str(record.get("reason", "")) if isinstance(record, dict) and not record.get("ok") else ""


def record(trial: Trial, model_path: str | Path, ok: bool, reason: str = "") -> None:
    folder = trial.runtime.folder
    if folder is None:
        return
    records = _records(trial.runtime)
    records[str(Path(model_path).resolve())] = {
        "ok": ok, "reason": reason, "at": dt.datetime.now().astimezone().isoformat(timespec="seconds")}
    write_text_atomic(folder / TRIALS, json.dumps(records, indent=2) + "\n")


def rollback(name: str) -> catalog.Runtime:
    """The runtime's previous build back in place; the build it replaces becomes the previous one."""
    current = catalog.find(name)
    before = previous(name)
    if before is None:
        raise RollbackError(f"the {name} runtime has no previous build to go back to")
    if current is None or current.origin != "user" or current.folder is None:
        raise RollbackError(f"the {name} runtime is not one built here")
    swap = current.folder.with_name(f".{name}.rollback-{os.getpid()}")
    os.replace(current.folder, swap)
    os.replace(catalog.previous_folder(name), current.folder)
    os.replace(swap, catalog.previous_folder(name))
    back = catalog.find(name)
    assert back is not None
    return back
