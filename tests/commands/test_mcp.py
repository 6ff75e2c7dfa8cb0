"""``quantdesk mcp`` and ``quantdesk chat --tools`` as a user runs them: real processes, the real npm MCP servers, the
real engine on the tiny model."""

from __future__ import annotations

import json
import re
import sys

import pytest

from app.mcp.approvals import Approvals
from app.mcp.config import McpServerConfig, McpServers
from tests.commands.test_engine import quantdesk
from tests.fixtures import mcp_servers


def test_add_test_ls_and_rm_a_stdio_server():
    command = str(mcp_servers.everything().command)
    added = quantdesk("mcp", "add", "everything", "--yes", "--", command, "stdio")
    assert added.returncode == 0, added.stderr
    assert f"saved everything → {command} stdio" in added.stdout
    assert "everything: mcp-servers/everything" in added.stdout and "  echo — Echoes back the input string" in \
        added.stdout
    listed = json.loads(quantdesk("mcp", "ls", "--json").stdout)
    assert listed[0]["name"] == "everything" and listed[0]["confirmed"] and listed[0]["args"] == ["stdio"]
    tested = json.loads(quantdesk("mcp", "test", "everything", "--json").stdout)
    assert tested["state"] == "ready" and "get-sum" in [t["name"] for t in tested["tools"]]
    removed = quantdesk("mcp", "rm", "everything")
    assert removed.returncode == 0 and McpServers().all() == []
    gone = quantdesk("mcp", "test", "everything")
    assert gone.returncode == 1 and "there is no MCP server named 'everything'" in gone.stderr


def test_a_command_is_never_started_before_it_is_confirmed():
    added = quantdesk("mcp", "add", "shell", "--", "sh", "-c", "touch started")  # no terminal to ask, no --yes
    assert added.returncode == 0
    assert "shell was not confirmed, so it has not been started" in added.stderr
    refused = quantdesk("mcp", "test", "shell")
    assert refused.returncode == 1 and "has not been confirmed, and there is no terminal to ask" in refused.stderr
    assert "sh -c 'touch started'" in refused.stderr  # the command in full
    assert "not confirmed yet" in quantdesk("mcp", "ls").stdout


def test_a_server_that_fails_to_start_is_a_sentence_and_exit_1(tmp_path):
    result = quantdesk("mcp", "add", "broken", "--yes", "--", "/no/such/server")
    assert result.returncode == 1 and "the command '/no/such/server' was not found" in result.stderr
    assert "Traceback" not in result.stderr


def test_add_an_http_server_with_a_bearer_token_from_stdin():
    from tests.mcp.http_server import serving

    with serving("tok-9f3") as url:
        added = quantdesk("mcp", "add", "web", "--url", url, "--bearer-token-stdin", stdin="tok-9f3\n")
        assert added.returncode == 0, added.stderr
        assert "(bearer token kept)" in added.stdout and "web: http-test-server" in added.stdout
        assert "tok-9f3" not in McpServers().path.read_text()
        wrong = quantdesk("mcp", "add", "web", "--url", url, "--bearer-token-stdin", stdin="wrong\n")
        assert wrong.returncode == 1 and "cannot be reached or did not speak MCP" in wrong.stderr


def test_import_an_mcp_json_and_see_it_listed(tmp_path):
    other = tmp_path / "claude_desktop_config.json"
    other.write_text(json.dumps({"mcpServers": {"memory": {"command": "npx", "args": ["-y", "server-memory"]},
                                                "odd": {"url": 5}}}))
    result = quantdesk("mcp", "import", str(other))
    assert result.returncode == 0
    assert "added 1: memory" in result.stdout and "'odd' was left out" in result.stdout
    assert "memory\tstdio\tnpx -y server-memory\tenabled, not confirmed yet" in quantdesk("mcp", "ls").stdout
    assert quantdesk("mcp", "disable", "memory").stdout.strip() == "memory disabled"
    assert McpServers().get("memory").disabled


