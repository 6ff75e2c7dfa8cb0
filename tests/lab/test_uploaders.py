"""The same quant from several uploaders, found on the Hub stand-in: the search by base model as the Hub answers it,
the files fetched into the lab's cache (or the library's copy used where it is), cancel, and the clean-up.
(The whole comparison, ranked, through ``quantdesk bench --uploaders``: tests/commands/test_lab.py.)"""

from __future__ import annotations

import threading

import pytest

from app.hub.download import download
from app.hub.plan import DownloadRequest
from app.hub.search import quantizations_of
from app.lab import uploaders
from app.lab.runner import LabCancelled

BASE = "meta-test/tiny-llama"
CARD = {"base_model": BASE}


def test_the_hub_lists_a_base_models_gguf_quantizations_by_its_card(hub_server, hub_env, tiny_models):
    hub_server.page_size = 2  # the answer comes in pages, as the Hub's does
    for n in range(3):
        hub_server.add_repo(f"q{n}/tiny-llama-GGUF", files={"tiny-llama-Q4_K_M.gguf": tiny_models.gguf_q4_k_m},
                            tags=["gguf"], card_data=CARD, downloads=10 * n)
    quantized = CARD | {"base_model_relation": "quantized"}  # as a card says it where the Hub could not infer it
    hub_server.add_repo("mlx-test/tiny-llama-4bit", files={"config.json": b"{}"}, tags=["mlx"], card_data=quantized,
                        downloads=99)
    hub_server.add_repo("tuner/tiny-llama-chat", files={"model.safetensors": b"x"}, card_data=CARD, downloads=98)
    hub_server.add_repo("listed/tiny-llama-Q8-GGUF", files={"tiny-llama-Q8_0.gguf": tiny_models.gguf_q8_0},
                        tags=["gguf"], card_data=quantized, downloads=5)
    found = quantizations_of(BASE)
    assert [m.repo_id for m in found] == ["q2/tiny-llama-GGUF", "q1/tiny-llama-GGUF", "listed/tiny-llama-Q8-GGUF",
                                          "q0/tiny-llama-GGUF"]  # most downloaded first; a finetune and MLX not
    assert all(f"base_model:quantized:{BASE}" in m.tags and m.format == "gguf" for m in found)
    assert [m.repo_id for m in quantizations_of(BASE, "mlx")] == ["mlx-test/tiny-llama-4bit"]
    assert quantizations_of("meta-test/nothing") == []


def test_the_librarys_copy_is_used_where_it_is_and_a_fetch_can_be_cancelled(hub_server, hub_env, tiny_models):
    hub_server.add_repo("acme/tiny-llama-GGUF", files={"tiny-llama-Q4_K_M.gguf": tiny_models.gguf_q4_k_m,
                                                       "tiny-llama-Q8_0.gguf": tiny_models.gguf_q8_0},
                        tags=["gguf"], card_data=CARD)
    found = uploaders.find(BASE, ["Q4_K_M", "Q8_0"], tiny_models.gguf_f16)
    assert [(c.quant, c.problem) for c in found.candidates] == [("Q4_K_M", ""), ("Q8_0", "")]
    q4, q8 = found.candidates
    assert found.checked_against == "tiny-llama-F16.gguf" and q4.architecture == "llama" and q4.n_vocab == 1024
    owned = download(DownloadRequest("acme/tiny-llama-GGUF", quant="Q4_K_M")).path  # in the library already
    sent = hub_server.bytes_sent_for("tiny-llama-Q4_K_M.gguf")

    cancel = threading.Event()
    cancel.set()
    with pytest.raises(LabCancelled, match="stopped while fetching"):
        uploaders.fetch([q4, q8], cancel=cancel)  # the library's copy first, then Q8_0's download stops
    assert not any(p.is_file() for p in uploaders.cache_root().rglob("*"))  # no partial file is left behind

    messages: list[str] = []
    fetched = uploaders.fetch([q4, q8], on_progress=lambda message, _fraction: messages.append(message))
    assert hub_server.bytes_sent_for("tiny-llama-Q4_K_M.gguf") == sent  # not downloaded again
    assert [(f.path, f.downloaded_now) for f in fetched] == [(str(owned), False),
                                                            (str(uploaders.cached_path(q8)), True)]
    assert messages[0] == "acme/tiny-llama-GGUF/tiny-llama-Q4_K_M: the library's copy"
    assert uploaders.cached_path(q8).read_bytes() == tiny_models.gguf_q8_0.read_bytes()
    assert uploaders.clean_up(fetched, keep=False) == [
        "removed acme/tiny-llama-GGUF/tiny-llama-Q8_0 (0.00 GB), fetched for this bench (--keep-downloads keeps it)"]
    assert owned.is_file() and not uploaders.cache_root().joinpath("acme").exists()  # the library's stays
