from __future__ import annotations

import dataclasses

import pytest

from app.models.estimate import (
    CTX_PAD,
    KV_TYPE_BYTES,
    LlamaCppSettings,
    UnknownModel,
    estimate_exl,
    estimate_llama_cpp,
    estimate_mlx,
    graph_parts,
)
from app.models.metadata import ModelMetadata, TensorInfo, read_gguf_file


def _bytes(meta, prefix):
    return sum(t.n_bytes for t in meta.tensors if t.name.startswith(prefix))


def test_context_is_padded_and_kv_follows_gqa(tiny_ggufs):
    meta = read_gguf_file(tiny_ggufs["llama"])
    est = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=1000))
    assert est.n_ctx == 1024 and est.n_ctx % CTX_PAD == 0
    # 2 layers x 1024 cells x (K + V) x 2 KV heads x 16 dims x 2 bytes (llama.cpp logged 0.25 MiB for this model)
    assert est.devices[0].kv_bytes == 2 * 1024 * 2 * 2 * 16 * 2 == 256 * 1024


@pytest.mark.parametrize("kv_type", ["f16", "q8_0", "q4_0"])
def test_cache_types(tiny_ggufs, kv_type):
    meta = read_gguf_file(tiny_ggufs["llama"])
    est = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=4096, kv_type=kv_type))
    assert est.devices[0].kv_bytes == int(4096 * 2 * 2 * 2 * 16 * KV_TYPE_BYTES[kv_type])


def test_sliding_window_layers_hold_window_plus_ubatch(tiny_ggufs):
    meta = read_gguf_file(tiny_ggufs["gemma3"])
    per_cell = 1 * 32 * 2 * 2  # 1 KV head x 32 dims x (K+V) x f16
    est = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=16384))
    swa_cells = 512 + 512  # n_swa + n_ubatch, padded to 256
    assert est.devices[0].kv_bytes == per_cell * (1 * 16384 + 6 * swa_cells)
    full = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=16384, swa_full=True))
    assert full.devices[0].kv_bytes == per_cell * 7 * 16384
    small = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=512))
    assert small.devices[0].kv_bytes == per_cell * 7 * 512  # the window never exceeds the context


def test_offload_rule_output_layer_first_embeddings_stay(tiny_ggufs):
    meta = read_gguf_file(tiny_ggufs["llama"])
    embd, out = _bytes(meta, "token_embd"), _bytes(meta, "output")
    blk0, blk1 = _bytes(meta, "blk.0."), _bytes(meta, "blk.1.")
    kv_layer = 1024 * 2 * 2 * 16 * 2
    cases = {0: (0, 0), 1: (out, 0), 2: (out + blk1, kv_layer), 3: (out + blk1 + blk0, 2 * kv_layer),
             99: (out + blk1 + blk0, 2 * kv_layer)}
    for ngl, (gpu_weights, gpu_kv) in cases.items():
        est = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=1024, gpu_layers=ngl, cpu_repack=False))
        gpu = est.device("GPU")
        assert (gpu.weights_bytes if gpu else 0) == gpu_weights, ngl
        assert (gpu.kv_bytes if gpu else 0) == gpu_kv, ngl
        assert est.devices[0].weights_bytes == meta.weights_bytes - gpu_weights
        assert est.devices[0].weights_bytes >= embd


def test_tied_output_is_duplicated_onto_the_gpu(tiny_ggufs):
    meta = read_gguf_file(tiny_ggufs["gemma3"])
    embd = _bytes(meta, "token_embd")
    est = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=1024, gpu_layers=1))
    assert est.device("GPU").weights_bytes == embd + _bytes(meta, "output_norm")
    assert est.devices[0].weights_bytes == meta.weights_bytes - _bytes(meta, "output_norm")


def test_a_gpu_runtime_computes_on_the_gpu_at_no_offloaded_layer_and_skips_the_repack(tiny_ggufs):
    # llama.cpp's op offload runs a prompt batch's matmuls on the GPU whatever -ngl says, and the CPU's
    # layers use the GPU's pinned host buffer type instead of the repack (Vulkan runtime, lavapipe:
    # tests/bench/fit_accuracy_vulkan.py).
    meta = read_gguf_file(tiny_ggufs["llama"])
    cpu_only = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=1024, gpu_layers=0))
    on_gpu_runtime = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=1024, gpu_layers=0, gpu_runtime=True))
    assert [d.name for d in cpu_only.devices] == ["CPU"]
    host, gpu = on_gpu_runtime.devices
    assert gpu.weights_bytes == gpu.kv_bytes == 0 and gpu.compute_bytes > 0
    assert host.weights_bytes == meta.weights_bytes and host.compute_bytes < cpu_only.devices[0].compute_bytes


