"""The app's own settings: models folder, offline mode, default context length, theme, language, update checks; and
the two things they decide for the whole process, each resolved here and only here: the models folder
(``models_dir``) and offline mode (``is_offline``, ``apply_offline``).

One small JSON file in ``app.paths.config_dir()``, written atomically by ``app.files`` (a temp file in the same
folder, fsynced, then ``os.replace``), so a crash mid-write leaves the old file whole. The Hugging Face token is never
kept here: it lives where huggingface_hub's ``login`` keeps it (``app.hub.config.save_token``).

A file that cannot be read is not overwritten blindly: ``load`` returns the defaults with the reason in
``problem``, and the next ``save`` first keeps the unreadable file as ``settings.json.bad``.
"""

from __future__ import annotations

import difflib
import json
import os
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

from app import paths
from app.datatypes import DEFAULT_OVERFLOW, OVERFLOW_POLICIES
from app.errors import QuantDeskError
from app.files import write_text_atomic
from app.records import known_fields

FILE_NAME = "settings.json"
THEMES = ("system", "light", "dark")
LANGUAGES = ("system", "en", "de")  # the app's own translations (resources/translations); "system": the OS locale
MIN_CONTEXT = 256
MAX_CONTEXT = 1_048_576
OFFLINE_VAR = "HF_HUB_OFFLINE"
OFFLINE_VARIABLES = (OFFLINE_VAR, "TRANSFORMERS_OFFLINE")  # huggingface_hub reads HF_HUB_OFFLINE first
MODELS_DIR_VAR = "QUANTDESK_MODELS_DIR"
MAX_LOADED_DEFAULT = 4
MAX_LOADED_LIMIT = 16
IDLE_UNLOAD_CHOICES = (0, 5, 15, 60)  # minutes; 0: off
RESPONSES_RETENTION_DEFAULT = 30  # days the server keeps a stored response (app/server/response_store.py)
RESPONSES_RETENTION_LIMIT = 3650
SAVED_STATES_DEFAULT_MB = 4096
SAVED_STATES_MAX_MB = 1_048_576
DOCUMENTS_MAX_FILE_DEFAULT_MB = 100  # one document's limit: larger files are a line of the collection's report
DOCUMENTS_MAX_FILE_LIMIT_MB = 4096
DOCUMENTS_WATCH_DEFAULT_S = 30  # a watched folder scanned again this often (app/documents/indexer.py)
DOCUMENTS_WATCH_LIMIT_S = 86_400


@dataclass
class Settings:
    models_dir: str | None = None  # None: the default under the user data folder
    offline: bool = False
    default_n_ctx: int = 4096
    theme: str = "system"
    language: str = "system"  # read once at start-up (app.ui.common.translations.install)
    check_updates: bool = True  # ask the Hub (at most daily) whether downloaded models changed: app.hub.updates
    # Several models loaded (app/engine/pool.py): the memory budget (None: what the fit check finds free), how many
    # at most, and the minutes without a message after which one unloads (0: never).
    memory_budget_gib: float | None = None
    max_loaded_models: int = MAX_LOADED_DEFAULT
    idle_unload_minutes: int = 0
    # The local server's Responses API: days a stored response is kept for previous_response_id, then purged.
    responses_retention_days: int = RESPONSES_RETENTION_DEFAULT
    # Chats resumed without reading them again (app/engine/states.py): the disk their saved model states may take,
    # in MiB, the least recently used going first; 0: none are saved.
    saved_states_mb: int = SAVED_STATES_DEFAULT_MB
    # A conversation that no longer fits the context (app/engine/overflow.py): new chats' policy (each chat may
    # choose its own), and the server's for requests that name none.
    overflow: str = DEFAULT_OVERFLOW
    server_overflow: str = DEFAULT_OVERFLOW
    # Documents (app/documents): the largest file a collection reads, in MiB; how often a watched folder is scanned
    # again for new, changed and deleted files, in seconds (0: only when asked).
    documents_max_file_mb: int = DOCUMENTS_MAX_FILE_DEFAULT_MB
    documents_watch_seconds: int = DOCUMENTS_WATCH_DEFAULT_S
    problem: str = ""  # why the file could not be read (not saved)

    def normalised(self) -> Settings:
        """The same settings with every value in range (a hand-edited file may hold anything)."""
        ctx = self.default_n_ctx if isinstance(self.default_n_ctx, int) else Settings.default_n_ctx
        budget = self.memory_budget_gib if not isinstance(self.memory_budget_gib, bool) else None
        loaded = self.max_loaded_models if type(self.max_loaded_models) is int else MAX_LOADED_DEFAULT
        retention = self.responses_retention_days if type(self.responses_retention_days) is int \
            else RESPONSES_RETENTION_DEFAULT
        states = self.saved_states_mb if type(self.saved_states_mb) is int else SAVED_STATES_DEFAULT_MB
        doc_mb = self.documents_max_file_mb if type(self.documents_max_file_mb) is int \
            else DOCUMENTS_MAX_FILE_DEFAULT_MB
        watch = self.documents_watch_seconds if type(self.documents_watch_seconds) is int \
            else DOCUMENTS_WATCH_DEFAULT_S
        return Settings(
            models_dir=str(self.models_dir) if isinstance(self.models_dir, str) and self.models_dir.strip() else None,
            offline=self.offline is True,
            default_n_ctx=min(max(ctx, MIN_CONTEXT), MAX_CONTEXT),
            theme=self.theme if self.theme in THEMES else "system",
            language=self.language if self.language in LANGUAGES else "system",
            check_updates=self.check_updates is not False,
            memory_budget_gib=budget if isinstance(budget, (int, float)) and budget > 0 else None,
            max_loaded_models=min(max(loaded, 1), MAX_LOADED_LIMIT),
            idle_unload_minutes=self.idle_unload_minutes if self.idle_unload_minutes in IDLE_UNLOAD_CHOICES else 0,
            responses_retention_days=min(max(retention, 1), RESPONSES_RETENTION_LIMIT),
            saved_states_mb=min(max(states, 0), SAVED_STATES_MAX_MB),
            overflow=self.overflow if self.overflow in OVERFLOW_POLICIES else DEFAULT_OVERFLOW,
            server_overflow=self.server_overflow if self.server_overflow in OVERFLOW_POLICIES else DEFAULT_OVERFLOW,
            documents_max_file_mb=min(max(doc_mb, 1), DOCUMENTS_MAX_FILE_LIMIT_MB),
            documents_watch_seconds=min(max(watch, 0), DOCUMENTS_WATCH_LIMIT_S),
            problem=self.problem)

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data.pop("problem")
        return data