@pytest.fixture
def files_server(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    config = mcp_servers.filesystem(folder)
    McpServers().save(config)
    McpServers().confirm("files")
    return folder


def test_chat_with_tools_forced_to_call_a_filesystem_tool_after_approval(tiny_tool_model, files_server):
    """The model's first reply must call the named tool (the engine's grammar); the call is asked for ("a": always),
    run by the real server-filesystem, its result goes back, and the model answers. The random model writes the
    call's (free-form) arguments; a seed whose call reads as the tool's schema is looked for among a few."""
    ok = None
    for seed in (3, 1, 2, 4, 5, 6):
        result = quantdesk("chat", str(tiny_tool_model), "--tools", "files", "--tool-choice",
                           "files__list_allowed_directories", "--prompt", "Which folders may you read?",
                           "--max-tokens", "400", "--seed", str(seed), "--max-tool-steps", "1", "--json",
                           stdin="a\n" * 10)
        assert result.returncode == 0, result.stderr[-2000:]
        out = json.loads(result.stdout)
        runs = out["tool_runs"]
        assert runs and all(r["function"] == "files__list_allowed_directories" for r in runs)
        assert all(r["kind"] in ("ok", "bad_arguments") for r in runs), runs
        assert out["stop_reason"] in ("eos", "length")  # the model went on after the step limit, without tools
        ok = next((r for r in runs if r["kind"] == "ok"), None)
        if ok:
            break
    assert ok is not None, "no seed made a call whose arguments fit the schema"
    assert ok["decision"] in ("always", "allowed") and f"Allowed directories:\n{files_server}" in ok["text"]
    assert Approvals().always() == [("files", "list_allowed_directories")]
    assert "always allowed: list_allowed_directories" in quantdesk("mcp", "ls").stdout
    assert quantdesk("mcp", "revoke", "files").stdout.strip() == "the tools of files: each call asks again"
    assert Approvals().always() == []


def test_chat_with_tools_runs_no_call_that_max_tokens_cut(tiny_tool_model, files_server):
    """A forced write_file cut by --max-tokens inside its arguments (this seed's random model takes some 45 tokens of
    the grammar's whitespace to name the tool, 90 are inside the path): no call, so nothing is asked or run and no
    file is written; the reply says it was cut (before, the half-written call was asked for and run)."""

    def chat(max_tokens: int) -> dict:
        result = quantdesk("chat", str(tiny_tool_model), "--tools", "files", "--tool-choice", "files__write_file",
                           "--prompt", "Write my notes to notes.md.", "--max-tokens", str(max_tokens), "--seed", "3",
                           "--max-tool-steps", "1", "--json", stdin="a\n" * 10)
        assert result.returncode == 0, result.stderr[-2000:]
        assert "allow files/write_file?" not in result.stderr
        return json.loads(result.stdout)

    for max_tokens in (12, 90):
        out = chat(max_tokens)
        assert out["stop_reason"] == "length" and not out["tool_runs"] and "tool_calls" not in out
        assert "<tool_call>" not in out["text"] and not out["text"].strip()
        assert list(files_server.iterdir()) == []


def test_chat_with_tools_in_the_terminal_shows_the_call_and_a_denial(tiny_tool_model, files_server):
    result = quantdesk("chat", str(tiny_tool_model), "--tools", "files", "--tool-choice",
                       "files__list_allowed_directories", "--prompt", "Which folders?", "--max-tokens", "400",
                       "--seed", "3", "--max-tool-steps", "1", stdin="n\n" * 10)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "→ files/list_allowed_directories" in result.stdout
    assert "← denied: the model is told" in result.stdout
    assert "allow files/list_allowed_directories? [y] once, [a] always this tool, [n] deny" in result.stderr
    assert "the step limit of 1 is reached" in result.stderr and "tools: 14 from files" in result.stderr


# One small tool (the filesystem server's fourteen take some 6,000 of the tiny model's tokens): the MCP SDK's own
# server, as a script.
CLOCK = '''
from mcp.server.mcpserver import MCPServer

server = MCPServer("clock")


@server.tool()
def today() -> str:
    """The day of the week."""
    return "Friday"


server.run()
'''


def test_chat_with_tools_keeps_to_the_overflow_policy_past_a_full_context(tiny_tool_model, tmp_path):
    """Each reply of a --tools turn reads what the overflow policy leaves of the history, as a chat without tools
    does: the tool loop was handed the whole history, and once it outgrew the context the engine refused it. Each
    turn's first reply must call the tool (run without asking), so the turns left out hold calls and results."""
    script = tmp_path / "clock.py"
    script.write_text(CLOCK, encoding="utf-8")
    McpServers().save(McpServerConfig("clock", command=sys.executable, args=[str(script)]).confirm())
    lines = [f"question {i}: which day comes after {i} apples and {i + 1} pears?" for i in range(8)]
    result = quantdesk("chat", str(tiny_tool_model), "--tools", "clock", "--tool-choice", "clock__today",
                       "--allow-tools", "--max-tool-steps", "1", "--ctx", "1024", "--max-tokens", "100", "--seed",
                       "1", "--overflow", "drop-oldest", stdin="\n".join([*lines, "/exit", ""]))
    assert result.returncode == 0, result.stderr[-2000:]
    assert len([line for line in result.stderr.splitlines() if "tok/s" in line]) == len(lines)  # each answered
    assert "← " in result.stdout and "Friday" in result.stdout  # calls ran: their results are in the history
    cuts = [re.match(r"note: (\d+) earlier messages not sent to the model \(context full\); (\d+) tokens sent", line)
            for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert cuts and all(cuts), result.stderr[-2000:]
    assert all(int(cut.group(2)) <= 1024 - 100 for cut in cuts if cut)
    dropped = [int(cut.group(1)) for cut in cuts if cut]
    assert dropped == sorted(dropped)  # a cut never shrinks


def test_a_model_whose_template_shows_no_tools_gets_them_in_the_generic_format(tiny_models, files_server):
    """The tiny model's template is plain ChatML: the tools reach it in llama.cpp's generic JSON format (it was
    refused before), and the load says so."""
    result = quantdesk("chat", str(tiny_models.gguf_q4_k_m), "--tools", "files", "--prompt", "hi", "--max-tokens",
                       "8", "--max-tool-steps", "1", "--ctx", "16384", stdin="n\n" * 10)  # 14 tools as JSON
    assert result.returncode == 0, result.stderr[-2000:]
    assert "tools: the generic JSON format (the template shows none)" in result.stderr
    assert "no tool support" not in result.stderr


def test_chat_with_a_server_that_is_not_there_or_disabled_is_a_sentence(tiny_tool_model, files_server):
    missing = quantdesk("chat", str(tiny_tool_model), "--tools", "nothere", "--prompt", "hi")
    assert missing.returncode != 0 and "there is no MCP server named 'nothere'" in missing.stderr
    McpServers().set_disabled("files", True)
    disabled = quantdesk("chat", str(tiny_tool_model), "--tools", "files", "--prompt", "hi")
    assert disabled.returncode != 0 and "the MCP server files is disabled" in disabled.stderr
