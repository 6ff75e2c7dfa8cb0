"""ToolBox against real MCP servers: the npm registry's server-everything and server-filesystem over stdio, the
official SDK's own server, and scripts that misbehave on purpose. Every failure is an outcome with a sentence, and
the ToolBox (and the other servers in it) go on working after each."""

from __future__ import annotations

import contextlib

import json
import sys
from dataclasses import replace
import threading
import time

import jsonschema
import psutil
import pytest

from app.mcp.client import RESULT_BUDGET_CHARS, ToolBox
from app.mcp.config import McpServerConfig
from tests.fixtures import mcp_servers
from tests.mcp.conftest import GARBAGE, SILENT, python_script, python_server


def test_the_tools_of_server_everything_are_listed_with_names_unique_for_the_model(box):
    status = box.connect(mcp_servers.everything())
    assert status.state == "ready" and "everything" in status.server_info and status.tools >= 10
    tools = {t.name: t for t in box.list_tools("everything")}
    assert {"echo", "get-sum", "trigger-long-running-operation"} <= set(tools)
    echo = tools["echo"].as_openai_function()
    assert echo["type"] == "function" and echo["function"]["name"] == "everything__echo"
    assert echo["function"]["description"] and "$schema" not in echo["function"]["parameters"]
    assert echo["function"]["parameters"]["required"] == ["message"]
    jsonschema.Draft202012Validator.check_schema(echo["function"]["parameters"])


def test_two_servers_whose_names_clash_for_the_model_get_different_function_names(box, tmp_path):
    assert box.connect(mcp_servers.everything("a.b")).state == "ready"
    assert box.connect(mcp_servers.everything("a_b")).state == "ready"
    names = [t.function_name for t in box.tools()]
    assert len(names) == len(set(names)) and "a_b__echo" in names and "a_b__echo_2" in names
    assert all(len(n) <= 64 and all(c.isalnum() or c in "_-" for c in n) for n in names)
    assert box.find("a_b__echo_2").server == "a_b"  # the second server's, whichever was asked
    assert box.call_function("a_b__echo_2", '{"message": "second"}').text == "Echo: second"


def test_echo_and_sum_answer_and_a_json_text_or_an_object_are_both_taken(box):
    box.connect(mcp_servers.everything())
    echo = box.call("everything", "echo", '{"message": "hello there"}')
    assert (echo.kind, echo.is_error, echo.text, echo.sentence) == ("ok", False, "Echo: hello there", "")
    total = box.call("everything", "get-sum", {"a": 2, "b": 40})
    assert total.kind == "ok" and "42" in total.text


def test_the_filesystem_server_lists_a_folder_and_refuses_one_outside_in_words(box, tmp_path):
    folder = tmp_path / "shared"
    (folder / "inner").mkdir(parents=True)
    (folder / "notes.txt").write_text("hi")
    box.connect(mcp_servers.filesystem(folder))
    listing = box.call("files", "list_directory", {"path": str(folder)})
    assert listing.kind == "ok" and "[FILE] notes.txt" in listing.text and "[DIR] inner" in listing.text
    assert listing.structured == {"content": listing.text}
    outside = box.call("files", "list_directory", {"path": str(tmp_path)})
    assert outside.kind == "tool_error" and outside.is_error and "outside allowed directories" in outside.text
    assert outside.sentence.startswith("files/list_directory reported an error: Access denied")


def test_a_tool_that_does_not_exist_and_arguments_against_the_schema_are_told_before_any_call(box):
    box.connect(mcp_servers.everything())
    missing = box.call("everything", "format_disk", {})
    assert missing.kind == "no_such_tool" and "has no tool named 'format_disk'" in missing.text
    assert "echo" in missing.text  # the model is told which there are
    unknown = box.call_function("everything__nope", "{}")
    assert unknown.kind == "no_such_tool" and "everything__echo" in unknown.text
    wrong = box.call("everything", "get-sum", '{"a": 1, "b": "two"}')
    assert wrong.kind == "bad_arguments" and "'two' is not of type 'number'" in wrong.text and "(at b)" in wrong.text
    absent = box.call("everything", "echo", {})
    assert absent.kind == "bad_arguments" and "'message' is a required property" in absent.text
    broken = box.call("everything", "echo", '{"message": "unterminated')
    assert broken.kind == "bad_arguments" and "not valid JSON" in broken.text
    not_object = box.call("everything", "echo", '["a list"]')
    assert not_object.kind == "bad_arguments" and "must be a JSON object" in not_object.text
    assert box.call("everything", "echo", {"message": "still here"}).text == "Echo: still here"


