"""Property-based tests of the model metadata readers (app/models/metadata/): whatever the bytes, a GGUF header
read from a local file or through the growing Range reader, a safetensors header or a config.json gives
metadata or ModelMetadataError with a sentence; never another exception, and never memory out of proportion to
the input (a count of 2**60 must not allocate).

The inputs are mostly well formed: a real model header with hostile values put into the fields the readers
use (extreme counts, lengths, wrong types, deep nesting), so they get past the magic bytes. The examples
hypothesis found are kept as files in tests/models/data/fuzz/ (test_fuzz_regressions.py). The budget comes from
the hypothesis profile (tests/conftest.py): small and fixed by default, ``HYPOTHESIS_PROFILE=fuzz`` for a long run.
"""

from __future__ import annotations

import itertools
import json
import struct
import tracemalloc
from collections.abc import Callable

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.hardware.profile import CpuInfo, GpuInfo, HardwareProfile
from app.hub.errors import HubError
from app.hub.remote import read_remote_gguf
from app.models.metadata import (
    ModelMetadata,
    ModelMetadataError,
    metadata_from_config,
    metadata_from_gguf,
    parse_growing,
    parse_gguf_header,
    parse_safetensors_header,
    read_model,
)
from app.models.recommend import fit_model
from tests.fixtures.limits import capped_examples
from tests.models import gguf_bytes as g

MiB = 1 << 20
# Some found inputs are tens of kB (an array nested 6,000 deep): hypothesis warns before printing them.
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr:hypothesis.errors.HypothesisWarning")

# Counts and lengths at the edges: around the readers' own limits, the 32/63/64-bit boundaries, and plain lies.
EXTREME = [0, 1, 2, 255, 4096, 4097, 65535, 1 << 24, (1 << 24) + 1, (1 << 31) - 1, 1 << 31, (1 << 32) - 1,
           1 << 32, 1 << 60, (1 << 63) - 1, 1 << 63, (1 << 64) - 1]
extreme_ints = st.sampled_from(EXTREME) | st.sampled_from(EXTREME).map(lambda n: -n) | st.integers(-(1 << 64), 1 << 64)
claimed_counts = st.none() | st.none() | st.sampled_from(EXTREME) | st.integers(0, (1 << 64) - 1)
type_codes = st.integers(0, 12) | st.sampled_from([13, 255, (1 << 31), (1 << 32) - 1])


@st.composite
def scalars(draw) -> g.Value:
    vtype = draw(st.sampled_from(sorted(g.SCALAR_FORMATS)))
    if vtype == g.FLOAT32:
        return g.Value(vtype, draw(st.floats(width=32)))
    if vtype == g.FLOAT64:
        return g.Value(vtype, draw(st.floats()))
    if vtype == g.BOOL:
        return g.Value(vtype, draw(st.integers(0, 255)))
    return g.Value(vtype, draw(extreme_ints))


strings = st.builds(lambda raw, claimed: g.Value(g.STRING, raw, claimed),
                    st.binary(max_size=40) | st.text(max_size=20).map(str.encode), claimed_counts)


def arrays(children: st.SearchStrategy[g.Value]) -> st.SearchStrategy[g.Value]:
    return st.builds(lambda items, claimed, item_type: g.Value(g.ARRAY, items, claimed, item_type),
                     st.lists(children, max_size=6), claimed_counts, st.none() | type_codes)


values = st.recursive(scalars() | strings, arrays, max_leaves=24)
deep = st.integers(1, 6000).map(g.nested_array)
hostile_values = values | deep | st.builds(lambda code, raw: g.Value(code, raw), st.integers(13, 1 << 32),
                                           st.binary(max_size=8))

# A plain transformer, and main's recurrent and hybrid families (each marks its recurrent layers its own way).
ARCHS = [b"llama", b"mamba2", b"lfm2", b"qwen35", b"nemotron_h", b"falcon-h1"]
GENERAL_KEYS = [b"general.architecture", b"general.alignment", b"general.file_type", b"general.name", b"split.count",
                b"tokenizer.ggml.tokens", b"tokenizer.chat_template", b"tokenizer.ggml.bos_token_id",
                b"tokenizer.ggml.eos_token_id"]
