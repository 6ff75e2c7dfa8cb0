"""Per-model presets (app/hub/presets.py) and llama-server's preset INI format (app/hub/preset_ini.py): a file
written as llama-server's README shows, matched to real library entries, and written back out."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app.datatypes import LoadSettings, choose_sampling
from app.hub import preset_ini, presets
from app.hub.library import Library, LibraryEntry

# As tools/server/README.md ("Model presets") writes one, with this machine's model in the second section.
README_INI = """\
version = 1

; (Optional) This section provides global settings shared across all presets.
; If the same key is defined in a specific preset, it will override the value in this global section.
[*]
c = 8192
n-gpu-layers = 8

; If the key corresponds to an existing model on the server,
; this will be used as the default config for that model
[ggml-org/MY-MODEL-GGUF:Q8_0]
; string value
chat-template = chatml
; numeric value
n-gpu-layers = 123
; flag value (for certain flags, you need to use the "no-" prefix for negation)
jinja = true
; shorthand argument (for example, context size)
c = 4096
; environment variable name
LLAMA_ARG_CACHE_RAM = 0

; If the key does NOT correspond to an existing model,
; you need to specify at least the model path or HF repo
[custom_model]
model = {model}
temp = 0.3  ; a comment after the value
top-k = 20
top-p = 0.9
min-p = 0.1
repeat-penalty = 1.2
ctk = q8_0
ctv = q8_0
chat-template-kwargs = {{"enable_thinking": false}}
reasoning-budget = 128
load-on-startup = true
"""


def test_the_parser_reads_sections_keys_and_comments_as_llama_cpp_does():
    parsed = preset_ini.parse(README_INI.format(model="/m/a.gguf"))
    assert parsed["default"] == {"version": "1"}
    assert parsed["*"] == {"c": "8192", "n-gpu-layers": "8"}
    assert parsed["ggml-org/MY-MODEL-GGUF:Q8_0"]["c"] == "4096"
    custom = parsed["custom_model"]
    assert custom["temp"] == "0.3" and custom["model"] == "/m/a.gguf"  # the comment and the blanks cut off
    assert custom["chat-template-kwargs"] == '{"enable_thinking": false}'
    # A repeated header starts the section afresh (llama.cpp's map assignment), the last value of a key wins.
    assert preset_ini.parse("[a]\nc = 1\nc = 2\n[b]\nc = 3\n[a]\nt = 4\n") == {"a": {"t": "4"}, "b": {"c": "3"}}


@pytest.mark.parametrize("line", ["c 4096", "[unclosed", "= 3", "[a] trailing", "4c = 1"])
def test_a_line_llama_server_would_refuse_is_refused_with_its_number(line):
    with pytest.raises(preset_ini.PresetFileError, match="line 2"):
        preset_ini.parse(f"[a]\n{line}\n")


def test_import_maps_each_key_quantdesk_has_and_names_each_it_skips(tiny_models, tmp_path, monkeypatch):
    monkeypatch.setenv("QUANTDESK_MODELS_DIR", str(tmp_path / "models"))
    entry, = Library().import_path(tiny_models.gguf_q8_0, copy=False)
    ini = tmp_path / "my-models.ini"
    ini.write_text(README_INI.format(model=tiny_models.gguf_q8_0), encoding="utf-8")
    report = preset_ini.import_file(ini)
    imported, = report.imported
    assert imported.name == "custom_model" and imported.model == entry.path
    preset = presets.for_model(entry.path)
    assert preset is not None and preset.key == str(Path(entry.path).resolve())
    # [*]'s context and GPU layers reach the section; its own keys win over them.
    assert preset.load == {"n_ctx": 8192, "gpu_layers": 8, "kv_cache_type": "q8_0"}
    assert preset.sampling == {"temperature": 0.3, "top_k": 20, "top_p": 0.9, "min_p": 0.1, "repeat_penalty": 1.2,
                               "chat_template_kwargs": {"enable_thinking": False}, "reasoning_budget": 128}
    assert imported.skipped == ["load-on-startup = true: llama-server's router setting, not the model's"]
    unmatched, = report.unmatched
    assert unmatched.name == "ggml-org/MY-MODEL-GGUF:Q8_0" and "names no model of the library" in unmatched.problem
    # chat-template is QuantDesk's LoadSettings.chat_template now (llama-server's names are bundled templates')
    assert {s.split(":")[0] for s in unmatched.skipped} == {"jinja = true", "LLAMA_ARG_CACHE_RAM = 0"}
    lines = "\n".join(report.lines())
    assert "skipped LLAMA_ARG_CACHE_RAM = 0: QuantDesk has no such setting" in lines
    assert "[ggml-org/MY-MODEL-GGUF:Q8_0] not imported" in lines
    # The preset is the model's settings on a load: its values under any given for the load itself; its quantized
    # KV cache brings flash attention (llama.cpp refuses a quantized V cache without it) unless told otherwise.
    assert preset.apply_load(LoadSettings(n_ctx=512), given=("n_ctx",)) == LoadSettings(
        n_ctx=512, gpu_layers=8, kv_cache_type="q8_0", flash_attention=True)
    assert preset.apply_load(LoadSettings(flash_attention=False), given=("flash_attention",)).flash_attention is False


def test_export_then_import_gives_the_same_presets(tiny_models, tmp_path, monkeypatch):
    monkeypatch.setenv("QUANTDESK_MODELS_DIR", str(tmp_path / "models"))
    entry, = Library().import_path(tiny_models.gguf_q4_k_m, copy=False)
    saved = presets.update(entry.path, load_values={"n_ctx": 1024, "gpu_layers": -1, "kv_cache_type": "q4_0",
                                                    "flash_attention": True, "threads": 3},
                           sampling={"temperature": 0.7, "top_k": 0, "seed": 42, "max_tokens": 300,
                                     "enable_thinking": False, "reasoning_effort": "high",
                                     "chat_template_kwargs": {"a": [1, "x"]}},
                           system_prompt="Be brief.", overflow="drop-oldest")
    text, left_out = preset_ini.export_text([saved], presets.library_entries())
    assert "n-gpu-layers = all" in text and "cache-type-k = q4_0\ncache-type-v = q4_0" in text
    assert f"model = {entry.path}" in text and "reasoning = off" in text and "flash-attn = on" in text
    assert left_out == ["[tiny-llama-Q4_K_M] system prompt: llama-server takes none in a preset",
                        "[tiny-llama-Q4_K_M] overflow policy: llama-server has no such setting"]
    assert preset_ini.parse(text)  # llama-server's grammar reads it
    presets.remove(saved.key)
    out = tmp_path / "out.ini"
    out.write_text(text, encoding="utf-8")
    report = preset_ini.import_file(out)
    assert [s.skipped for s in report.imported] == [[]] and not report.unmatched
    again = presets.for_model(entry.path)
    assert again is not None and again.load == saved.load and again.sampling == saved.sampling


def _entry(path: str, repo: str | None = None, quant: str | None = None) -> LibraryEntry:
    return LibraryEntry(id=Path(path).stem, name=Path(path).name, format="gguf", path=path, files=[], size=1,
                        source="download", owned=True, added_at=0.0, repo_id=repo, quant=quant)


def test_sections_match_library_models_by_repo_and_quant_by_file_name_or_by_path(tmp_path):
    q4 = _entry("/lib/Qwen3-8B-Q4_K_M.gguf", "Qwen/Qwen3-8B-GGUF", "Q4_K_M")
    q8 = _entry("/lib/Qwen3-8B-Q8_0.gguf", "Qwen/Qwen3-8B-GGUF", "Q8_0")
    local = _entry(str(tmp_path / "mine.gguf"))
    entries = [q4, q8, local]
    # llama-server's cache name (the tag in any case: llama.cpp's canonical_tag), hf-repo, the served id, a path.
    assert preset_ini.match_section("qwen/qwen3-8b-gguf:q8_0", {}, entries, tmp_path) == (
        "Qwen/Qwen3-8B-GGUF/Qwen3-8B-Q8_0.gguf", q8.path)
    assert preset_ini.match_section("x", {"hf-repo": "Qwen/Qwen3-8B-GGUF:Q4_K_M"}, entries, tmp_path)[1] == q4.path
    assert preset_ini.match_section("Qwen3-8B-Q4_K_M", {}, entries, tmp_path)[1] == q4.path
    assert preset_ini.match_section("x", {"model": "mine.gguf"}, entries, tmp_path) == (local.path, local.path)
    several = preset_ini.match_section("Qwen/Qwen3-8B-GGUF", {}, entries, tmp_path)
    assert isinstance(several, str) and "Qwen3-8B-Q4_K_M.gguf, Qwen3-8B-Q8_0.gguf" in several
    assert "neither a file here" in preset_ini.match_section("x", {"model": "/nowhere.gguf"}, entries, tmp_path)
    # Exported under llama-server's cache name, found again by it.
    preset = presets.ModelPreset(presets.entry_key(q8), q8.path, {"n_ctx": 2048})
    assert preset_ini.section_name(preset, q8) == "Qwen/Qwen3-8B-GGUF:Q8_0"


def test_values_no_engine_takes_are_refused_and_nothing_is_saved(tmp_path):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    with pytest.raises(presets.PresetError, match="temperature must be between 0 and 10"):
        presets.update(model, sampling={"temperature": 50.0})
    with pytest.raises(presets.PresetError, match="KV cache type"):
        presets.update(model, load_values={"kv_cache_type": "q5_1"})
    assert presets.load().models == {}
    ini = tmp_path / "p.ini"
    ini.write_text(f"[m]\nmodel = {model}\ntemp = 50\n", encoding="utf-8")
    with pytest.raises(presets.PresetError, match=r"\[m\]: temperature"):
        preset_ini.import_file(ini)
    assert not presets.presets_path().exists()
    # Values llama-server takes and QuantDesk cannot are skipped by name, the rest imported.
    ini.write_text(f"[m]\nmodel = {model}\nctk = q5_1\nn-predict = -1\nreasoning-effort = xhigh\nc = 64\n",
                   encoding="utf-8")
    section, = preset_ini.import_file(ini).imported
    assert [s.split(":")[0] for s in section.skipped] == ["ctk = q5_1", "n-predict = -1", "reasoning-effort = xhigh"]
    assert presets.for_model(model).load == {"n_ctx": 64}


def test_an_unreadable_presets_file_counts_as_none_and_is_never_written_over(tmp_path):
    path = presets.presets_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{not json", encoding="utf-8")
    assert presets.for_model(tmp_path / "m.gguf") is None and "cannot be read" in presets.load().problem
    with pytest.raises(presets.PresetError, match="left as it is"):
        presets.update(tmp_path / "m.gguf", load_values={"n_ctx": 512})
    assert path.read_text(encoding="utf-8") == "{not json"


def test_the_sampling_rule_puts_the_preset_between_the_chat_and_the_model():
    from app.datatypes import ModelSampling

    model = ModelSampling(temperature=0.6, top_p=0.9, origin="general.sampling.*")
    chosen = choose_sampling({"top_k": 5}, model, {"temperature": 0.2, "top_k": 9, "max_tokens": 99})
    assert chosen.sources == {"temperature": "preset", "top_p": "model", "top_k": "user", "min_p": "default",
                              "repeat_penalty": "default"}
    assert (chosen.settings.temperature, chosen.settings.top_k, chosen.settings.max_tokens) == (0.2, 5, 99)
    assert json.loads(json.dumps(chosen.described()))["temperature"]["source"] == "preset"


def test_a_hand_edited_preset_no_engine_takes_is_not_applied_and_stays_in_the_file(tmp_path, caplog):
    model = tmp_path / "m.gguf"
    model.write_bytes(b"GGUF")
    path = presets.presets_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    key = str(model.resolve())
    path.write_text(json.dumps({"version": 1, "models": {key: {"load": {"n_ctx": "lots"}, "sampling": {}}}}),
                    encoding="utf-8")
    with caplog.at_level("WARNING", logger="app.hub.presets"):
        assert presets.for_model(model) is None
    assert f"the preset of {key} is not used" in caplog.text
    other = tmp_path / "other.gguf"
    other.write_bytes(b"GGUF")
    presets.update(other, load_values={"n_ctx": 512})  # saving another model's keeps it as the user wrote it
    assert json.loads(path.read_text(encoding="utf-8"))["models"][key]["load"] == {"n_ctx": "lots"}
