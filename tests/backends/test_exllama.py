"""The ExLlama backends without a GPU: every probe outcome, the registry, the cache and sampler
mapping, the model folder's template and stop tokens, and the dynamic-generator job loop.

What cannot exist here is replaced, and only that: the NVIDIA driver answers from the recordings in
tests/hardware/recordings (see its README for where each value comes from) or from the Tesla T4
recording below; torch's version.py texts are the files real wheels install. Loading and generating
on a GPU is tests/gpu/exl_smoke.py's job.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from backends import _exllama_common as common
from backends import registry
from app.datatypes import Done, Message, SamplingSettings, Token
from backends.base import GenerationError
from backends.exllamav2 import ExLlamaV2Backend
from backends.exllamav3 import ExLlamaV3Backend
from tests.hardware.replay import RECORDINGS, RecordedNvml

# torch/version.py as installed by real wheels (written by torch's tools/generate_torch_version.py):
TORCH_CUDA = ("from typing import Optional\n\n__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', "
              "'rocm', 'xpu']\n__version__ = '2.11.0.dev20260107+cu130'\ndebug = False\ncuda: Optional[str] = '13.0'\n"
              "git_version = '4f0b239c7757d538e605e6431aa5bd05d78a54f9'\nhip: Optional[str] = None\n"
              "rocm: Optional[str] = None\nxpu: Optional[str] = None\n")
TORCH_CPU = ("from typing import Optional\n\n__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'xpu']\n"
             "__version__ = '2.9.1'\ndebug = False\ncuda: Optional[str] = None\n"
             "git_version = '5811a8d7da873dd699ff6687092c225caffcf1bb'\nhip: Optional[str] = None\n"
             "xpu: Optional[str] = None\n")
TORCH_ROCM = TORCH_CPU.replace("'2.9.1'", "'2.9.1+rocm6.4'").replace("hip: Optional[str] = None",
                                                                      "hip: Optional[str] = '6.4.43482-0f2d60242'")

# A Tesla T4 (Turing, compute capability 7.5) as NVML reports it: the name and capability NVIDIA
# publishes for the part, 15360 MiB as nvidia-smi shows on T4 instances, 256-bit GDDR6 at 5001 MHz.
TESLA_T4 = {"nvmlSystemGetDriverVersion": "550.54.15", "devices": [{
    "nvmlDeviceGetName": "Tesla T4", "nvmlDeviceGetCudaComputeCapability": [7, 5],
    "nvmlDeviceGetMemoryInfo": {"total": 16106127360, "free": 15642329088, "used": 463798272},
    "nvmlDeviceGetMemoryBusWidth": 256, "nvmlDeviceGetMaxClockInfo": {"NVML_CLOCK_MEM": 5001}}]}


def recorded_nvml(machine: str | None):
    """NVML as a recorded machine answered it; None: a machine with no NVIDIA driver."""
    data = json.loads((RECORDINGS / machine / "nvml.json").read_text()) if machine else None
    return RecordedNvml(data)


def sources(installed=("exllamav2", "exllamav3"), torch=TORCH_CUDA, nvml=None) -> common.ProbeSources:
    return common.ProbeSources(installed=lambda name: name in installed, torch_version_text=lambda: torch,
                               nvml=lambda: nvml if nvml is not None else recorded_nvml("rtx4090-desktop"))


# ------------------------------------------------------------------------------------------- probe


def test_torch_builds_are_read_from_their_version_files():
    assert common.parse_torch_version_file(TORCH_CUDA) == common.TorchBuild("2.11.0.dev20260107+cu130", "13.0", None)
    assert common.parse_torch_version_file(TORCH_CPU) == common.TorchBuild("2.9.1", None, None)
    assert common.parse_torch_version_file(TORCH_ROCM).hip == "6.4.43482-0f2d60242"
    assert common.parse_torch_version_file("cuda = '12.1'\n").cuda == "12.1"  # torch 2.0 wrote no annotation


@pytest.mark.parametrize("case,package,expected_reason,expected_hint", [
    (dict(installed=()), "exllamav3", "exllamav3 is not installed", "quantdesk[exl3]"),
    (dict(installed=("exllamav2",), torch=None), "exllamav2", "PyTorch is not installed", "download.pytorch.org"),
    (dict(torch=TORCH_CPU), "exllamav3", "PyTorch 2.9.1 is a CPU-only build, without CUDA", "download.pytorch.org/whl/cu"),
    (dict(torch=TORCH_ROCM), "exllamav2", "PyTorch 2.9.1+rocm6.4 is a ROCm build", "llama.cpp"),
    (dict(nvml=recorded_nvml(None)), "exllamav3", "no NVIDIA GPU: no NVIDIA driver answered (NVML: NVML Shared Library Not Found)",
     "NVIDIA GPU"),
    (dict(nvml=RecordedNvml({"nvmlSystemGetDriverVersion": "550.54.15", "devices": []})), "exllamav2",
     "the NVIDIA driver is loaded but reports no GPU", "CUDA_VISIBLE_DEVICES"),
])
def test_probe_says_precisely_why_it_cannot_run(case, package, expected_reason, expected_hint):
    min_cc = (8, 0) if package == "exllamav3" else None
    availability = common.probe_exllama(package, package.replace("exllamav", "exl"), min_cc, "Ampere",
                                        sources(**case))
    assert not availability.available
    assert availability.reason.startswith(expected_reason)
    assert expected_hint in availability.hint


def test_exl3_needs_ampere_but_exl2_runs_on_older_gpus(monkeypatch):
    monkeypatch.setattr(common, "SOURCES", sources(nvml=RecordedNvml(TESLA_T4)))
    too_old = ExLlamaV3Backend.probe()
    assert not too_old.available
    assert too_old.reason == ("the GPU is too old for exllamav3: it needs Ampere (RTX 30xx, A100) or newer "
                              "(compute capability 8.0+); GPU0 Tesla T4 is 7.5")
    assert "EXL2" in too_old.hint
    assert ExLlamaV2Backend.probe().available


@pytest.mark.parametrize("machine", ["rtx4090-desktop", "rtx3060-laptop-windows", "two-gpu-box"])
def test_probe_is_ok_on_recorded_ampere_and_newer_machines(monkeypatch, machine):
    monkeypatch.setattr(common, "SOURCES", sources(nvml=recorded_nvml(machine)))
    assert ExLlamaV3Backend.probe().available
    assert ExLlamaV2Backend.probe().available


def test_registry_reports_each_exllama_status(monkeypatch):
    monkeypatch.setattr(common, "SOURCES", sources(installed=("exllamav3",), nvml=recorded_nvml("two-gpu-box")))
    statuses = {s.name: s for s in registry.statuses()}
    assert statuses["exllamav3"].availability.available and statuses["exllamav3"].formats == ("exl3",)
    assert statuses["exllamav2"].availability.reason == "exllamav2 is not installed"
    assert statuses["exllamav2"].formats == ("exl2",)
    assert (registry.backend_for_format("exl2"), registry.backend_for_format("exl3")) == ("exllamav2", "exllamav3")


@pytest.fixture
def fake_site(tmp_path, monkeypatch):
    """A folder on sys.path holding packages named torch / exllamav3 that raise if imported: the probe
    may find them (find_spec) and read torch/version.py, never import them."""
    def add(package: str, files: dict[str, str] | None = None) -> None:
        folder = tmp_path / package
        folder.mkdir()
        (folder / "__init__.py").write_text(f"raise ImportError('the probe imported {package}')\n")
        for name, text in (files or {}).items():
            (folder / name).write_text(text)

    monkeypatch.syspath_prepend(str(tmp_path))
    return add


def test_real_probe_finds_packages_and_reads_torch_without_importing_them(fake_site, monkeypatch):
    """Everything real but NVML: find_spec, torch/version.py from disk, and this machine's missing driver."""
    fake_site("exllamav3")
    fake_site("torch", {"version.py": TORCH_CPU})
    availability = ExLlamaV3Backend.probe()
    assert availability.reason == "PyTorch 2.9.1 is a CPU-only build, without CUDA"
    (Path(sys.path[0]) / "torch" / "version.py").write_text(TORCH_CUDA)
    pynvml = pytest.importorskip("pynvml")
    try:  # this machine has no NVIDIA driver: the real pynvml says so
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("this machine has an NVIDIA driver")
    except pynvml.NVMLError:
        pass
    assert ExLlamaV3Backend.probe().reason.startswith("no NVIDIA GPU: no NVIDIA driver answered (NVML: ")
    assert "torch" not in sys.modules and "exllamav3" not in sys.modules