def test_stop_ends_the_long_running_operation_within_a_second_and_the_server_goes_on(box):
    box.connect(mcp_servers.everything())
    stop = threading.Event()
    threading.Timer(0.8, stop.set).start()
    started = time.monotonic()
    outcome = box.call("everything", "trigger-long-running-operation", {"duration": 30, "steps": 30}, cancel=stop)
    stopped_after = time.monotonic() - started - 0.8
    assert outcome.kind == "cancelled" and outcome.is_error and "stopped" in outcome.sentence
    assert stopped_after < 1.0, stopped_after
    assert box.call("everything", "echo", {"message": "after"}).text == "Echo: after"


def test_a_call_past_its_timeout_is_said_and_the_server_goes_on(box):
    box.connect(mcp_servers.everything())
    started = time.monotonic()
    outcome = box.call("everything", "trigger-long-running-operation", {"duration": 20, "steps": 20}, timeout_s=1)
    assert outcome.kind == "timeout" and "did not answer within 1 s" in outcome.sentence
    assert time.monotonic() - started < 5
    assert box.call("everything", "echo", {"message": "after"}).text == "Echo: after"


def _server_process(command: str) -> psutil.Process:
    for child in psutil.Process().children(recursive=True):
        try:
            if any(command in part for part in child.cmdline()):
                return child
        except psutil.Error:
            continue
    raise AssertionError(f"no process runs {command}")


def test_a_server_killed_mid_call_is_said_and_the_next_call_starts_it_again(box):
    config = mcp_servers.everything()
    box.connect(config)
    process = _server_process("mcp-server-everything")
    threading.Timer(0.5, process.kill).start()
    outcome = box.call("everything", "trigger-long-running-operation", {"duration": 20, "steps": 20})
    assert outcome.kind == "crashed" and "went away during everything/trigger-long-running-operation" in outcome.sentence
    assert box.status("everything").state == "failed"
    again = box.call("everything", "echo", {"message": "back"})
    assert again.text == "Echo: back" and box.status("everything").state == "ready"


def test_a_server_command_that_exits_at_once_is_a_sentence(box):
    config = McpServerConfig("quits", command=sys.executable,
                             args=["-c", "import sys; sys.stderr.write('no config file\\n'); sys.exit(3)"]).confirm()
    status = box.connect(config)
    assert status.state == "failed"
    assert "quits ended before it finished the MCP handshake" in status.sentence
    assert "no config file" in status.sentence  # its last words on stderr
    missing = box.connect(McpServerConfig("ghost", command="/no/such/mcp-server").confirm())
    assert missing.state == "failed" and "the command '/no/such/mcp-server' was not found" in missing.sentence
    call = box.call("quits", "anything", {})
    assert call.kind == "unavailable" and call.is_error and "ended before" in call.text


def test_a_server_that_never_answers_initialize_times_out_in_words(box, tmp_path):
    started = time.monotonic()
    status = box.connect(python_script(tmp_path, "silent", SILENT), timeout_s=2)
    assert time.monotonic() - started < 10
    assert status.state == "failed"
    assert "silent did not answer the MCP handshake (initialize) within 2 s" in status.sentence
    assert "waiting for nothing" in status.sentence


def test_a_server_that_answers_garbage_is_said_with_what_it_wrote(box, tmp_path):
    status = box.connect(python_script(tmp_path, "garbage", GARBAGE), timeout_s=2)
    assert status.state == "failed"
    assert "it wrote what is not JSON-RPC: 'hello, this is not JSON-RPC'" in status.sentence
    assert box.connect(mcp_servers.everything()).state == "ready"  # the ToolBox goes on
    assert box.call("everything", "echo", {"message": "ok"}).kind == "ok"


