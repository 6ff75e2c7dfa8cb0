"""``quantdesk launch TOOL``: each tool's configuration in the format its documentation gives (checked here against
schemas written from those pages; the tools themselves need not be installed), the user's files merged and backed up,
a model too small for a tool refused in words, a running server found by its record, and a server started detached
when none runs."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import httpx
import jsonschema
import pytest
import yaml

from app.server import agent_configs, running
from app.server.agent_configs import TOOLS, Endpoint, write_setup
from app.server.app import create_app
from app.server.thread import ServerThread

ROOT = Path(__file__).resolve().parents[2]
BIG = Endpoint("http://127.0.0.1:8080", "Qwen3-Coder-30B-A3B-Q4_K_M", 65_536)
KEYED = Endpoint("http://127.0.0.1:8080", "Qwen3-Coder-30B-A3B-Q4_K_M", 65_536, api_key="qd-0123456789abcdef")

# Claude Code's environment variables for a gateway (docs.anthropic.com/en/docs/claude-code/settings, "Environment
# variables", and .../llm-gateway): the ones QuantDesk may set.
CLAUDE_ENV = {"ANTHROPIC_BASE_URL", "ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_MODEL", "ANTHROPIC_DEFAULT_OPUS_MODEL",
              "ANTHROPIC_DEFAULT_SONNET_MODEL", "ANTHROPIC_DEFAULT_HAIKU_MODEL", "ANTHROPIC_SMALL_FAST_MODEL"}

# Codex's config.toml (developers.openai.com/codex/config-reference): a model provider's keys, and the root keys.
CODEX_PROVIDER_KEYS = {"name", "base_url", "env_key", "wire_api", "query_params", "http_headers", "env_http_headers",
                       "request_max_retries", "stream_max_retries", "stream_idle_timeout_ms", "requires_openai_auth"}
CODEX_ROOT_KEYS = {"model", "model_provider", "model_context_window"}

# opencode.json's custom provider (opencode.ai/docs/providers/#custom-provider, opencode.ai/docs/config; the keys of
# https://opencode.ai/config.json's provider and model objects that QuantDesk writes, none other allowed).
OPENCODE_SCHEMA = {
    "type": "object",
    "required": ["provider", "model"],
    "properties": {
        "$schema": {"const": "https://opencode.ai/config.json"},
        "model": {"type": "string", "pattern": "^[^/]+/.+$"},  # provider_id/model_id
        "provider": {"type": "object", "additionalProperties": {
            "type": "object", "required": ["npm", "options", "models"], "additionalProperties": False,
            "properties": {
                "npm": {"const": "@ai-sdk/openai-compatible"}, "name": {"type": "string"},
                "options": {"type": "object", "required": ["baseURL"], "additionalProperties": False,
                            "properties": {"baseURL": {"type": "string", "pattern": "^https?://.+/v1$"},
                                           "apiKey": {"type": "string"}}},
                "models": {"type": "object", "minProperties": 1, "additionalProperties": {
                    "type": "object", "additionalProperties": False,
                    "properties": {"name": {"type": "string"},
                                   "limit": {"type": "object", "required": ["context", "output"],
                                             "additionalProperties": False,
                                             "properties": {"context": {"type": "integer", "minimum": 1},
                                                            "output": {"type": "integer", "minimum": 1}}}}}}}}},
    },
}

# Continue's config.yaml (docs.continue.dev/reference): the top level's required keys and a model's documented keys.
CONTINUE_SCHEMA = {
    "type": "object",
    "required": ["name", "version", "schema", "models"],
    "properties": {
        "schema": {"const": "v1"},
        "models": {"type": "array", "items": {
            "type": "object", "required": ["name", "provider", "model"],
            "properties": {
                "name": {"type": "string"}, "provider": {"type": "string"}, "model": {"type": "string"},
                "apiBase": {"type": "string"}, "apiKey": {"type": "string"},
                "roles": {"type": "array", "items": {"enum": ["chat", "autocomplete", "embed", "rerank", "edit",
                                                              "apply", "summarize"]}},
                "defaultCompletionOptions": {"type": "object", "properties": {
                    "contextLength": {"type": "integer"}, "maxTokens": {"type": "integer"}}},
            }}},
    },
}


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """The user's home folder, where the tools keep their files (a temp folder: the real one is never touched)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.delenv("CODEX_HOME", raising=False)
    return tmp_path


