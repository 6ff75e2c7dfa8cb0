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


def log_dir() -> Path:
    """The log (app.logs): under the user state folder on Linux ($XDG_STATE_HOME/QuantDesk/log)."""
    return Path(platformdirs.user_log_dir(APP_NAME, appauthor=False))


def models_dir() -> Path:
    """The library folder: QUANTDESK_MODELS_DIR, else the one chosen in Settings (app.settings), else the
    default under the data folder."""
    override = os.environ.get("QUANTDESK_MODELS_DIR")
    if override:
        return Path(override)
    from app import settings  # imported here: app.settings itself uses config_dir()

    chosen = settings.load().models_dir
    return Path(chosen).expanduser() if chosen else default_models_dir()


def default_models_dir() -> Path:
    return data_dir() / "models"
