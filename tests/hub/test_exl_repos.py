"""EXL2 / EXL3 repos on the Hub stand-in, laid out as uploaders do (a bit rate per branch, the card and
measurement.json on main): listed with one quant per branch, recognised without tags, pulled by bit rate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from app.hub.download import DownloadRequest, exl_branch_for
from app.hub.errors import HubError
from tests.fixtures.hub_server import EXL_TINY, exl_branch_files, exl_safetensors
from tests.hub.conftest import sha256

EXL2_REPO = "turbo/Tiny-exl2"


def _show(repo: str, capsys) -> dict:
    assert main(["show", repo, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def _config_reads(hub) -> list[str]:
    return [r.path for r in hub.log if r.file == "config.json" and r.method == "GET"]


def test_show_lists_each_bit_rate_branch_as_a_quant_sized_by_its_weights(hub_env, capsys):
    commits = hub_env.add_exl_repo(EXL2_REPO, "exl2", {"4.0bpw": 4.0, "6_5": 6.5}, tags=["exl2"])
    details = _show(EXL2_REPO, capsys)
    assert details["format"] == "exl2" and details["commit"] == commits["main"]
    assert sorted(details["branches"]) == ["4.0bpw", "6_5", "main"]
    quants = {g["revision"]: g for g in details["quants"]}
    assert set(quants) == {"4.0bpw", "6_5"}  # the bare "6_5" of bartowski-style repos too, once EXL is known
    assert quants["4.0bpw"]["quant"] == "4.0bpw" and quants["6_5"]["quant"] == "6.5bpw"
    assert quants["4.0bpw"]["size"] == len(exl_safetensors("exl2", 4.0, EXL_TINY))
    assert quants["6_5"]["size"] == len(exl_safetensors("exl2", 6.5, EXL_TINY))
    assert sorted(quants["4.0bpw"]["files"]) == sorted(exl_branch_files("exl2", 4.0))
    assert [g["revision"] for g in details["quants"]] == ["4.0bpw", "6_5"]  # smallest first
    assert _config_reads(hub_env) == []  # the tags told the format: no config.json was read

    assert main(["show", EXL2_REPO]) == 0
    out = capsys.readouterr().out
    assert "format exl2" in out and "6.5bpw" in out and "branch 6_5: " in out


def test_untagged_exl3_repo_is_recognised_by_a_branch_config(hub_env, capsys):
    hub_env.add_exl_repo("acme/Tiny-Quants", "exl3", {"3.0bpw": 3.0, "5.0bpw": 5.0})
    details = _show("acme/Tiny-Quants", capsys)
    assert details["format"] == "exl3"  # neither the tags nor the name say it; 3.0bpw's config.json does
    assert [(g["quant"], g["revision"]) for g in details["quants"]] == [("3.0bpw", "3.0bpw"), ("5.0bpw", "5.0bpw")]
    assert len(_config_reads(hub_env)) == 1


def test_untagged_single_quant_repo_is_recognised_by_its_own_config(hub_env, capsys):
    commit = hub_env.add_repo("acme/Tiny-single", exl_branch_files("exl2", 5.0))
    details = _show("acme/Tiny-single", capsys)
    assert details["format"] == "exl2"
    (group,) = details["quants"]
    assert (group["quant"], group["revision"]) == ("5.0bpw", "main")  # the bits come from quantization_config
    assert group["size"] == len(exl_safetensors("exl2", 5.0, EXL_TINY))
    assert details["commit"] == commit


def test_plain_safetensors_repo_stays_plain(hub_env, capsys):
    files = exl_branch_files("exl2", 4.0, quantization_config=False)
    hub_env.add_repo("acme/Tiny-fp16", files)
    details = _show("acme/Tiny-fp16", capsys)
    assert details["format"] == "safetensors" and details["quants"] == []


def test_pull_by_bit_rate_fetches_the_whole_branch_pinned_and_registers_it(hub_env, capsys):
    commits = hub_env.add_exl_repo(EXL2_REPO, "exl2", {"4.0bpw": 4.0, "6.0bpw": 6.0}, tags=["exl2"])
    assert main(["pull", EXL2_REPO, "--quant", "6.0bpw", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    folder = Path(result["path"])
    assert folder.name == "Tiny-exl2@6.0bpw" and result["commit"] == commits["6.0bpw"]
    expected = exl_branch_files("exl2", 6.0)
    assert sorted(result["files"]) == sorted(expected)  # the branch as a set; main's card stays behind
    for name, data in expected.items():
        assert sha256(folder / name) == sha256(data)
    fetched = {r.path for r in hub_env.log if "/resolve/" in r.path}
    assert fetched and all(f"/resolve/{commits['6.0bpw']}/" in p for p in fetched)  # pinned to the commit

    assert main(["ls", "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["models"]
    assert (entry["id"], entry["format"], entry["quant"], entry["revision"], entry["architecture"]) == \
        (f"{EXL2_REPO}@6.0bpw", "exl2", "6.0bpw", "6.0bpw", "LlamaForCausalLM")
    assert entry["commit_hash"] == commits["6.0bpw"] and entry["path"] == str(folder)

    assert main(["pull", EXL2_REPO, "--quant", "5.0bpw"]) == 1
    err = capsys.readouterr().err
    assert "has no 5.0bpw branch" in err and "available: 4.0bpw, 6.0bpw" in err
    assert main(["pull", EXL2_REPO]) == 1  # main holds only the card and measurement.json
    err = capsys.readouterr().err
    assert "its quants are kept in branches" in err and "pull one with --quant: 4.0bpw, 6.0bpw" in err


@pytest.mark.parametrize("fmt,quantization_config", [("exl3", True), ("exl2", False)])
def test_pulled_branch_of_an_untagged_repo_is_registered_as_exl(hub_env, capsys, fmt, quantization_config):
    """EXL3 is told by its config; an EXL2 from before exllamav2 wrote quantization_config by its branch name."""
    repo = "acme/Tiny-untagged"
    hub_env.add_repo(repo, {"README.md": b"# quants in branches\n"})
    hub_env.add_repo(repo, exl_branch_files(fmt, 4.0, quantization_config=quantization_config), revision="4.0bpw")
    assert main(["pull", repo, "--quant", "4bpw", "--json"]) == 0
    capsys.readouterr()
    assert main(["ls", "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["models"]
    assert (entry["id"], entry["format"], entry["quant"]) == (f"{repo}@4.0bpw", fmt, "4.0bpw")


def test_bit_rate_resolves_to_one_branch_or_says_which():
    branches = ["main", "4.0bpw-h6", "4.0bpw-h8", "6.5bpw"]
    assert exl_branch_for(DownloadRequest("a/b", quant="6.5bpw"), branches) == "6.5bpw"
    assert exl_branch_for(DownloadRequest("a/b", quant="4.0bpw-h8"), branches) == "4.0bpw-h8"
    assert exl_branch_for(DownloadRequest("a/b", quant="4bpw_h6"), branches) == "4.0bpw-h6"
    with pytest.raises(HubError, match="several 4.0bpw branches: 4.0bpw-h6, 4.0bpw-h8"):
        exl_branch_for(DownloadRequest("a/b", quant="4.0bpw"), branches)
    with pytest.raises(HubError, match="no 3.0bpw branch") as info:
        exl_branch_for(DownloadRequest("a/b", quant="3.0bpw"), ["main"])
    assert "keeps no bit rates in branches" in info.value.hint