def test_what_the_gpu_cannot_address_stays_on_the_host(tiny_ggufs):
    # ggml-vulkan runs an op whose tensors exceed maxStorageBufferRange on the CPU (lavapipe: 128 MiB),
    # so a tied output layer bigger than that keeps its one mapped copy on the host, and so do its logits.
    meta = read_gguf_file(tiny_ggufs["gemma3"])
    embd = _bytes(meta, "token_embd")
    free = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=1024, gpu_layers=99, gpu_runtime=True))
    tight = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=1024, gpu_layers=99, gpu_runtime=True,
                                                      gpu_max_tensor_bytes=embd - 1))
    assert free.device("GPU").weights_bytes - tight.device("GPU").weights_bytes == embd
    logits = 512 * meta.vocab_size * 4
    assert tight.devices[0].compute_bytes >= logits > free.devices[0].compute_bytes


def test_attention_too_large_for_the_gpu_runs_on_the_host(tiny_ggufs):
    meta = read_gguf_file(tiny_ggufs["llama"])
    scores = 4096 * 512 * max(meta.head_count) * 4  # q·kᵀ over 4096 cells for a 512-token ubatch
    settings = dict(n_ctx=4096, gpu_layers=99, gpu_runtime=True)
    roomy = estimate_llama_cpp(meta, LlamaCppSettings(**settings, gpu_max_tensor_bytes=scores))
    tight = estimate_llama_cpp(meta, LlamaCppSettings(**settings, gpu_max_tensor_bytes=scores - 1))
    assert roomy.device("GPU").compute_bytes >= scores > tight.device("GPU").compute_bytes
    assert tight.devices[0].compute_bytes >= scores > roomy.devices[0].compute_bytes


def test_scores_bigger_than_an_allocation_block_take_a_second_one_with_layers_on_both_sides(tiny_ggufs):
    # Vulkan allocates compute buffers in 1 GiB blocks; Llama-3.2-1B shapes at 32k (2 GiB of scores on the
    # host) measured one extra block of scores at -ngl 8 and none at -ngl 0 or 17.
    meta = read_gguf_file(tiny_ggufs["llama"])
    scores = 4096 * 512 * max(meta.head_count) * 4
    n_layer = meta.block_count

    def host_compute(ngl, chunk):
        return estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=4096, gpu_layers=ngl, gpu_runtime=True,
                                                         gpu_max_tensor_bytes=scores - 1,
                                                         host_chunk_bytes=chunk)).devices[0].compute_bytes

    assert host_compute(2, chunk=scores - 1) - host_compute(2, chunk=None) == scores  # layers on both sides
    assert host_compute(0, chunk=scores - 1) == host_compute(0, chunk=None)
    assert host_compute(n_layer + 1, chunk=scores - 1) == host_compute(n_layer + 1, chunk=None)
    assert host_compute(2, chunk=scores) == host_compute(2, chunk=None)  # the scores fit a block


def test_moe_reads_only_the_used_experts(tiny_ggufs):
    meta = read_gguf_file(tiny_ggufs["moe"])
    est = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=1024))
    experts = _bytes_matching(meta, "_exps.")
    assert est.bytes_per_token_cpu == pytest.approx(
        meta.weights_bytes - _bytes(meta, "token_embd") - experts + experts * 2 / 8, abs=8)


def _bytes_matching(meta, part):
    return sum(t.n_bytes for t in meta.tensors if part in t.name)


def test_unknown_architectures_say_why(tiny_ggufs):
    meta = read_gguf_file(tiny_ggufs["llama"])
    meta.architecture = "kimi-linear"
    with pytest.raises(UnknownModel, match="linear attention with caches QuantDesk does not size"):
        estimate_llama_cpp(meta, LlamaCppSettings())
    meta.architecture = "t5"
    with pytest.raises(UnknownModel, match="not modelled"):
        estimate_llama_cpp(meta, LlamaCppSettings())
    config = _config_meta("mlx")
    config.architecture = "qwen3_next"
    with pytest.raises(UnknownModel, match="GGUF"):
        estimate_mlx(config, 4096)


