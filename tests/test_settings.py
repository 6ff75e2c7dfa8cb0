"""app.settings: the app's settings file, atomic writes, damaged files kept, offline mode, and the models
folder that app.settings.models_dir() follows."""

from __future__ import annotations

import json
import os

import pytest

from app import paths, settings
from app.hub import config


@pytest.fixture(autouse=True)
def fresh_offline_state(monkeypatch):
    monkeypatch.setattr(settings, "_set_by_app", False)
    monkeypatch.setenv(settings.OFFLINE_VAR, "placeholder")  # registers the variable for restoring
    monkeypatch.delenv(settings.OFFLINE_VAR)


def test_defaults_without_a_file():
    loaded = settings.load()
    assert loaded == settings.Settings()
    assert not settings.settings_path().exists()


def test_save_and_load_round_trip():
    path = settings.save(settings.Settings(models_dir="/data/models", offline=True, default_n_ctx=8192,
                                           theme="dark"))
    assert path == paths.config_dir() / "settings.json"
    loaded = settings.load()
    assert (loaded.models_dir, loaded.offline, loaded.default_n_ctx, loaded.theme) == (
        "/data/models", True, 8192, "dark")
    assert not [p for p in path.parent.iterdir() if p.name != "settings.json"]  # no temp file left behind


def test_update_keeps_other_values():
    settings.update(theme="light")
    settings.update(default_n_ctx=2048)
    loaded = settings.load()
    assert (loaded.theme, loaded.default_n_ctx) == ("light", 2048)
    with pytest.raises(KeyError):
        settings.update(hf_token="hf_secret")


def test_no_token_is_ever_written():
    config.save_token("hf_abcdefghijklmnop")
    settings.update(offline=True)
    assert "hf_" not in settings.settings_path().read_text()
    assert set(json.loads(settings.settings_path().read_text())) == {"models_dir", "offline", "default_n_ctx", "theme",
                                                                     "language", "check_updates", "memory_budget_gib",
                                                                     "max_loaded_models", "idle_unload_minutes",
                                                                     "responses_retention_days",
                                                                     "saved_states_mb",
                                                                     "overflow", "server_overflow",
                                                                     "documents_max_file_mb",
                                                                     "documents_watch_seconds"}


def test_values_out_of_range_are_normalised():
    settings.settings_path().parent.mkdir(parents=True, exist_ok=True)
    settings.settings_path().write_text(json.dumps({"default_n_ctx": 12, "theme": "purple", "language": "xx",
                                                    "offline": "yes", "models_dir": "  ", "unknown": 1}))
    loaded = settings.load()
    assert (loaded.default_n_ctx, loaded.theme, loaded.offline, loaded.models_dir) == (256, "system", False, None)
    assert loaded.check_updates is True  # on unless switched off
    assert loaded.language == "system"  # one QuantDesk has no translation for
    assert loaded.problem == ""


def test_loaded_models_limits_are_normalised_and_make_the_pool_limits():
    from app.engine.pool import limits_from

    settings.settings_path().parent.mkdir(parents=True, exist_ok=True)
    settings.settings_path().write_text(json.dumps({"memory_budget_gib": -3, "max_loaded_models": 99,
                                                    "idle_unload_minutes": 7}))
    loaded = settings.load()
    assert (loaded.memory_budget_gib, loaded.max_loaded_models, loaded.idle_unload_minutes) == (None, 16, 0)
    assert limits_from(loaded).idle_ttl_s is None and limits_from(loaded).budget_bytes is None
    saved = settings.update(memory_budget_gib=1.5, max_loaded_models=2, idle_unload_minutes=15)
    limits = limits_from(settings.load())
    assert saved.max_loaded_models == 2
    assert (limits.budget_bytes, limits.max_loaded, limits.idle_ttl_s) == (3 << 29, 2, 900.0)


