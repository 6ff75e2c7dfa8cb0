"""``quantdesk docs add | ls | index | search | rm`` run as the real ``quantdesk`` entry (``python -m app``) over the
real documents database under the test's own data folder, real files, and the real engine with the tiny embedding
model."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.fixtures.documents import page_phrase, write_binary_txt, write_markdown, write_text_pdf

ROOT = Path(__file__).resolve().parents[2]


def quantdesk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=240,
                          cwd=ROOT)


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "manuals"
    folder.mkdir()
    write_text_pdf(folder / "guide.pdf", 3, tag="cli-")
    write_markdown(folder / "notes.md")
    (folder / "plain.txt").write_text("The pump needs priming before the first start.\n")
    write_binary_txt(folder / "program.txt")
    return folder


def test_a_folder_added_indexed_searched_and_removed(tmp_path):
    folder = _folder(tmp_path)
    added = quantdesk("docs", "add", "manuals", str(folder))
    assert added.returncode == 0, added.stderr
    assert f"made the collection “manuals” of the folder {folder} (watched)" in added.stdout
    assert "quantdesk docs index manuals" in added.stderr

    indexed = quantdesk("docs", "index", "manuals")
    assert indexed.returncode == 0, indexed.stderr
    assert "manuals: 4 files (4 new, 0 changed, 0 unchanged, 0 removed)" in indexed.stdout
    assert "1 file not indexed:" in indexed.stdout and "program.txt: binary" in indexed.stdout
    assert "manuals: scanning" in indexed.stderr and "manuals: done 4/4 files" in indexed.stderr  # progress

    listed = quantdesk("docs", "ls", "--json")
    assert listed.returncode == 0, listed.stderr
    [row] = json.loads(listed.stdout)
    assert (row["name"], row["folder"], row["files"], row["indexed"], row["failed"]) == ("manuals", str(folder),
                                                                                        4, 3, 1)
    assert row["chunks"] > 0 and row["size_bytes"] > 0 and row["embed_model"] is None
    plain = quantdesk("docs", "ls")
    assert plain.stdout.startswith("manuals\t3/4 files, 1 failed\t")

    found = quantdesk("docs", "search", "manuals", page_phrase(2, "cli-"), "--json", "-k", "2")
    assert found.returncode == 0, found.stderr
    first = json.loads(found.stdout)["passages"][0]
    assert (Path(first["path"]).name, first["page"], first["where"]) == ("guide.pdf", 2, "guide.pdf, page 2")
    shown = quantdesk("docs", "search", "manuals", "pump priming")
    assert shown.stdout.startswith("[1] plain.txt, line 1")

    (folder / "plain.txt").write_text("The pump is primed now.\n")
    again = quantdesk("docs", "index", "manuals", "--json")
    result = json.loads(again.stdout)
    assert (result["added"], result["changed"], result["unchanged"]) == (0, 1, 3)  # only the changed file read

    removed = quantdesk("docs", "rm", "manuals")
    assert removed.returncode == 0 and "removed the collection “manuals”" in removed.stdout
    assert json.loads(quantdesk("docs", "ls", "--json").stdout) == []
    assert (folder / "guide.pdf").is_file()  # the user's files stay


def test_files_added_by_hand_and_sentences_for_what_cannot_be(tmp_path):
    notes = write_markdown(tmp_path / "notes.md")
    plain = tmp_path / "plain.txt"
    plain.write_text("Flanges and gaskets.\n")
    made = quantdesk("docs", "add", "mine", str(notes))
    assert made.returncode == 0 and "1 path added by hand" in made.stdout
    more = quantdesk("docs", "add", "mine", str(plain))
    assert more.returncode == 0 and "added 1 path to “mine”" in more.stdout
    assert json.loads(quantdesk("docs", "ls", "--json").stdout)[0]["paths"] == sorted([str(notes), str(plain)])

    missing = quantdesk("docs", "add", "mine", str(tmp_path / "gone.pdf"))
    assert missing.returncode == 1 and f"{tmp_path / 'gone.pdf'} does not exist" in missing.stderr
    nothing = quantdesk("docs", "index", "nope")
    assert nothing.returncode == 1 and "there is no collection named “nope”" in nothing.stderr
    assert "Traceback" not in nothing.stderr
    bad_k = quantdesk("docs", "search", "mine", "x", "-k", "0")
    assert bad_k.returncode == 1 and "-k takes" in bad_k.stderr


def test_an_embedding_model_embeds_every_passage_and_searches_by_meaning(tmp_path, tiny_models, tiny_embedding_model):
    folder = _folder(tmp_path)
    refused = quantdesk("docs", "add", "manuals", str(folder), "--embed-model", str(tiny_models.gguf_q8_0))
    assert refused.returncode == 1 and "is not an embedding model (its GGUF declares no pooling)" in refused.stderr

    made = quantdesk("docs", "add", "manuals", str(folder), "--embed-model", str(tiny_embedding_model))
    assert made.returncode == 0, made.stderr
    assert f"embedding model: {tiny_embedding_model.name}" in made.stdout
    indexed = quantdesk("docs", "index", "manuals", "--json")
    assert indexed.returncode == 0, indexed.stderr
    result = json.loads(indexed.stdout)
    assert result["embedded"] == result["chunks"] > 0 and result["problem"] == ""
    found = quantdesk("docs", "search", "manuals", "The pump needs priming before the first start.", "--json")
    assert found.returncode == 0, found.stderr
    answer = json.loads(found.stdout)
    assert answer["notes"] == []
    assert Path(answer["passages"][0]["path"]).name == "plain.txt"
