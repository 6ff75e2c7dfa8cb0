"""EXL2 / EXL3 repos on the Hub stand-in, laid out as uploaders do (a bit rate per branch, the card and
measurement.json on main): listed with one quant per branch, recognised without tags, pulled by bit rate."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.cli import main
from app.hub.plan import DownloadRequest, exl_branch_for
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
    # A quant that names no bit rate (a GGUF quant's name) matches no branch by its bits: refused in words.
    with pytest.raises(HubError, match="no Q4_K_M branch"):
        exl_branch_for(DownloadRequest("a/b", quant="Q4_K_M"), branches)


BARTOWSKI = "bartowski/Tiny-exl2"  # untagged; the name and measurement.json say EXL2; bit rates in bare branches


def test_bare_number_branches_of_an_untagged_exl2_repo_are_listed_and_pulled(hub_env, capsys):
    commits = hub_env.add_exl_repo(BARTOWSKI, "exl2", {"8_0": 8.0, "4_25": 4.25, "6_5": 6.5})
    details = _show(BARTOWSKI, capsys)
    assert details["format"] == "exl2"
    assert [(g["quant"], g["revision"]) for g in details["quants"]] == [
        ("4.25bpw", "4_25"), ("6.5bpw", "6_5"), ("8.0bpw", "8_0")]
    assert {g["revision"]: g["size"] for g in details["quants"]}["6_5"] == len(exl_safetensors("exl2", 6.5, EXL_TINY))

    assert main(["pull", BARTOWSKI]) == 1  # main holds the card and measurement.json only
    assert "pull one with --quant: 4.25bpw, 6.5bpw, 8.0bpw" in capsys.readouterr().err

    assert main(["pull", BARTOWSKI, "--quant", "6_5", "--json"]) == 0  # the branch name as the uploader wrote it
    result = json.loads(capsys.readouterr().out)
    assert result["commit"] == commits["6_5"] and Path(result["path"]).name == "Tiny-exl2@6_5"
    assert sorted(result["files"]) == sorted(exl_branch_files("exl2", 6.5))
    assert main(["pull", BARTOWSKI, "--quant", "4.25bpw", "--json"]) == 0  # or as a bit rate
    assert json.loads(capsys.readouterr().out)["commit"] == commits["4_25"]
    assert main(["ls", "--json"]) == 0
    found = {e["id"]: (e["format"], e["quant"]) for e in json.loads(capsys.readouterr().out)["models"]}
    assert found == {f"{BARTOWSKI}@6_5": ("exl2", "6.5bpw"), f"{BARTOWSKI}@4_25": ("exl2", "4.25bpw")}


def test_bare_numbers_are_not_quants_of_a_gguf_repo(hub_env, tmp_path, capsys):
    from tests.hub.conftest import write_gguf

    gguf = write_gguf(tmp_path / "m-Q4_0.gguf", file_type=2)
    hub_env.add_repo("acme/m-GGUF", {gguf.name: gguf}, tags=["gguf"])
    for branch in ("6_5", "dev"):
        hub_env.add_repo("acme/m-GGUF", {gguf.name: gguf, "notes.md": branch.encode()}, revision=branch)
    details = _show("acme/m-GGUF", capsys)
    assert details["format"] == "gguf" and [(g["quant"], g["revision"]) for g in details["quants"]] == [("Q4_0", None)]
    assert main(["pull", "acme/m-GGUF", "--quant", "4_0"]) == 1  # no bit-rate branch: a GGUF quant name it is
    err = capsys.readouterr().err
    assert "has no 4_0 file" in err and "available: Q4_0" in err


def test_bare_number_branches_resolve_only_in_a_repo_known_as_exl():
    branches = ["main", "4_25", "6_5", "8_0"]
    assert exl_branch_for(DownloadRequest("a/b", quant="6_5"), branches, "exl2") == "6_5"
    assert exl_branch_for(DownloadRequest("a/b", quant="6.5bpw"), branches, "exl2") == "6_5"
    assert exl_branch_for(DownloadRequest("a/b", quant="8bpw"), branches, "exl2") == "8_0"
    with pytest.raises(HubError, match="no 5.0bpw branch") as info:
        exl_branch_for(DownloadRequest("a/b", quant="5.0bpw"), branches, "exl2")
    assert info.value.hint == "available: 4_25, 6_5, 8_0"
    with pytest.raises(HubError, match="no 6_5 branch"):  # not known as EXL: "6_5" may be anything
        exl_branch_for(DownloadRequest("a/b", quant="6_5"), branches)


def test_pull_by_bare_branch_of_a_repo_tagged_exl3(hub_env, capsys):
    commits = hub_env.add_exl_repo("acme/Tiny", "exl3", {"3_0": 3.0, "5_0": 5.0}, tags=["exl3"])
    assert main(["pull", "acme/Tiny", "--quant", "5_0", "--json"]) == 0  # only the tags say EXL here
    assert json.loads(capsys.readouterr().out)["commit"] == commits["5_0"]
    assert main(["ls", "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)["models"]
    assert (entry["id"], entry["format"], entry["quant"]) == ("acme/Tiny@5_0", "exl3", "5.0bpw")