def test_claude_code_gets_its_gateway_variables_merged_into_settings_env(home):
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"permissions": {"allow": ["Bash(ls)"]}, "env": {"DISABLE_TELEMETRY": "1"}}))
    setup = TOOLS["claude"].make(BIG)
    path, backup = write_setup(setup)
    written = json.loads(path.read_text())
    assert written["permissions"] == {"allow": ["Bash(ls)"]} and written["env"]["DISABLE_TELEMETRY"] == "1"
    ours = {k: v for k, v in written["env"].items() if k != "DISABLE_TELEMETRY"}
    assert set(ours) == CLAUDE_ENV
    assert ours["ANTHROPIC_BASE_URL"] == "http://127.0.0.1:8080"  # the root: Claude Code adds /v1/messages
    assert ours["ANTHROPIC_MODEL"] == ours["ANTHROPIC_DEFAULT_HAIKU_MODEL"] == BIG.model
    assert ours["ANTHROPIC_AUTH_TOKEN"]  # some value, which a server without a key does not check
    assert json.loads(backup.read_text())["env"] == {"DISABLE_TELEMETRY": "1"}  # the user's file, as it was
    assert "export ANTHROPIC_BASE_URL=http://127.0.0.1:8080" in setup.lines


def test_codex_gets_a_responses_provider_and_keeps_the_rest_of_its_file(home):
    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text('# mine\nmodel = "gpt-5.5"\napproval_policy = "on-request"\n\n[model_providers.other]\n'
                      'name = "Other"\nbase_url = "https://example.com/v1"\nwire_api = "responses"\n\n'
                      '[model_providers.quantdesk]\nname = "stale"\nbase_url = "http://old/v1"\n\n[tui]\n'
                      'notifications = true\n')
    path, backup = write_setup(TOOLS["codex"].make(KEYED))
    text = path.read_text()
    parsed = tomllib.loads(text)
    provider = parsed["model_providers"]["quantdesk"]
    assert provider == {"name": "QuantDesk", "base_url": "http://127.0.0.1:8080/v1", "wire_api": "responses",
                        "env_key": "QUANTDESK_API_KEY"}  # the key stays in the environment, never in the file
    assert set(provider) <= CODEX_PROVIDER_KEYS
    assert {k: parsed[k] for k in CODEX_ROOT_KEYS} == {"model": KEYED.model, "model_provider": "quantdesk",
                                                       "model_context_window": 65_536}
    assert parsed["approval_policy"] == "on-request" and parsed["tui"] == {"notifications": True}
    assert parsed["model_providers"]["other"]["base_url"] == "https://example.com/v1"
    assert text.startswith("# mine\n") and "stale" not in text and KEYED.api_key not in text
    assert 'model = "gpt-5.5"' in backup.read_text()


def test_codex_in_a_fresh_home_and_codex_home_respected(home, monkeypatch):
    monkeypatch.setenv("CODEX_HOME", str(home / "elsewhere"))
    path, backup = write_setup(TOOLS["codex"].make(BIG))
    assert path == home / "elsewhere" / "config.toml" and backup is None
    parsed = tomllib.loads(path.read_text())
    assert "env_key" not in parsed["model_providers"]["quantdesk"]  # a server without a key: nothing to send


def test_opencode_gets_an_openai_compatible_provider_in_its_documented_shape(home):
    config = home / ".config" / "opencode" / "opencode.json"
    config.parent.mkdir(parents=True)
    config.write_text(json.dumps({"$schema": "https://opencode.ai/config.json", "theme": "tokyonight",
                                  "provider": {"ollama": {"npm": "@ai-sdk/openai-compatible",
                                                          "options": {"baseURL": "http://localhost:11434/v1"},
                                                          "models": {"qwen3": {}}}}}))
    path, _ = write_setup(TOOLS["opencode"].make(KEYED))
    written = json.loads(path.read_text())
    jsonschema.validate(written, OPENCODE_SCHEMA)
    assert written["theme"] == "tokyonight" and "ollama" in written["provider"]
    ours = written["provider"]["quantdesk"]
    assert ours["options"] == {"baseURL": "http://127.0.0.1:8080/v1", "apiKey": "{env:QUANTDESK_API_KEY}"}
    assert ours["models"][KEYED.model]["limit"]["context"] == 65_536
    assert written["model"] == f"quantdesk/{KEYED.model}"


def test_opencode_with_comments_is_left_alone_in_words(home):
    config = home / ".config" / "opencode" / "opencode.json"
    config.parent.mkdir(parents=True)
    config.write_text('{\n  // mine\n  "theme": "x"\n}\n')
    with pytest.raises(agent_configs.AgentConfigError, match="not plain JSON"):
        write_setup(TOOLS["opencode"].make(BIG))
    assert config.read_text() == '{\n  // mine\n  "theme": "x"\n}\n'


