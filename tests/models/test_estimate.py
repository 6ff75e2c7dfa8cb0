from __future__ import annotations

import pytest

from app.models.estimate import (
    CTX_PAD,
    KV_TYPE_BYTES,
    LlamaCppSettings,
    UnknownModel,
    estimate_exl,
    estimate_llama_cpp,
    estimate_mlx,
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
    meta.architecture = "mamba2"
    with pytest.raises(UnknownModel, match="recurrent"):
        estimate_llama_cpp(meta, LlamaCppSettings())
    meta.architecture = "t5"
    with pytest.raises(UnknownModel, match="not modelled"):
        estimate_llama_cpp(meta, LlamaCppSettings())


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
