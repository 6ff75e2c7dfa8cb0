"""The starting list (resources/catalog/starter_models.json) is data with its date, covers the machines and
formats it promises, and names only architectures the bundled engines load: asked of llama.cpp itself (a
vocab-only load of a header carrying that general.architecture, in a child process) and of mlx-lm's own
model-type lookup, never of a copied list."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from app.models.estimate import LLAMA_CPP_MODELLED
from app.models.metadata import RECURRENT_ARCHS
from app.hub.discover import TIERS, starter_list

ROOT = Path(__file__).resolve().parents[2]
NOT_AN_ARCHITECTURE = "not-an-architecture"

# Writes one vocab-only GGUF per architecture named on the command line and prints the ones llama.cpp loads:
# llama_model_load_from_file fails on an architecture name it does not know (llm_arch_from_string).
LLAMA_CPP_LOADS = r"""
import sys, tempfile, os
import gguf, llama_cpp
sys.path.insert(0, sys.argv[1])
from tests.models.gguf_builder import _vocab
folder = tempfile.mkdtemp()
for arch in sys.argv[2:]:
    path = os.path.join(folder, f"{len(os.listdir(folder))}.gguf")
    writer = gguf.GGUFWriter(path, arch)
    tokens, scores, types = _vocab(300)
    writer.add_tokenizer_model("llama")
    writer.add_token_list(tokens)
    writer.add_token_scores(scores)
    writer.add_token_types(types)
    writer.write_header_to_file(); writer.write_kv_data_to_file(); writer.write_tensors_to_file(); writer.close()
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(path.encode(), params)
    if model:
        llama_cpp.llama_model_free(model)
        print("LOADS", arch)
"""


def _llama_cpp_loads(architectures: set[str]) -> set[str]:
    result = subprocess.run([sys.executable, "-c", LLAMA_CPP_LOADS, str(ROOT), *sorted(architectures)],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    return set(re.findall(r"^LOADS (\S+)$", result.stdout, re.M))


def test_every_gguf_architecture_is_one_the_bundled_llama_cpp_loads():
    wanted = {m.architecture for m in starter_list().models if m.format == "gguf"}
    loads = _llama_cpp_loads(wanted | {NOT_AN_ARCHITECTURE})
    assert NOT_AN_ARCHITECTURE not in loads  # the check can fail
    assert wanted <= loads, f"llama.cpp does not load: {sorted(wanted - loads)}"


def test_every_mlx_architecture_is_one_mlx_lm_loads():
    from mlx_lm.utils import _get_classes

    for model in starter_list().models:
        if model.format == "mlx":
            _get_classes({"model_type": model.architecture})  # raises ValueError("Model type ... not supported.")
    with pytest.raises(ValueError, match="not supported"):
        _get_classes({"model_type": NOT_AN_ARCHITECTURE})


def test_every_gguf_architecture_is_sized_by_the_estimator():
    """A starter whose every quant would say 'unknown' would be a poor first screen."""
    for model in starter_list().models:
        if model.format == "gguf":
            assert model.architecture in LLAMA_CPP_MODELLED | RECURRENT_ARCHS, model.repo_id


def test_the_list_is_dated_data_covering_machines_formats_and_kinds():
    raw = json.loads((ROOT / "resources" / "catalog" / "starter_models.json").read_text(encoding="utf-8"))
    starters = starter_list()
    assert re.fullmatch(r"20\d\d-(0[1-9]|1[0-2])", starters.updated) and starters.updated == raw["updated"]
    models = starters.models
    assert len({m.repo_id for m in models}) == len(models)
    assert {m.tier for m in models} == set(TIERS)
    assert {m.format for m in models} == {"gguf", "mlx"}
    assert {m.modality for m in models} == {"text", "vision", "embedding"}  # an embedding model for the documents
    for fmt in ("gguf", "mlx"):  # each format has something for the smallest machines and for the 16 GB ones
        assert {"small", "16 GB"} <= {m.tier for m in models if m.format == fmt}, fmt
    for m in models:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", m.repo_id) and m.params_b > 0 and m.approx_q4_bytes > 0
        assert m.why.endswith(".") and m.why.count(". ") == 0 and len(m.why) < 160, m.why  # one sentence
        assert m.format == "mlx" or m.repo_id.upper().endswith("GGUF"), m.repo_id
