"""A GGUF without a chat template gets its base model's, read from the Hub (the local stand-in) by the parent and
kept beside the file, where the engine's choice reads it (app/hub/chat_templates.py, app/engine/client.py
keep_base_template, backends/chat_format/bundled.py)."""

from __future__ import annotations

import json

import pytest

from app.engine.client import keep_base_template
from app.hub import chat_templates
from app.models.metadata import read_gguf_header
from backends.chat_format import bundled

BASE_TEMPLATE = "{{ bos_token }}{% for m in messages %}<start_of_turn>{{ m['role'] }}\n{{ m['content'] }}" \
                "<end_of_turn>\n{% endfor %}<start_of_turn>model\n"


def header_only_gguf(path, **keys):
    """A GGUF header of the gemma3 architecture without a chat template, naming what ``keys`` give."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "gemma3")
    writer.add_name("Gemma 3 270m")
    if "base" in keys:
        writer.add_base_model_count(1)
        writer.add_base_model_repo_url(0, keys["base"])
    if "source" in keys:
        writer.add_source_repo_url(keys["source"])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_the_repos_a_header_names_come_in_order():
    metadata = {"general.base_model.count": 2,
                "general.base_model.0.repo_url": "https://huggingface.co/google/gemma-3-270m-it",
                "general.base_model.1.organization": "Google", "general.base_model.1.name": "Gemma 3 270m",
                "general.source.repo_url": "https://huggingface.co/google/gemma-3-270m-it",
                "general.source.huggingface.repository": "unsloth/gemma-3-270m-it"}
    assert chat_templates.named_repos(metadata) == ["google/gemma-3-270m-it", "Google/Gemma-3-270m",
                                                    "unsloth/gemma-3-270m-it"]
    assert chat_templates.repo_of("https://example.com/a/b") == ""


@pytest.fixture
def hub(hub_server, monkeypatch):
    monkeypatch.setenv("HF_ENDPOINT", hub_server.url)
    hub_server.add_repo("google/gemma-3-270m-it", files={
        "tokenizer_config.json": json.dumps({"chat_template": BASE_TEMPLATE}).encode(), "config.json": b"{}"})
    hub_server.add_repo("acme/gemma-3-270m-it-GGUF", files={"gemma-3-270m-it-Q4_K_M.gguf": b"GGUF"},
                        card_data={"base_model": "google/gemma-3-270m-it"}, tags=["gguf"])
    hub_server.add_repo("acme/templated", files={"chat_template.jinja": b"FROM JINJA {{ messages }}",
                                                 "tokenizer_config.json": b'{"chat_template": "FROM CONFIG"}'})
    return hub_server


def test_the_base_model_s_template_is_read_from_its_tokenizer_config(hub):
    found = chat_templates.find({"general.base_model.count": 1,
                                 "general.base_model.0.repo_url": "https://huggingface.co/google/gemma-3-270m-it"})
    assert found == {"chat_template": BASE_TEMPLATE, "repo": "google/gemma-3-270m-it",
                     "file": "tokenizer_config.json"}
    # chat_template.jinja comes before tokenizer_config.json's, as transformers reads them
    assert chat_templates.find({"general.source.repo_url": "acme/templated"})["file"] == "chat_template.jinja"


def test_the_repo_it_was_downloaded_from_names_its_base_model_on_its_card(hub):
    found = chat_templates.find({}, downloaded_from="acme/gemma-3-270m-it-GGUF")
    assert (found["repo"], found["chat_template"]) == ("google/gemma-3-270m-it", BASE_TEMPLATE)


def test_repos_without_a_template_are_said_as_tried(hub):
    assert chat_templates.find({"general.source.repo_url": "acme/nothing-here"}) == {
        "chat_template": "", "tried": ["acme/nothing-here"]}


def test_the_parent_keeps_the_base_model_s_template_beside_the_file_and_the_choice_reads_it(hub, tmp_path):
    model = header_only_gguf(tmp_path / "gemma-3-270m-it-Q4_K_M.gguf",
                             base="https://huggingface.co/google/gemma-3-270m-it")
    keep_base_template(model)
    kept = json.loads(bundled.kept_path(model).read_text(encoding="utf-8"))
    assert kept["repo"] == "google/gemma-3-270m-it"
    choice = bundled.for_model(model, read_gguf_header(model)[0])
    assert (choice.name, choice.source) == ("hub", BASE_TEMPLATE)
    assert choice.line == ("chat template: google/gemma-3-270m-it's (read from google/gemma-3-270m-it's "
                           "tokenizer_config.json on the Hub: the file has none)")
    # asked once: what is kept is not asked again
    requests = len(hub.log)
    keep_base_template(model)
    assert len(hub.log) == requests


def test_offline_nothing_is_kept_and_the_family_s_template_serves(hub, tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    model = header_only_gguf(tmp_path / "gemma.gguf", base="https://huggingface.co/google/gemma-3-270m-it")
    keep_base_template(model)
    assert not bundled.kept_path(model).exists()
    assert bundled.for_model(model, read_gguf_header(model)[0]).name == "gemma"


def test_a_file_that_names_no_repo_asks_nothing_and_keeps_nothing(hub, tmp_path):
    model = header_only_gguf(tmp_path / "mine.gguf")
    requests = len(hub.log)
    keep_base_template(model)
    assert len(hub.log) == requests and not bundled.kept_path(model).exists()
