"""Uploaders of one base model on the Hub stand-in, for the tests of the lab's uploader comparison (the CLI's and the
Lab page's)."""

from __future__ import annotations

from pathlib import Path

from tests.fixtures.models import quantize_gguf

VOCAB_ONLY = Path(__file__).resolve().parents[1] / "models" / "data" / "real-vocab"  # real models' headers, no weights
BASE = "meta-test/tiny-llama"  # the base model the uploaders quantized


def add_uploaders(hub_server, tiny_models, tmp_path) -> dict[str, Path]:
    """Three repos with a file of one name and one quant type, made three ways from the same F16, as uploaders do:
    llama.cpp's own Q4_K_M mix (some layers kept in 6 bits, and an F16 beside it), every tensor in 4 bits (pure),
    and the mix with its output layer in Q4_0; repos whose "Q4_K_M" is another model (another architecture, another
    vocabulary: their headers only, as a vocabulary-only GGUF holds); one without a Q4_K_M; one that quantizes another
    base."""
    made = {"careful/tiny-llama-GGUF": tiny_models.gguf_q4_k_m,
            "pure/tiny-llama-GGUF": quantize_gguf(tiny_models.gguf_f16, tmp_path / "pure.gguf", "Q4_K_M", pure=True),
            "q4-output/tiny-llama-GGUF": quantize_gguf(tiny_models.gguf_f16, tmp_path / "out.gguf", "Q4_K_M",
                                                       output_tensor_type=2)}
    assert len({path.read_bytes() for path in made.values()}) == 3
    card = {"base_model": BASE, "license": "apache-2.0"}
    hub_server.add_repo(BASE, files={"config.json": b'{"model_type": "llama"}', "README.md": b"# tiny llama"},
                        tags=["transformers"], downloads=10)
    for n, (repo, path) in enumerate(made.items()):
        files = {"tiny-llama-Q4_K_M.gguf": path} | ({"tiny-llama-F16.gguf": tiny_models.gguf_f16} if n == 0 else {})
        hub_server.add_repo(repo, tags=["gguf"], files=files, card_data=card, downloads=300 - n)
    hub_server.add_repo("mixup/tiny-llama-GGUF", tags=["gguf"], card_data=card, downloads=50,
                        files={"tiny-llama-Q4_K_M.gguf": VOCAB_ONLY / "ggml-vocab-starcoder.gguf"})
    hub_server.add_repo("spm/tiny-llama-GGUF", tags=["gguf"], card_data=card, downloads=45,
                        files={"tiny-llama-Q4_K_M.gguf": VOCAB_ONLY / "ggml-vocab-llama-spm.gguf"})
    hub_server.add_repo("eights/tiny-llama-GGUF", tags=["gguf"], card_data=card, downloads=40,
                        files={"tiny-llama-Q8_0.gguf": tiny_models.gguf_q8_0})
    hub_server.add_repo("else/other-GGUF", tags=["gguf"], card_data={"base_model": "meta-test/other"},
                        files={"other-Q4_K_M.gguf": tiny_models.gguf_q4_k_m})
    return made