def test_continue_gets_a_models_entry_and_a_new_file_its_required_keys(home):
    path, backup = write_setup(TOOLS["continue"].make(BIG))
    assert backup is None
    written = yaml.safe_load(path.read_text())
    jsonschema.validate(written, CONTINUE_SCHEMA)
    entry = written["models"][0]
    assert entry["provider"] == "openai" and entry["apiBase"] == "http://127.0.0.1:8080/v1"
    assert entry["defaultCompletionOptions"]["contextLength"] == 65_536
    # again, with a model of the user's beside it: ours replaced, theirs kept
    written["models"].insert(0, {"name": "Mine", "provider": "ollama", "model": "qwen3"})
    path.write_text(yaml.safe_dump(written))
    smaller = Endpoint(BIG.url, BIG.model, 32_768)
    _, backup = write_setup(TOOLS["continue"].make(smaller))
    again = yaml.safe_load(path.read_text())
    jsonschema.validate(again, CONTINUE_SCHEMA)
    assert [m["name"] for m in again["models"]] == ["Mine", f"QuantDesk {BIG.model}"]
    assert again["models"][1]["defaultCompletionOptions"]["contextLength"] == 32_768 and backup.exists()


def test_cline_and_openai_clients_are_told_their_values(home):
    cline = TOOLS["cline"].make(BIG)
    assert cline.file is None and "  API Provider: OpenAI Compatible" in cline.lines
    assert f"  Base URL: {BIG.openai_base}" in cline.lines and f"  Model ID: {BIG.model}" in cline.lines
    assert "export OPENAI_BASE_URL=http://127.0.0.1:8080/v1" in TOOLS["openai"].make(BIG).lines


@pytest.mark.parametrize(("tool", "least"), [("claude", 64_000), ("codex", 64_000), ("opencode", 64_000),
                                             ("cline", 32_768)])
def test_a_context_too_small_for_the_tool_is_refused_with_the_figure_and_its_source(tool, least):
    small = Endpoint(BIG.url, "SmolLM2-135M-Instruct-Q4_1", 8192)
    why = TOOLS[tool].refusal(small)
    assert why is not None and f"{least:,}" in why and "8,192" in why and "ollama" in why.lower()
    assert TOOLS[tool].refusal(Endpoint(BIG.url, BIG.model, least)) is None
    assert TOOLS["continue"].refusal(small) is None and TOOLS["openai"].refusal(small) is None


