"""mcp.json: the format LM Studio, Claude Desktop and Cursor use, QuantDesk's own keys beside theirs, another app's
file imported (conflicts reported, nothing overwritten), bearer tokens kept out of the file, refusals in words."""

from __future__ import annotations

import json
import stat

import pytest

from app import paths
from app.mcp.config import (McpConfigError, McpServerConfig, McpServers, import_mcp_json,
                            token_storage_sentence)

CLAUDE_DESKTOP = {
    "mcpServers": {
        "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/Users/me/Desktop"]},
        "github": {"command": "docker", "args": ["run", "-i", "--rm", "ghcr.io/github/github-mcp-server"],
                   "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_secret"}},
    },
    "globalShortcut": "Ctrl+Space",  # another key of Claude Desktop's file
}
CURSOR = {
    "mcpServers": {
        "Remote Search": {"url": "https://search.example/mcp", "headers": {"Authorization": "Bearer tok-123",
                                                                          "X-Team": "blue"}},
        "filesystem": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/elsewhere"]},
        "broken": {"args": ["no command"]},
        "windsurf": {"serverUrl": "https://w.example/mcp"},
    },
}


def test_a_saved_server_round_trips_in_the_shared_format_with_our_keys_beside(tmp_path):
    store = McpServers()
    config = McpServerConfig("files", command="npx", args=["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
                             env={"DEBUG": "1"}, cwd=str(tmp_path), timeout_s=30)
    store.save(config)
    data = json.loads(store.path.read_text())
    entry = data["mcpServers"]["files"]
    assert entry == {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "/tmp"],
                     "env": {"DEBUG": "1"}, "cwd": str(tmp_path), "timeout_s": 30}
    assert store.path.parent == paths.config_dir() and stat.S_IMODE(store.path.stat().st_mode) == 0o600
    back = store.get("files")
    assert (back.command, back.args, back.env, back.cwd, back.timeout_s) == (config.command, config.args,
                                                                             config.env, config.cwd, 30)
    assert back.needs_confirmation  # never started: the user confirms its command line first
    confirmed = store.confirm("files")
    assert not confirmed.needs_confirmation and json.loads(store.path.read_text())["mcpServers"]["files"][
        "confirmed"] == "DEBUG=1 npx -y @modelcontextprotocol/server-filesystem /tmp (in " + str(tmp_path) + ")"
    store.save(McpServerConfig("files", command="npx", args=["-y", "something-else"], confirmed=confirmed.confirmed))
    assert store.get("files").needs_confirmation  # another command: confirmed again


def test_keys_another_app_wrote_are_kept_when_we_write(tmp_path):
    store = McpServers()
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_text(json.dumps({"mcpServers": {"x": {"command": "a", "args": [], "type": "stdio",
                                                           "alwaysAllow": ["t"]}}, "globalShortcut": "Ctrl+K"}))
    store.set_disabled("x", True)
    data = json.loads(store.path.read_text())
    assert data["globalShortcut"] == "Ctrl+K"
    assert data["mcpServers"]["x"]["alwaysAllow"] == ["t"] and data["mcpServers"]["x"]["type"] == "stdio"
    assert data["mcpServers"]["x"]["disabled"] is True


def test_importing_claude_desktops_file_then_cursors_reports_conflicts_and_overwrites_nothing(tmp_path):
    claude = tmp_path / "claude_desktop_config.json"
    claude.write_text(json.dumps(CLAUDE_DESKTOP))
    report = import_mcp_json(claude)
    assert report.added == ["filesystem", "github"] and not report.conflicts
    store = McpServers()
    github = store.get("github")
    assert github.env == {"GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_secret"} and github.needs_confirmation

    cursor = tmp_path / "mcp.json"
    cursor.write_text(json.dumps(CURSOR))
    report = import_mcp_json(cursor)
    assert report.conflicts == ["filesystem"]  # another folder: ours stays
    assert store.get("filesystem").args[-1] == "/Users/me/Desktop"
    assert report.renamed == {"Remote Search": "Remote-Search"}
    assert set(report.added) == {"Remote-Search", "windsurf"}
    assert "needs either a command" in report.skipped["broken"]
    sentences = " ".join(report.sentences())
    assert "'filesystem' was left out: a different server of that name is already here" in sentences
    assert "'Remote Search' was added as 'Remote-Search'" in sentences

    search = store.get("Remote-Search")
    assert search.headers == {"X-Team": "blue"} and search.bearer == "file"  # the token left the headers
    assert "tok-123" not in store.path.read_text()
    assert store.request_headers(search) == {"X-Team": "blue", "Authorization": "Bearer tok-123"}
    assert store.get("windsurf").url == "https://w.example/mcp"

    again = import_mcp_json(claude)
    assert again.unchanged == ["filesystem", "github"] and not again.added


def test_a_bearer_token_lives_outside_mcp_json_and_goes_with_the_server():
    store = McpServers()
    store.save(McpServerConfig("web", url="https://mcp.example/api"), bearer_token="abc-token")
    assert "abc-token" not in store.path.read_text()
    assert "0600" in token_storage_sentence()  # no keychain in the tests: the 0600 file
    assert store.bearer_token(store.get("web")) == "abc-token"
    store.save(McpServerConfig("web", url="https://mcp.example/v2"))  # None: the token stays
    assert store.bearer_token(store.get("web")) == "abc-token"
    store.remove("web")
    tokens = paths.config_dir() / "mcp-tokens.json"
    assert not tokens.exists() or "abc-token" not in tokens.read_text()


@pytest.mark.parametrize(("config", "words"), [
    (McpServerConfig("bad name!", command="x"), "cannot name an MCP server"),
    (McpServerConfig("web", url="ftp://example.com/mcp"), "is not an http:// or https:// address"),
    (McpServerConfig("web", url="https://user:pw@example.com/mcp"), "not in the address"),
    (McpServerConfig("cmd", command="  "), "needs a command to start"),
    (McpServerConfig("slow", command="x", timeout_s=0), "timeout must be more than 0 seconds"),
])
def test_what_cannot_be_saved_is_said(config, words):
    with pytest.raises(McpConfigError, match=words):
        McpServers().save(config)


@pytest.mark.parametrize("text", ["{not json", "[1, 2]"])
def test_an_unreadable_file_is_a_sentence_and_is_not_overwritten(text):
    store = McpServers()
    store.path.parent.mkdir(parents=True, exist_ok=True)
    store.path.write_text(text)
    with pytest.raises(McpConfigError, match="cannot be read|holds no JSON object"):
        store.all()
    with pytest.raises(McpConfigError):
        store.save(McpServerConfig("x", command="y"))
    assert store.path.read_text() == text


def test_an_import_file_that_is_not_one_is_a_sentence(tmp_path):
    (tmp_path / "other.json").write_text(json.dumps({"servers_list": []}))
    with pytest.raises(McpConfigError, match='has no "mcpServers" object'):
        import_mcp_json(tmp_path / "other.json")
    with pytest.raises(McpConfigError, match="cannot read"):
        import_mcp_json(tmp_path / "missing.json")