ARCH_KEYS = [b"block_count", b"context_length", b"embedding_length", b"feed_forward_length", b"attention.head_count",
             b"attention.head_count_kv", b"attention.key_length", b"attention.value_length",
             b"attention.sliding_window", b"attention.sliding_window_pattern", b"attention.key_length_swa",
             b"attention.value_length_swa", b"attention.shared_kv_layers", b"vocab_size", b"expert_count",
             b"expert_used_count", b"attention.kv_lora_rank", b"rope.dimension_count", b"nextn_predict_layers",
             b"ssm.conv_kernel", b"ssm.inner_size", b"ssm.state_size", b"ssm.group_count", b"wkv.head_size",
             b"token_shift_count", b"shortconv.l_cache", b"full_attention_interval", b"attention.recurrent_layers"]
dims = st.sampled_from([0, 1, 32, 64, 256]) | st.sampled_from(EXTREME) | st.integers(0, (1 << 64) - 1)
tensors = st.builds(g.Tensor, name=st.sampled_from([b"token_embd.weight", b"output.weight", b"blk.0.attn_q.weight",
                                                    b"blk.1.ffn_up_exps.weight", b"blk.x.attn_k.weight", b"blk.",
                                                    b"blk.99999999999.ssm_a", b"blk.-1.attn_v.weight"])
                    | st.binary(max_size=16), dims=st.lists(dims, max_size=5),
                    ggml_type=st.integers(0, 40) | st.sampled_from([(1 << 32) - 1]), offset=extreme_ints,
                    claimed_dims=st.none() | st.none() | st.sampled_from([0, 5, 9, 255, (1 << 32) - 1]))


@st.composite
def gguf_files(draw) -> bytes:
    """A real two-layer model header with some of its fields replaced or added, hostile counts in the
    header, and now and then cut short or followed by junk."""
    arch = draw(st.sampled_from(ARCHS))
    header = g.minimal_model(arch)
    kv = dict(header.kv)
    keys = st.sampled_from(GENERAL_KEYS) | st.sampled_from(ARCH_KEYS).map(lambda k: arch + b"." + k) \
        | st.binary(max_size=24)
    for key, value in draw(st.lists(st.tuples(keys, hostile_values), max_size=6)):
        kv[key] = value
    header.kv = list(kv.items())
    if draw(st.booleans()):
        header.kv.append(draw(st.tuples(keys, hostile_values)))  # a duplicate now and then
    header.tensors += draw(st.lists(tensors, max_size=4))
    header.version = draw(st.sampled_from([3, 3, 3, 2]) | st.integers(0, (1 << 32) - 1))
    header.claimed_kv = draw(st.none() | st.none() | st.sampled_from(EXTREME))
    header.claimed_tensors = draw(st.none() | st.none() | st.sampled_from(EXTREME))
    data = g.header_bytes(header)
    cut = draw(st.none() | st.integers(0, len(data)))
    return data[:cut] + draw(st.binary(max_size=32)) if cut is not None else data


def _bounded(call: Callable[[], object], input_size: int) -> object:
    """Run ``call`` and check its peak Python memory stays in proportion to the input."""
    tracemalloc.start()
    try:
        result = call()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * input_size + 8 * MiB, f"{peak / MiB:.1f} MiB for {input_size} bytes of input"
    return result


def _is_sentence(error: Exception) -> None:
    text = str(error)
    assert text and "\n" not in text and len(text) < 2000, text


# What `quantdesk fit` plans for: a machine with a 24 GiB NVIDIA GPU, so that layers are split between devices.
MACHINE = HardwareProfile(os="linux", arch="x86_64", cpu=CpuInfo(flags=["avx2"]), ram_total_bytes=64 << 30,
                          ram_available_bytes=64 << 30, ram_bandwidth_gbps=50.0, gpus=[GpuInfo(
                              index=0, vendor="nvidia", name="RTX", vram_total_bytes=24 << 30,
                              vram_free_bytes=24 << 30, compute_capability="8.9", bandwidth_gbps=1000.0)])


