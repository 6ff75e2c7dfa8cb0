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