CONTEXT_HELP = "context length in tokens (default: the Default context in the app's Settings, 4096 unless changed)"


def context_length(asked: int | None) -> int:
    """A command's --ctx as given, else the Default context the user chose in Settings."""
    return asked if asked is not None else load().default_n_ctx


def models_dir() -> Path:
    """The library folder: QUANTDESK_MODELS_DIR, else the one chosen in Settings, else the default under the
    data folder (read at each call, so a change on the Settings page holds at once)."""
    override = os.environ.get(MODELS_DIR_VAR)
    if override:
        return Path(override)
    chosen = load().models_dir
    return Path(chosen).expanduser() if chosen else paths.default_models_dir()


def settings_path() -> Path:
    return paths.config_dir() / FILE_NAME


def load() -> Settings:
    path = settings_path()
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Settings()
    except OSError as exc:
        return Settings(problem=f"Could not read the settings file {path}: {exc.strerror or exc}.")
    try:
        data = json.loads(text)
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
    except ValueError as exc:
        return Settings(problem=f"The settings file {path} is damaged ({exc}); the defaults are in use, and the "
                                f"file will be kept as {FILE_NAME}.bad when settings are next saved.")
    values = known_fields(Settings, data)
    values.pop("problem", None)  # never read from the file
    return Settings(**values).normalised()


def save(settings: Settings) -> Path:
    """Write atomically; raises OSError (with the path) when the folder cannot be written."""
    path = settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists() and load().problem:
        os.replace(path, path.with_name(FILE_NAME + ".bad"))  # keep what we could not read
    return write_text_atomic(path, json.dumps(settings.normalised().to_json(), indent=2) + "\n")


def update(**changes: Any) -> Settings:
    """Load, change some values, save; returns the saved settings."""
    current = load()
    for key, value in changes.items():
        if key not in keys():
            raise KeyError(key)
        setattr(current, key, value)
    current.problem = ""
    current = current.normalised()
    save(current)
    return current


# --- one value typed as text (``quantdesk config set KEY VALUE``) -------------------------------------------
# What each setting is and what it takes, in the words `quantdesk config ls` and a refused `config set` print.
def _either(values: tuple[object, ...]) -> str:
    return ", ".join(str(v) for v in values[:-1]) + f" or {values[-1]}"


