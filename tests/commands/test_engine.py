"""``quantdesk chat`` as a user runs it: a real process, real engine, real tiny model."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def quantdesk(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", *args], input=stdin, capture_output=True, text=True,
                          timeout=240, cwd=ROOT)


def test_chat_prompt_json_prints_text_and_stats(tiny_models):
    result = quantdesk("chat", str(tiny_models.gguf_q4_k_m), "--prompt", "hi", "--json", "--max-tokens", "12",
                       "--seed", "3")
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout)
    for key in ("text", "prompt_tokens", "completion_tokens", "ttft_ms", "prompt_tps", "decode_tps", "stop_reason"):
        assert key in out
    assert out["completion_tokens"] == 12 and out["stop_reason"] == "length"
    assert out["prompt_tokens"] > 0 and out["decode_tps"] > 0 and out["backend"] == "llama.cpp"


def test_chat_json_schema_holds_the_reply_to_the_schema(tiny_models, tmp_path):
    import jsonschema

    schema = {"type": "object", "properties": {"colour": {"enum": ["red", "green", "blue"]},
                                               "count": {"type": "integer"}},
              "required": ["colour", "count"], "additionalProperties": False}
    (tmp_path / "schema.json").write_text(json.dumps(schema))
    result = quantdesk("chat", str(tiny_models.gguf_q4_k_m), "--prompt", "Pick a colour.", "--json",
                       "--json-schema", str(tmp_path / "schema.json"), "--max-tokens", "200", "--seed", "5")
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout)
    assert out["stop_reason"] == "eos"
    jsonschema.validate(json.loads(out["text"]), schema)


def test_chat_json_schema_file_problems_are_sentences(tiny_models, tmp_path):
    (tmp_path / "bad.json").write_text("{not json")
    (tmp_path / "list.json").write_text("[1, 2]")
    for name, words in (("missing.json", "cannot read the JSON schema"), ("bad.json", "is not valid JSON"),
                        ("list.json", "holds no JSON Schema object")):
        result = quantdesk("chat", str(tiny_models.gguf_q8_0), "--prompt", "hi", "--json-schema", str(tmp_path / name))
        assert result.returncode != 0 and words in result.stderr and "Traceback" not in result.stderr


def test_a_schema_the_grammar_cannot_hold_is_refused_before_any_engine_starts(tiny_models, tmp_path, capsys):
    """The server's check and sentence (its strict response_format's 400, tests/server/test_structured_output.py),
    not a failure in the middle of the reply."""
    from app.cli import main

    schema = tmp_path / "tags.json"
    schema.write_text(json.dumps({"type": "object", "properties": {"tags": {"type": "array", "uniqueItems": True}}}))
    assert main(["chat", str(tiny_models.gguf_q8_0), "--prompt", "hi", "--json-schema", str(schema)]) == 1
    captured = capsys.readouterr()
    assert captured.err == (f"quantdesk: {schema}: the grammar cannot hold replies to this JSON schema: it does not "
                            f"enforce schema.properties.tags: uniqueItems\n")
    assert captured.out == ""


def test_chat_prompt_streams_text_then_a_stats_line(tiny_models):
    result = quantdesk("chat", str(tiny_models.mlx_4bit), "--prompt", "hi", "--max-tokens", "5")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "loaded" in result.stderr and "with mlx" in result.stderr
    assert "tok/s" in result.stderr and "TTFT" in result.stderr and "5 tokens" in result.stderr


def test_interactive_chat_keeps_history_and_prints_stats_after_each_reply(tiny_models):
    result = quantdesk("chat", str(tiny_models.gguf_q8_0), "--max-tokens", "4",
                       stdin="first question\n/reset\nsecond question\n/exit\n")
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stderr.count("TTFT") == 2
    assert "(history cleared)" in result.stderr


def test_the_stats_line_meters_the_context_and_warns_before_it_is_full(tiny_models):
    # 256 tokens of context, 40 a reply: the fourth reply leaves less than a reply's worth, the fifth message would
    # not fit (the engine refuses it, as before)
    result = quantdesk("chat", str(tiny_models.gguf_q8_0), "--ctx", "256", "--max-tokens", "40", "--seed", "1",
                       stdin="first question\nsecond question\nthird question\nfourth\n/exit\n")
    assert result.returncode == 0, result.stderr[-2000:]
    stats = [line for line in result.stderr.splitlines() if "tok/s" in line]
    assert len(stats) == 4
    used = []
    for line in stats:
        meter = re.search(r" · ctx (\d+)/256 \((\d+)%\) · ", line)
        prompt = int(re.search(r"prompt [\d.]+ tok/s \((\d+) tokens\)", line).group(1))
        assert meter and int(meter.group(1)) == prompt + 40  # the prompt the engine read and the reply it made
        assert int(meter.group(2)) == round(100 * int(meter.group(1)) / 256)
        used.append(int(meter.group(1)))
    assert used == sorted(used) and 256 - used[2] >= 40 > 256 - used[3]
    warnings = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    assert warnings == [f"warning: the context is nearly full: {256 - used[3]} of 256 tokens left (the next reply "
                        "may take up to 40); when it is full the engine refuses the next message: start a new chat "
                        "(/reset) or load with a larger context (--ctx)"]
    assert result.stderr.index(warnings[0]) > result.stderr.index(stats[3])  # after the reply that filled it


def test_chat_json_says_the_context_used_of_the_context(tiny_models):
    result = quantdesk("chat", str(tiny_models.gguf_q8_0), "--prompt", "hi", "--json", "--max-tokens", "6",
                       "--ctx", "256")
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout)
    assert out["n_ctx"] == 256 and out["context_used"] == out["prompt_tokens"] + out["completion_tokens"]


def test_the_context_warning_comes_under_a_tenth_left_or_under_a_reply():
    from app.commands.engine import context_warning, stats_line
    from app.datatypes import GenerationStats

    def stats(prompt: int, reply: int) -> GenerationStats:
        return GenerationStats(prompt_tokens=prompt, prompt_ms=1.0, ttft_ms=2.0, generated_tokens=reply,
                               decode_ms=3.0, stop_reason="eos", peak_memory_bytes=0)

    assert " · ctx 1,234/4,096 (30%) · " in stats_line(stats(1000, 234), 4096)
    assert " · ctx " not in stats_line(stats(1000, 234))  # no context known, no meter
    assert context_warning(stats(3000, 100), 4096, 512) == ""  # 996 left: more than a tenth and than a reply
    assert "500 of 4,096 tokens left" in context_warning(stats(3496, 100), 4096, 512)  # under a reply's 512
    assert context_warning(stats(3496, 100), 4096, 100) == ""  # but a 100-token reply still fits, and a tenth is left
    assert "400 of 4,096 tokens left" in context_warning(stats(3596, 100), 4096, 100)  # under a tenth
    # a max_tokens as large as the context counts as half of it, else every reply would warn
    assert context_warning(stats(1000, 100), 4096, 8192) == ""
    assert context_warning(stats(1000, 100), 0, 512) == ""  # no context known


def test_bad_input_exits_non_zero_with_a_sentence(tmp_path):
    bad = tmp_path / "model.gguf"
    bad.write_bytes(b"not a model at all")
    result = quantdesk("chat", str(bad), "--prompt", "hi")
    assert result.returncode == 1
    assert result.stderr.strip() == (
        "quantdesk: model.gguf is not a GGUF file: it starts with b'not ', not b'GGUF' "
        "(the file may be corrupt or an HTML error page saved by a failed download)")
    assert "Traceback" not in result.stderr
    result = quantdesk("chat", str(bad), "--prompt", "hi", "--temperature", "-3")
    assert result.returncode == 1 and "temperature must be between 0 and 10" in result.stderr


def test_chat_with_images_finds_the_projector_beside_the_model(tiny_vision, tmp_path):
    import shutil

    from tests.fixtures.models import write_test_png

    model = tmp_path / tiny_vision.text.gguf_q8_0.name
    shutil.copy(tiny_vision.text.gguf_q8_0, model)
    picture = write_test_png(tmp_path / "picture.png")
    result = quantdesk("chat", str(model), "--prompt", "what is it?", "--image", str(picture), "--image",
                       str(picture), "--json", "--max-tokens", "5", "--ctx", "512")
    assert result.returncode == 1 and "does not see images" in result.stderr and "--mmproj" in result.stderr
    shutil.copy(tiny_vision.mmproj_f16, tmp_path)
    result = quantdesk("chat", str(model), "--prompt", "what is it?", "--image", str(picture), "--image",
                       str(picture), "--json", "--max-tokens", "5", "--ctx", "512")
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout)
    assert out["vision"]["projector"] == tiny_vision.mmproj_f16.name
    assert out["completion_tokens"] == 5 and out["prompt_tokens"] > 2 * 16  # two images of 16 tokens each


def test_chat_refuses_a_file_that_is_not_an_image_before_loading(tiny_vision, tmp_path):
    notes = tmp_path / "notes.png"
    notes.write_text("not a picture")
    result = quantdesk("chat", str(tiny_vision.text.gguf_q8_0), "--prompt", "x", "--image", str(notes),
                       "--mmproj", str(tiny_vision.mmproj_f16))
    assert result.returncode == 1 and "notes.png: this is not a PNG, JPEG or WebP image" in result.stderr
    assert "llama" not in result.stderr  # no engine ran


def _small_machine(tmp_path, ram_bytes: int) -> str:
    """A saved profile (as `quantdesk hw --json` writes) of a machine with only ``ram_bytes`` free."""
    from app.hardware.profile import CpuInfo, HardwareProfile

    hw = HardwareProfile(os="linux", arch="x86_64", cpu=CpuInfo(flags=["avx2"]), ram_total_bytes=ram_bytes,
                         ram_available_bytes=ram_bytes)
    path = tmp_path / "small.json"
    path.write_text(hw.to_json())
    return str(path)


def test_chat_refuses_a_model_that_does_not_fit_and_says_how_to_load_it_anyway(tiny_models, tmp_path):
    small = _small_machine(tmp_path, 16 << 20)
    result = quantdesk("chat", str(tiny_models.gguf_q8_0), "--prompt", "hi", "--hardware", small)
    assert result.returncode != 0 and result.stdout == ""
    assert "tiny-llama-Q8_0.gguf does not fit this machine: needs" in result.stderr
    assert "--force loads it anyway: past it the system may swap" in result.stderr


def test_chat_force_loads_past_the_fit_check_with_the_risk_in_words(tiny_models, tmp_path):
    small = _small_machine(tmp_path, 16 << 20)
    result = quantdesk("chat", str(tiny_models.gguf_q8_0), "--prompt", "hi", "--max-tokens", "3", "--force",
                       "--hardware", small)
    assert result.returncode == 0, result.stderr
    assert "Loading tiny-llama-Q8_0.gguf anyway, though it does not fit this machine (needs" in result.stderr
    assert "run out of memory" in result.stderr and result.stdout.strip()


def test_chat_plans_its_load_as_the_chat_does_a_q8_cache_or_a_shorter_context_where_the_default_does_not_fit(
        tiny_models, tmp_path):
    """The one load planner (app/models/planner.py): where the default context does not fit with an f16 KV cache,
    ``quantdesk chat`` takes a q8_0 one (or a shorter context), as the model bar does, and says so; a --ctx given is
    kept, and judged."""
    from app.models.metadata import read_model
    from app.models.planner import plan_load
    from app.datatypes import LoadSettings
    from app.hardware.profile import CpuInfo, HardwareProfile

    ctx = read_model(tiny_models.gguf_q8_0).context_length
    probe = HardwareProfile(os="linux", arch="x86_64", cpu=CpuInfo(flags=["avx2"]), ram_total_bytes=64 << 30,
                            ram_available_bytes=64 << 30)
    q8 = plan_load(tiny_models.gguf_q8_0, probe, LoadSettings(n_ctx=ctx, kv_cache_type="q8_0"),
                   given=("kv_cache_type", "n_ctx")).estimate_bytes
    small = _small_machine(tmp_path, q8)
    result = quantdesk("chat", str(tiny_models.gguf_q8_0), "--prompt", "hi", "--max-tokens", "3", "--ctx", str(ctx),
                       "--hardware", small)
    assert result.returncode == 0, result.stderr
    assert f"note: a q8_0 KV cache keeps the context at {ctx} tokens" in result.stderr
    assert f"context {ctx}" in result.stderr
    held = quantdesk("chat", str(tiny_models.gguf_q8_0), "--prompt", "hi", "--ctx", str(ctx), "--kv-type", "f16",
                     "--hardware", small)
    assert held.returncode != 0 and "does not fit this machine" in held.stderr  # the user's KV type is kept


def test_chat_draft_gives_the_same_reply_and_reports_the_speculation(tiny_draft_pair):
    args = ("chat", str(tiny_draft_pair.target), "--prompt", "Tell me a story.", "--json", "--max-tokens", "40",
            "--temperature", "0", "--threads", "2")
    plain = json.loads(quantdesk(*args).stdout)
    for draft in (str(tiny_draft_pair.draft), "prompt-lookup"):
        result = quantdesk(*args, "--draft", draft, "--draft-tokens", "5")
        assert result.returncode == 0, result.stderr[-2000:]
        out = json.loads(result.stdout)
        assert out["text"] == plain["text"]
        assert out["draft"]["model"] == draft and out["draft"]["draft_tokens"] == 5
        assert 0 <= out["accepted_tokens"] <= out["draft_tokens"]
        assert out["verify_passes"] > 0 and out["tokens_per_pass"] >= 1
    assert plain["draft"] is None and plain["acceptance_rate"] is None
    assert out["draft_tokens"] > 0  # the reply repeats enough of itself for prompt lookup to guess at least once
    result = quantdesk("chat", str(tiny_draft_pair.target), "--prompt", "hi", "--max-tokens", "20", "--temperature",
                       "0", "--draft", str(tiny_draft_pair.draft))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "loads beside the model; the fit check counted the model alone" in result.stderr
    assert "draft accepted" in result.stderr and "tokens per pass" in result.stderr


def test_chat_refuses_a_draft_of_another_vocabulary_with_a_sentence(tiny_draft_pair, tiny_other_vocab_models, tmp_path):
    other = tiny_other_vocab_models[0]
    result = quantdesk("chat", str(tiny_draft_pair.target), "--prompt", "hi", "--draft", str(other))
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert f"{other.name} cannot draft for {tiny_draft_pair.target.name}: its vocabulary has 1,100 tokens" in result.stderr
    result = quantdesk("chat", str(tiny_draft_pair.target), "--prompt", "hi", "--draft", str(tmp_path / "nothing.gguf"))
    assert result.returncode != 0 and "does not exist" in result.stderr and "Traceback" not in result.stderr
    result = quantdesk("chat", str(tiny_draft_pair.target), "--prompt", "hi", "--draft", str(tiny_draft_pair.draft),
                       "--draft-p-min", "1.5")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "the draft's minimum probability must be between 0 and 1, not 1.5" in result.stderr


# --- thinking models: the tiny model with Qwen3.5's real chat template thinks until a budget closes the block
# (tests/backends/test_thinking.py), so every run here has a budget where it needs an answer after the thinking.

THINK = ("--prompt", "Why is the sky blue?", "--max-tokens", "30", "--temperature", "0")
FAINT, RESET = "\033[2m", "\033[0m"


def _thinking_json(model, *args: str) -> dict:
    result = quantdesk("chat", str(model), *THINK, "--json", *args)
    assert result.returncode == 0, result.stderr[-2000:]
    return json.loads(result.stdout)


def test_chat_json_has_the_thinking_beside_the_answer_and_its_stats(tiny_thinking_model):
    out = _thinking_json(tiny_thinking_model, "--reasoning-budget", "8")
    assert out["reasoning"].strip() and out["text"].strip()
    assert "<think>" not in out["text"] and "</think>" not in out["text"] + out["reasoning"]
    assert 8 <= out["reasoning_tokens"] < out["completion_tokens"] == 30
    assert out["reasoning_ms"] > 0 and out["first_answer_ms"] >= out["ttft_ms"] > 0
    assert "tool_calls" not in out  # only when the reply made any


def test_chat_prints_the_thinking_marked_off_then_the_answer(tiny_thinking_model):
    out = _thinking_json(tiny_thinking_model, "--reasoning-budget", "8")
    result = quantdesk("chat", str(tiny_thinking_model), *THINK, "--reasoning-budget", "8")
    assert result.returncode == 0, result.stderr[-2000:]
    # not a terminal: no styles, the parts under headers
    assert result.stdout == f"Thinking:\n{out['reasoning'].strip()}\n\nAnswer:\n{out['text'].lstrip()}\n"
    stats = result.stderr.strip().splitlines()[-1]
    assert f"thinking {out['reasoning_tokens']} tokens in " in stats and " · answer from " in stats
    assert stats.endswith("30 tokens · length")

    hidden = quantdesk("chat", str(tiny_thinking_model), *THINK, "--reasoning-budget", "8", "--hide-thinking")
    assert hidden.returncode == 0, hidden.stderr[-2000:]
    assert hidden.stdout == f"{out['text'].lstrip()}\n"  # still thought, and counted:
    assert f"thinking {out['reasoning_tokens']} tokens in " in hidden.stderr


def _on_terminal(tmp_path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``quantdesk`` with its stdout on a pseudo-terminal, as in a terminal window: the exit code, what the
    terminal showed (its line ends back to ``\\n``) and stderr."""
    import os
    import select
    import time

    master, slave = os.openpty()
    errors = tmp_path / "stderr.txt"
    with errors.open("w") as err:
        proc = subprocess.Popen([sys.executable, "-m", "app", *args], stdin=subprocess.DEVNULL, stdout=slave,
                                stderr=err, cwd=ROOT, env={**os.environ, **(env or {})})
    os.close(slave)
    shown, deadline = b"", time.monotonic() + 240
    try:
        while time.monotonic() < deadline:
            if not select.select([master], [], [], 1)[0]:
                continue
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: the process closed the terminal's other end
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(master)
        proc.kill() if proc.poll() is None else None
    return proc.wait(timeout=30), shown.decode().replace("\r\n", "\n"), errors.read_text()


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_chat_on_a_terminal_dims_the_thinking_unless_no_color(tiny_thinking_model, tmp_path):
    out = _thinking_json(tiny_thinking_model, "--reasoning-budget", "8")
    args = ("chat", str(tiny_thinking_model), *THINK, "--reasoning-budget", "8")
    code, shown, stderr = _on_terminal(tmp_path, *args, env={"NO_COLOR": "", "TERM": "xterm-256color"})
    assert code == 0, stderr[-2000:]
    assert shown == f"{FAINT}{out['reasoning'].strip()}{RESET}\n\n{out['text'].lstrip()}\n"
    code, shown, stderr = _on_terminal(tmp_path, *args, env={"NO_COLOR": "1", "TERM": "xterm-256color"})
    assert code == 0, stderr[-2000:]
    assert shown == f"Thinking:\n{out['reasoning'].strip()}\n\nAnswer:\n{out['text'].lstrip()}\n"