# ------------------------------------------------------------------ recurrent and hybrid layers


def _state_row_bytes(spec):
    """llama.cpp's n_embd_r + n_embd_s for one layer, in F32, written out per architecture."""
    if spec.arch == "lfm2":
        return spec.n_embd * (spec.shortconv_l_cache - 1) * 4
    d_inner, conv_dim = spec.ssm_inner, spec.ssm_inner + 2 * spec.ssm_group_count * spec.ssm_state_size
    return ((spec.ssm_conv_kernel - 1) * conv_dim + spec.ssm_state_size * d_inner) * 4


@pytest.mark.parametrize("fixture", ["tiny_lfm2", "tiny_granite_hybrid", "tiny_mamba2"])
def test_recurrent_layers_hold_a_state_and_only_attention_layers_a_kv_cache(request, fixture):
    models = request.getfixturevalue(fixture)
    spec, meta = models.spec, read_gguf_file(models.gguf_q8_0)
    attention = [il for il in range(spec.n_layer) if spec.attends(il)]
    recurrent = [il for il in range(spec.n_layer) if not spec.attends(il)]
    assert [meta.layer_kv_heads(il) for il in range(spec.n_layer)] == [
        spec.n_head_kv if il in attention else 0 for il in range(spec.n_layer)]
    for n_ctx in (1024, 8192):
        est = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=n_ctx))
        cpu = est.devices[0]
        assert cpu.state_bytes == len(recurrent) * _state_row_bytes(spec)  # the same at any context
        assert cpu.kv_bytes == len(attention) * n_ctx * 2 * spec.n_head_kv * spec.hd * 2
        assert cpu.total_bytes == cpu.weights_bytes + cpu.kv_bytes + cpu.state_bytes + cpu.compute_bytes \
            + cpu.output_bytes + cpu.other_bytes
    # Offloaded layers take their state along (llama.cpp: the layer's device when offload_kqv, the default).
    split = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=1024, gpu_layers=2))  # output + the last block
    last_is_recurrent = (spec.n_layer - 1) in recurrent
    assert split.device("GPU").state_bytes == (_state_row_bytes(spec) if last_is_recurrent else 0)
    assert split.devices[0].state_bytes + split.device("GPU").state_bytes == len(recurrent) * _state_row_bytes(spec)


def _hybrid_meta(arch, extra, n_layer=8, tensors=()):
    from app.models.metadata import metadata_from_gguf

    kv = {"general.architecture": arch, f"{arch}.block_count": n_layer, f"{arch}.embedding_length": 2048,
          f"{arch}.attention.head_count": 16, f"{arch}.attention.head_count_kv": 2,
          f"{arch}.attention.key_length": 256, f"{arch}.attention.value_length": 256,
          f"{arch}.ssm.conv_kernel": 4, f"{arch}.ssm.inner_size": 4096, f"{arch}.ssm.state_size": 128,
          f"{arch}.ssm.group_count": 16, f"{arch}.ssm.time_step_rank": 32,
          "tokenizer.ggml.tokens": [f"t{i}" for i in range(64)], **extra}
    return metadata_from_gguf(kv, list(tensors) or [TensorInfo("token_embd.weight", (2048, 64), "F16", 2048 * 128)],
                              source="mem")


def test_qwen3_next_attends_every_fourth_layer_and_its_delta_net_state_is_sized():
    meta = _hybrid_meta("qwen3next", {})
    assert meta.recurrent.layers == (True, True, True, False) * 2  # full_attention_interval defaults to 4
    # Qwen3-Next-80B-A3B's gated delta net: conv over q, k and v; a 128 x 128 state per value head (32 heads)
    assert meta.recurrent.r_elements == 3 * (4096 + 2 * 16 * 128) and meta.recurrent.s_elements == 128 * 4096
    est = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=4096))
    assert est.devices[0].state_bytes == 6 * (3 * 8192 + 128 * 4096) * 4
    assert est.devices[0].kv_bytes == 2 * 4096 * 2 * 2 * 256 * 2
    explicit = _hybrid_meta("qwen35", {"qwen35.attention.recurrent_layers": [True] * 6 + [False, False]})
    assert explicit.recurrent.layers == (True,) * 6 + (False, False)
    interval = _hybrid_meta("qwen35moe", {"qwen35moe.full_attention_interval": 2})
    assert interval.recurrent.layers == (True, False) * 4


