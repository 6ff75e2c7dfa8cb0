"""A gated repo on the Hub stand-in behaves the same in every place that reads the Hub: Search, Discover, ``show``,
``inspect`` and ``pull`` all work with the token saved by ``quantdesk login`` (no HF_TOKEN in the environment),
and all refuse with the same sentence without it."""

from __future__ import annotations

import json

import pytest

from app.cli import main
from app.hub import config
from app.hub.errors import AccessDenied
from tests.ui.tiny_hub import cpu_only

REPO = "meta/Gated-GGUF"
CARD = b"---\nlicense: other\n---\n# Gated\n\nA gated test model.\n"


@pytest.fixture
def gated_repo(hub_env, tiny_models):
    hub_env.add_repo(REPO, {"Gated-Q4_K_M.gguf": tiny_models.gguf_q4_k_m, "README.md": CARD}, gated=True,
                     tags=["gguf"])
    return hub_env


def _discover(repo_id: str):
    from app.hub.discover import model_choices

    return model_choices(repo_id, cpu_only())


def test_with_the_saved_token_every_place_reads_the_gated_repo(gated_repo, capsys):
    config.save_token("hf_test_token")  # as `quantdesk login` saves it; HF_TOKEN is not set

    assert main(["search", "Gated", "--json"]) == 0
    (found,) = json.loads(capsys.readouterr().out)
    assert (found["repo_id"], found["gated"]) == (REPO, True)

    assert main(["show", REPO, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert [g["quant"] for g in shown["quants"]] == ["Q4_K_M"] and shown["gated"]
    assert shown["summary"] == "A gated test model."

    assert main(["inspect", REPO, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["architecture"] == "llama"

    choices = _discover(REPO)
    assert [(c.quant, c.verdict) for c in choices.choices] == [("Q4_K_M", "CPU only")]
    assert choices.summary == "A gated test model."

    assert main(["pull", REPO, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["files"] == ["Gated-Q4_K_M.gguf"]

    refused = [r for r in gated_repo.log if r.status in (401, 403)]
    assert refused == []
    sent = [r for r in gated_repo.log if r.path != "/api/models"]
    assert sent and all(r.headers.get("authorization") == "Bearer hf_test_token" for r in sent)


def test_without_a_token_every_place_says_the_same_sentence(gated_repo, capsys):
    for argv in (["show", REPO], ["inspect", REPO], ["pull", REPO]):
        assert main(argv) == 1, argv
        err = capsys.readouterr().err
        assert f"{REPO} is gated" in err and "quantdesk login" in err, (argv, err)
    with pytest.raises(AccessDenied, match=f"{REPO} is gated"):
        _discover(REPO)
