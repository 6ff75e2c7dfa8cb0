"""The user's runtime pins: one for every model (``quantdesk runtime use NAME``) and per model file
(``quantdesk runtime use NAME --model FILE``, or the model bar's runtime menu). ``auto`` removes a pin.

Kept in ``<config>/runtimes.json``, written atomically like the settings file. An unreadable file
counts as "no pins" (the automatic choice), with the reason in ``Pins.problem``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from app import paths
from app.files import write_text_atomic

FILE_NAME = "runtimes.json"
AUTO = "auto"


@dataclass
class Pins:
    default: str | None = None  # pinned for every model
    models: dict[str, str] = field(default_factory=dict)  # absolute model path -> runtime name
    problem: str = ""

    def for_model(self, model_path: str | Path | None) -> tuple[str, str] | None:
        """(runtime name, where the pin is) for a model: its own pin, else the global one."""
        if model_path is not None:
            own = self.models.get(_key(model_path))
            if own:
                return own, "for this model"
        return (self.default, "for every model") if self.default else None


def _key(model_path: str | Path) -> str:
    return str(Path(model_path).expanduser().resolve())


def pins_path() -> Path:
    return paths.config_dir() / FILE_NAME


def load() -> Pins:
    try:
        data = json.loads(pins_path().read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Pins()
    except (OSError, ValueError) as exc:
        return Pins(problem=f"the runtime pins in {pins_path()} cannot be read ({exc}); the automatic choice is used")
    if not isinstance(data, dict):
        return Pins(problem=f"the runtime pins in {pins_path()} are not a JSON object; the automatic choice is used")
    default = data.get("default") if isinstance(data.get("default"), str) else None
    models = {str(k): v for k, v in (data.get("models") or {}).items() if isinstance(v, str)} \
        if isinstance(data.get("models"), dict) else {}
    return Pins(default or None, models)


def save(pins: Pins) -> Path:
    return write_text_atomic(pins_path(), json.dumps({"default": pins.default, "models": pins.models}, indent=2) + "\n")


def pin(name: str, model_path: str | Path | None = None) -> Pins:
    """Pin ``name`` for one model or for all (``auto`` removes the pin)."""
    pins = load()
    pins.problem = ""
    if model_path is None:
        pins.default = None if name == AUTO else name
    elif name == AUTO:
        pins.models.pop(_key(model_path), None)
    else:
        pins.models[_key(model_path)] = name
    save(pins)
    return pins


def forget(name: str) -> Pins:
    """Drop every pin of a runtime that was removed."""
    pins = load()
    pins.problem = ""
    if pins.default == name:
        pins.default = None
    pins.models = {k: v for k, v in pins.models.items() if v != name}
    save(pins)
    return pins