def test_falcon_h1_layers_keep_both_and_mtp_blocks_nothing():
    falcon = _hybrid_meta("falcon-h1", {}, n_layer=4)
    assert all(falcon.recurrent.layers) and [falcon.layer_kv_heads(il) for il in range(4)] == [2] * 4
    est = estimate_llama_cpp(falcon, LlamaCppSettings(n_ctx=1024))
    assert est.devices[0].state_bytes == 4 * falcon.recurrent.layer_bytes and est.devices[0].kv_bytes > 0
    # The last block predicts the next-but-one token: llama.cpp neither loads it nor caches for it.
    tensors = [TensorInfo("token_embd.weight", (2048, 64), "F16", 2048 * 128),
               TensorInfo("blk.6.attn_q.weight", (2048, 2048), "F16", 2048 * 2048 * 2),
               TensorInfo("blk.7.attn_q.weight", (2048, 2048), "F16", 2048 * 2048 * 2),
               TensorInfo("blk.7.nextn.eh_proj.weight", (4096, 2048), "F16", 4096 * 2048 * 2)]
    mtp = _hybrid_meta("qwen3next", {"qwen3next.nextn_predict_layers": 1}, tensors=tensors)
    assert mtp.recurrent.layers[7] is False and mtp.layer_kv_heads(7) == 0
    est = estimate_llama_cpp(mtp, LlamaCppSettings(n_ctx=1024, cpu_repack=False))
    assert est.devices[0].weights_bytes == 2048 * 128 + 2048 * 2048 * 2
    assert est.devices[0].kv_bytes == 1 * 1024 * 2 * 2 * 256 * 2  # layer 3 only: 7 would, but it is MTP


# ------------------------------------------------------------------ Qwen3-VL's deepstack input


@pytest.mark.parametrize("fixture", ["tiny_qwen3vl", "tiny_qwen3vlmoe"])
def test_deepstack_widens_the_input_embedding_while_the_first_layers_attend(request, fixture):
    models = request.getfixturevalue(fixture)
    spec, meta = models.spec, read_gguf_file(models.gguf_q8_0)
    assert meta.deepstack_layers == spec.deepstack_layers == 3 and meta.summary()["deepstack_layers"] == 3
    plain = dataclasses.replace(meta, deepstack_layers=0)
    settings = LlamaCppSettings(n_ctx=2048)  # attention, not the logits, is the graph's peak here
    est, without = estimate_llama_cpp(meta, settings), estimate_llama_cpp(plain, settings)
    # llama.cpp pads the looked-up embedding to (1 + 3) x n_embd for the deepstack slices (zeros for text)
    assert est.devices[0].compute_bytes - without.devices[0].compute_bytes == 512 * 4 * spec.n_embd * 4
    assert est.devices[0].kv_bytes == without.devices[0].kv_bytes == spec.n_layer * 2048 * 2 * spec.n_head_kv * spec.hd * 2
    assert est.devices[0].weights_bytes == without.devices[0].weights_bytes


# ------------------------------------------------------------------ Llama 4's chunked attention


def test_llama4_chunked_layers_cache_one_chunk_and_the_ubatch(tiny_llama4):
    meta = read_gguf_file(tiny_llama4.gguf_q8_0)
    spec = tiny_llama4.spec
    # llama.cpp fixes the chunk at 8192 tokens (the GGUF names none) on three of every four layers
    assert meta.sliding_window == 8192 and meta.swa_layers == [True, True, True, False]
    row = 2 * spec.n_head_kv * spec.hd * 2  # K and V, f16
    for n_ctx, chunked_cells in ((4096, 4096), (16384, 8192 + 512), (65536, 8192 + 512)):
        est = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=n_ctx))
        # as llama.cpp logs it for this file at 16384: 3 layers x 8704 cells (12.75 MiB) + 1 x 16384 (8 MiB)
        assert est.devices[0].kv_bytes == (3 * chunked_cells + n_ctx) * row
    assert estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=16384, swa_full=True)).devices[0].kv_bytes == 4 * 16384 * row
    # the shared expert is no routed one: --cpu-moe moves only the routed experts (llama.cpp's _exps pattern)
    from app.models.estimate import expert_in_ram

    in_ram = {t.name for t in meta.tensors if expert_in_ram(t.name, 0, -1) and t.name.startswith("blk.0.")}
    assert in_ram == {f"blk.0.ffn_{part}_exps.weight" for part in ("gate", "up", "down")}
    assert estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=4096, cpu_moe=-1)).cpu_moe == spec.n_layer