def _used(meta: ModelMetadata) -> None:
    """What the commands do with metadata: `inspect --json` prints its summary, `fit` plans a load (a verdict of
    "unknown" with its reason where the estimator does not model it)."""
    json.dumps(meta.summary())
    json.dumps(fit_model(meta, MACHINE, n_ctx=4096).to_json())


def _metadata(read: Callable[[], tuple], source: str) -> None:
    kv, tensors, _ = read()
    _used(metadata_from_gguf(kv, tensors, source=source, file_name="fuzz-Q4_K_M.gguf"))


def range_reader(data: bytes) -> Callable[[int, int], bytes]:
    """What fetch_range answers: bytes [start, end), fewer at the end of the file."""
    return lambda start, end: data[start:end]


@given(data=gguf_files(), first=st.sampled_from([16, 100, 4096, MiB]))
@capped_examples
def test_any_gguf_header_read_by_ranges_gives_metadata_or_our_error(data, first):
    try:
        _bounded(lambda: _metadata(lambda: parse_growing(range_reader(data), parse_gguf_header, "fuzz.gguf",
                                                         first=first), "fuzz"), len(data))
    except ModelMetadataError as exc:
        _is_sentence(exc)


SHARDED = "fuzz-Q4_K_M-00001-of-00002.gguf"


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])  # one Hub stand-in, a repo per example
@given(data=gguf_files(), name=st.sampled_from(["fuzz-Q4_K_M.gguf", SHARDED]), second_shard=st.booleans())
@capped_examples
def test_any_gguf_on_the_hub_gives_metadata_or_our_error(data, name, second_shard, hub_reader):
    """app.hub.remote's reader itself, over HTTP Range requests to the Hub stand-in: the growing reads, a server
    that answers fewer bytes than asked at the end of the file, and the other shards of a split model."""
    files = {name: data}
    if name == SHARDED and second_shard:
        files[SHARDED.replace("00001-of", "00002-of")] = data
    repo_id = f"fuzz/m{next(_repo_numbers)}"
    hub_reader.add_repo(repo_id, files=files)
    try:
        _used(_bounded(lambda: read_remote_gguf(repo_id, name), len(data)))
    except (ModelMetadataError, HubError) as exc:
        _is_sentence(exc)
    finally:
        hub_reader.repos.pop(repo_id)  # the stand-in keeps no example's bytes into the next
        hub_reader.log.clear()


_repo_numbers = itertools.count()


@pytest.fixture
def hub_reader(hub_env):
    """The Hub stand-in, read once through app.hub.remote before the examples: the first request's imports and
    HTTP session (17 MiB) are not an example's memory."""
    hub_env.add_repo("fuzz/warm-up", files={"warm-up-Q4_K_M.gguf": g.header_bytes(g.minimal_model())})
    read_remote_gguf("fuzz/warm-up", "warm-up-Q4_K_M.gguf")
    return hub_env


@given(data=gguf_files())
@capped_examples
def test_any_local_gguf_file_gives_metadata_or_our_error(data, tmp_path_factory):
    path = tmp_path_factory.mktemp("fuzz") / "fuzz-Q4_K_M.gguf"
    path.write_bytes(data)
    try:
        meta = _bounded(lambda: read_model(path), len(data))
        assert isinstance(meta, ModelMetadata)
        _used(meta)
    except ModelMetadataError as exc:
        _is_sentence(exc)


@given(data=st.binary(max_size=256))
@capped_examples
def test_random_bytes_after_the_magic(data):
    try:
        _metadata(lambda: parse_gguf_header(b"GGUF" + data), "fuzz")
    except ModelMetadataError as exc:
        _is_sentence(exc)
    except Exception as exc:  # the prefix may simply be too short: that is NeedMoreData, the growing loop's signal
        from app.models.metadata import NeedMoreData

        assert isinstance(exc, NeedMoreData), repr(exc)


# ------------------------------------------------------------------------------------------ JSON: safetensors, config

json_scalars = (st.none() | st.booleans() | st.sampled_from(EXTREME) | st.integers() | st.floats()
                | st.text(max_size=12) | st.sampled_from(["", "1", "1e400", "-1", "nan", "F16", "affine"]))