@pytest.mark.skipif(sys.platform == "win32", reason="pseudo-terminals are POSIX")
def test_a_reply_cut_off_in_its_thinking_leaves_the_terminal_unstyled_and_says_why(tiny_thinking_model, tmp_path):
    code, shown, stderr = _on_terminal(tmp_path, "chat", str(tiny_thinking_model), "--prompt", "hi",
                                       "--max-tokens", "6", env={"NO_COLOR": "", "TERM": "xterm-256color"})
    assert code == 0, stderr[-2000:]
    assert shown.startswith(FAINT) and shown.endswith(f"{RESET}\n") and shown.count(RESET) == 1
    assert "thinking 6 tokens" in stderr and "answer from" not in stderr
    assert ("note: the reply ended inside the thinking, before any answer: raise --max-tokens, or bound the thinking "
            "with --reasoning-budget N") in stderr


def test_no_think_and_a_budget_of_nothing_turn_the_thinking_off(tiny_thinking_model):
    for args in (("--no-think",), ("--reasoning-budget", "0"), ("--chat-template-kwargs", '{"enable_thinking": false}')):
        out = _thinking_json(tiny_thinking_model, *args)
        assert out["reasoning"] == "" and out["reasoning_tokens"] == 0 and out["text"].strip(), args
        assert out["completion_tokens"] == 30
    result = quantdesk("chat", str(tiny_thinking_model), *THINK, "--no-think")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "Thinking:" not in result.stdout and "Answer:" not in result.stdout and result.stdout.strip()
    assert "thinking" not in result.stderr.strip().splitlines()[-1]
    # --think asks for the template's thinking, as its default does: no budget, no answer
    out = _thinking_json(tiny_thinking_model, "--think")
    assert out["text"] == "" and out["reasoning_tokens"] == 30