def test_a_llama4_gguf_without_chunks_attends_everywhere():
    from app.models.metadata import metadata_from_gguf

    kv = {"general.architecture": "llama4", "llama4.block_count": 4, "llama4.embedding_length": 256,
          "llama4.attention.head_count": 4, "llama4.attention.sliding_window": 0, "tokenizer.ggml.tokens": ["a"]}
    meta = metadata_from_gguf(kv, [], source="mem")
    assert meta.sliding_window == 0 and meta.swa_layers == [False] * 4  # llama.cpp: swa_type NONE


# ------------------------------------------------------------------ MoE experts kept in RAM


def test_experts_in_ram_match_the_patterns_llama_cpp_is_given(tiny_moe):
    import re

    from app.models.estimate import _layer_of, expert_in_ram
    from app.datatypes import expert_tensor_patterns

    meta = read_gguf_file(tiny_moe.gguf_q8_0)
    names = [t.name for t in meta.tensors] + ["blk.1.ffn_gate_up_exps.weight", "blk.12.ffn_down_exps.bias",
                                              "blk.0.ffn_up_shexp.weight", "blk.3.ffn_down_chexps.weight"]
    for cpu_moe in (-1, 0, 1, 2, 3, 12, 13):
        patterns = expert_tensor_patterns(cpu_moe)
        for name in names:
            assert expert_in_ram(name, _layer_of(name, 40), cpu_moe) == any(re.search(p, name) for p in patterns), \
                (cpu_moe, name)


def test_experts_in_ram_stay_on_the_cpu_and_are_read_from_ram(tiny_moe):
    meta = read_gguf_file(tiny_moe.gguf_q8_0)
    experts = [sum(t.n_bytes for t in meta.tensors if t.name.startswith(f"blk.{il}.") and "_exps." in t.name)
               for il in range(4)]
    everything = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=1024, gpu_layers=99))
    assert everything.cpu_moe == 0
    for cpu_moe, in_ram in ((-1, sum(experts)), (2, experts[0] + experts[1]), (0, 0)):
        est = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=1024, gpu_layers=99, cpu_moe=cpu_moe))
        cpu, gpu = est.devices[0], est.device("GPU")
        assert est.cpu_moe == {-1: 4, 2: 2, 0: 0}[cpu_moe]
        assert gpu.weights_bytes == everything.device("GPU").weights_bytes - in_ram
        assert cpu.weights_bytes == everything.devices[0].weights_bytes + in_ram  # Q8_0: no repacked copy
        assert est.bytes_per_token_cpu == pytest.approx(in_ram * 2 / 8, abs=8)  # 2 of 8 experts per token
        assert est.bytes_per_token_cpu + est.bytes_per_token_gpu == pytest.approx(
            everything.bytes_per_token_gpu, abs=8)
        # A prompt batch copies each mapped expert stack to the GPU for its matmul (ggml's op offload): the copy
        # lives beside that stage's activations, so the GPU's compute buffer holds at least both (and never less
        # than with every expert on the GPU). Measured for host weights on Vulkan: tests/bench/fit_accuracy_vulkan.py.
        largest = max((t.n_bytes for t in meta.tensors if "_exps." in t.name), default=0) if cpu_moe else 0
        g = graph_parts(meta, 1024, LlamaCppSettings(n_ctx=1024))
        assert gpu.compute_bytes >= max(everything.device("GPU").compute_bytes, g.moe + largest + g.residual)
    dense = estimate_llama_cpp(read_gguf_file(tiny_moe.gguf_q8_0), LlamaCppSettings(n_ctx=1024, cpu_moe=-1))
    assert dense.devices[0].weights_bytes == everything.devices[0].weights_bytes + everything.device("GPU").weights_bytes


