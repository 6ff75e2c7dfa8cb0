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
    meta.architecture = "deepseek4"
    result = fit_model(meta, _hw())
    assert result.verdict == "unknown" and "linear attention" in result.reason and result.estimate is None


# ------------------------------------------------------------------ MoE: experts in RAM, the rest on the GPU


def _fake_moe(layers: int = 48, expert_mib: int = 330, dense_mib: int = 12) -> ModelMetadata:
    """A Qwen3-30B-A3B-like Q4_K_M header: 128 experts per layer, 8 used per token (shapes matter only
    through bytes here)."""
    tensors = [TensorInfo("token_embd.weight", (2048, 151936), "Q6_K", 250 * MiB),
               TensorInfo("output.weight", (2048, 151936), "Q6_K", 250 * MiB)]
    for i in range(layers):
        tensors.append(TensorInfo(f"blk.{i}.attn_q.weight", (2048, 4096), "Q4_K", dense_mib * MiB))
        for part in ("gate", "up", "down"):
            tensors.append(TensorInfo(f"blk.{i}.ffn_{part}_exps.weight", (2048, 768, 128), "Q4_K",
                                      expert_mib * MiB // 3))
    return ModelMetadata(format="gguf", source="Fake-30B-A3B-Q4_K_M.gguf", architecture="qwen3moe",
                         quant=parse_gguf_filename("Fake-30B-A3B-Q4_K_M.gguf"), block_count=layers,
                         context_length=40960, embedding_length=2048, vocab_size=151936, head_count=[32] * layers,
                         head_count_kv=[4] * layers, key_length=128, value_length=128, expert_count=128,
                         expert_used_count=8, tensors=tensors)


def test_a_moe_that_does_not_fit_keeps_every_layer_on_the_gpu_and_the_fewest_experts_in_ram():
    meta, hw = _fake_moe(), _hw([_nvidia(8 * GiB)], ram=64 * GiB)
    result = fit_gguf(meta, hw, n_ctx=8192)
    n = result.estimate.cpu_moe
    assert result.verdict == f"MoE split: experts of {n} of 48 layers in RAM" and 0 < n < 48
    assert result.estimate.gpu_layers == 49 and result.fits and result.rank == 1
    assert "system RAM" in result.reason and f"the first {n} of 48 layers" in result.reason

    def gpu_bytes(cpu_moe):
        est = estimate_llama_cpp(meta, LlamaCppSettings(n_ctx=8192, gpu_layers=49, cpu_moe=cpu_moe), "GPU0")
        return est.device("GPU").total_bytes

    assert gpu_bytes(n) <= 8 * GiB < gpu_bytes(n - 1)  # the smallest N that fits
    # Speed: the used experts of N layers come from RAM (50 GB/s), everything else from VRAM (1000 GB/s).
    experts_per_layer = 330 * MiB // 3 * 3
    from_ram = n * experts_per_layer * 8 / 128
    est = result.estimate
    assert est.bytes_per_token_cpu == pytest.approx(from_ram, rel=1e-6)
    assert result.decode_tok_s == pytest.approx(1 / (from_ram / 50e9 + est.bytes_per_token_gpu / 1000e9), rel=1e-6)
    # ... faster than moving whole layers to the CPU, whose attention and shared weights are read from RAM too.
    layers_only = fit_gguf(meta, hw, n_ctx=8192, cpu_moe=0)
    assert layers_only.verdict.startswith("partial: ") and result.decode_tok_s > 1.3 * layers_only.decode_tok_s


def test_when_even_all_experts_in_ram_are_too_much_whole_layers_move_too():
    meta = _fake_moe()
    result = fit_gguf(meta, _hw([_nvidia(int(1.6 * GiB))], ram=64 * GiB), n_ctx=8192)
    assert result.verdict.startswith("partial: ") and result.verdict.endswith(" layers, experts in RAM")
    assert result.estimate.cpu_moe == 48 and 0 < result.estimate.gpu_layers < 49
    assert "the experts of all 48 layers stay in system RAM" in result.reason


def test_no_split_where_it_cannot_help_or_when_told():
    meta = _fake_moe()
    assert fit_gguf(meta, _hw([_nvidia(24 * GiB)])).verdict == "full GPU"
    apple = GpuInfo(index=0, vendor="apple", name="M3", vram_total_bytes=64 * GiB, unified=True,
                    working_set_limit_bytes=48 * GiB, bandwidth_gbps=400.0)
    unified = fit_gguf(meta, _hw([apple], ram=64 * GiB, os="darwin", arch="arm64"))
    assert unified.verdict == "unified memory" and unified.estimate.cpu_moe == 0
    told = fit_gguf(meta, _hw([_nvidia(24 * GiB)]), cpu_moe=-1)  # the user asked for every expert in RAM
    assert told.verdict == "MoE split: experts of 48 of 48 layers in RAM" and "all 48 layers" in told.reason
    assert fit_gguf(meta, _hw([_nvidia(24 * GiB)]), gpu_layers=20, cpu_moe=4).estimate.cpu_moe == 4


def test_recommend_names_the_split_and_its_load_settings():
    hw = _hw([_nvidia(8 * GiB)], ram=64 * GiB)
    report = recommend([("moe-q4", _fake_moe())], hw)
    cand = report.candidates[0]
    assert cand.verdict.startswith("MoE split") and cand.estimate.cpu_moe == report.load_settings.cpu_moe > 0
    assert report.load_settings.gpu_layers == 49
    assert "experts of" in report.best.reason and "system RAM" in report.best.reason



# --- planning for the llama.cpp runtime a load would get (app/runtimes/choose.py). The runtime records are
# shaped like a profile's `runtimes` (what each runtime's ggml reported); no NVIDIA GPU exists here, so these
# are built, not recorded.

def _runtime(name, backend, *devices):
    from app.datatypes import Device
    from app.hardware.profile import RuntimeInfo

    return RuntimeInfo(name, backend, devices=[Device("CPU", "CPU", "cpu", 32 * GiB, 32 * GiB),
                                                *[Device(*d) for d in devices]])


def test_a_gpu_no_installed_runtime_can_use_is_planned_as_cpu_only_with_the_runtime_to_build():
    hw = _hw([_nvidia(24 * GiB)])
    hw.runtimes = [_runtime("cpu", "cpu")]
    result = fit_gguf(_fake_gguf("Q4_K_M"), hw)
    assert result.verdict == "CPU only" and result.runtime == "CPU"
    assert result.reason.startswith("RTX is present, but no installed runtime can use it, so the CPU runs the model: "
                                    "build one with `quantdesk runtime build vulkan` or `cuda`")
    assert [d.name for d in result.estimate.devices] == ["CPU"]


def test_the_plan_is_for_the_device_the_chosen_runtime_sees():
    hw = _hw([_nvidia(24 * GiB)])
    vulkan0 = ("Vulkan0", "NVIDIA GeForce RTX", "gpu", 24 * GiB, 6 * GiB, "nvidia", False, 4 * GiB - 1)
    hw.runtimes = [_runtime("cpu", "cpu"), _runtime("vulkan", "vulkan", vulkan0)]
    result = fit_gguf(_fake_gguf("Q8_0"), hw)  # 7.3 GiB of weights, 6 GiB free on the GPU as Vulkan sees it
    assert result.runtime == "Vulkan · NVIDIA GeForce RTX (24.0 GiB)"
    assert result.verdict.startswith("partial: ") and result.reason.endswith("fit on Vulkan0 (NVIDIA GeForce RTX); "
                                                                             "the rest run on the CPU")
    assert result.estimate.device("Vulkan0").total_bytes <= 6 * GiB
