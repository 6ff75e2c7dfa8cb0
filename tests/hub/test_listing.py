"""app.hub.listing: one repo, fetched once, sorted into quants by one rule that show, pull and recommend share."""

from __future__ import annotations

import json

from app.cli import main
from app.hub.listing import RepoListing
from tests.fixtures.hub_server import exl_branch_files
from tests.hub.conftest import payload


def _model_info_calls(hub, repo_id: str) -> list[str]:
    return [r.path for r in hub.log
            if r.path == f"/api/models/{repo_id}" or r.path.startswith(f"/api/models/{repo_id}/revision/")]


def test_show_pull_and_recommend_agree_on_which_branches_are_bit_rates(hub_env, capsys):
    """Not known as EXL by tags, name or measurement.json: "1_0" is a version, "6_5" a bit rate (its config)."""
    plain = exl_branch_files("exl2", 4.0, quantization_config=False)
    hub_env.add_repo("acme/Tiny", plain)
    hub_env.add_repo("acme/Tiny", plain, revision="1_0")
    hub_env.add_repo("acme/Tiny", exl_branch_files("exl2", 6.5), revision="6_5")

    listing = RepoListing.fetch("acme/Tiny")
    assert (listing.format, list(listing.bit_rates)) == ("exl2", ["6_5"])
    assert main(["show", "acme/Tiny", "--json"]) == 0
    assert [(g["quant"], g["revision"]) for g in json.loads(capsys.readouterr().out)["quants"]] == [("6.5bpw", "6_5")]
    assert main(["recommend", "acme/Tiny", "--json"]) == 0
    labels = [c["label"] for c in json.loads(capsys.readouterr().out)["candidates"]]
    assert sorted(labels) == ["acme/Tiny", "acme/Tiny@6_5"]
    assert main(["pull", "acme/Tiny", "--quant", "6_5", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["commit"] == listing.branch_commit("6_5")


def test_projectors_are_kept_apart_from_the_quants(hub_env):
    files = {"M-Q4_K_M.gguf": payload(1000, 1), "M-Q8_0.gguf": payload(2000, 2),
             "mmproj-M-f16.gguf": payload(300, 3), "mmproj-M-Q8_0.gguf": payload(200, 4)}
    hub_env.add_repo("acme/M-GGUF", files, tags=["gguf"])
    listing = RepoListing.fetch("acme/M-GGUF")
    assert [f.path for f in listing.projectors] == ["mmproj-M-Q8_0.gguf", "mmproj-M-f16.gguf"]
    assert {g.quant: g.files for g in listing.quants()} == {"Q4_K_M": ["M-Q4_K_M.gguf"], "Q8_0": ["M-Q8_0.gguf"]}
    assert [m.label for m in listing.models()] == ["acme/M-GGUF/M-Q4_K_M.gguf", "acme/M-GGUF/M-Q8_0.gguf"]


def test_a_pull_by_bit_rate_lists_the_repo_once_and_only_the_branch_it_fetches(hub_env, capsys):
    commits = hub_env.add_exl_repo("turbo/Tiny-exl2", "exl2", {"4.0bpw": 4.0, "5.0bpw": 5.0, "6.0bpw": 6.0},
                                   tags=["exl2"])
    assert main(["pull", "turbo/Tiny-exl2", "--quant", "5.0bpw", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["commit"] == commits["5.0bpw"]
    assert _model_info_calls(hub_env, "turbo/Tiny-exl2") == [
        "/api/models/turbo/Tiny-exl2/revision/main", f"/api/models/turbo/Tiny-exl2/revision/{commits['5.0bpw']}"]
    assert [r.path for r in hub_env.log if r.path.endswith("/refs")] == ["/api/models/turbo/Tiny-exl2/refs"]
