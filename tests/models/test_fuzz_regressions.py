"""The inputs the fuzz tests found (tests/models/data/fuzz/), each read the ways QuantDesk reads a model: from the
local file, through HTTP Range requests from the Hub stand-in, and by `quantdesk inspect` in a real process. Each
ends in its sentence, never in a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from app.models.metadata import ModelMetadataError, read_model, read_safetensors_file
from app.hub.remote import read_remote_gguf
from app.models.recommend import fit_model
from tests.models.test_metadata_fuzz import MACHINE

ROOT = Path(__file__).resolve().parents[2]
FUZZ = Path(__file__).parent / "data" / "fuzz"
# file -> the sentence's telling words (a regular expression)
EXPECTED = {
    "nested-array-5000-deep.gguf": "array of arrays, which llama.cpp cannot read either",
    "alignment-is-an-array.gguf": r"general.alignment is \[32\], not a power of two",
    "key-length-is-an-array.gguf": r"llama.attention.key_length is \[1, 2\]; expected a whole number",
    "block-count-2pow32.gguf": "llama.block_count is 4294967296; expected a whole number from 0 to 4,096",
    "array-claims-2pow60-items.gguf": "an array claims 1152921504606846976 items",
    "string-claims-2pow60-bytes.gguf": "a string claims 1152921504606846976 bytes",
    "architecture-is-a-number.gguf": "general.architecture is 7, not a name",
    "tensor-of-2pow64-elements.gguf": "more elements than llama.cpp can address",
    # found reading the fix, not by hypothesis: 65,536 kept items first, then a per-layer array (was TypeError)
    "per-layer-array-past-the-kept-items-budget.gguf": "head_count_kv comes after more array items than a model",
    "safetensors-header-is-a-list.safetensors": "does not hold a JSON object",
    "safetensors-header-nested-100000-deep.safetensors": "nests too deeply to be read",
    "config-architectures-is-an-object": None,  # no architecture named: metadata without one, not an error
    # a tensor "blk.x.…" made `quantdesk fit` fail reading its block number (ValueError in the estimator)
    "tensor-named-blk-x.gguf": None,
    "config-layers-2pow63": "num_hidden_layers is 9223372036854775808; expected a whole number from 0 to 4,096",
    "config-heads-is-a-string": "num_attention_heads is ':'; expected a whole number",
    "config-mlx-bits-null": "quantization bits is None; expected a whole number from 1 to 64",
    "config-exl3-bits-not-a-number": "quantization_config bits is 'x'; expected a number from 1 to 64",
    "config-mlx-group-size-0": "quantization group_size is 0; expected a whole number from 1",
}


def _read(path: Path):
    return read_safetensors_file(path) if path.suffix == ".safetensors" else read_model(path)


def test_every_file_has_its_expected_sentence():
    assert sorted(p.name for p in FUZZ.iterdir() if p.name != "README.md") == sorted(EXPECTED)


# The inputs that read: what `quantdesk fit` plans for them (on a machine with a 24 GiB GPU).
PLANNED = {"config-architectures-is-an-object": ("unknown", "lacks layer or attention-head counts"),
           "tensor-named-blk-x.gguf": ("full GPU", "")}


@pytest.mark.usefixtures("address_space_cap")
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_found_input_reads_to_its_sentence(name):
    if EXPECTED[name] is None:
        meta = _read(FUZZ / name)
        result = fit_model(meta, MACHINE, n_ctx=4096)
        verdict, reason = PLANNED[name]
        assert result.verdict == verdict and reason in result.reason
        return
    with pytest.raises(ModelMetadataError, match=EXPECTED[name]) as error:
        _read(FUZZ / name)
    assert "\n" not in str(error.value)


@pytest.mark.usefixtures("address_space_cap")
@pytest.mark.parametrize("name", sorted(n for n in EXPECTED if n.endswith(".gguf")))
def test_each_found_gguf_read_through_range_requests(name, hub_env):
    hub_env.add_repo(f"fuzz/{name[:-5]}", files={"model-Q4_0.gguf": FUZZ / name})
    if EXPECTED[name] is None:
        assert read_remote_gguf(f"fuzz/{name[:-5]}", "model-Q4_0.gguf").tensors == _read(FUZZ / name).tensors
        return
    with pytest.raises(ModelMetadataError, match=EXPECTED[name]):
        read_remote_gguf(f"fuzz/{name[:-5]}", "model-Q4_0.gguf")


def test_inspect_of_the_nested_array_file_is_one_sentence_not_a_traceback():
    """Issue 21: a hostile GGUF made `quantdesk inspect` print a 3,000-line traceback (a RecursionError through
    the array reader, one frame pair per level)."""
    result = subprocess.run([sys.executable, "-m", "app", "inspect", str(FUZZ / "nested-array-5000-deep.gguf")],
                            cwd=ROOT, env=os.environ.copy(), capture_output=True, text=True, timeout=120)
    assert result.returncode == 1
    assert result.stderr == ("quantdesk: GGUF header holds an array of arrays, which llama.cpp cannot read "
                             "either.\n")
