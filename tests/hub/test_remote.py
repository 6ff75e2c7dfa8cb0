"""Remote GGUF headers over real HTTP Range requests, against the local Hub stand-in."""

from __future__ import annotations

import pytest

from app.hub.errors import RemoteReadError
from app.hub.remote import read_remote_gguf
from app.models.metadata import read_gguf_file
from tests.fixtures.hub_server import HubServer
from tests.models.gguf_builder import ArchSpec, write_gguf

# A vocabulary large enough that the header (token list) spans several growing ranges.
BIG_VOCAB = ArchSpec("llama", n_layer=2, n_embd=64, n_head=4, n_head_kv=2, n_ff=128, n_vocab=60_000,
                     name="big-vocab")


@pytest.fixture
def hub(monkeypatch):
    server = HubServer().start()
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    yield server
    server.stop()


def test_reads_only_the_header(hub, tmp_path):
    path = write_gguf(tmp_path / "Big-Q8_0.gguf", BIG_VOCAB)
    size = path.stat().st_size
    hub.add_repo("acme/Big-GGUF", files={"Big-Q8_0.gguf": path})
    meta = read_remote_gguf("acme/Big-GGUF", "Big-Q8_0.gguf")
    local = read_gguf_file(path)
    assert meta.vocab_size == 60_000 and meta.block_count == 2
    assert [(t.name, t.n_bytes) for t in meta.tensors] == [(t.name, t.n_bytes) for t in local.tensors]
    assert meta.source == "acme/Big-GGUF/Big-Q8_0.gguf"
    sent = hub.bytes_sent_for("Big-Q8_0.gguf")
    gets = hub.requests_for("Big-Q8_0.gguf")
    assert len(gets) >= 2, "a 60k-token header does not fit the first range"
    assert sent < size, f"read {sent} of {size} bytes: not just the header"
    assert sent <= 2 * local.header_bytes + (1 << 20)


def test_missing_file_and_truncated_header(hub, tmp_path):
    path = write_gguf(tmp_path / "x.gguf", BIG_VOCAB)
    hub.add_repo("acme/cut", files={"cut-Q4_0.gguf": path.read_bytes()[:200_000]})
    with pytest.raises(RemoteReadError, match="Not found"):
        read_remote_gguf("acme/cut", "nope.gguf")
    with pytest.raises(Exception, match="truncated|ends inside"):
        read_remote_gguf("acme/cut", "cut-Q4_0.gguf")
