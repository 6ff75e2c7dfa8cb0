"""`quantdesk recommend` and `quantdesk fit` given the id of an EXL2/EXL3 repo on the Hub stand-in: each
bit-rate branch is a candidate sized from its own config.json and safetensors headers."""

from __future__ import annotations

import json

from app.cli import main
from app.hardware.profile import BackendSupport, CpuInfo, GpuInfo, HardwareProfile
from app.models.metadata import parse_safetensors_header
from tests.fixtures.hub_server import LLAMA_3_8B, exl_branch_files, exl_safetensors

GiB = 1 << 30
REPO = "turbo/Llama-3-8B-exl2"


def _rtx(tmp_path, vram: int) -> str:
    """An NVIDIA card on which both ExLlama backends report themselves usable."""
    hw = HardwareProfile(os="linux", arch="x86_64", cpu=CpuInfo(flags=["avx2"]), ram_total_bytes=32 * GiB,
                         ram_available_bytes=32 * GiB,
                         gpus=[GpuInfo(index=0, vendor="nvidia", name="RTX", vram_total_bytes=vram,
                                       vram_free_bytes=vram, compute_capability="8.6", bandwidth_gbps=450.0)],
                         backends=[BackendSupport("exllamav2", True), BackendSupport("exllamav3", True),
                                   BackendSupport("llama.cpp", True)])
    path = tmp_path / "hw.json"
    path.write_text(hw.to_json())
    return str(path)


def _weights(fmt: str, bpw: float) -> int:
    return sum(t.n_bytes for t in parse_safetensors_header(exl_safetensors(fmt, bpw, LLAMA_3_8B, with_data=False)))


def test_recommend_sizes_each_branch_and_picks_the_exl_quant_that_fits_in_vram(hub_env, tmp_path, capsys):
    # Llama-3-8B's shapes with the headers only: 4.0bpw needs about 7 GiB at 8k tokens, 6.0bpw about 8.7 GiB.
    hub_env.add_exl_repo(REPO, "exl2", {"4.0bpw": 4.0, "6.0bpw": 6.0}, shape=LLAMA_3_8B, tags=["exl2"],
                         with_data=False)
    assert main(["recommend", REPO, "--hardware", _rtx(tmp_path, 8 * GiB), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    by_label = {c["label"]: c for c in report["candidates"]}
    low, high = by_label[f"{REPO}@4.0bpw"], by_label[f"{REPO}@6.0bpw"]
    assert (low["format"], low["quant"], low["file_bytes"]) == ("exl2", "4.0bpw", _weights("exl2", 4.0))
    assert (high["format"], high["quant"], high["file_bytes"]) == ("exl2", "6.0bpw", _weights("exl2", 6.0))
    assert low["verdict"] == "full GPU" and high["verdict"] == "does not fit"
    assert report["best"]["label"] == f"{REPO}@4.0bpw" and report["best"]["format"] == "exl2"
    assert report["format_preference"][0] in ("exl3", "exl2")  # EXL first: the model fits whole in VRAM

    assert main(["recommend", REPO, "--hardware", _rtx(tmp_path, 24 * GiB), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["best"]["label"] == f"{REPO}@6.0bpw"  # room for the better one


def test_fit_one_branch_by_name(hub_env, tmp_path, capsys):
    hub_env.add_exl_repo(REPO, "exl2", {"4.0bpw": 4.0, "6.0bpw": 6.0}, shape=LLAMA_3_8B, tags=["exl2"],
                         with_data=False)
    assert main(["fit", f"{REPO}@6.0bpw", "--hardware", _rtx(tmp_path, 8 * GiB), "--json"]) == 0
    fit = json.loads(capsys.readouterr().out)
    assert (fit["format"], fit["quant"], fit["verdict"]) == ("exl2", "6.0bpw", "does not fit")
    assert fit["file_bytes"] == _weights("exl2", 6.0)


def test_untagged_exl3_and_an_exl2_without_quantization_config(hub_env, tmp_path, capsys):
    hub_env.add_exl_repo("acme/Tiny-exl3", "exl3", {"3.0bpw": 3.0, "5.0bpw": 5.0})
    hub_env.add_exl_repo("acme/Tiny-old", "exl2", {"4.0bpw": 4.0}, quantization_config=False)
    assert main(["recommend", "acme/Tiny-exl3", "acme/Tiny-old", "--hardware", _rtx(tmp_path, 24 * GiB),
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    found = {c["label"]: (c["format"], c["quant"], c["verdict"]) for c in report["candidates"]}
    assert found == {"acme/Tiny-exl3@3.0bpw": ("exl3", "3.0bpw", "full GPU"),
                     "acme/Tiny-exl3@5.0bpw": ("exl3", "5.0bpw", "full GPU"),
                     "acme/Tiny-old@4.0bpw": ("exl2", "4.0bpw", "full GPU")}  # the branch name tells the bits
    assert report["best"]["label"] == "acme/Tiny-exl3@5.0bpw"


def test_recommend_takes_bare_number_branches_of_exl_repos(hub_env, tmp_path, capsys):
    # bartowski names the bit-rate branches of his EXL2 repos 4_25, 6_5, 8_0; the repo name says EXL2
    hub_env.add_exl_repo("bartowski/Llama-3-8B-exl2", "exl2", {"4_25": 4.25, "6_5": 6.5, "8_0": 8.0},
                         shape=LLAMA_3_8B, with_data=False)
    hub_env.add_exl_repo("acme/Llama-tagged", "exl3", {"4_0": 4.0}, shape=LLAMA_3_8B, with_data=False, tags=["exl3"])
    assert main(["recommend", "bartowski/Llama-3-8B-exl2", "acme/Llama-tagged", "--hardware", _rtx(tmp_path, 8 * GiB),
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    found = {c["label"]: (c["format"], c["quant"], c["file_bytes"], c["verdict"]) for c in report["candidates"]}
    assert found == {
        "bartowski/Llama-3-8B-exl2@4_25": ("exl2", "4.25bpw", _weights("exl2", 4.25), "full GPU"),
        "bartowski/Llama-3-8B-exl2@6_5": ("exl2", "6.5bpw", _weights("exl2", 6.5), "does not fit"),
        "bartowski/Llama-3-8B-exl2@8_0": ("exl2", "8.0bpw", _weights("exl2", 8.0), "does not fit"),
        "acme/Llama-tagged@4_0": ("exl3", "4.0bpw", _weights("exl3", 4.0), "full GPU")}
    assert report["best"]["label"] in ("bartowski/Llama-3-8B-exl2@4_25", "acme/Llama-tagged@4_0")


def test_a_bare_number_branch_of_a_plain_repo_is_not_a_quant(hub_env, tmp_path, capsys):
    """Not known as EXL by tags, name or measurement.json: "1_0" is a quant only if its own config says EXL."""
    plain = exl_branch_files("exl2", 4.0, quantization_config=False)  # an fp16-style config, no quantization
    hub_env.add_repo("acme/Tiny", plain)
    hub_env.add_repo("acme/Tiny", plain, revision="1_0")
    hub_env.add_repo("acme/Tiny", exl_branch_files("exl2", 6.5), revision="6_5")  # its config says exl2
    assert main(["recommend", "acme/Tiny", "--hardware", _rtx(tmp_path, 24 * GiB), "--json"]) == 0
    labels = [c["label"] for c in json.loads(capsys.readouterr().out)["candidates"]]
    assert sorted(labels) == ["acme/Tiny", "acme/Tiny@6_5"]