def test_a_result_of_50_mb_is_cut_to_the_budget_and_said(box, tmp_path):
    box.connect(python_server(tmp_path))
    started = time.monotonic()
    outcome = box.call("py", "huge", {"megabytes": 50}, timeout_s=120)
    seconds = time.monotonic() - started
    assert outcome.kind == "ok" and outcome.cut and outcome.full_chars == 50 * 2**20
    assert len(outcome.text) < RESULT_BUDGET_CHARS + 200
    assert outcome.text.startswith("0123456789abcdef") and "cut by QuantDesk" in outcome.text
    assert outcome.sentence == (f"py/huge's result was {50 * 2**20:,} characters; the model was given the first "
                                f"{RESULT_BUDGET_CHARS:,}")
    print(f"50 MB result read in {seconds:.1f} s")
    assert box.call("py", "nap", {"seconds": 0}).text == "slept 0.0"


def test_a_tool_that_fails_is_an_error_for_the_model_and_a_sentence_for_the_user(box, tmp_path):
    box.connect(python_server(tmp_path))
    outcome = box.call("py", "fail", {"reason": "the disk is full"})
    assert outcome.kind == "tool_error" and outcome.is_error
    assert outcome.sentence.startswith("py/fail reported an error: ") and outcome.text


def test_a_server_flooding_its_stderr_still_serves_and_memory_keeps_only_the_tail(box, tmp_path):
    status = box.connect(python_server(tmp_path, "flood", "--flood", "30"), timeout_s=120)
    assert status.state == "ready", status.sentence
    conn_tail = box._connections["flood"].stderr
    assert conn_tail.bytes > 30 * 2**20 and len(conn_tail.lines) <= 20
    assert conn_tail.lines[-1] == "the flood is over"
    assert box.call("flood", "nap", {"seconds": 0}).kind == "ok"


def test_every_process_is_stopped_when_the_toolbox_closes(tmp_path):
    with ToolBox() as box:
        box.connect(mcp_servers.everything())
        box.connect(mcp_servers.filesystem(tmp_path))
        pids = [p.pid for p in psutil.Process().children(recursive=True)]
        assert pids
    processes = []
    for pid in pids:
        with contextlib.suppress(psutil.NoSuchProcess):  # gone already
            processes.append(psutil.Process(pid))
    psutil.wait_procs(processes, timeout=5)  # until each has ended (reaped: they are ours), a few seconds at most
    alive = [pid for pid in pids if psutil.pid_exists(pid) and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE]
    assert alive == []


def test_a_streamable_http_server_with_a_bearer_token(box, tmp_path):
    """The SDK's own server over streamable HTTP, behind a bearer token: the token from the keychain's place is sent,
    a wrong one is refused in words."""
    from tests.mcp.http_server import serving

    with serving("s3cret") as url:
        headers = {"good": {"Authorization": "Bearer s3cret"}, "bad": {"Authorization": "Bearer wrong"}}
        tool_box = ToolBox(headers_for=lambda config: headers[config.name])
        try:
            ready = tool_box.connect(McpServerConfig("good", url=url), timeout_s=20)
            assert ready.state == "ready", ready.sentence
            assert json.loads(tool_box.call("good", "add", {"a": 1, "b": 2}).text) == 3
            refused = tool_box.connect(McpServerConfig("bad", url=url), timeout_s=20)
            assert refused.state == "failed" and f"bad at {url} cannot be reached or did not speak MCP" in \
                refused.sentence
        finally:
            tool_box.close()


def test_a_command_not_confirmed_or_a_disabled_server_is_never_started(box, tmp_path):
    marker = tmp_path / "started"
    config = McpServerConfig("sneaky", command=sys.executable, args=["-c", f"open({str(marker)!r}, 'w')"])
    status = box.connect(config)
    assert status.state == "failed" and "has not been confirmed" in status.sentence
    disabled = box.connect(replace(config.confirm(), disabled=True))
    assert disabled.state == "failed" and "is disabled" in disabled.sentence
    assert box.call("sneaky", "x", {}).kind == "unavailable"
    time.sleep(0.3)  # a child started anyway would have written its marker by now: an absence is shown by waiting
    assert not marker.exists()


@pytest.mark.parametrize("arguments", [None, ""])
def test_no_arguments_are_an_empty_object(box, arguments):
    box.connect(mcp_servers.everything())
    assert box.call("everything", "get-env", arguments).kind == "ok"