def test_chat_template_kwargs_that_are_not_a_json_object_are_a_usage_sentence(tiny_thinking_model):
    for value, words in (("{enable_thinking: false}", "is not valid JSON (Expecting property name"),
                         ("[1, 2]", "is JSON but not an object")):
        result = quantdesk("chat", str(tiny_thinking_model), "--prompt", "hi", "--chat-template-kwargs", value)
        assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
        assert (f"quantdesk chat: error: argument --chat-template-kwargs: {value!r} {words}" in result.stderr)
        assert """give a JSON object such as '{"enable_thinking": false}'""" in result.stderr
    result = quantdesk("chat", str(tiny_thinking_model), "--prompt", "hi", "--reasoning-effort", "extreme")
    assert result.returncode == 2 and "invalid choice: 'extreme'" in result.stderr
    result = quantdesk("chat", str(tiny_thinking_model), "--prompt", "hi", "--reasoning-budget", "-2")
    assert result.returncode == 1 and "reasoning_budget must be -1 (none) or 0 to 1,000,000 tokens" in result.stderr


@pytest.fixture(scope="module")
def tiny_glm_model(tiny_models, llama_cpp_sources):
    """The tiny model with GLM-4.7-Flash's real chat template: it drops earlier turns' thinking unless the
    chat_template_kwargs say ``clear_thinking: false``."""
    from tests.fixtures.models import build_templated_model

    return build_templated_model(tiny_models, "glm", llama_cpp_sources.templates["GLM-4.7-Flash.jinja"])