def test_probing_imports_neither_torch_nor_exllama():
    code = ("import sys\nfrom backends import registry\nregistry.status('exllamav2'); registry.status('exllamav3')\n"
            "print(sorted(m for m in ('torch', 'exllamav2', 'exllamav3') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         cwd=Path(__file__).resolve().parents[2])
    assert out.stdout.strip() == "[]"


# ---------------------------------------------------------------------------------- load settings


@pytest.mark.parametrize("name,bits", [("fp16", 16), ("f16", 16), ("q8", 8), ("q8_0", 8), ("q6", 6),
                                       ("Q4", 4), ("q4_0", 4)])
def test_cache_types_map_to_bits(name, bits):
    assert common.kv_cache_bits(name) == bits


def test_unknown_cache_type_is_refused():
    with pytest.raises(GenerationError, match="unknown cache type 'q5_1'") as err:
        common.kv_cache_bits("q5_1")
    assert err.value.kind == "settings" and "fp16, q8, q6 or q4" in err.value.hint


def test_context_is_padded_to_whole_cache_pages():
    assert [common.padded_context(n) for n in (16, 256, 257, 4096, 5000)] == [256, 256, 512, 4096, 5120]


def test_gpu_split_is_checked_against_the_devices():
    assert common.check_gpu_split(None, 2) is None and common.check_gpu_split([], 1) is None
    assert common.check_gpu_split([20, 10.5], 2) == [20.0, 10.5]
    assert common.check_gpu_split([0, 12], 2) == [0.0, 12.0]  # 0 leaves a GPU out
    for bad, devices, words in (([-1, 10], 2, "0 or more"), ([0, 0], 2, "more than 0"), ([8, 8, 8], 2, "CUDA sees 2")):
        with pytest.raises(GenerationError, match=words):
            common.check_gpu_split(bad, devices)


def test_sampler_plan_keeps_the_settings_and_turns_temperature_zero_into_argmax():
    plan = common.plan_sampler(SamplingSettings(temperature=0.7, top_p=0.9, top_k=40, min_p=0.05, repeat_penalty=1.1))
    assert plan == common.SamplerPlan(greedy=False, temperature=0.7, top_k=40, top_p=0.9, min_p=0.05,
                                      repetition_penalty=1.1, repetition_range=64)
    assert common.plan_sampler(SamplingSettings(temperature=0)).greedy
    assert common.plan_sampler(SamplingSettings(top_k=1)).greedy
    assert common.plan_sampler(SamplingSettings(top_k=0)).top_k == 0  # 0 is "off" in both libraries


def test_generation_limit_stays_inside_the_context():
    assert common.max_new_tokens(100, 4096, 512) == 513  # one past the shared loop's own cut
    assert common.max_new_tokens(4000, 4096, 512) == 96
    with pytest.raises(GenerationError, match="4096 tokens long but the context holds 4096") as err:
        common.max_new_tokens(4096, 4096, 10)
    assert err.value.kind == "context"


# ------------------------------------------------------------------------------- the model folder


@pytest.fixture
def exl_folder(tiny_models, tmp_path):
    """The tiny HF model's folder, marked as an EXL3 quant (its files are what both libraries read)."""
    folder = shutil.copytree(tiny_models.hf, tmp_path / "tiny-exl3")
    config = json.loads((folder / "config.json").read_text())
    config["quantization_config"] = {"quant_method": "exl3", "bits": 4.0, "head_bits": 6}
    (folder / "config.json").write_text(json.dumps(config))
    return folder


def test_folder_gives_template_tokens_and_stop_ids(exl_folder):
    folder = common.read_model_folder(exl_folder)
    assert (folder.n_layers, folder.quantization["bits"], folder.template_source) == (2, 4.0, "tokenizer_config.json")
    assert (folder.bos_token, folder.eos_token, folder.add_bos_token) == ("<|endoftext|>", "<|im_end|>", False)
    eos = json.loads((exl_folder / "config.json").read_text())["eos_token_id"]
    assert folder.stop_token_ids == [eos]
    prompt, add_bos = common.render_prompt(folder, [Message("user", "Hello")])
    assert prompt == "<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n" and not add_bos


def test_folder_template_sources_and_extra_stop_ids(exl_folder):
    (exl_folder / "generation_config.json").write_text(json.dumps({"eos_token_id": [7, 9]}))
    config = json.loads((exl_folder / "tokenizer_config.json").read_text())
    config["chat_template"] = [{"name": "tool_use", "template": "TOOLS"}, {"name": "default", "template": "{{ bos_token }}DEFAULT"}]
    config.update(add_bos_token=True, bos_token={"content": "<s>", "lstrip": False})
    (exl_folder / "tokenizer_config.json").write_text(json.dumps(config))
    folder = common.read_model_folder(exl_folder)
    assert folder.stop_token_ids[-2:] == [7, 9]
    assert common.render_prompt(folder, [Message("user", "x")]) == ("<s>DEFAULT", False)  # the template wrote BOS
    folder.template = "NO BOS"
    assert common.render_prompt(folder, [Message("user", "x")]) == ("NO BOS", True)
    (exl_folder / "chat_template.jinja").write_text("JINJA FILE")
    assert common.read_model_folder(exl_folder).template_source == "chat_template.jinja"
    del config["chat_template"]
    (exl_folder / "tokenizer_config.json").write_text(json.dumps(config))
    (exl_folder / "chat_template.jinja").unlink()
    assert common.read_model_folder(exl_folder).template_source == "fallback: ChatML"


def test_hostile_template_is_refused(exl_folder):
    folder = common.read_model_folder(exl_folder)
    folder.template = "{{ ''.__class__.__mro__[1].__subclasses__() }}"
    with pytest.raises(GenerationError, match="refused") as err:
        common.render_prompt(folder, [Message("user", "x")])
    assert err.value.kind == "template"


def test_unreadable_folder_is_a_load_error(tmp_path):
    with pytest.raises(GenerationError, match="has no readable config.json"):
        common.read_model_folder(tmp_path)
    (tmp_path / "config.json").write_text("{broken")
    with pytest.raises(GenerationError, match="config.json cannot be read"):
        common.read_model_folder(tmp_path)


@pytest.mark.parametrize("method,backend", [("exl2", "exllamav2"), ("exl3", "exllamav3")])
def test_exl_folders_are_detected_and_refused_with_the_probe_reason(exl_folder, monkeypatch, method, backend):
    from app.engine.client import EngineClient
    from app.errors import BackendUnavailable
    from app.models.detect import detect_model

    config = json.loads((exl_folder / "config.json").read_text())
    config["quantization_config"]["quant_method"] = method
    (exl_folder / "config.json").write_text(json.dumps(config))
    assert detect_model(exl_folder).format == method
    monkeypatch.setattr(common, "SOURCES", sources(torch=TORCH_CPU))
    client = EngineClient()
    with pytest.raises(BackendUnavailable, match=f"{backend} cannot run here: PyTorch 2.9.1 is a CPU-only build"):
        client.load(exl_folder)
    assert client.pid is None  # refused before any engine process was started


# ------------------------------------------------------------------------------------- the job loop


class ScriptedGenerator:
    """Answers ``iterate()`` with result dicts shaped as exllamav3's Generator.iterate docstring and
    exllamav2's dynamic.py describe them: "started", "prefill", then one "streaming" per token."""

    def __init__(self, script: list[dict]) -> None:
        self.script = script
        self.jobs: list = []
        self.cancelled: list = []

    def enqueue(self, job) -> int:
        self.jobs.append(job)
        return len(self.jobs)

    def num_remaining_jobs(self) -> int:
        return len(self.jobs)

    def iterate(self) -> list[dict]:
        job = self.jobs[0]
        step = self.script.pop(0)
        if step.get("eos"):
            self.jobs.remove(job)
        return [{"job": job, "serial": 0, **step}, {"job": object(), "stage": "streaming", "text": "OTHER JOB"}]

    def cancel(self, job) -> None:
        self.cancelled.append(job)
        self.jobs.remove(job)


def tokens(*texts: str) -> list[dict]:
    return [{"stage": "streaming", "eos": False, **({"text": t} if t is not None else {})} for t in texts]


START = [{"stage": "started", "eos": False}, {"stage": "prefill", "eos": False, "curr_progress": 5, "max_progress": 9}]


def test_one_string_per_token_and_the_stop_token_adds_nothing():
    script = START + tokens("Hel", None, "lo é") + [{"stage": "streaming", "eos": True, "eos_reason": "stop_token",
                                                     "held": {"text": ""}}]
    generator = ScriptedGenerator(script)
    assert list(common.stream_job(generator, "job")) == ["Hel", "", "lo é"]  # the held token counts, text comes later
    assert generator.cancelled == [] and generator.num_remaining_jobs() == 0


def test_the_librarys_length_cut_keeps_its_last_token():
    script = tokens("a") + [{"stage": "streaming", "eos": True, "eos_reason": "max_new_tokens", "text": "b"}]
    assert list(common.stream_job(ScriptedGenerator(script), "job")) == ["a", "b"]


def test_closing_the_stream_early_cancels_the_job():
    generator = ScriptedGenerator(START + tokens("a", "b", "c", "d"))
    stream = common.stream_job(generator, "job")
    assert [next(stream), next(stream)] == ["a", "b"]
    stream.close()
    assert generator.cancelled == ["job"] and generator.num_remaining_jobs() == 0


class _Ids:
    def __init__(self, n: int) -> None:
        self.shape = (1, n)


class ScriptedExLlama(common.ExLlamaBackendBase):
    """The shared backend half over a scripted generator: template, context, stats and cancel."""

    name = "scripted"
    formats = ("exl3",)

    def __init__(self, folder: common.ModelFolder, script: list[dict], n_ctx: int = 256) -> None:
        super().__init__()
        self._folder, self._n_ctx = folder, n_ctx
        self._generator = ScriptedGenerator(script)
        self.jobs: list[tuple[int, int]] = []

    @classmethod
    def probe(cls):
        raise NotImplementedError

    def load(self, model_path, settings, on_progress=None):
        raise NotImplementedError

    def _encode(self, prompt, add_bos):
        return _Ids(len(prompt.split()) + add_bos)

    def _make_job(self, input_ids, limit, sampling):
        self.jobs.append((input_ids.shape[-1], limit))
        return f"job{len(self.jobs)}"

    def peak_memory_bytes(self) -> int:
        return 0


def test_shared_loop_over_the_job_gives_stats_stop_strings_and_cancel(exl_folder):
    folder = common.read_model_folder(exl_folder)
    backend = ScriptedExLlama(folder, tokens("Hello", " wor", "ld", "!", " STOP", "never"))
    events = list(backend.generate("r1", [Message("user", "hi there")], SamplingSettings(stop=("STOP",)),
                                   threading.Event()))
    done = events[-1]
    assert isinstance(done, Done) and done.text == "Hello world! " and done.stats.stop_reason == "stop"
    assert done.stats.prompt_tokens == 4 and backend.jobs == [(4, 252)]  # capped by the 256-token cache
    assert sum(e.count for e in events if isinstance(e, Token)) == 5
    assert backend._generator.cancelled == ["job1"]  # the stop string ended it: the job was dropped

    cancelled = threading.Event()
    backend = ScriptedExLlama(folder, tokens("a", "b", "c"))
    stream = backend.generate("r2", [Message("user", "x")], SamplingSettings(), cancelled)
    next(stream)
    cancelled.set()
    done = list(stream)[-1]
    assert done.stats.stop_reason == "cancelled" and backend._generator.cancelled == ["job1"]

    backend = ScriptedExLlama(folder, [], n_ctx=4)
    with pytest.raises(GenerationError, match="the context holds 4"):
        list(backend.generate("r3", [Message("user", "a long message")], SamplingSettings(), threading.Event()))


def test_unloading_twice_is_harmless(exl_folder):
    backend = ScriptedExLlama(common.read_model_folder(exl_folder), [])
    backend.unload()
    backend.unload()
    with pytest.raises(GenerationError, match="no model is loaded"):
        list(backend.generate("r", [Message("user", "x")], SamplingSettings(), threading.Event()))
