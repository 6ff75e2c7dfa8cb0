"""Which chat template a model is served with (backends/chat_format/bundled.py): the user's choice, the file's own,
the base model's read from the Hub and kept beside it, the family's bundled for its architecture or vocabulary,
ChatML last; and the bundled files against their sources."""

from __future__ import annotations

import json

import pytest

from backends.chat_format import bundled, formats

OWN = "{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}"


def no_vocabulary(token: str) -> bool:
    return False


def test_the_file_s_own_template_comes_first():
    choice = bundled.choose(own=OWN, architecture="gemma3", has_token=no_vocabulary)
    assert (choice.source, choice.name, choice.origin) == (OWN, "model", "in the model file")


def test_the_user_s_choice_wins_over_the_file_s_own_by_name_or_by_file(tmp_path):
    assert bundled.choose(own=OWN, architecture="llama", chosen="gemma").source == bundled.bundled_source("gemma")
    assert bundled.choose(own=OWN, architecture="llama", chosen="llama-3").name == "llama3"  # llama.cpp's name
    jinja = tmp_path / "mine.jinja"
    jinja.write_text("MINE {{ messages[0]['content'] }}", encoding="utf-8")
    choice = bundled.choose(own=OWN, architecture="llama", chosen=str(jinja))
    assert (choice.source, choice.name) == ("MINE {{ messages[0]['content'] }}", "file")
    assert str(jinja) in choice.origin
    config = tmp_path / "tokenizer_config.json"
    config.write_text(json.dumps({"chat_template": [{"name": "default", "template": "DEFAULT"},
                                                    {"name": "tool_use", "template": "TOOLS"}]}), encoding="utf-8")
    assert bundled.choose(own="", architecture="llama", chosen=str(config)).source == "DEFAULT"


def test_a_choice_that_names_nothing_is_refused_in_words(tmp_path):
    with pytest.raises(bundled.TemplateChoiceError, match="no bundled chat template.*gemma.*and no file"):
        bundled.choose(own="", architecture="llama", chosen="vicuna")
    config = tmp_path / "tokenizer_config.json"
    config.write_text("{}", encoding="utf-8")
    with pytest.raises(bundled.TemplateChoiceError, match="holds no chat_template"):
        bundled.choose(own="", architecture="llama", chosen=str(config))


def test_the_base_model_s_template_kept_beside_the_file_comes_before_the_family_s(tmp_path):
    model = tmp_path / "gemma-3-270m-Q4_K_M.gguf"
    model.write_bytes(b"")
    bundled.kept_path(model).write_text(json.dumps({"chat_template": "BASE", "repo": "google/gemma-3-270m-it",
                                                    "file": "tokenizer_config.json"}), encoding="utf-8")
    choice = bundled.choose(own="", architecture="gemma3", model_path=model, has_token=no_vocabulary)
    assert (choice.source, choice.name) == ("BASE", "hub")
    assert choice.origin == "read from google/gemma-3-270m-it's tokenizer_config.json on the Hub: the file has none"
    # a record of a lookup that found nothing is no template
    bundled.kept_path(model).write_text(json.dumps({"chat_template": "", "tried": ["google/gemma-3-270m-it"]}),
                                        encoding="utf-8")
    assert bundled.choose(own="", architecture="gemma3", model_path=model).name == "gemma"


@pytest.mark.parametrize(("architecture", "name", "title"), [
    ("gemma3", "gemma", "Gemma"), ("gemma2", "gemma", "Gemma"), ("gemma3n", "gemma", "Gemma"),
    ("qwen2", "qwen2", "Qwen2.5"), ("qwen3", "qwen3", "Qwen3"), ("qwen3moe", "qwen3", "Qwen3"),
    ("phi3", "phi3", "Phi-3")])
def test_an_architecture_whose_family_is_known_gets_its_template(architecture, name, title):
    choice = bundled.choose(own="", architecture=architecture, has_token=no_vocabulary)
    assert (choice.name, choice.title) == (name, title)
    assert choice.origin == f"bundled for the {architecture} architecture: the file has none"
    assert choice.line == f"chat template: {title} (bundled for the {architecture} architecture: the file has none)"