def test_interactive_chat_gives_each_turn_its_thinking_back(tiny_glm_model):
    """Each assistant turn goes back with its thinking: a template that keeps it makes the next prompt longer by
    it, one that drops it (the default here) does not see it."""
    def second_prompt_tokens(*args: str) -> int:
        result = quantdesk("chat", str(tiny_glm_model), "--max-tokens", "20", "--temperature", "0",
                           "--reasoning-budget", "8", *args, stdin="hello there\nand again\n/exit\n")
        assert result.returncode == 0, result.stderr[-2000:]
        assert result.stdout.count("Thinking:\n") == 2 and result.stdout.count("\n\nAnswer:\n") == 2
        stats = [line for line in result.stderr.splitlines() if "tok/s" in line]
        assert len(stats) == 2 and all("thinking" in line for line in stats)
        return int(re.search(r"prompt [\d.]+ tok/s \((\d+) tokens\)", stats[1]).group(1))

    dropped = second_prompt_tokens()
    kept = second_prompt_tokens("--chat-template-kwargs", '{"clear_thinking": false}')
    assert kept >= dropped + 8  # the first reply's thinking: the budget's 8 tokens at least


def _printed(events: list[tuple[str, str]], **options) -> str:
    """What ReplyPrinter writes for a stream of (thinking, answer) deltas."""
    import io

    from app.commands.engine import ReplyPrinter
    from app.datatypes import Token

    out = io.StringIO()
    printer = ReplyPrinter(out, **options)
    for reasoning, text in events:
        printer.token(Token("r", text, 0.0, reasoning=reasoning))
    printer.finish()
    return out.getvalue()


