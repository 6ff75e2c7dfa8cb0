from __future__ import annotations

import json

import pytest

from app.hardware.profile import BackendSupport, CpuInfo, GpuInfo, HardwareProfile
from app.models.estimate import LlamaCppSettings, estimate_llama_cpp
from app.models.metadata import ModelMetadata, TensorInfo, read_gguf_file
from app.models.quants import QuantInfo, parse_gguf_filename
from app.models.recommend import fit_gguf, fit_model, recommend

GiB = 1 << 30
MiB = 1 << 20


def _hw(gpus=(), ram=32 * GiB, backends=(), os="linux", arch="x86_64"):
    return HardwareProfile(os=os, arch=arch, cpu=CpuInfo(flags=["avx2"]), ram_total_bytes=ram,
                           ram_available_bytes=ram, gpus=list(gpus), ram_bandwidth_gbps=50.0,
                           backends=list(backends))


def _nvidia(vram):
    return GpuInfo(index=0, vendor="nvidia", name="RTX", vram_total_bytes=vram, vram_free_bytes=vram,
                   compute_capability="8.9", bandwidth_gbps=1000.0)


def _fake_gguf(quant: str, layers: int = 32, layer_bytes: int = 200 * MiB) -> ModelMetadata:
    """A Llama-3-8B-like header at a given size per layer (shapes matter only through bytes here)."""
    info = parse_gguf_filename(f"Fake-8B-{quant}.gguf")
    tensors = [TensorInfo("token_embd.weight", (4096, 128256), "Q6_K", 400 * MiB),
               TensorInfo("output.weight", (4096, 128256), "Q6_K", 400 * MiB)]
    tensors += [TensorInfo(f"blk.{i}.ffn_up.weight", (4096, 14336), "Q8_0", layer_bytes) for i in range(layers)]
    return ModelMetadata(format="gguf", source=f"Fake-8B-{quant}.gguf", architecture="llama", quant=info,
                         block_count=layers, context_length=131072, embedding_length=4096, vocab_size=128256,
                         head_count=[32] * layers, head_count_kv=[8] * layers, key_length=128, value_length=128,
                         tensors=tensors)


def test_full_partial_cpu_and_does_not_fit():
    meta = _fake_gguf("Q8_0")
    assert fit_gguf(meta, _hw([_nvidia(24 * GiB)])).verdict == "full GPU"
    partial = fit_gguf(meta, _hw([_nvidia(4 * GiB)]))
    assert partial.verdict.startswith("partial: ") and partial.verdict.endswith(" of 33 layers")
    ngl = partial.estimate.gpu_layers
    assert 0 < ngl < 33
    # auto picks the most layers that fit: one more would not.
    one_more = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=8192, gpu_layers=ngl + 1), "GPU0")
    assert one_more.device("GPU").total_bytes > 4 * GiB >= partial.estimate.device("GPU").total_bytes
    assert fit_gguf(meta, _hw()).verdict == "CPU only"
    small_ram = fit_gguf(meta, _hw(ram=4 * GiB))
    assert small_ram.verdict == "does not fit" and "GiB" in small_ram.reason


def test_largest_context_that_fits_and_speed():
    meta = _fake_gguf("Q4_K_M", layer_bytes=120 * MiB)
    result = fit_gguf(meta, _hw([_nvidia(8 * GiB)]), n_ctx=4096)
    assert result.verdict == "full GPU"
    at_max = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=result.max_ctx, gpu_layers=33), "GPU0")
    beyond = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=result.max_ctx + 256, gpu_layers=33), "GPU0")
    assert at_max.device("GPU").total_bytes <= 8 * GiB < beyond.device("GPU").total_bytes
    # decode speed: bandwidth / bytes read per token (embeddings are looked up, not read).
    read = meta.weights_bytes - 400 * MiB
    assert result.decode_tok_s == pytest.approx(1000e9 / read, rel=1e-6)


def test_apple_is_unified_memory_and_prefers_mlx():
    apple = GpuInfo(index=0, vendor="apple", name="M2", vram_total_bytes=16 * GiB, unified=True,
                    working_set_limit_bytes=11 * GiB, bandwidth_gbps=100.0)
    hw = _hw([apple], ram=16 * GiB, os="darwin", arch="arm64")
    result = fit_gguf(_fake_gguf("Q4_K_M", layer_bytes=150 * MiB), hw)
    assert result.verdict == "unified memory" and [d.name for d in result.estimate.devices] == ["unified"]
    assert fit_gguf(_fake_gguf("F16", layer_bytes=600 * MiB), hw).verdict == "does not fit"
    mlx = ModelMetadata(format="mlx", source="Fake-4bit", architecture="llama", block_count=32,
                        embedding_length=4096, vocab_size=128256, head_count=[32] * 32, head_count_kv=[8] * 32,
                        key_length=128, value_length=128, quant=QuantInfo("mlx", "4bit", 4.5),
                        tensors=[TensorInfo("w", (1,), "U32", 5 * GiB)])
    report = recommend([("gguf-q4", _fake_gguf("Q4_K_M", layer_bytes=150 * MiB)), ("mlx-4bit", mlx)], hw)
    assert report.format_preference[0] == "mlx"
    assert report.best.format == "mlx" and report.best.label == "mlx-4bit"


def test_recommender_picks_highest_precision_that_fits_fully_and_explains():
    hw = _hw([_nvidia(12 * GiB)])
    metas = [(q, _fake_gguf(q, layer_bytes=mb * MiB)) for q, mb in
             (("Q4_K_M", 130), ("Q6_K", 190), ("Q8_0", 240), ("F16", 450))]
    report = recommend(metas, hw)
    verdicts = {c.label: c.verdict for c in report.candidates}
    assert verdicts["Q4_K_M"] == verdicts["Q6_K"] == "full GPU"
    assert verdicts["F16"].startswith("partial") or verdicts["F16"] == "CPU only"
    best = report.best_per_format["gguf"]
    full = [c for c in report.candidates if c.verdict == "full GPU"]
    assert best.label == max(full, key=lambda c: c.bits_per_weight).label
    assert best.reason.endswith(".") and best.quant in best.reason
    assert report.load_settings.gpu_layers == 33
    json.dumps(report.to_json())  # the CLI prints it


def test_exl_preferred_only_when_it_fits_and_exllama_is_usable():
    exl = ModelMetadata(format="exl3", source="Fake-exl3", architecture="llama", block_count=32,
                        embedding_length=4096, vocab_size=128256, head_count=[32] * 32, head_count_kv=[8] * 32,
                        key_length=128, value_length=128, quant=QuantInfo("exl3", "4.0bpw", 4.0),
                        tensors=[TensorInfo("w", (1,), "U8", 4 * GiB)])
    gguf = _fake_gguf("Q4_K_M", layer_bytes=130 * MiB)
    ready = _hw([_nvidia(24 * GiB)], backends=[BackendSupport("exllamav3", True)])
    assert recommend([("exl", exl), ("gguf", gguf)], ready).best.format == "exl3"
    no_exllama = _hw([_nvidia(24 * GiB)], backends=[BackendSupport("exllamav3", False, "no CUDA torch")])
    assert recommend([("exl", exl), ("gguf", gguf)], no_exllama).best.format == "gguf"
    assert fit_model(exl, _hw()).verdict == "does not fit"  # no NVIDIA GPU


def test_unknown_is_a_verdict_with_reason(tiny_ggufs):
    meta = read_gguf_file(tiny_ggufs["llama"])
    meta.architecture = "rwkv7"
    result = fit_model(meta, _hw())
    assert result.verdict == "unknown" and "recurrent" in result.reason and result.estimate is None
