from __future__ import annotations

import json


from app.cli import main
from app.hardware.profile import CpuInfo, GpuInfo, HardwareProfile

GiB = 1 << 30


def _hardware_file(tmp_path, vram=None):
    gpus = [GpuInfo(index=0, vendor="nvidia", name="RTX", vram_total_bytes=vram, vram_free_bytes=vram,
                    bandwidth_gbps=500.0)] if vram else []
    hw = HardwareProfile(os="linux", arch="x86_64", cpu=CpuInfo(flags=["avx2"]), ram_total_bytes=16 * GiB,
                         ram_available_bytes=16 * GiB, gpus=gpus)
    path = tmp_path / "hw.json"
    path.write_text(hw.to_json())
    return str(path)


def test_inspect_json(tiny_ggufs, capsys):
    assert main(["inspect", str(tiny_ggufs["gemma3"]), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["architecture"] == "gemma3" and data["swa_layers"] == 6 and data["quant"] == "F16"


def test_fit_json_shape(tiny_ggufs, tmp_path, capsys):
    hw = _hardware_file(tmp_path, vram=8 * GiB)
    assert main(["fit", str(tiny_ggufs["llama"]), "--ctx", "4000", "--gpu-layers", "2", "--kv-type", "q8_0",
                 "--hardware", hw, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["n_ctx"] == 4096 and data["gpu_layers"] == 2 and data["verdict"] == "partial: 2 of 3 layers"
    assert [d["name"] for d in data["devices"]] == ["CPU", "GPU0 (RTX)"]
    for dev in data["devices"]:
        parts = ("weights_bytes", "kv_bytes", "compute_bytes", "output_bytes", "other_bytes", "state_bytes", "vision_bytes")
        assert set(dev) == {"name", "total_bytes", *parts}
        assert dev["total_bytes"] == sum(dev[k] for k in parts)
    assert main(["fit", str(tiny_ggufs["llama"]), "--hardware", hw, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["verdict"] == "full GPU"


def test_recommend_a_folder(tiny_ggufs, tmp_path, capsys):
    hw = _hardware_file(tmp_path)
    folder = tiny_ggufs["llama"].parent
    assert main(["recommend", str(folder), "--ctx", "2048", "--hardware", hw, "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert len(report["candidates"]) == 3
    assert {c["verdict"] for c in report["candidates"]} == {"CPU only"}
    assert report["best"]["format"] == "gguf" and report["format_preference"] == ["gguf"]
    assert main(["recommend", str(folder), "--hardware", hw]) == 0
    assert "Best GGUF:" in capsys.readouterr().out


def test_bad_input_is_a_sentence(tmp_path, capsys):
    broken = tmp_path / "broken.gguf"
    broken.write_bytes(b"GGUF\x03\x00\x00\x00")
    assert main(["inspect", str(broken)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("quantdesk: ") and "Traceback" not in err
    assert main(["fit", str(tmp_path / "nothing-here.gguf")]) == 1
    assert "No such model" in capsys.readouterr().err
    assert main(["fit", str(broken), "--gpu-layers", "many"]) == 1


def test_without_ctx_fit_plans_for_the_default_context_chosen_in_settings(tiny_ggufs, tmp_path, capsys):
    from app import settings

    hw = _hardware_file(tmp_path, vram=8 * GiB)
    assert main(["fit", str(tiny_ggufs["llama"]), "--hardware", hw, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_ctx"] == 4096  # the Settings' default when none was chosen
    settings.save(settings.Settings(default_n_ctx=16384))
    assert main(["fit", str(tiny_ggufs["llama"]), "--hardware", hw, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_ctx"] == 16384
    assert main(["fit", str(tiny_ggufs["llama"]), "--ctx", "2048", "--hardware", hw, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["n_ctx"] == 2048  # --ctx still wins


def test_fit_cpu_moe(tiny_ggufs, tmp_path, capsys):
    hw = _hardware_file(tmp_path, vram=8 * GiB)
    assert main(["fit", str(tiny_ggufs["moe"]), "--cpu-moe", "all", "--hardware", hw, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["verdict"] == "MoE split: experts of 2 of 2 layers in RAM" and data["cpu_moe"] == 2
    assert main(["fit", str(tiny_ggufs["moe"]), "--cpu-moe", "1", "--hardware", hw]) == 0
    out = capsys.readouterr().out
    assert "MoE split: experts of 1 of 2 layers in RAM" in out and "experts of 1 layer in RAM" in out


def test_inspect_names_the_sampling_the_model_recommends(tiny_sampling_model, capsys):
    assert main(["inspect", str(tiny_sampling_model)]) == 0
    assert "sampling           temperature 0.6, top_p 0.9, top_k 20, min_p 0, repeat_penalty 1.05" in \
        capsys.readouterr().out
    assert main(["inspect", str(tiny_sampling_model), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["recommended_sampling"]["temperature"] == 0.6