def test_the_printer_trims_the_parts_and_marks_each_change_between_thinking_and_answer():
    # the line breaks a format writes around the thinking block, thinking again after some answer (a model that
    # thinks between steps), and one event holding the end of the thinking and the start of the answer
    stream = [("\n", ""), ("First, ", ""), ("light.\n\n", ""), ("So:", ""), ("\n", "\n\n"), ("", "Blue"),
              (" scattering", " because"), ("", ".")]
    assert _printed(stream) == ("Thinking:\nFirst, light.\n\nSo:\n\nAnswer:\nBlue\n\nThinking:\nscattering\n\n"
                                "Answer:\nbecause.")
    assert _printed(stream, styles=True) == (f"{FAINT}First, light.\n\nSo:{RESET}\n\nBlue\n\n{FAINT}scattering{RESET}"
                                             "\n\nbecause.")
    assert _printed(stream, show_thinking=False) == "Blue because."
    assert _printed([("", "  plain"), ("", " answer")]) == "plain answer"  # no thinking, no headers


def test_the_json_result_has_tool_calls_only_when_the_reply_made_any():
    from app.commands.engine import _json_result
    from app.datatypes import Done, GenerationStats, Loaded
    from app.datatypes import ToolCall

    loaded = Loaded("llama.cpp", "model.gguf", 512, 2, 0, False, {}, 10.0)
    stats = GenerationStats(prompt_tokens=5, prompt_ms=1.0, ttft_ms=2.0, generated_tokens=9, decode_ms=3.0,
                            stop_reason="tool_calls", peak_memory_bytes=0)
    call = ToolCall("call_1", "get_weather", '{"city": "Oslo"}')
    out = _json_result(loaded, Done("r", "", stats, reasoning="Weather, so a tool.", tool_calls=(call,)))
    assert out["tool_calls"] == [{"id": "call_1", "name": "get_weather", "arguments": '{"city": "Oslo"}'}]
    assert out["reasoning"] == "Weather, so a tool." and out["text"] == ""
    assert "tool_calls" not in _json_result(loaded, Done("r", "Sunny.", stats))