def _launch(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", "launch", *args], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **env}, timeout=300)


def test_launch_finds_the_running_server_by_its_record_and_writes_the_tool_file(engine, home):
    """A server that listens says so in a record (as `quantdesk serve` and the Server page do); `launch` finds it,
    reads its model and context from /v1/models, writes Continue's file and refuses Claude Code for its context."""
    server = ServerThread(create_app(engine)).start()
    record = running.announce(server.url, api_key_required=False, source="app")
    try:
        assert [r.url for r in running.running()] == [server.url]
        done = _launch("continue", "--write", env={"HOME": str(home)})
        assert done.returncode == 0, done.stderr
        entry = yaml.safe_load((home / ".continue" / "config.yaml").read_text())["models"][0]
        assert entry["model"] == "tiny-llama-Q8_0" and entry["apiBase"] == f"{server.url}/v1"
        assert entry["defaultCompletionOptions"]["contextLength"] == engine.loaded.n_ctx
        refused = _launch("claude", env={"HOME": str(home)})
        assert refused.returncode != 0 and not (home / ".claude").exists()
        assert "Claude Code needs at least 64,000" in refused.stderr and "Traceback" not in refused.stderr
    finally:
        running.withdraw(record)
        server.stop()
    assert running.running() == []


def test_a_record_of_a_process_gone_is_no_server():
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    path = running.records_dir() / f"{dead.pid}-9.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"url": "http://127.0.0.1:9", "pid": dead.pid, "api_key_required": False}))
    assert running.running() == [] and not path.exists()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_launch_starts_a_detached_server_when_none_runs(tiny_models, home):
    """No server: `launch openai --model M` starts `quantdesk serve` in a session of its own that outlives the
    command, waits until it listens and prints the client's environment; the server answers there."""
    port = _free_port()
    done = _launch("openai", "--model", str(tiny_models.gguf_q8_0), "--port", str(port), "--ctx", "512",
                   env={"HOME": str(home)})
    found = [r for r in running.running() if r.url.endswith(f":{port}")]
    try:
        assert done.returncode == 0, done.stderr
        assert f"export OPENAI_BASE_URL=http://127.0.0.1:{port}/v1" in done.stdout
        assert "export OPENAI_MODEL=tiny-llama-Q8_0" in done.stdout
        assert len(found) == 1 and os.getsid(found[0].pid) == found[0].pid  # its own session: detached
        cards = httpx.get(f"http://127.0.0.1:{port}/v1/models", timeout=30).json()["data"]
        assert cards[0]["id"] == "tiny-llama-Q8_0" and cards[0]["meta"]["n_ctx"] == 512
        again = _launch("openai", "--model", str(tiny_models.gguf_q8_0), env={"HOME": str(home)})
        assert again.returncode == 0 and "starting" not in again.stderr  # the running one is found, none started
    finally:
        for record in found:  # the server this test started, by its pid
            os.kill(record.pid, signal.SIGINT)
            deadline = time.monotonic() + 60
            while running.running() and time.monotonic() < deadline:
                time.sleep(0.2)
    assert running.running() == []  # it withdrew its record as it stopped


def test_requests_made_from_each_written_configuration_are_answered(engine, home):
    """What each tool sends, built from the file `launch --write` wrote (its URL, key and model), reaches the model:
    Codex's Responses request (streamed, with its instructions, a function tool, store false, a cache key), Claude
    Code's Messages request (its billing line first in the system), OpenCode's and Continue's chat completions."""
    server = ServerThread(create_app(engine)).start()
    try:
        endpoint = Endpoint(server.url, "tiny-llama-Q8_0", engine.loaded.n_ctx)
        for name in ("codex", "claude", "opencode", "continue"):
            write_setup(TOOLS[name].make(endpoint))
        codex = tomllib.loads((home / ".codex" / "config.toml").read_text())
        provider = codex["model_providers"][codex["model_provider"]]
        assert provider["wire_api"] == "responses"
        with httpx.stream("POST", f"{provider['base_url']}/responses", timeout=120, json={
                "model": codex["model"], "instructions": "You are a coding agent.", "stream": True, "store": False,
                "input": [{"type": "message", "role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
                "tools": [{"type": "function", "name": "shell", "description": "Run a command.", "strict": False,
                           "parameters": {"type": "object", "properties": {"command": {"type": "string"}}}}],
                "tool_choice": "auto", "parallel_tool_calls": False, "prompt_cache_key": "session-1",
                "max_output_tokens": 8}) as reply:
            events = [line for line in reply.iter_lines() if line.startswith("event: ")]
        assert reply.status_code == 200 and events[0] == "event: response.created"
        assert events[-1] in ("event: response.completed", "event: response.incomplete")  # (8 tokens: cut short)

        env = json.loads((home / ".claude" / "settings.json").read_text())["env"]
        message = httpx.post(f"{env['ANTHROPIC_BASE_URL']}/v1/messages", timeout=120,
                             headers={"Authorization": f"Bearer {env['ANTHROPIC_AUTH_TOKEN']}",
                                      "anthropic-version": "2023-06-01"},
                             json={"model": env["ANTHROPIC_MODEL"], "max_tokens": 8, "messages": [
                                 {"role": "user", "content": "hi"}], "system": [
                                 {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.1; cch=1;"},
                                 {"type": "text", "text": "You are Claude Code."}]})
        assert message.status_code == 200 and message.json()["type"] == "message"

        opencode = json.loads((home / ".config" / "opencode" / "opencode.json").read_text())
        provider_id, model = opencode["model"].split("/", 1)
        options = opencode["provider"][provider_id]["options"]
        cont = yaml.safe_load((home / ".continue" / "config.yaml").read_text())["models"][0]
        for base, key, name in ((options["baseURL"], options["apiKey"], model),
                                (cont["apiBase"], cont["apiKey"], cont["model"])):
            chat = httpx.post(f"{base}/chat/completions", headers={"Authorization": f"Bearer {key}"}, timeout=120,
                              json={"model": name, "max_tokens": 4, "messages": [{"role": "user", "content": "hi"}]})
            assert chat.status_code == 200 and chat.json()["choices"][0]["message"]["role"] == "assistant"
    finally:
        server.stop()


def test_a_model_trained_for_too_short_a_context_is_refused_before_any_server_starts(tiny_models, home):
    done = _launch("codex", "--model", str(tiny_models.gguf_q8_0), "--port", str(_free_port()),
                   env={"HOME": str(home)})
    assert done.returncode != 0 and "Traceback" not in done.stderr
    assert "was trained for a context of" in done.stderr and "Codex needs at least 64,000" in done.stderr
    assert "starting" not in done.stderr and running.running() == [] and not (home / ".codex").exists()
