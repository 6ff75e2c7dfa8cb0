"""Per-model presets: a model's own load settings (context, GPU layers, KV cache type, ...) and chat settings
(sampling, system prompt, thinking, overflow policy) that the user saved for it, applied on every load of that model:
the Chat (the model bar's settings and the chat's sampling), ``quantdesk chat`` (its flags win) and the server's
on-demand loads (where the preset's load settings fit).

A preset is keyed by the model's library identity: ``REPO/FILE`` for a library model that came from a Hub repo (a
folder model: ``REPO``), so that it follows the model when the library is moved; the model's absolute path for any
other file. The runtime is not kept here: a model's runtime pin is app/runtimes/pins.py's, per model already.

Kept in ``<config>/model_presets.json``, written atomically (app/files). An unreadable file counts as "no presets",
with the reason in ``Presets.problem``; saving over it is refused, so that nothing the user had is lost unseen.
The order of precedence is one rule in one place each: load settings in ``ModelPreset.apply_load`` (a value given on
the command line or typed in the model bar wins), sampling in app.datatypes.choose_sampling (the chat's own value,
then the preset's, then the model's, then QuantDesk's). llama-server's INI format: app/hub/preset_ini.py.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from app import paths
from app.datatypes import LoadSettings, choose_sampling
from app.files import write_text_atomic

log = logging.getLogger(__name__)

FILE_NAME = "model_presets.json"
VERSION = 1
# The LoadSettings fields a preset may hold (llama-server's keys for them: app/hub/preset_ini.py).
LOAD_FIELDS = ("n_ctx", "gpu_layers", "kv_cache_type", "threads", "flash_attention", "cpu_moe", "mmproj", "draft",
               "draft_tokens", "draft_p_min", "chat_template")
# The SamplingSettings fields a preset may hold: a chat's settings, less what belongs to one conversation (its JSON
# schema, tools, stop strings).
CHAT_FIELDS = ("temperature", "top_p", "top_k", "min_p", "repeat_penalty", "max_tokens", "seed", "enable_thinking",
               "reasoning_effort", "reasoning_budget", "reasoning_budget_message", "reasoning_format",
               "chat_template_kwargs")
KV_CACHE_TYPES = ("f16", "q8_0", "q4_0")


class PresetError(ValueError):
    """A preset that cannot be saved: a value no engine takes, or a presets file that cannot be read or written."""


@dataclass
class ModelPreset:
    key: str  # REPO/FILE (a library model from the Hub), REPO (a folder model from the Hub), else the absolute path
    path: str = ""  # the model's path when the preset was last saved (shown; found again by ``key``)
    load: dict[str, Any] = field(default_factory=dict)  # LOAD_FIELDS given, by LoadSettings' names
    sampling: dict[str, Any] = field(default_factory=dict)  # CHAT_FIELDS given, by SamplingSettings' names
    system_prompt: str | None = None
    # The overflow policy when the context is full (app/engine/overflow.py): a chat without its own follows it before
    # the Settings default (``overflow_policy``); kept as saved, a name it does not know is not applied.
    overflow: str | None = None

    def overflow_policy(self) -> str | None:
        from app.datatypes import OVERFLOW_POLICIES

        return self.overflow if self.overflow in OVERFLOW_POLICIES else None

    def is_empty(self) -> bool:
        return not self.load and not self.sampling and self.system_prompt is None and self.overflow is None

    def apply_load(self, settings: LoadSettings, given: tuple[str, ...] = ()) -> LoadSettings:
        """``settings`` with this preset's load values, except the fields named in ``given`` (set by the user for this
        load: a command-line flag, the model bar). A quantized KV cache from the preset turns flash attention on
        unless the preset or the load says otherwise: llama.cpp refuses a quantized V cache without it (as the
        model bar's own q8_0 choice does)."""
        values = {k: v for k, v in self.load.items() if k not in given}
        if values.get("kv_cache_type", "f16") != "f16" and "flash_attention" not in self.load \
                and "flash_attention" not in given:
            values["flash_attention"] = True
        return dataclasses.replace(settings, **values)

    def validate(self) -> None:
        """PresetError naming each value no engine would take."""
        problems = []
        unknown = sorted(set(self.load) - set(LOAD_FIELDS)) + sorted(set(self.sampling) - set(CHAT_FIELDS))
        if unknown:
            problems.append(f"no such setting: {', '.join(unknown)}")
        kv = self.load.get("kv_cache_type")
        if kv is not None and kv not in KV_CACHE_TYPES:
            problems.append(f"the KV cache type must be one of {', '.join(KV_CACHE_TYPES)}, not {kv!r}")
        try:
            LoadSettings(**{k: v for k, v in self.load.items() if k in LOAD_FIELDS}).validate()
            choose_sampling({k: v for k, v in self.sampling.items() if k in CHAT_FIELDS}, None).settings.validate()
        except (ValueError, TypeError) as exc:
            problems.append(str(exc))
        if self.system_prompt is not None and not isinstance(self.system_prompt, str):
            problems.append("the system prompt must be text")
        if problems:
            raise PresetError("; ".join(problems))

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"path": self.path, "load": self.load, "sampling": self.sampling}
        if self.system_prompt is not None:
            out["system_prompt"] = self.system_prompt
        if self.overflow is not None:
            out["overflow"] = self.overflow
        return out

    @classmethod
    def from_json(cls, key: str, data: dict[str, Any]) -> ModelPreset:
        """A stored preset; values a newer version wrote (unknown fields) are kept out of the settings."""
        load = data["load"] if isinstance(data.get("load"), dict) else {}
        sampling = data["sampling"] if isinstance(data.get("sampling"), dict) else {}
        system = data.get("system_prompt")
        overflow = data.get("overflow")
        return cls(key, str(data.get("path") or ""), {k: v for k, v in load.items() if k in LOAD_FIELDS},
                   {k: v for k, v in sampling.items() if k in CHAT_FIELDS},
                   system if isinstance(system, str) else None, overflow if isinstance(overflow, str) else None)

    def lines(self) -> list[str]:
        """The preset's values in words, one a line (``quantdesk preset show``)."""
        out = [f"{name}: {value}" for name, value in self.load.items()]
        out += [f"{name}: {value}" for name, value in self.sampling.items()]
        if self.system_prompt is not None:
            out.append(f"system prompt: {self.system_prompt}")
        if self.overflow is not None:
            out.append(f"overflow: {self.overflow}")
        return out


