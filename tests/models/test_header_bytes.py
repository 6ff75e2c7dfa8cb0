"""GGUF headers compared byte for byte, key by key (what an update check uses to tell a new chat template from a
new file): written by the gguf package, read by our parser from a file and from a prefix of it."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from app.models.metadata import parse_gguf_header_bytes, read_gguf_header, read_gguf_header_bytes


def _gguf(path: Path, template: str = "{{ messages }}", tokens: int = 5000, last_token: str = "z",
          context: int = 4096, weights: np.ndarray | None = None) -> Path:
    import gguf

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_context_length(context)
    writer.add_token_list([f"t{i}" for i in range(tokens - 1)] + [last_token])  # longer than the arrays we keep
    writer.add_chat_template(template)
    writer.add_tensor("token_embd.weight", np.arange(64, dtype=np.float32) if weights is None else weights)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_only_the_template_differs(tmp_path):
    old, new = _gguf(tmp_path / "a.gguf"), _gguf(tmp_path / "b.gguf", template="{% for m in messages %}{% endfor %}")
    ours, theirs = read_gguf_header_bytes(old), read_gguf_header_bytes(new)
    assert ours.changed_keys(theirs) == {"tokenizer.chat_template"}
    assert ours.only_chat_template_differs(theirs, old.stat().st_size, new.stat().st_size)
    assert ours.data_start == read_gguf_header(old)[2]  # the same parse underneath


def test_a_skipped_long_array_still_counts_by_its_bytes(tmp_path):
    old, new = _gguf(tmp_path / "a.gguf"), _gguf(tmp_path / "b.gguf", last_token="y", template="other")
    ours, theirs = read_gguf_header_bytes(old), read_gguf_header_bytes(new)
    assert ours.changed_keys(theirs) == {"tokenizer.chat_template", "tokenizer.ggml.tokens"}
    assert not ours.only_chat_template_differs(theirs, old.stat().st_size, new.stat().st_size)


def test_other_tensors_or_keys_are_not_a_template_change(tmp_path):
    base = read_gguf_header_bytes(_gguf(tmp_path / "a.gguf"))
    size = (tmp_path / "a.gguf").stat().st_size
    other_shape = _gguf(tmp_path / "b.gguf", template="x", weights=np.arange(128, dtype=np.float32))
    assert not base.only_chat_template_differs(read_gguf_header_bytes(other_shape), size, other_shape.stat().st_size)
    other_key = _gguf(tmp_path / "c.gguf", template="x", context=8192)
    assert base.changed_keys(read_gguf_header_bytes(other_key)) == {"tokenizer.chat_template", "llama.context_length"}
    same = read_gguf_header_bytes(_gguf(tmp_path / "d.gguf"))
    assert base.changed_keys(same) == set() and not base.only_chat_template_differs(same, size, size)


def test_a_prefix_parses_like_the_file(tmp_path):
    path = _gguf(tmp_path / "a.gguf")
    assert parse_gguf_header_bytes(path.read_bytes()) == read_gguf_header_bytes(path)