ABOUT = {
    "models_dir": ("the models folder", "a folder, or none for the default under the data folder"),
    "offline": ("never contact the Hub", "true or false"),
    "default_n_ctx": ("the default context length in tokens", f"a whole number from {MIN_CONTEXT} to {MAX_CONTEXT}"),
    "theme": ("the app's look", _either(THEMES)),
    "language": ("the app's language, read at start-up", _either(LANGUAGES)),
    "check_updates": ("ask the Hub at most daily whether downloaded models changed", "true or false"),
    "memory_budget_gib": ("the loaded models' memory budget in GiB",
                          "a number above 0, or none for what the fit check finds free"),
    "max_loaded_models": ("how many models stay loaded at most", f"a whole number from 1 to {MAX_LOADED_LIMIT}"),
    "idle_unload_minutes": ("minutes without a message before a loaded model unloads",
                            _either(tuple(m or "0 (never)" for m in IDLE_UNLOAD_CHOICES))),
    "responses_retention_days": ("days the local server keeps a stored response (Responses API)",
                                 f"a whole number from 1 to {RESPONSES_RETENTION_LIMIT}"),
    "saved_states_mb": ("the disk chats' saved model states may take, in MiB (they resume without being read again)",
                        f"a whole number from 0 (none saved) to {SAVED_STATES_MAX_MB}"),
    "overflow": ("what a new chat does once the conversation no longer fits the context", _either(OVERFLOW_POLICIES)),
    "server_overflow": ("what the local server does with a conversation that does not fit the context, unless the "
                        "request says", _either(OVERFLOW_POLICIES)),
    "documents_max_file_mb": ("the largest file a document collection reads, in MiB (larger ones are a report line)",
                              f"a whole number from 1 to {DOCUMENTS_MAX_FILE_LIMIT_MB}"),
    "documents_watch_seconds": ("how often a watched document folder is scanned again, in seconds",
                                f"a whole number from 0 (only when asked) to {DOCUMENTS_WATCH_LIMIT_S}"),
}
_TRUE, _FALSE, _NONE = ("true", "yes", "on", "1"), ("false", "no", "off", "0"), ("none", "default", "")


class SettingError(QuantDeskError):
    """A key that is no setting, or a value of the wrong type or out of range; the message says which."""


def keys() -> list[str]:
    return [f.name for f in fields(Settings) if f.name != "problem"]


def check_key(key: str) -> None:
    """SettingError, with the nearest name, when ``key`` is no setting."""
    if key not in keys():
        near = difflib.get_close_matches(key, keys(), n=1)
        raise SettingError(f"there is no setting {key!r}" + (f"; did you mean {near[0]}?" if near else ""),
                           "list them with: quantdesk config ls")


def parse(key: str, text: str) -> Any:
    """``text`` as the value of setting ``key``, checked against its type and range (never clamped: a value the
    app would change is refused, with what it takes)."""
    check_key(key)
    word = text.strip()
    if key in ("offline", "check_updates"):
        if word.lower() in _TRUE + _FALSE:
            return word.lower() in _TRUE
    elif key == "models_dir":
        return None if word.lower() in _NONE else str(Path(word).expanduser())
    elif key == "memory_budget_gib":
        if word.lower() in _NONE:
            return None
        number = _number(word, float)
        if number is not None and 0 < number < float("inf"):
            return number
    elif key in ("overflow", "server_overflow"):
        if word in OVERFLOW_POLICIES:
            return word
    elif key in ("theme", "language"):
        if word in (THEMES if key == "theme" else LANGUAGES):
            return word
    else:
        number = _number(word, int)
        if key == "default_n_ctx" and number is not None and MIN_CONTEXT <= number <= MAX_CONTEXT:
            return number
        if key == "max_loaded_models" and number is not None and 1 <= number <= MAX_LOADED_LIMIT:
            return number
        if key == "idle_unload_minutes" and number in IDLE_UNLOAD_CHOICES:
            return number
        if key == "responses_retention_days" and number is not None and 1 <= number <= RESPONSES_RETENTION_LIMIT:
            return number
        if key == "saved_states_mb" and number is not None and 0 <= number <= SAVED_STATES_MAX_MB:
            return number
        if key == "documents_max_file_mb" and number is not None and 1 <= number <= DOCUMENTS_MAX_FILE_LIMIT_MB:
            return number
        if key == "documents_watch_seconds" and number is not None and 0 <= number <= DOCUMENTS_WATCH_LIMIT_S:
            return number
    raise SettingError(f"{key} cannot be {text!r}: it takes {ABOUT[key][1]}")


def _number(word: str, kind: type[int] | type[float]) -> int | float | None:
    try:
        return kind(word)
    except ValueError:
        return None


def shown(value: Any) -> str:
    """A setting's value as ``parse`` takes it back."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


# --- offline mode ------------------------------------------------------------------------------------
# The app turns HF_HUB_OFFLINE on for its own requests (read at call time, here). Turning it off clears only
# a value the app set: one that came from the user's environment stays, and the Settings page says so.
_set_by_app = False


def offline_variable() -> str | None:
    """The variable that turns offline mode on, if one does."""
    for var in OFFLINE_VARIABLES:
        value = os.environ.get(var)
        if value:
            return var if value.strip().upper() in {"1", "ON", "YES", "TRUE"} else None
    return None


def is_offline() -> bool:
    return offline_variable() is not None


def apply_offline(on: bool) -> None:
    global _set_by_app
    if on:
        if not is_offline():
            os.environ[OFFLINE_VAR] = "1"
            _set_by_app = True
    elif _set_by_app and os.environ.get(OFFLINE_VAR) == "1":
        del os.environ[OFFLINE_VAR]
        _set_by_app = False


def offline_forced_by_environment() -> bool:
    """Offline because of the user's environment, not because of our setting."""
    return is_offline() and not (_set_by_app and os.environ.get(OFFLINE_VAR) == "1")


def apply_environment(settings: Settings) -> None:
    """What the settings change in this process at start-up."""
    apply_offline(settings.offline)