@dataclass
class Presets:
    models: dict[str, ModelPreset] = field(default_factory=dict)
    problem: str = ""  # why the file could not be read (then nothing is saved over it)


def presets_path() -> Path:
    return paths.config_dir() / FILE_NAME


def load() -> Presets:
    path = presets_path()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Presets()
    except (OSError, ValueError) as exc:
        return Presets(problem=f"the model presets in {path} cannot be read ({exc})")
    if not isinstance(data, dict) or not isinstance(data.get("models", {}), dict):
        return Presets(problem=f"the model presets in {path} are not a JSON object of models")
    return Presets({str(k): ModelPreset.from_json(str(k), v) for k, v in (data.get("models") or {}).items()
                    if isinstance(v, dict)})


def save(presets: Presets) -> Path:
    if presets.problem:
        raise PresetError(f"{presets.problem}; it is left as it is: fix or remove the file first")
    models = {k: p.to_json() for k, p in sorted(presets.models.items()) if not p.is_empty()}
    try:
        return write_text_atomic(presets_path(), json.dumps({"version": VERSION, "models": models}, indent=2,
                                                            ensure_ascii=False) + "\n")
    except OSError as exc:  # a full disk, a read-only folder: said, and the old file stays whole
        raise PresetError(f"the model presets cannot be written to {presets_path()}: {exc.strerror or exc}") from None


# --- keys --------------------------------------------------------------------------------------------------------


def library_entries() -> list[Any]:
    """The library's models as it lists them now (no scan: a preset lookup on every load stays cheap)."""
    from app.hub.errors import LibraryError
    from app.hub.library import Library

    try:
        return Library().entries(refresh=False)
    except (LibraryError, OSError):
        return []