def test_damaged_file_is_kept_not_overwritten():
    path = settings.settings_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text('{"theme": "dark", ')
    loaded = settings.load()
    assert loaded.theme == "system" and "damaged" in loaded.problem and str(path) in loaded.problem
    settings.update(theme="light")
    assert path.with_name("settings.json.bad").read_text() == '{"theme": "dark", '
    assert settings.load().theme == "light"


def test_failed_write_leaves_the_old_file(monkeypatch):
    settings.update(theme="dark")

    def disk_full(*_args, **_kwargs):  # the new bytes are written, but never reach the disk
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch, pytest.raises(OSError):
        patch.setattr(os, "fsync", disk_full)
        settings.update(theme="light")
    assert settings.load().theme == "dark"
    assert [p.name for p in settings.settings_path().parent.iterdir()] == ["settings.json"]


def test_models_dir_follows_the_setting(monkeypatch, tmp_path):
    assert settings.models_dir() == paths.default_models_dir()
    settings.update(models_dir=str(tmp_path / "big-disk"))
    assert settings.models_dir() == tmp_path / "big-disk"
    monkeypatch.setenv("QUANTDESK_MODELS_DIR", str(tmp_path / "env"))
    assert settings.models_dir() == tmp_path / "env"  # the environment still wins
    monkeypatch.delenv("QUANTDESK_MODELS_DIR")
    settings.update(models_dir=None)
    assert settings.models_dir() == paths.default_models_dir()


def test_offline_mode_sets_and_clears_the_variable():
    assert not settings.is_offline()
    settings.apply_offline(True)
    assert os.environ[settings.OFFLINE_VAR] == "1" and settings.is_offline()
    assert not settings.offline_forced_by_environment()
    settings.apply_offline(False)
    assert settings.OFFLINE_VAR not in os.environ and not settings.is_offline()


def test_offline_from_the_environment_is_not_cleared(monkeypatch):
    monkeypatch.setenv(settings.OFFLINE_VAR, "1")
    assert settings.offline_forced_by_environment()
    settings.apply_offline(True)
    settings.apply_offline(False)
    assert os.environ[settings.OFFLINE_VAR] == "1"
    assert settings.offline_forced_by_environment()


def test_apply_environment_at_start_up():
    settings.update(offline=True)
    settings.apply_environment(settings.load())
    assert settings.is_offline()


def test_the_saved_states_limit_is_normalised():
    settings.settings_path().parent.mkdir(parents=True, exist_ok=True)
    settings.settings_path().write_text(json.dumps({"saved_states_mb": -5}))
    assert settings.load().saved_states_mb == 0  # off, not a negative size
    settings.settings_path().write_text(json.dumps({"saved_states_mb": "lots"}))
    assert settings.load().saved_states_mb == settings.SAVED_STATES_DEFAULT_MB
    settings.settings_path().write_text(json.dumps({"documents_max_file_mb": 0, "documents_watch_seconds": -3}))
    assert (settings.load().documents_max_file_mb, settings.load().documents_watch_seconds) == (1, 0)
    settings.settings_path().write_text(json.dumps({"documents_max_file_mb": True, "documents_watch_seconds": "x"}))
    assert (settings.load().documents_max_file_mb, settings.load().documents_watch_seconds) == (
        settings.DOCUMENTS_MAX_FILE_DEFAULT_MB, settings.DOCUMENTS_WATCH_DEFAULT_S)


def test_the_overflow_policies_are_checked_and_normalised():
    settings.settings_path().parent.mkdir(parents=True, exist_ok=True)
    settings.settings_path().write_text(json.dumps({"overflow": "forget", "server_overflow": 3}))
    loaded = settings.load()
    assert (loaded.overflow, loaded.server_overflow) == ("stop", "stop")
    assert settings.parse("overflow", "compact") == "compact"
    assert settings.parse("server_overflow", " drop-oldest ") == "drop-oldest"
    with pytest.raises(settings.SettingError, match="overflow cannot be 'forget': it takes stop, drop-oldest, "
                                                    "truncate-middle or compact"):
        settings.parse("overflow", "forget")
    assert settings.update(overflow="truncate-middle").overflow == "truncate-middle"