def _config_meta(fmt, bpw=None):
    from app.models.quants import QuantInfo

    layers = 4
    return ModelMetadata(format=fmt, source="x", architecture="llama", block_count=layers, embedding_length=256,
                         vocab_size=1000, head_count=[8] * layers, head_count_kv=[2] * layers, key_length=32,
                         value_length=32, quant=QuantInfo(fmt, "q", bpw),
                         tensors=[TensorInfo("w", (1000, 1000), "U32", 4_000_000)])


def test_mlx_and_exl_add_cache_and_overheads():
    mlx = estimate_mlx(_config_meta("mlx"), 2000)
    dev = mlx.devices[0]
    assert mlx.n_ctx == 2048 and dev.weights_bytes == 4_000_000
    assert dev.kv_bytes == 4 * 2048 * 2 * (32 + 32) * 2
    exl = estimate_exl(_config_meta("exl2", 4.0), 4096, "q4_0")
    assert exl.devices[0].kv_bytes == 4 * 4096 * 2 * (32 + 32) * 4.5 // 8  # 4-bit codes + fp16 scale per 32
    assert exl.devices[0].other_bytes > 500 << 20  # the reserve ExLlama needs beyond weights + cache


def test_a_malformed_state_size_is_a_sentence_not_a_traceback():
    from app.models.metadata import ModelMetadataError

    for bad in ("big", -1, True):
        with pytest.raises(ModelMetadataError, match="qwen3next.ssm.state_size"):
            _hybrid_meta("qwen3next", {"qwen3next.ssm.state_size": bad})


def test_sequences_decoded_together_keep_a_window_a_state_and_logits_each(tiny_ggufs, tiny_mamba2):
    """``n_seq`` (LoadSettings.parallel, a unified cache): full layers keep n_ctx cells, each sequence adds its window
    on sliding-window layers (llama.cpp: n_swa * n_seq_max + n_ubatch), its recurrent state and its logits row."""
    gemma = read_gguf_file(tiny_ggufs["gemma3"])
    per_cell = 1 * 32 * 2 * 2
    four = estimate_llama_cpp(gemma, LlamaCppSettings(n_ctx=16384, n_seq=4)).devices[0]
    assert four.kv_bytes == per_cell * (1 * 16384 + 6 * (512 * 4 + 512))
    assert four.output_bytes == 4 * gemma.vocab_size * 4
    capped = estimate_llama_cpp(gemma, LlamaCppSettings(n_ctx=2048, n_seq=8)).devices[0]
    assert capped.kv_bytes == per_cell * 7 * 2048  # the windows never exceed the context
    mamba = read_gguf_file(tiny_mamba2.gguf_q8_0)
    one, four = (estimate_llama_cpp(mamba, LlamaCppSettings(n_ctx=1024, n_seq=n)).devices[0] for n in (1, 4))
    assert four.state_bytes == 4 * one.state_bytes > 0


@pytest.mark.parametrize("fixture", ["tiny_mamba2", "tiny_lfm2"])
def test_the_estimate_of_four_sequences_is_what_llama_cpp_allocates(request, fixture):
    """Loaded with four sequences (the server's --parallel 4), llama.cpp logs the buffers the estimate of n_seq=4
    predicts: its cache or recurrent state and its logits, within the log's rounding to 0.01 MiB."""
    pytest.importorskip("llama_cpp", reason="needs llama-cpp-python: pip install -e '.[llama]'")
    from app.datatypes import LoadSettings
    from backends.llama_cpp import LlamaCppBackend

    path = request.getfixturevalue(fixture).gguf_q8_0
    backend = LlamaCppBackend()
    loaded = backend.load(str(path), LoadSettings(n_ctx=1024, threads=2, gpu_layers=0, parallel=4))
    backend.unload()
    logged = next(d for d in loaded.devices if d.name == "CPU")
    predicted = estimate_llama_cpp(read_gguf_file(path), LlamaCppSettings(n_ctx=1024, n_seq=4)).devices[0]
    rounding = 0.005 * 1024 * 1024
    assert abs(logged.kv_bytes - (predicted.kv_bytes + predicted.state_bytes)) <= rounding
    assert abs(logged.output_bytes - predicted.output_bytes) <= rounding and logged.output_bytes > 0