def entry_key(entry: Any) -> str:
    """The key of a library entry: REPO/FILE for a file from a Hub repo, REPO for a folder from one, else its path."""
    if entry.repo_id:
        return entry.repo_id if Path(entry.path).is_dir() or not entry.path.lower().endswith(".gguf") \
            else f"{entry.repo_id}/{Path(entry.path).name}"
    return str(Path(entry.path).expanduser().resolve())


def model_key(model: str | Path, entries: list[Any] | None = None) -> str:
    """The preset key of a model: a library entry (by its path, id or name) keeps its library identity; any other
    file or folder is keyed by its absolute path. A remote model (``remote:CONN/MODEL``) is keyed by its reference."""
    text = str(model)
    if text.startswith("remote:"):
        return text
    resolved = str(Path(text).expanduser().resolve())
    for entry in library_entries() if entries is None else entries:
        if str(Path(entry.path).expanduser().resolve()) == resolved:
            return entry_key(entry)
    return resolved


def for_model(model: str | Path | None) -> ModelPreset | None:
    """This model's preset (None: it has none, the file cannot be read, or the preset holds a value no engine takes,
    as a hand-edited file may: then the log says why, and the file keeps it for the user to fix)."""
    if not model:
        return None
    found = load().models.get(model_key(model))
    if found is None or found.is_empty():
        return None
    try:
        found.validate()
    except PresetError as exc:
        log.warning("the preset of %s is not used: %s", found.key, exc)
        return None
    return found


def put(preset: ModelPreset) -> ModelPreset:
    """Save ``preset`` (validated) in place of the model's old one; an empty preset removes it."""
    preset.validate()
    presets = load()
    if preset.is_empty():
        presets.models.pop(preset.key, None)
    else:
        presets.models[preset.key] = preset
    save(presets)
    return preset


def update(model: str | Path, *, load_values: dict[str, Any] | None = None, sampling: dict[str, Any] | None = None,
           system_prompt: str | None = None, overflow: str | None = None, unset: tuple[str, ...] = ()) -> ModelPreset:
    """Change some of a model's preset (made if it has none): the values given replace the old ones; None leaves a
    value as it was; ``unset`` names fields to forget (LoadSettings' or SamplingSettings' names, ``system_prompt``,
    ``overflow``)."""
    key = model_key(model)
    old = load().models.get(key) or ModelPreset(key)
    preset = ModelPreset(key, str(Path(model).expanduser().resolve()) if not str(model).startswith("remote:")
                         else str(model), dict(old.load), dict(old.sampling), old.system_prompt, old.overflow)
    preset.load.update(load_values or {})
    preset.sampling.update(sampling or {})
    if system_prompt is not None:
        preset.system_prompt = system_prompt
    if overflow is not None:
        preset.overflow = overflow
    for name in unset:
        preset.load.pop(name, None)
        preset.sampling.pop(name, None)
        if name == "system_prompt":
            preset.system_prompt = None
        if name == "overflow":
            preset.overflow = None
    return put(preset)


def remove(model_or_key: str) -> ModelPreset:
    """Forget a model's preset (by the model or by its key); KeyError when it has none."""
    presets = load()
    key = model_or_key if model_or_key in presets.models else model_key(model_or_key)
    found = presets.models.pop(key)
    save(presets)
    return found


def find(model_or_key: str) -> ModelPreset | None:
    """A preset by its key, or by the model it belongs to (a path, or a library model's id or name)."""
    presets = load()
    if model_or_key in presets.models:
        return presets.models[model_or_key]
    path: str | None = model_or_key
    if not Path(model_or_key).expanduser().exists():
        from app.hub.resolve import library_model

        try:
            path = library_model(model_or_key)  # a name several models answer to is refused, listing them
        except OSError:
            return None
    return presets.models.get(model_key(path)) if path else None


def path_of(preset: ModelPreset) -> str | None:
    """Where the preset's model is now: the library entry of its key, else the path it was saved with, if it is
    still there."""
    for entry in library_entries():
        if entry_key(entry) == preset.key:
            return str(entry.path)
    return preset.path if preset.path and Path(preset.path).exists() else None


def sampling_for(model: str | Path | None) -> dict[str, Any] | None:
    """The sampling values of a model's preset (None: no preset), for a generation's choose_sampling."""
    preset = for_model(model)
    return dict(preset.sampling) if preset is not None else None
