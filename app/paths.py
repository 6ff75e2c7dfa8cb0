"""Where QuantDesk keeps things. Every path comes from platformdirs, so tests redirect all of them
through the XDG_* variables (Linux) and the user's real folders are never touched. This module imports nothing
of the app: the models folder the user chose is resolved by app.settings.models_dir(), on top of these."""

from __future__ import annotations

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


def default_models_dir() -> Path:
    return data_dir() / "models"