json_values = st.recursive(json_scalars, lambda children: st.lists(children, max_size=5)
                           | st.dictionaries(st.text(max_size=8), children, max_size=5), max_leaves=20)
tensor_entries = st.fixed_dictionaries({}, optional={
    "dtype": st.sampled_from(["F16", "BF16", "U32", "I8"]) | json_values,
    "shape": st.lists(st.sampled_from(EXTREME) | st.integers(), max_size=6) | json_values,
    "data_offsets": st.lists(st.sampled_from(EXTREME) | st.integers(), min_size=0, max_size=3) | json_values})
safetensors_headers = st.dictionaries(st.text(max_size=12) | st.just("__metadata__"), tensor_entries | json_values,
                                      max_size=6) | json_values


def _deep_json(depth: int) -> str:
    return "[" * depth + "]" * depth


@st.composite
def safetensors_prefixes(draw) -> bytes:
    if draw(st.integers(0, 9)) == 0:
        text = _deep_json(draw(st.integers(1, 200_000))).encode()
    else:
        text = json.dumps(draw(safetensors_headers), allow_nan=True).encode()
    claimed = draw(st.none() | st.sampled_from(EXTREME))
    return struct.pack("<Q", (len(text) if claimed is None else claimed) & ((1 << 64) - 1)) + text


@given(data=safetensors_prefixes())
@capped_examples
def test_any_safetensors_header_gives_tensors_or_our_error(data):
    try:
        tensors = _bounded(lambda: parse_growing(range_reader(data), lambda d: parse_safetensors_header(d, "x"),
                                                 "x.safetensors", first=64), len(data))
        for t in tensors:
            assert t.n_elements >= 0 and t.n_bytes >= 0
    except ModelMetadataError as exc:
        _is_sentence(exc)


# The config.json fields the readers use, each given every kind of JSON value.
CONFIG_KEYS = ["model_type", "architectures", "num_hidden_layers", "n_layer", "hidden_size", "num_attention_heads",
               "num_key_value_heads", "head_dim", "sliding_window", "use_sliding_window", "layer_types",
               "sliding_window_pattern", "max_position_embeddings", "vocab_size", "num_experts", "num_local_experts",
               "n_routed_experts", "num_experts_per_tok", "kv_lora_rank", "qk_rope_head_dim", "tie_word_embeddings",
               "bos_token_id", "eos_token_id", "torch_dtype", "dtype", "text_config", "quantization",
               "quantization_config"]
QUANT_KEYS = ["bits", "group_size", "mode", "quant_method", "head_bits", "lm_head"]
quant_blocks = st.dictionaries(st.sampled_from(QUANT_KEYS) | st.text(max_size=6), json_values, max_size=5)
configs = st.dictionaries(st.sampled_from(CONFIG_KEYS), json_values | quant_blocks
                          | st.sampled_from(EXTREME) | st.sampled_from([{"quant_method": "exl2"},
                                                                        {"quant_method": "exl3", "bits": "x"}]),
                          max_size=10)


@given(config=configs, name=st.sampled_from(["", "Model-4bit", "x-4.0bpw-exl3", "Model-mxfp4"]))
@capped_examples
def test_any_config_gives_metadata_or_our_error(config, name):
    try:
        meta = _bounded(lambda: metadata_from_config(config, [], source="fuzz", name=name), 4096)
        _used(meta)
    except ModelMetadataError as exc:
        _is_sentence(exc)


@given(text=st.sampled_from(["", "{", "[]", "null", "1e999999", '"x"']) | configs.map(json.dumps)
       | st.integers(1, 200_000).map(_deep_json) | st.text(max_size=50))
@capped_examples
def test_any_config_file_gives_metadata_or_our_error(text, tmp_path_factory):
    folder = tmp_path_factory.mktemp("model")
    (folder / "config.json").write_text(text, encoding="utf-8")
    try:
        meta = read_model(folder)
        json.dumps(meta.summary())
    except ModelMetadataError as exc:
        _is_sentence(exc)