def test_chat_uses_the_models_recommended_sampling_unless_a_flag_sets_it(tiny_sampling_model):
    result = quantdesk("chat", str(tiny_sampling_model), "--prompt", "hi", "--json", "--max-tokens", "4",
                       "--temperature", "0.3")
    assert result.returncode == 0, result.stderr[-2000:]
    used = json.loads(result.stdout)["sampling"]
    assert used["temperature"] == {"value": 0.3, "source": "user"}  # the flag wins
    assert used["top_p"] == {"value": 0.9, "source": "model"} and used["top_k"] == {"value": 20, "source": "model"}
    assert used["min_p"] == {"value": 0.0, "source": "model"}
    assert used["repeat_penalty"] == {"value": 1.05, "source": "model"}
    result = quantdesk("chat", str(tiny_sampling_model), "--prompt", "hi", "--max-tokens", "4")
    assert result.returncode == 0, result.stderr[-2000:]
    assert ("sampling from the model: temperature 0.6, top-p 0.9, top-k 20, min-p 0, repeat penalty 1.05"
            in result.stderr)


def test_chat_without_a_recommendation_reports_quantdesks_defaults(tiny_models):
    result = quantdesk("chat", str(tiny_models.gguf_q8_0), "--prompt", "hi", "--json", "--max-tokens", "2")
    assert result.returncode == 0, result.stderr[-2000:]
    used = json.loads(result.stdout)["sampling"]
    assert used["temperature"] == {"value": 0.8, "source": "default"} and used["top_k"]["source"] == "default"


