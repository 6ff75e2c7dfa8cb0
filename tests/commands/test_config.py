"""``quantdesk config ls | get | set`` over the real settings file (app/settings, under the test's own config folder):
values typed by the setting they go to, a wrong type, a value out of range or an unknown key refused in words."""

from __future__ import annotations

import json

import pytest

from app import settings
from app.cli import main


def test_ls_lists_every_setting_with_its_value_and_what_it_takes(capsys):
    settings.update(theme="dark", memory_budget_gib=12.5)
    assert main(["config", "ls"]) == 0
    rows = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()}
    assert list(rows) == settings.keys()
    assert rows["theme"].split()[1] == "dark" and "system, light or dark" in rows["theme"]
    assert rows["memory_budget_gib"].split()[1] == "12.5" and rows["models_dir"].split()[1] == "none"
    assert main(["config", "ls", "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == settings.load().to_json()


@pytest.mark.parametrize(("key", "typed", "stored", "shown"), [
    ("theme", "light", "light", "light"),
    ("offline", "yes", True, "true"),
    ("check_updates", "off", False, "false"),
    ("default_n_ctx", "8192", 8192, "8192"),
    ("memory_budget_gib", "6.5", 6.5, "6.5"),
    ("memory_budget_gib", "none", None, "none"),
    ("max_loaded_models", "2", 2, "2"),
    ("idle_unload_minutes", "15", 15, "15"),
    ("saved_states_mb", "0", 0, "0"),
    ("saved_states_mb", "8192", 8192, "8192"),
    ("documents_max_file_mb", "512", 512, "512"),
    ("documents_watch_seconds", "0", 0, "0"),
    ("language", "de", "de", "de"),
])
def test_set_stores_the_typed_value_and_get_prints_it_back(capsys, key, typed, stored, shown):
    assert main(["config", "set", key, typed]) == 0
    assert capsys.readouterr().out == f"{key} = {shown}\n"
    assert getattr(settings.load(), key) == stored
    assert main(["config", "get", key]) == 0
    assert capsys.readouterr().out == f"{shown}\n"
    assert main(["config", "get", key, "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == stored


def test_set_models_dir_keeps_a_folder_and_none_goes_back_to_the_default(capsys, tmp_path):
    assert main(["config", "set", "models_dir", str(tmp_path / "models")]) == 0
    assert settings.models_dir() == tmp_path / "models"
    assert main(["config", "set", "models_dir", "none"]) == 0
    assert settings.load().models_dir is None


@pytest.mark.parametrize(("argv", "sentence"), [
    (["set", "default_n_ctx", "lots"], "default_n_ctx cannot be 'lots': it takes a whole number from 256 to 1048576"),
    (["set", "default_n_ctx", "100"], "default_n_ctx cannot be '100': it takes a whole number from 256 to 1048576"),
    (["set", "offline", "maybe"], "offline cannot be 'maybe': it takes true or false"),
    (["set", "theme", "blue"], "theme cannot be 'blue': it takes system, light or dark"),
    (["set", "idle_unload_minutes", "7"], "idle_unload_minutes cannot be '7': it takes 0 (never), 5, 15 or 60"),
    (["set", "max_loaded_models", "0"], "max_loaded_models cannot be '0': it takes a whole number from 1 to 16"),
    (["set", "saved_states_mb", "-1"],
     "saved_states_mb cannot be '-1': it takes a whole number from 0 (none saved) to 1048576"),
    (["set", "memory_budget_gib", "-2"],
     "memory_budget_gib cannot be '-2': it takes a number above 0, or none for what the fit check finds free"),
    (["set", "them", "dark"], "there is no setting 'them'; did you mean theme? (list them with: quantdesk config ls)"),
    (["get", "colour"], "there is no setting 'colour' (list them with: quantdesk config ls)"),
    (["set", "problem", "x"], "there is no setting 'problem' (list them with: quantdesk config ls)"),
])
def test_a_wrong_value_or_unknown_key_is_refused_in_words_and_nothing_changes(capsys, argv, sentence):
    settings.update(theme="dark", default_n_ctx=2048)
    before = settings.settings_path().read_text(encoding="utf-8")
    assert main(["config", *argv]) == 1
    captured = capsys.readouterr()
    assert captured.err == f"quantdesk: {sentence}\n" and captured.out == ""
    assert settings.settings_path().read_text(encoding="utf-8") == before
