"""EXL2/EXL3 sizing against what exllamav2/exllamav3 allocate, and the recommender's EXL preference
fed by the ExLlama backends' own probes (NVML answers from tests/hardware/recordings)."""

from __future__ import annotations

import pytest

from app.hardware.profile import BackendSupport, GpuInfo
from app.models.estimate import estimate_exl
from app.models.metadata import ModelMetadata, TensorInfo
from app.models.quants import QuantInfo
from app.models.recommend import recommend
from backends import _exllama_common as common
from backends import registry
from tests.backends.test_exllama import TESLA_T4, recorded_nvml, sources
from tests.hardware.replay import RecordedNvml
from tests.models.test_recommend import _fake_gguf, _hw

GiB, MiB = 1 << 30, 1 << 20
LAYERS, KV_HEADS, HEAD_DIM = 32, 8, 128


def _exl(fmt: str = "exl3", weights: int = 4 * GiB) -> ModelMetadata:
    """A Llama-3-8B-shaped EXL quant: 32 layers, 8 KV heads of 128 dims."""
    return ModelMetadata(format=fmt, source=f"Fake-{fmt}", architecture="llama", block_count=LAYERS,
                         embedding_length=4096, vocab_size=128256, head_count=[32] * LAYERS,
                         head_count_kv=[KV_HEADS] * LAYERS, key_length=HEAD_DIM, value_length=HEAD_DIM,
                         quant=QuantInfo(fmt, "4.0bpw", 4.0), tensors=[TensorInfo("w", (1,), "U8", weights)])


def _cache_bytes(n_ctx: int, bits: float) -> int:
    return int(LAYERS * n_ctx * KV_HEADS * 2 * HEAD_DIM * bits / 8)


@pytest.mark.parametrize("kv_type,bits", [("fp16", 16), ("f16", 16), ("q8", 8.5), ("q8_0", 8.5), ("q6", 6.5),
                                          ("q4", 4.5), ("q4_0", 4.5)])
def test_cache_size_follows_the_libraries_layout(kv_type, bits):
    est = estimate_exl(_exl(), 8192, kv_type)
    assert est.devices[0].kv_bytes == _cache_bytes(8192, bits)  # codes + one fp16 scale per 32 elements


def test_quantized_cache_needs_one_fp16_layer_to_attend_over():
    fp16, q4 = (estimate_exl(_exl(), 8192, t).devices[0] for t in ("fp16", "q4"))
    assert q4.compute_bytes - fp16.compute_bytes == 8192 * KV_HEADS * 2 * HEAD_DIM * 2
    assert q4.total_bytes < fp16.total_bytes  # still far smaller overall


def test_context_is_whole_cache_pages():
    assert estimate_exl(_exl(), 5000).n_ctx == 5120
    assert estimate_exl(_exl(), 5000).devices[0].kv_bytes == _cache_bytes(5120, 16)


def _hw_from_probes(monkeypatch, nvml, gpu: GpuInfo):
    """hw.backends as `quantdesk hw` fills them: from registry.statuses(), i.e. the backends' own probes."""
    monkeypatch.setattr(common, "SOURCES", sources(nvml=nvml))
    backends = [BackendSupport(s.name, s.availability.available, s.availability.reason)
                for s in registry.statuses()]
    return _hw([gpu], backends=backends)


def _gpu(name: str, vram: int, capability: str) -> GpuInfo:
    return GpuInfo(index=0, vendor="nvidia", name=name, vram_total_bytes=vram, vram_free_bytes=vram,
                   compute_capability=capability, bandwidth_gbps=1000.0)


def test_exl_is_preferred_when_the_whole_model_fits_and_the_backend_runs(monkeypatch):
    hw = _hw_from_probes(monkeypatch, recorded_nvml("rtx4090-desktop"), _gpu("RTX 4090", 24 * GiB, "8.9"))
    report = recommend([("exl", _exl()), ("gguf", _fake_gguf("Q4_K_M", layer_bytes=130 * MiB))], hw)
    assert report.best.format == "exl3"
    assert report.format_preference[:2] == ["exl3", "exl2"]


def test_gguf_comes_first_when_no_exl_quant_fits_in_vram(monkeypatch):
    hw = _hw_from_probes(monkeypatch, recorded_nvml("rtx3060-laptop-windows"), _gpu("RTX 3060 Laptop", 6 * GiB, "8.6"))
    report = recommend([("exl", _exl(weights=8 * GiB)), ("gguf", _fake_gguf("Q4_K_M", layer_bytes=130 * MiB))], hw)
    assert report.format_preference[0] == "gguf"
    assert report.best.format == "gguf"


def test_exl3_is_not_recommended_on_a_gpu_older_than_ampere(monkeypatch):
    hw = _hw_from_probes(monkeypatch, RecordedNvml(TESLA_T4), _gpu("Tesla T4", 15 * GiB, "7.5"))
    assert not next(b for b in hw.backends if b.name == "exllamav3").available
    report = recommend([("exl3", _exl("exl3")), ("exl2", _exl("exl2")),
                        ("gguf", _fake_gguf("Q4_K_M", layer_bytes=130 * MiB))], hw)
    assert report.best.format == "exl2"  # exllamav2 runs on Turing; EXL3 does not
    assert "exl3" not in report.format_preference


def test_no_exl_without_a_usable_backend(monkeypatch):
    monkeypatch.setattr(common, "SOURCES", sources(torch=None))
    backends = [BackendSupport(s.name, s.availability.available) for s in registry.statuses()]
    hw = _hw([_gpu("RTX 4090", 24 * GiB, "8.9")], backends=backends)
    report = recommend([("exl", _exl()), ("gguf", _fake_gguf("Q4_K_M", layer_bytes=130 * MiB))], hw)
    assert report.best.format == "gguf" and report.format_preference == ["gguf"]