def test_chat_applies_the_models_preset_and_a_flag_wins_over_it(tiny_sampling_model, tmp_path):
    ini = tmp_path / "presets.ini"  # a llama-server preset file, imported as a user would
    ini.write_text(f"version = 1\n\n[tiny]\nmodel = {tiny_sampling_model}\nc = 768\ntemp = 0.25\ntop-k = 7\n"
                   "n-predict = 3\n", encoding="utf-8")
    result = quantdesk("preset", "import", str(ini))
    assert result.returncode == 0, result.stderr[-2000:]
    assert "[tiny] → tiny-llama-sampling-F16.gguf: 4 setting(s)" in result.stdout
    assert quantdesk("preset", "set", str(tiny_sampling_model), "--system", "Answer in one word.").returncode == 0
    result = quantdesk("chat", str(tiny_sampling_model), "--prompt", "hi", "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout)
    assert out["n_ctx"] == 768 and out["completion_tokens"] <= 3  # the preset's context and reply length
    with_system = out["prompt_tokens"]  # the preset's system prompt is part of the prompt
    assert out["sampling"]["temperature"] == {"value": 0.25, "source": "preset"}
    assert out["sampling"]["top_k"] == {"value": 7, "source": "preset"}
    assert out["sampling"]["top_p"] == {"value": 0.9, "source": "model"}  # what the preset leaves to the model
    # Flags win over the preset, value by value; --no-preset leaves it out altogether.
    result = quantdesk("chat", str(tiny_sampling_model), "--prompt", "hi", "--json", "--ctx", "256",
                       "--temperature", "0.5", "--max-tokens", "2")
    out = json.loads(result.stdout)
    assert out["n_ctx"] == 256 and out["sampling"]["temperature"] == {"value": 0.5, "source": "user"}
    assert out["sampling"]["top_k"]["source"] == "preset" and out["completion_tokens"] == 2
    result = quantdesk("chat", str(tiny_sampling_model), "--prompt", "hi", "--json", "--no-preset", "--max-tokens", "2")
    out = json.loads(result.stdout)
    assert out["n_ctx"] != 768 and out["sampling"]["temperature"] == {"value": 0.6, "source": "model"}
    assert out["prompt_tokens"] < with_system
    result = quantdesk("chat", str(tiny_sampling_model), "--prompt", "hi", "--max-tokens", "2")
    assert "the model's preset applies" in result.stderr and "context 768" in result.stderr
    assert "sampling from the model's preset: temperature 0.25, top-k 7" in result.stderr


def test_preset_command_sets_shows_exports_and_removes(tiny_models, tmp_path):
    model = str(tiny_models.gguf_q8_0)
    result = quantdesk("preset", "set", model, "--ctx", "1024", "--kv-type", "q8_0", "--temperature", "0.4",
                       "--think", "--overflow", "truncate-middle")
    assert result.returncode == 0, result.stderr[-2000:]
    shown = json.loads(quantdesk("preset", "show", model, "--json").stdout)
    assert shown["load"] == {"n_ctx": 1024, "kv_cache_type": "q8_0"} and shown["overflow"] == "truncate-middle"
    assert shown["sampling"] == {"temperature": 0.4, "enable_thinking": True} and shown["path"] == model
    refused = quantdesk("preset", "set", model, "--top-p", "0")
    assert refused.returncode != 0 and "top_p must be in (0, 1]" in refused.stderr
    assert quantdesk("preset", "set", model, "--unset", "temperature").returncode == 0
    exported = quantdesk("preset", "export")
    assert exported.returncode == 0 and "[tiny-llama-Q8_0]" in exported.stdout and "ctx-size = 1024" in exported.stdout
    assert "reasoning = on" in exported.stdout and "temp" not in exported.stdout
    assert "left out: [tiny-llama-Q8_0] overflow policy: llama-server has no such setting" in exported.stderr
    assert model in quantdesk("preset", "ls").stdout
    assert quantdesk("preset", "rm", model).returncode == 0
    gone = quantdesk("preset", "show", model)
    assert gone.returncode != 0 and "has no preset" in gone.stderr
    bad = tmp_path / "bad.ini"
    bad.write_text("[a]\nthis is no key\n", encoding="utf-8")
    refused = quantdesk("preset", "import", str(bad))
    assert refused.returncode != 0 and "line 2" in refused.stderr and "nothing imported" in refused.stderr


@pytest.mark.parametrize("policy", ["drop-oldest", "truncate-middle", "compact"])
def test_each_overflow_policy_keeps_the_chat_going_past_a_full_context_and_says_each_cut(tiny_models, policy):
    lines = [f"question {i}: what comes after {i} apples and {i + 1} pears?" for i in range(26)]
    result = quantdesk("chat", str(tiny_models.gguf_q8_0), "--ctx", "256", "--max-tokens", "24", "--seed", "1",
                       "--system", "You are terse.", "--overflow", policy, stdin="\n".join([*lines, "/exit", ""]))
    assert result.returncode == 0, result.stderr[-2000:]
    stats = [line for line in result.stderr.splitlines() if "tok/s" in line]
    assert len(stats) == 26  # every message answered
    notes = [line for line in result.stderr.splitlines() if line.startswith("note: ")]
    assert len(notes) >= 2
    dropped = []
    for note in notes:
        words = "compacted into a note by the model" if policy == "compact" else "not sent to the model"
        found = re.match(rf"note: (\d+) earlier messages {words} \(context full\); (\d+) tokens sent", note)
        assert found, note
        dropped.append(int(found.group(1)))
        assert int(found.group(2)) <= 256 - 24
        if policy == "compact":
            assert re.search(r"\. The note: \S", note)  # the model's own note, not empty
    assert dropped == sorted(dropped) and len(set(dropped)) == len(dropped)  # each cut leaves out more
    # the meter after a cut is the cut prompt's: never past the context
    for line in stats:
        assert int(re.search(r" · ctx (\d+)/256 ", line).group(1)) <= 256


def test_overflow_stop_keeps_the_engines_refusal(tiny_models):
    lines = [f"question {i}: what comes after {i} apples and {i + 1} pears?" for i in range(12)]
    result = quantdesk("chat", str(tiny_models.gguf_q8_0), "--ctx", "256", "--max-tokens", "24", "--seed", "1",
                       "--overflow", "stop", stdin="\n".join([*lines, "/exit", ""]))
    assert result.returncode != 0
    assert "the conversation is " in result.stderr and "tokens long but the context holds 256" in result.stderr
    assert "note: " not in result.stderr and "Traceback" not in result.stderr


def test_one_prompt_under_a_policy_says_it_in_json_and_one_too_long_for_any_is_a_sentence(tiny_models):
    result = quantdesk("chat", str(tiny_models.gguf_q8_0), "--ctx", "256", "--max-tokens", "24", "--prompt",
                       " ".join(f"w{i}" for i in range(20)), "--json", "--overflow", "drop-oldest")
    assert result.returncode == 0, result.stderr[-2000:]
    out = json.loads(result.stdout)
    assert out["overflow"] == "drop-oldest" and "context_cut" not in out  # it fits: nothing left out
    result = quantdesk("chat", str(tiny_models.gguf_q8_0), "--ctx", "256", "--max-tokens", "24", "--prompt",
                       " ".join(f"w{i}" for i in range(60)), "--json", "--overflow", "drop-oldest")
    assert result.returncode == 1 and result.stdout == ""
    assert re.fullmatch(r"quantdesk: the newest message does not fit the context: it is \d+ tokens, and the "
                        r"context of 256 must keep 24 for the reply \(send a shorter message, lower the reply's max "
                        r"tokens or load with a larger context\)\n", result.stderr), result.stderr


@pytest.mark.real_model
def test_gemma_3_without_a_template_chats_in_gemma_s_turns_and_says_where_they_came_from(gemma3_gguf):
    """Gemma 3 270M's GGUF carries no chat template: `quantdesk chat` serves Gemma's, bundled for its architecture,
    and says so; the reply no longer runs on into made-up ChatML turns (the old fallback's "<|im_end|> <|im_start|>
    teacher …"). The fixture is the pretrained model (no "it" finetune), so what it answers is not asserted."""
    ask = ("chat", str(gemma3_gguf), "--prompt", "What is the capital of France?", "--temperature", "0", "--ctx", "512")
    result = quantdesk(*ask, "--max-tokens", "24")
    assert result.returncode == 0, result.stderr[-2000:]
    assert "chat template: Gemma (bundled for the gemma3 architecture: the file has none; its header names no " \
           "fine-tune (Gemma 3 270m): likely a pre-trained model, not tuned to chat" in result.stderr
    assert "<|im_start|>" not in result.stdout and "<|im_end|>" not in result.stdout
    out = json.loads(quantdesk(*ask, "--max-tokens", "1", "--json").stdout)
    assert out["chat_template"] == "gemma"
    assert out["chat_template_origin"].startswith("bundled for the gemma3 architecture: the file has none; ")
    assert out["prompt_tokens"] == 16  # <bos><start_of_turn>user … <end_of_turn>\n<start_of_turn>model\n
    template = quantdesk("chat", str(gemma3_gguf), "--prompt", "hi", "--chat-template", "chatml", "--max-tokens", "1",
                         "--ctx", "512", "--json")
    assert json.loads(template.stdout)["chat_template_origin"].startswith("your choice, bundled; its header names no")
