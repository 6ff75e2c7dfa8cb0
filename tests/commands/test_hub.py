"""The CLI twins: a real ``python -m app.cli pull`` child killed with SIGKILL at about half and restarted,
and search / show / ls / rm / import / login through app.cli.main."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from app import settings
from app.cli import main
from app.hub import config
from app.hub.download import STAGING_DIR_NAME
from app.hub.plan import DownloadRequest
from tests.hub.conftest import payload, sha256, write_gguf

ROOT = Path(__file__).resolve().parents[2]
SIZE = 4_000_000


def _pull(args: list[str]) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "app", "pull", *args, "--json"], cwd=ROOT,
                            env=dict(os.environ), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(predicate, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.02)  # polling a file another process writes; there is no event to wait on
    return False


def _finish(child: subprocess.Popen, timeout: float) -> tuple[str, str]:
    """The child's output once it exits; killed (and its output so far) when it does not within ``timeout``."""
    try:
        return child.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        child.kill()
        out, err = child.communicate()
        return out, err + f"\n[the test killed the pull: it was still running after {timeout:g} s]"


def test_pull_killed_at_half_resumes_with_range_and_matching_sha256(hub_env):
    data = payload(SIZE, 7)
    name = "kill-Q4_K_M.gguf"
    hub_env.add_repo("acme/kill-GGUF", {name: data}, tags=["gguf"])
    # The first transfer stops at half (as if the line went quiet), so the kill lands at a known point.
    hub_env.faults.add(name, "stall", after_bytes=SIZE // 2, seconds=60)
    part = (settings.models_dir() / STAGING_DIR_NAME / DownloadRequest("acme/kill-GGUF", quant="Q4_K_M").key()
            / "files" / (name + ".part"))
    child = _pull(["acme/kill-GGUF", "--quant", "Q4_K_M"])
    try:
        assert _wait_for(lambda: part.exists() and part.stat().st_size >= SIZE // 2, timeout=120)
    finally:
        child.send_signal(signal.SIGKILL)
        child.communicate(timeout=10)  # also closes the pipes
    assert child.returncode == -signal.SIGKILL
    kept = part.stat().st_size
    assert kept == SIZE // 2
    sent_before = hub_env.bytes_sent_for(name)

    again = _pull(["acme/kill-GGUF", "--quant", "Q4_K_M"])
    out, err = _finish(again, timeout=120)
    assert again.returncode == 0, err
    result = json.loads(out)
    assert result["resumed_bytes"] == kept
    assert sha256(Path(result["path"])) == sha256(data)
    last = [r for r in hub_env.requests_for(name) if r.path.startswith("/lfs/")][-1]
    assert last.status == 206 and last.headers["range"] == f"bytes={kept}-"
    resent = hub_env.bytes_sent_for(name) - sent_before
    assert resent == SIZE - kept  # only the missing half crossed the wire again


def test_ctrl_c_leaves_a_resumable_partial_and_says_so(hub_env):
    name = "int-Q4_0.gguf"
    hub_env.add_repo("acme/int-GGUF", {name: payload(SIZE, 8)}, tags=["gguf"])
    hub_env.faults.add(name, "stall", after_bytes=1_000_000, seconds=60)
    part = (settings.models_dir() / STAGING_DIR_NAME / DownloadRequest("acme/int-GGUF").key() / "files" / (name + ".part"))
    child = _pull(["acme/int-GGUF"])
    try:
        reached = _wait_for(lambda: part.exists() and part.stat().st_size >= 1_000_000, timeout=120)
        if reached:
            child.send_signal(signal.SIGINT)
        out, err = _finish(child, timeout=60)
    finally:
        if child.poll() is None:  # never leave the child (and its stalled download) running: a hang, a leak
            child.kill()
            child.communicate()
    assert reached, f"the partial file never reached 1 MB; the pull said: {err[-2000:]}"
    assert child.returncode == 130, err[-2000:]
    assert "Run the same command again to resume" in err and "1.0 MB of 4.0 MB kept" in err
    assert part.stat().st_size == 1_000_000


def test_search_json_filters_sorts_and_pages(hub_env, capsys):
    hub_env.page_size = 2  # the Hub pages with Link headers; make the client follow them
    for i, (likes, downloads) in enumerate([(5, 100), (50, 10), (1, 1000)]):
        hub_env.add_repo(f"org{i}/llama-{i}-GGUF", {"m-Q4_0.gguf": b"x"}, tags=["gguf"], likes=likes,
                         downloads=downloads)
    hub_env.add_repo("mlx-community/llama-mlx", {"config.json": b"{}"}, tags=["mlx"], downloads=5000)
    assert main(["search", "llama", "--format", "gguf", "--sort", "downloads", "--json"]) == 0
    found = json.loads(capsys.readouterr().out)
    assert [m["repo_id"] for m in found] == ["org2/llama-2-GGUF", "org0/llama-0-GGUF", "org1/llama-1-GGUF"]
    assert {m["format"] for m in found} == {"gguf"}
    assert main(["search", "llama", "--sort", "likes", "--limit", "1", "--page", "2", "--json"]) == 0
    assert [m["repo_id"] for m in json.loads(capsys.readouterr().out)] == ["org0/llama-0-GGUF"]


def test_show_groups_files_by_quant_and_lists_branches(hub_env, capsys):
    files = {f"m-Q4_K_M-0000{i}-of-00002.gguf": payload(1000, i) for i in (1, 2)} | {"m-Q8_0.gguf": payload(3000),
                                                                                      "README.md": b"---\nlicense: mit\n---\n# M\n\nA small test model.\n"}
    hub_env.add_repo("acme/m-GGUF", files, tags=["gguf"], card_data={"license": "mit"})
    hub_env.add_repo("acme/m-GGUF", {"m-Q2_K.gguf": b"y"}, revision="4.0bpw")
    assert main(["show", "acme/m-GGUF", "--json"]) == 0
    details = json.loads(capsys.readouterr().out)
    assert {g["quant"]: g["size"] for g in details["quants"]} == {"Q4_K_M": 2000, "Q8_0": 3000}
    assert details["license"] == "mit" and details["summary"] == "A small test model."
    assert sorted(details["branches"]) == ["4.0bpw", "main"]


def test_search_offline_is_a_clear_error_without_connecting(hub_env, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    assert main(["search", "llama"]) == 1
    assert "offline mode is on" in capsys.readouterr().err
    assert hub_env.log == []


def _quantdesk(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    """The command as a user runs it from a terminal: a new process that reads the saved Settings itself."""
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, env=env or dict(os.environ),
                          capture_output=True, text=True, timeout=120, check=False)


def test_offline_mode_saved_in_settings_holds_in_the_cli(hub_env, tmp_path):
    from app import settings

    gguf = write_gguf(tmp_path / "w-Q8_0.gguf", arch="qwen2", file_type=7)
    hub_env.add_repo("acme/w-GGUF", {gguf.name: gguf}, tags=["gguf"])
    settings.save(settings.Settings(offline=True, models_dir=str(tmp_path / "big-disk")))  # as the GUI saves it
    for argv in (["search", "w"], ["pull", "acme/w-GGUF"], ["show", "acme/w-GGUF"], ["recommend", "acme/w-GGUF"]):
        run = _quantdesk(*argv)
        assert run.returncode == 1, (argv, run.stdout, run.stderr)
        assert "offline mode is on in QuantDesk's Settings" in run.stderr, argv
        assert "switch it off on the app's Settings page; a quantdesk command given --online" in run.stderr
    assert hub_env.log == []  # refused before any request

    run = _quantdesk("pull", "acme/w-GGUF", "--online", "--json")  # for this run only
    assert run.returncode == 0, run.stderr
    assert Path(json.loads(run.stdout)["path"]).is_relative_to(tmp_path / "big-disk")  # the saved models folder
    assert hub_env.log
    seen = len(hub_env.log)
    assert _quantdesk("search", "w").returncode == 1  # the setting still holds on the next run
    assert len(hub_env.log) == seen
    run = _quantdesk("ls", "--json")
    assert json.loads(run.stdout)["disk"]["models_dir"] == str(tmp_path / "big-disk")


def test_offline_from_the_environment_is_never_cleared_by_the_cli(hub_env):
    from app import settings

    settings.save(settings.Settings(offline=False))
    env = dict(os.environ, HF_HUB_OFFLINE="1")
    for argv in (["search", "w"], ["--online", "search", "w"]):
        run = _quantdesk(*argv, env=env)
        assert run.returncode == 1
        assert "offline mode is on (HF_HUB_OFFLINE is set)" in run.stderr and "unset HF_HUB_OFFLINE" in run.stderr
    assert hub_env.log == []


def test_pull_ls_rm_roundtrip(hub_env, tmp_path, capsys):
    gguf = write_gguf(tmp_path / "w-Q8_0.gguf", arch="qwen2", file_type=7)
    hub_env.add_repo("acme/w-GGUF", {gguf.name: gguf}, tags=["gguf"])
    assert main(["pull", "acme/w-GGUF", "--json"]) == 0
    path = Path(json.loads(capsys.readouterr().out)["path"])
    assert main(["ls", "--json"]) == 0
    listing = json.loads(capsys.readouterr().out)
    (entry,) = listing["models"]
    assert (entry["id"], entry["format"], entry["quant"], entry["architecture"]) == \
        ("acme/w-GGUF:Q8_0", "gguf", "Q8_0", "qwen2")
    assert listing["disk"]["owned_bytes"] == gguf.stat().st_size
    assert main(["rm", "acme/w-GGUF:Q8_0", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["freed_bytes"] == gguf.stat().st_size
    assert not path.exists() and not path.parent.exists()
    assert main(["rm", "acme/w-GGUF:Q8_0"]) == 1
    assert "No model" in capsys.readouterr().err


def test_import_a_single_file_from_a_stick_works_offline(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    stick = write_gguf(tmp_path / "usb" / "Stick-Model-Q4_K_M.gguf")
    assert main(["import", str(stick), "--json"]) == 0
    (entry,) = json.loads(capsys.readouterr().out)
    assert entry["owned"] and entry["quant"] == "Q4_K_M" and entry["architecture"] == "llama"
    assert Path(entry["path"]).is_relative_to(settings.models_dir())
    assert entry["files"][0]["sha256"] == sha256(stick)
    assert main(["ls"]) == 0
    assert "local:Stick-Model-Q4_K_M" in capsys.readouterr().out


def test_login_stores_the_token_where_huggingface_hub_reads_it(hub_env, monkeypatch, capsys):
    import io

    monkeypatch.setattr(sys, "stdin", io.StringIO("hf_test_token\n"))
    assert main(["login"]) == 0
    token_file = config.hf_home() / "token"
    assert token_file.read_text() == "hf_test_token"
    assert oct(token_file.stat().st_mode & 0o777) == "0o600"
    # huggingface_hub itself, pointed at the same HF_HOME, finds it (its login stores it there too)
    code = "from huggingface_hub import get_token; print(get_token())"
    out = subprocess.run([sys.executable, "-c", code], env=dict(os.environ), capture_output=True, text=True,
                         timeout=60)
    assert out.stdout.strip() == "hf_test_token"
    hub_env.add_repo("meta/g-GGUF", {"g-Q4_0.gguf": b"gated"}, gated=True, tags=["gguf"])
    assert main(["pull", "meta/g-GGUF", "--json"]) == 0
    capsys.readouterr()


@pytest.mark.parametrize("argv", [["pull", "acme/none"], ["show", "acme/none"]])
def test_unknown_repo_is_a_sentence(hub_env, capsys, argv):
    assert main(argv) == 1
    assert "was not found" in capsys.readouterr().err
