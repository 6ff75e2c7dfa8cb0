"""The crash guard through ``quantdesk chat`` as a user runs it (a real process, a real engine that aborts in a decode
as llama.cpp's AMX kernels do on some Xeons, a real model), ``quantdesk hw`` showing what was learned and ``quantdesk
runtime forget`` forgetting it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
QUESTION = "What is the capital of France? Answer in one sentence."

pytestmark = [pytest.mark.real_model]


def quantdesk(*args: str, crash: str = "", stdin: str | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ, QUANTDESK_TEST_CRASH=crash) if crash else dict(os.environ)
    return subprocess.run([sys.executable, "-m", "app", *args], input=stdin, capture_output=True, text=True,
                          timeout=240, cwd=ROOT, env=env)


def test_a_crash_at_the_first_token_is_survived_said_once_and_remembered(smollm2_gguf):
    first = quantdesk("chat", str(smollm2_gguf), "--prompt", QUESTION, "--temperature", "0", crash="warm-up")
    assert first.returncode == 0, first.stderr[-2000:]
    assert "Paris" in first.stdout
    [note] = [line for line in first.stderr.splitlines() if line.startswith("note: ")]
    assert "crashed (SIGABRT) while loading SmolLM2-135M-Instruct.Q4_1.gguf" in note
    assert "without llama.cpp's extra buffer types" in note and "remembered for Q4_1" in note

    hw = quantdesk("hw")
    assert hw.returncode == 0, hw.stderr
    assert "Learned after engine crashes" in hw.stdout and "Q4_1 on" in hw.stdout
    assert "without llama.cpp's extra buffer types" in hw.stdout

    # The next run goes straight to the learned configuration: no crash, and a shorter note.
    again = quantdesk("chat", str(smollm2_gguf), "--prompt", QUESTION, "--temperature", "0", "--json",
                      crash="warm-up")
    assert again.returncode == 0, again.stderr[-2000:]
    out = json.loads(again.stdout)
    assert out["text"] == first.stdout.strip() and "as learned after an engine crash" in out["notice"]

    forgot = quantdesk("runtime", "forget")
    assert forgot.returncode == 0 and "forgot 1 configuration" in forgot.stdout
    assert "nothing (every model loads with llama.cpp's defaults)" in quantdesk("hw").stdout


def test_a_crash_under_a_reply_keeps_the_conversation(smollm2_gguf):
    """Interactive: the first reply crashes the engine and is replayed; the whole transcript (the second reply reads
    the first turn) is the one a run without any crash prints."""
    args = ("chat", str(smollm2_gguf), "--temperature", "0", "--max-tokens", "40")
    turns = "My name is Ada. Remember it.\nWhat is my name?\n/exit\n"
    calm = quantdesk(*args, stdin=turns)
    result = quantdesk(*args, crash="reply", stdin=turns)
    assert result.returncode == 0, result.stderr[-2000:]
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert len(notes) == 1 and "crashed (SIGABRT) during generation" in notes[0]
    assert result.stdout == calm.stdout and result.stdout.count("> ") == 3


def test_a_crash_nothing_cures_is_one_sentence_naming_the_kept_log(smollm2_gguf):
    result = quantdesk("chat", str(smollm2_gguf), "--prompt", QUESTION, crash="always")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    [line] = [ln for ln in result.stderr.splitlines() if ln.startswith("quantdesk: ")]
    assert "crashed (SIGABRT) while loading" in line and "also without llama.cpp's extra buffer types" in line
    log = Path(line.split("the engine's last lines are in ")[1].rstrip(")"))
    assert log.is_file() and "aborting in llama_decode" in log.read_text()
