"""The library: models found in the HF cache and in watched folders (by reference), imports, delete, disk usage;
everything here works with HF_HUB_OFFLINE set."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from app import settings
from app.hub.config import hf_hub_cache
from app.hub.library import MANIFEST_NAME, Library
from tests.hub.conftest import sha256, write_gguf


def test_models_in_the_hf_cache_are_listed_by_reference(hub_env, tmp_path, monkeypatch):
    from huggingface_hub import hf_hub_download

    gguf = write_gguf(tmp_path / "c-Q4_K_M.gguf", arch="gemma3")
    commit = hub_env.add_repo("acme/c-GGUF", {gguf.name: gguf}, tags=["gguf"])
    cached = hf_hub_download("acme/c-GGUF", gguf.name, cache_dir=hf_hub_cache(), endpoint=hub_env.url, token=False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    (entry,) = Library().entries()
    assert (entry.id, entry.source, entry.owned) == ("hf-cache:acme/c-GGUF:Q4_K_M", "hf-cache", False)
    assert (entry.repo_id, entry.commit_hash, entry.quant, entry.architecture) == ("acme/c-GGUF", commit, "Q4_K_M",
                                                                                   "gemma3")
    assert entry.path == cached
    _, freed = Library().remove(entry.id)
    assert freed == 0 and sha256(gguf) == sha256(Path(cached))  # a reference is only forgotten


def test_watched_folder_and_linked_import_are_references(tmp_path):
    folder = tmp_path / "my-models"
    write_gguf(folder / "a-Q8_0.gguf", file_type=7)
    mlx = folder / "qwen-4bit"
    mlx.mkdir()
    (mlx / "config.json").write_text(json.dumps({"model_type": "qwen2", "architectures": ["Qwen2ForCausalLM"],
                                                 "quantization": {"group_size": 64, "bits": 4}}))
    (mlx / "model.safetensors").write_bytes(b"\0" * 64)
    library = Library()
    found = {e.name: e for e in library.add_folder(folder)}
    assert found["a-Q8_0"].quant == "Q8_0" and found["a-Q8_0"].format == "gguf"
    assert (found["qwen-4bit"].format, found["qwen-4bit"].architecture) == ("mlx", "Qwen2ForCausalLM")
    assert not any(e.owned for e in found.values())
    write_gguf(folder / "b-Q4_0.gguf", file_type=2)  # appears later: the next scan finds it
    assert {e.name for e in library.entries()} == {"a-Q8_0", "qwen-4bit", "b-Q4_0"}
    (folder / "a-Q8_0.gguf").unlink()  # gone from disk: the reference goes too
    assert {e.name for e in library.entries()} == {"qwen-4bit", "b-Q4_0"}


def test_copied_import_is_owned_and_rm_frees_the_disk(tmp_path):
    src = write_gguf(tmp_path / "usb" / "x-Q6_K.gguf", file_type=18)
    (entry,) = Library().import_path(src)
    assert entry.owned and entry.quant == "Q6_K" and src.exists()
    usage = Library().disk_usage()
    assert usage["owned_bytes"] == src.stat().st_size and usage["models"] == 1
    _, freed = Library().remove("local:x-Q6_K")
    assert freed == src.stat().st_size
    assert not (settings.models_dir() / "local" / "x-Q6_K").exists()
    assert Library().disk_usage()["owned_bytes"] == 0


def test_manifest_is_sqlite_with_what_the_design_asks(hub_env, tmp_path):
    from app.hub.download import download
    from app.hub.plan import DownloadRequest

    gguf = write_gguf(tmp_path / "s-Q4_K_M.gguf")
    commit = hub_env.add_repo("acme/s-GGUF", {gguf.name: gguf}, tags=["gguf"])
    download(DownloadRequest("acme/s-GGUF"))
    with sqlite3.connect(settings.models_dir() / MANIFEST_NAME) as conn:
        row = conn.execute("SELECT repo_id, commit_hash, format, quant, architecture, files, size FROM models").fetchone()
    assert row[:5] == ("acme/s-GGUF", commit, "gguf", "Q4_K_M", "llama")
    assert json.loads(row[5]) == [{"path": gguf.name, "size": gguf.stat().st_size, "sha256": sha256(gguf)}]
    assert row[6] == gguf.stat().st_size


def test_models_bundled_beside_a_frozen_app_are_listed_without_setup(tmp_path, monkeypatch):
    app_dir = tmp_path / "opt" / "quantdesk"  # as the .deb lays it out: the binary, and models/ beside it
    write_gguf(app_dir / "models" / "tiny-Q4_K_M.gguf", file_type=15)
    (app_dir / "quantdesk").write_bytes(b"")
    monkeypatch.setattr("sys.frozen", True, raising=False)
    monkeypatch.setattr("sys.executable", str(app_dir / "quantdesk"))
    entries = Library().entries()
    assert [(e.name, e.source, e.owned) for e in entries] == [("tiny-Q4_K_M", "bundled", False)]
    (app_dir / "models" / "tiny-Q4_K_M.gguf").unlink()  # an update shipped without it: the reference goes
    assert Library().entries() == []


def test_a_source_checkout_has_no_bundle(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.executable", str(tmp_path / "python"))
    write_gguf(tmp_path / "models" / "stray-Q8_0.gguf", file_type=7)
    assert Library().entries() == []  # not frozen: a models/ folder beside the interpreter means nothing
