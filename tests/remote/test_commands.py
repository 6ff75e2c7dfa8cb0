"""``quantdesk remote add | ls | test | rm``, a chat with a remote model from the command line, and the API key:
never on a command line, in an engine's environment, or in any file QuantDesk writes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from app import cli, paths
from app.engine.client import EngineClient
from app.remote.connections import Connections, model_ref
from app.server.app import create_app, model_id
from app.server.thread import ServerThread
from app.datatypes import LoadSettings
from tests.fixtures.openai_faults import MODEL

ROOT = Path(__file__).resolve().parents[2]
KEY = "qd-secret-7e3b9a1c55d2"


def quantdesk(*args: str, env: dict | None = None, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", *args], cwd=ROOT, capture_output=True, text=True,
                          input=stdin, timeout=180, env={**os.environ, **(env or {})})


def test_add_tests_the_server_and_lists_its_models(faulty_server, capsys):
    assert cli.main(["remote", "add", "stub", faulty_server.url]) == 0
    out = capsys.readouterr().out
    assert f"saved stub → {faulty_server.url}" in out
    assert f"remote:stub/{MODEL} · context 2048" in out and "openai-compatible server, answered in" in out
    assert cli.main(["remote", "test", "stub", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["models"] == [{"id": MODEL, "owned_by": "stub", "n_ctx": 2048}] and result["latency_ms"] > 0


def test_a_key_is_read_from_stdin_or_the_environment_never_from_an_argument(faulty_server, capsys):
    faulty_server.api_key = KEY
    assert cli.main(["remote", "add", "stub", faulty_server.url]) == 1  # no key: refused in words
    assert "stub asks for an API key (401: Invalid API key)" in capsys.readouterr().err
    result = quantdesk("remote", "add", "stub", faulty_server.url, "--api-key-stdin", stdin=KEY + "\n")
    assert result.returncode == 0, result.stderr
    assert cli.main(["remote", "ls"]) == 0
    captured = capsys.readouterr()
    assert f"stub\t{faulty_server.url}\tkey in the key file" in captured.out and "0600" in captured.err
    os.environ["STUB_KEY"] = KEY
    try:
        assert cli.main(["remote", "add", "stub", faulty_server.url, "--api-key-env", "STUB_KEY"]) == 0
    finally:
        del os.environ["STUB_KEY"]
    with pytest.raises(SystemExit):
        cli.main(["remote", "add", "stub", faulty_server.url, "--api-key", KEY])  # no such option, on purpose


def test_rm_forgets_the_connection_and_its_key(faulty_server, capsys):
    os.environ["STUB_KEY"] = KEY
    try:
        cli.main(["remote", "add", "stub", faulty_server.url, "--api-key-env", "STUB_KEY", "--no-test"])
    finally:
        del os.environ["STUB_KEY"]
    assert cli.main(["remote", "rm", "stub"]) == 0
    assert Connections().all() == [] and not (paths.config_dir() / "remote-keys.json").exists()
    assert cli.main(["remote", "test", "stub"]) == 1
    assert "no remote connection named 'stub'" in capsys.readouterr().err


def test_the_key_stays_out_of_command_lines_environments_and_every_file_quantdesk_writes(tiny_models, tmp_path):
    with EngineClient() as local:
        local.load(tiny_models.gguf_q8_0, LoadSettings(n_ctx=512))
        server = ServerThread(create_app(local, api_key=KEY)).start()
        try:
            ref = model_ref("qd", model_id(local.loaded.model_path))
            keychain = {"PYTHON_KEYRING_BACKEND": "keyrings.alt.file.PlaintextKeyring",
                        "XDG_DATA_HOME": str(tmp_path / "user-data")}  # a real keyring, outside our folders
            added = quantdesk("remote", "add", "qd", f"{server.url}/v1", "--api-key-stdin", env=keychain,
                              stdin=KEY)
            assert added.returncode == 0 and "API key in the system keychain" in added.stdout, added.stderr
            chat = quantdesk("chat", ref, "--prompt", "hello", "--max-tokens", "8", "--json", env=keychain)
            assert chat.returncode == 0, chat.stderr
            assert json.loads(chat.stdout)["completion_tokens"] == 8
            assert KEY not in chat.stdout + chat.stderr + added.stdout + added.stderr

            os.environ.update(keychain)  # this process loads the same connection into an engine host
            try:
                import keyring.core

                keyring.core.init_backend()
                with EngineClient() as client:
                    client.load(ref)
                    host = Path(f"/proc/{client.pid}")
                    assert KEY.encode() not in (host / "cmdline").read_bytes()
                    assert KEY.encode() not in (host / "environ").read_bytes()
            finally:
                for var in keychain:
                    os.environ.pop(var)
                keyring.core.init_backend()
        finally:
            server.stop()
    written = [p for root in (paths.config_dir(), paths.data_dir(), paths.cache_dir(),
                              Path(os.environ["XDG_STATE_HOME"]), tmp_path / "user-data" / "QuantDesk")
               if root.exists() for p in root.rglob("*") if p.is_file()]
    assert written, "the session wrote nothing: the check would prove nothing"
    leaking = [str(p) for p in written if KEY.encode() in p.read_bytes()]
    assert leaking == []
