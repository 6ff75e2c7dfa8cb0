"""``quantdesk ls --check-updates`` and ``quantdesk update`` against the Hub stand-in, through app.cli.main."""

from __future__ import annotations

import json
from pathlib import Path

from app import settings
from app.cli import main
from app.hub.library import Library
from tests.hub.conftest import ENTRY, FILE, REPO, sha256


def test_ls_check_updates_says_what_changed_and_plain_ls_remembers_it(gguf_repo, fixed_template, capsys):
    server, _ = gguf_repo
    server.update_repo(REPO, {FILE: fixed_template})
    assert main(["ls", "--check-updates"]) == 0
    out = capsys.readouterr().out
    assert f"    update available: chat template changed (quantdesk update {ENTRY})\n" in out
    assert f"      {FILE}: chat template changed\n" in out
    server.log.clear()
    assert main(["ls"]) == 0  # no request: what the last check found
    assert "update available: chat template changed" in capsys.readouterr().out and server.log == []
    assert main(["ls", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)["updates"][ENTRY]
    assert found["available"] and found["changes"] == [{"path": FILE, "kind": "template", "of_model": True}]


def test_ls_check_updates_on_an_unchanged_library_says_up_to_date(gguf_repo, capsys):
    assert main(["ls", "--check-updates"]) == 0
    assert "    up to date\n" in capsys.readouterr().out


def test_ls_check_updates_offline_or_switched_off_is_a_sentence_and_no_request(gguf_repo, monkeypatch, capsys):
    server, _ = gguf_repo
    server.log.clear()
    settings.update(offline=True)
    assert main(["ls", "--check-updates"]) != 0
    assert "offline mode is on" in capsys.readouterr().err
    settings.update(offline=False, check_updates=False)
    assert main(["ls", "--check-updates"]) != 0
    assert "Update checks are off" in capsys.readouterr().err
    assert server.log == []


def test_update_fetches_the_changed_file_and_then_is_up_to_date(gguf_repo, fixed_template, capsys):
    server, entry = gguf_repo
    new_commit = server.update_repo(REPO, {FILE: fixed_template})
    assert main(["update", ENTRY, "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result == {"id": ENTRY, "updated": True, "commit": new_commit, "reasons": ["chat template changed"],
                      "fetched": [FILE]}
    assert sha256(Path(entry.path)) == sha256(fixed_template) and Library().find(ENTRY).commit_hash == new_commit
    assert main(["update", ENTRY]) == 0
    assert f"{ENTRY} is up to date" in capsys.readouterr().out


def test_update_that_fails_verification_says_why_and_keeps_the_model(gguf_repo, fixed_template, capsys):
    server, entry = gguf_repo
    server.update_repo(REPO, {FILE: fixed_template})
    server.faults.add(FILE, "wrong_byte", times=-1, offset=4096)
    before = sha256(Path(entry.path))
    assert main(["update", ENTRY]) == 1
    err = capsys.readouterr().err
    assert f"{FILE} from {REPO} failed verification" in err and "nothing was installed" in err
    assert sha256(Path(entry.path)) == before and Library().find(ENTRY) == entry


def test_online_flag_checks_despite_the_saved_offline_mode(gguf_repo, fixed_template, capsys):
    server, _ = gguf_repo
    server.update_repo(REPO, {FILE: fixed_template})
    settings.update(offline=True)
    assert main(["ls", "--check-updates", "--online"]) == 0
    assert "update available: chat template changed" in capsys.readouterr().out
