"""Where QuantDesk keeps things. Every path comes from platformdirs, so tests redirect all of them
through the XDG_* variables (Linux) and the user's real folders are never touched."""

from __future__ import annotations

import os
from pathlib import Path

import platformdirs

APP_NAME = "QuantDesk"


def config_dir() -> Path:
    return Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def data_dir() -> Path:
    return Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))


def cache_dir() -> Path:
    return Path(platformdirs.user_cache_dir(APP_NAME, appauthor=False))


def models_dir() -> Path:
    """The library folder. QUANTDESK_MODELS_DIR overrides the default (the setting will too)."""
    override = os.environ.get("QUANTDESK_MODELS_DIR")
    return Path(override) if override else data_dir() / "models"
