"""``quantdesk chat`` as a user runs it: a real process, real engine, real tiny model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

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