@pytest.mark.parametrize(("tokens", "name"), [
    ({"<|start_header_id|>", "<|eot_id|>", "<|im_start|>", "<|im_end|>"}, "llama3"),
    ({"[INST]", "[/INST]"}, "mistral"),
    ({"<|im_start|>", "<|im_end|>"}, "chatml"),
    ({"<|assistant|>", "<|end|>"}, "phi3")])
def test_the_llama_architecture_is_told_apart_by_its_vocabulary(tokens, name):
    choice = bundled.choose(own="", architecture="llama", has_token=tokens.__contains__)
    assert choice.name == name
    assert "the vocabulary holds" in choice.origin


def test_chatml_is_the_last_resort_and_says_so():
    choice = bundled.choose(own="", architecture="rwkv7", has_token=no_vocabulary)
    assert (choice.name, choice.title) == ("chatml", "ChatML")
    assert choice.origin == "the last resort: the file has none and no template is known for the rwkv7 architecture"


@pytest.mark.parametrize("name", bundled.names())
def test_every_bundled_template_renders_a_conversation_with_the_format_layer(name):
    template = formats.Template.of(bundled.bundled_source(name), "<s>", "</s>")
    request = formats.Request(messages=[{"role": "system", "content": "Be brief."},
                                        {"role": "user", "content": "What is the capital of France?"}])
    prepared = formats.apply(template, request)
    assert "What is the capital of France?" in prepared.prompt
    assert "Be brief." in prepared.prompt
    assert prepared.parse("Paris.").content.strip() == "Paris."


def test_the_gemma_template_writes_gemma_s_turns():
    prompt = formats.apply(formats.Template.of(bundled.bundled_source("gemma"), "<bos>", "<eos>"),
                           formats.Request(messages=[{"role": "user", "content": "Hi"}])).prompt
    assert prompt == "<bos><start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n"


def test_the_bundled_llama_cpp_templates_are_the_source_archive_s_byte_for_byte(llama_cpp_sources):
    sources = {"llama3": "meta-llama-Llama-3.1-8B-Instruct.jinja", "qwen2": "Qwen-Qwen2.5-7B-Instruct.jinja",
               "qwen3": "Qwen-Qwen3-0.6B.jinja", "phi3": "microsoft-Phi-3.5-mini-instruct.jinja",
               "mistral": "mistralai-Mistral-Nemo-Instruct-2407.jinja"}
    for name, file in sources.items():
        assert bundled.bundled_source(name) == llama_cpp_sources.templates[file], name


def test_a_gguf_s_vocabulary_is_read_from_its_header(tiny_models):
    has = bundled.vocabulary_of(tiny_models.gguf_f16)
    assert has is not None
    assert has("<|im_start|>") and has("<|im_end|>")
    assert not has("<start_of_turn>") and not has("<|im_start")  # whole tokens only


@pytest.mark.parametrize(("metadata", "said"), [
    ({"general.name": "Gemma 3 270m", "general.basename": "gemma-3"}, True),  # google/gemma-3-270m converted
    ({"general.name": "Gemma 3 270m It", "general.basename": "gemma-3", "general.finetune": "it"}, False),
    ({"general.name": "Gemma 3 270m", "general.basename": "gemma-3", "general.finetune": "it"}, False),
    ({"general.name": "Qwen2.5 7B Instruct", "general.basename": "Qwen2.5"}, False),
    ({"general.name": "Llama-3-8B-chat", "general.basename": "Llama-3"}, False),
    ({"general.name": "tiny-llama"}, False),  # not the converter's header: nothing to go by
    ({}, False)])
def test_a_file_without_a_template_whose_header_names_no_fine_tune_is_said_to_be_pre_trained(tmp_path, metadata,
                                                                                           said):
    model = tmp_path / "model.gguf"
    choice = bundled.for_model(model, {"general.architecture": "gemma3", **metadata})
    assert choice.name == "gemma" and choice.origin.startswith("bundled for the gemma3 architecture: the file has none")
    assert ("likely a pre-trained model, not tuned to chat" in choice.origin) is said
    if said:
        assert f"its header names no fine-tune ({metadata['general.name']})" in choice.line
    # a file with its own template is served it, whatever its name
    own = bundled.for_model(model, {"general.architecture": "gemma3", "tokenizer.chat_template": "T", **metadata})
    assert own.origin == "in the model file"
