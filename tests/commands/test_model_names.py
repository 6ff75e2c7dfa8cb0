"""A library model by the names `quantdesk ls` gives it, wherever a MODEL is taken: its id (what `ls` prints), its repo
(with ``:QUANT`` where the library holds several quants of it), a unique prefix; one name for several models is
refused listing them, a name nothing answers to is a sentence, a path still works. Through the real CLI (``python -m
app`` children, and app.cli.main in this process) on a fresh library: two quants pulled from the Hub stand-in and an
imported embedding model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import anyio
import pytest

from app.cli import main
from tests.commands.test_mcp_serve import stdio_session, structured
from tests.commands.test_server import _ctrl_c, _listening, _serving

ROOT = Path(__file__).resolve().parents[2]
REPO = "acme/tiny-GGUF"
Q4 = f"{REPO}:Q4_K_M"
Q8 = f"{REPO}:Q8_0"
EMBED = "local:tiny-llama-embedding-F16"
AMBIGUOUS = f"'{REPO}' names 2 models in the library: {Q4}, {Q8}."
HOW = "name one of them as `quantdesk ls` prints it"
UNKNOWN = "No model 'no-such-model' here: it is neither a file or folder nor a model in the library."


def quantdesk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=240, cwd=ROOT)


@pytest.fixture
def library(hub_env, tiny_models, tiny_embedding_model, capsys) -> dict[str, Path]:
    """The library `quantdesk ls` lists: acme/tiny-GGUF:Q4_K_M and :Q8_0 pulled, the embedding model imported; each
    id with its path."""
    hub_env.add_repo(REPO, {"tiny-Q8_0.gguf": tiny_models.gguf_q8_0, "tiny-Q4_K_M.gguf": tiny_models.gguf_q4_k_m},
                     tags=["gguf"])
    for quant in ("Q4_K_M", "Q8_0"):
        assert main(["pull", REPO, "--quant", quant, "--json"]) == 0
    assert main(["import", str(tiny_embedding_model), "--json"]) == 0
    capsys.readouterr()
    assert main(["ls", "--json"]) == 0
    listed = {m["id"]: Path(m["path"]) for m in json.loads(capsys.readouterr().out)["models"]}
    assert set(listed) == {Q4, Q8, EMBED}
    return listed


def test_chat_takes_what_ls_prints_a_repo_quant_and_a_prefix_and_refuses_the_rest(library):
    for name in (Q4, "acme/tiny-gguf:q4_k_m", "acme/tiny-GGUF:Q4"):
        run = quantdesk("chat", name, "--prompt", "hi", "--json", "--max-tokens", "3", "--seed", "1")
        assert run.returncode == 0, (name, run.stderr[-2000:])
        assert Path(json.loads(run.stdout)["model"]) == library[Q4], name

    run = quantdesk("chat", Q8, "--draft", "acme/tiny-GGUF:Q4", "--prompt", "hi", "--json", "--max-tokens", "3")
    assert run.returncode == 0, run.stderr[-2000:]
    assert Path(json.loads(run.stdout)["draft"]["model"]) == library[Q4]  # --draft takes the same names

    run = quantdesk("chat", REPO, "--prompt", "hi")  # the repo of two quants
    assert run.returncode == 1
    assert AMBIGUOUS in run.stderr and HOW in run.stderr
    run = quantdesk("chat", "no-such-model", "--prompt", "hi")
    assert run.returncode == 1
    assert UNKNOWN in run.stderr and "`quantdesk ls` lists the library's models" in run.stderr
    assert "Traceback" not in run.stderr


def test_fit_inspect_and_recommend_read_the_librarys_copy_by_its_names(library, hub_env, tiny_models, capsys):
    seen = len(hub_env.log)
    assert main(["fit", "acme/tiny-GGUF:Q8", "--ctx", "256", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["quant"] == "Q8_0"
    assert main(["inspect", Q4, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["quant"] == "Q4_K_M"
    assert main(["recommend", "local:tiny", "--json"]) == 0  # a unique prefix
    (candidate,) = json.loads(capsys.readouterr().out)["candidates"]
    assert candidate["label"] == str(library[EMBED])
    assert len(hub_env.log) == seen  # read from the library's files, not the Hub

    assert main(["fit", REPO]) == 1
    err = capsys.readouterr().err
    assert AMBIGUOUS in err and HOW in err
    hub_env.add_repo("acme/tiny", {"tiny-F16.gguf": tiny_models.gguf_f16}, tags=["gguf"])
    assert main(["fit", "acme/tiny", "--json"]) == 0  # a Hub repo: whole library names only, never a prefix of one
    assert json.loads(capsys.readouterr().out)["quant"] == "F16" and len(hub_env.log) > seen
    assert main(["fit", "no-such-model"]) == 1
    assert ("No model 'no-such-model' here: it is neither a file or folder, nor a model in the library, nor a Hub "
            "repo id (owner/name).") in capsys.readouterr().err


def test_rm_update_and_preset_take_the_same_names(library, hub_env, capsys):
    assert main(["update", "acme/tiny-GGUF:q8"]) == 0
    assert f"{Q8} is up to date" in capsys.readouterr().out

    assert main(["preset", "set", "acme/tiny-GGUF:Q4", "--ctx", "256"]) == 0
    capsys.readouterr()
    assert main(["preset", "show", Q4, "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["key"] == f"{REPO}/tiny-Q4_K_M.gguf" and shown["load"] == {"n_ctx": 256}
    assert main(["preset", "set", REPO, "--ctx", "256"]) == 1
    assert AMBIGUOUS in capsys.readouterr().err

    assert main(["rm", REPO]) == 1
    assert AMBIGUOUS in capsys.readouterr().err
    assert main(["rm", "acme/tiny-GGUF:Q8", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["removed"] == Q8
    assert not library[Q8].exists() and library[Q4].exists()
    seen = len(hub_env.log)
    assert main(["inspect", REPO, "--json"]) == 0  # the repo's one quant now: the library's copy, not the Hub's
    assert json.loads(capsys.readouterr().out)["quant"] == "Q4_K_M" and len(hub_env.log) == seen
    assert main(["rm", "no-such-model"]) == 1
    assert "No model 'no-such-model' in the library." in capsys.readouterr().err


def test_docs_add_takes_the_embedding_model_by_its_library_name(library, tmp_path, capsys):
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("QuantDesk runs models on this machine.\n")
    assert main(["docs", "add", "notes", str(notes), "--embed-model", "tiny-llama-emb"]) == 0
    capsys.readouterr()
    assert main(["docs", "ls", "--json"]) == 0
    (collection,) = json.loads(capsys.readouterr().out)
    assert collection["embed_model"] == str(library[EMBED])

    assert main(["docs", "add", "other", str(notes), "--embed-model", Q4]) == 1  # found, and said what it is
    assert "tiny-Q4_K_M.gguf is not an embedding model" in capsys.readouterr().err


def test_serve_and_bench_take_library_names(library):
    with _serving("acme/tiny-GGUF:Q4") as (proc, lines):
        _url, seen = _listening(lines)
        assert any("model id 'tiny-Q4_K_M'" in line for line in seen)
        _ctrl_c(proc, lines)
    run = quantdesk("serve", "--model", REPO, "--port", "0")
    assert run.returncode == 1 and AMBIGUOUS in run.stderr

    run = quantdesk("bench", "acme/tiny-GGUF:Q8", "--no-quality", "--reps", "1", "--prompt-tokens", "16",
                    "--gen-tokens", "2", "--ctx", "256", "--no-save", "--json")
    assert run.returncode == 0, run.stderr[-2000:]
    (variant,) = json.loads(run.stdout)["variants"]
    assert Path(variant["path"]) == library[Q8] and not variant["error"]
    run = quantdesk("bench", "no-such-model")
    assert run.returncode == 1 and UNKNOWN in run.stderr


def test_the_mcp_tools_take_what_ls_prints_and_say_which_models_a_name_means(library):
    async def agent() -> None:
        async with stdio_session() as session:
            said = structured(await session.call_tool("chat", {
                "model": Q4, "max_tokens": 3, "messages": [{"role": "user", "content": "Hi"}]}))
            assert said["model"] == "tiny-Q4_K_M" and said["usage"]["completion_tokens"] > 0
            fit = structured(await session.call_tool("fit", {"model": "acme/tiny-GGUF:Q8", "ctx": 256}))
            assert fit["quant"] == "Q8_0"
            for tool, args in (("chat", {"model": REPO, "messages": [{"role": "user", "content": "Hi"}]}),
                               ("fit", {"model": REPO}), ("bench", {"models": [REPO]})):
                refused = await session.call_tool(tool, args)
                assert refused.is_error and AMBIGUOUS in refused.content[0].text, tool

    anyio.run(agent)
