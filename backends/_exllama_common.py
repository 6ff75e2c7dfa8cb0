"""What the ExLlamaV2 (EXL2) and ExLlamaV3 (EXL3) backends share: the probe, cache and sampler
mapping, the model folder's chat template and stop tokens, the dynamic-generator job loop, and the
CUDA memory figures.

Nothing here imports torch or exllama at module level: ``probe`` runs in the GUI process, which must
never load an inference library. The probe therefore reads torch's generated ``torch/version.py`` as
text (found with ``find_spec``) and asks the NVIDIA driver through NVML (nvidia-ml-py, ctypes only).

Both libraries' dynamic generators have the same shape (exllamav2/generator/dynamic.py,
exllamav3/generator/generator.py + job.py): enqueue a job, call ``iterate()`` until the job's
"streaming" result says ``eos``, ``cancel(job)`` to drop it and free its cache pages.
"""

from __future__ import annotations

import ast
import gc
import importlib.util
import json
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from backends.chat_format import formats
from backends.chat_format import template as chat_template
from backends.chat_format.formats import Prepared
from app.datatypes import Loaded, Message, Prompt, SamplingSettings
from backends.base import Availability, Backend, GenerationError, peak_rss_bytes

# Both libraries page their caches in blocks of 256 tokens and want the cache size to be a whole
# number of pages (exllamav2/generator/dynamic.py: "cache.max_seq_len must be multiple of 256";
# exllamav3/cache/quant.py, fp16.py: "max_num_tokens must be a multiple of PAGE_SIZE").
PAGE_SIZE = 256

# Cache element width by LoadSettings.kv_cache_type. ExLlama's own names first; llama.cpp's names are
# accepted too, so a setting carried over from a GGUF model means the nearest thing here.
KV_CACHE_BITS = {"fp16": 16, "f16": 16, "q8": 8, "q8_0": 8, "q6": 6, "q4": 4, "q4_0": 4}

# llama.cpp's default repeat_last_n: the repetition penalty looks at the same window on every backend.
REPETITION_RANGE = 64

CUDA_TORCH_HINT = ("install a CUDA build of PyTorch, e.g. pip install torch --index-url "
                   "https://download.pytorch.org/whl/cu128")


def kv_cache_bits(kv_cache_type: str) -> int:
    try:
        return KV_CACHE_BITS[kv_cache_type.lower()]
    except KeyError:
        raise GenerationError("settings", f"unknown cache type {kv_cache_type!r} for ExLlama",
                              "use fp16, q8, q6 or q4") from None


def padded_context(n_ctx: int) -> int:
    """The cache size the libraries accept: n_ctx rounded up to whole 256-token pages."""
    return -(-n_ctx // PAGE_SIZE) * PAGE_SIZE


# ------------------------------------------------------------------------------------------- probe


@dataclass(frozen=True)
class TorchBuild:
    version: str
    cuda: str | None
    hip: str | None


def parse_torch_version_file(text: str) -> TorchBuild:
    """Read torch's generated version.py: ``__version__ = '2.9.1+cu128'`` and ``cuda: Optional[str] = '12.8'``
    (None in CPU-only wheels; ROCm wheels set ``hip`` instead). Written by torch's
    tools/generate_torch_version.py."""
    values: dict[str, Any] = {}
    for line in text.splitlines():
        match = re.match(r"^(\w+)\s*(?::[^=]+)?=\s*(.+)$", line.strip())
        if match:
            try:
                values[match[1]] = ast.literal_eval(match[2].strip())
            except (ValueError, SyntaxError):
                continue
    return TorchBuild(str(values.get("__version__", "?")), values.get("cuda") or None, values.get("hip") or None)


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def _torch_version_text() -> str | None:
    """torch/version.py's text, or None when torch is not installed; torch itself is not imported."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    for location in spec.submodule_search_locations or ():
        try:
            with open(os.path.join(location, "version.py"), encoding="utf-8") as f:
                return f.read()
        except OSError:
            continue
    return ""  # torch is there but its version file is not: a broken or unusual install


def _nvml() -> Any:
    import pynvml  # nvidia-ml-py: ctypes bindings, loads libnvidia-ml only in nvmlInit

    return pynvml


@dataclass
class ProbeSources:
    """Where the probe reads the machine from; tests replace these with recorded answers."""

    installed: Callable[[str], bool] = _installed
    torch_version_text: Callable[[], str | None] = _torch_version_text
    nvml: Callable[[], Any] = _nvml


SOURCES = ProbeSources()


@dataclass(frozen=True)
class NvidiaGpu:
    index: int
    name: str
    compute_capability: tuple[int, int] | None


def nvidia_gpus(nvml: Any) -> list[NvidiaGpu]:
    """The GPUs the NVIDIA driver reports; raises RuntimeError with the reason when it does not answer."""
    try:
        nvml.nvmlInit()
    except Exception as exc:  # NVMLError_LibraryNotFound / DriverNotLoaded / NoPermission ...
        raise RuntimeError(f"no NVIDIA driver answered (NVML: {exc})") from None
    try:
        gpus = []
        for index in range(nvml.nvmlDeviceGetCount()):
            handle = nvml.nvmlDeviceGetHandleByIndex(index)
            name = nvml.nvmlDeviceGetName(handle)
            try:
                major, minor = nvml.nvmlDeviceGetCudaComputeCapability(handle)
                capability: tuple[int, int] | None = (int(major), int(minor))
            except Exception:  # very old drivers cannot say; the library will find out at load
                capability = None
            gpus.append(NvidiaGpu(index, name.decode() if isinstance(name, bytes) else str(name), capability))
        return gpus
    finally:
        try:
            nvml.nvmlShutdown()
        except Exception:  # best effort: the answers are already read
            pass


def probe_exllama(package: str, extra: str, min_compute_capability: tuple[int, int] | None = None,
                  generation: str = "", sources: ProbeSources | None = None) -> Availability:
    """Can ``package`` (exllamav2 / exllamav3) run here? Each "no" names the missing piece and the fix."""
    src = sources or SOURCES
    if not src.installed(package):
        return Availability.no(f"{package} is not installed",
                               f"pip install 'quantdesk[{extra}]' on a machine with an NVIDIA GPU and CUDA")
    text = src.torch_version_text()
    if text is None:
        return Availability.no(f"PyTorch is not installed ({package} runs on it)", CUDA_TORCH_HINT)
    torch = parse_torch_version_file(text)
    if torch.cuda is None:
        if torch.hip:
            return Availability.no(f"PyTorch {torch.version} is a ROCm build; QuantDesk runs {package} on "
                                   "NVIDIA CUDA only", "use GGUF models with llama.cpp on AMD GPUs")
        return Availability.no(f"PyTorch {torch.version} is a CPU-only build, without CUDA", CUDA_TORCH_HINT)
    try:
        nvml = src.nvml()
    except ImportError as exc:
        return Availability.no(f"cannot ask the NVIDIA driver: nvidia-ml-py is missing ({exc})",
                               "pip install nvidia-ml-py")
    try:
        gpus = nvidia_gpus(nvml)
    except RuntimeError as exc:
        return Availability.no(f"no NVIDIA GPU: {exc}",
                               f"{package} needs an NVIDIA GPU with its driver installed; use GGUF models otherwise")
    if not gpus:
        return Availability.no("the NVIDIA driver is loaded but reports no GPU",
                               "check nvidia-smi and CUDA_VISIBLE_DEVICES")
    if min_compute_capability:
        able = [g for g in gpus if g.compute_capability is None or g.compute_capability >= min_compute_capability]
        if not able:
            want = ".".join(map(str, min_compute_capability))
            found = ", ".join(f"GPU{g.index} {g.name} is {'.'.join(map(str, g.compute_capability or ()))}"
                              for g in gpus)
            return Availability.no(f"the GPU is too old for {package}: it needs {generation} or newer "
                                   f"(compute capability {want}+); {found}",
                                   "use EXL2 (exllamav2) or GGUF models on this GPU")
    return Availability.ok()


# ------------------------------------------------------------------------------ the model folder


@dataclass
class ModelFolder:
    """What QuantDesk reads from an EXL2/EXL3 folder itself: the chat template and the stop tokens
    (the libraries' tokenizers leave templating to transformers, which the engine host does not load)."""

    path: Path
    config: dict[str, Any]
    template: str
    template_source: str
    bos_token: str = ""
    eos_token: str = ""
    add_bos_token: bool = False
    stop_token_ids: list[int] = field(default_factory=list)

    @property
    def n_layers(self) -> int:
        text = self.config.get("text_config") or {}
        return int(self.config.get("num_hidden_layers") or text.get("num_hidden_layers") or 0)

    @property
    def quantization(self) -> dict[str, Any]:
        quant = self.config.get("quantization_config")
        return quant if isinstance(quant, dict) else {}


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise GenerationError("load", f"{path.parent.name}/{path.name} cannot be read: {exc}") from None
    return data if isinstance(data, dict) else {}


def _token_text(value: Any) -> str:
    """tokenizer_config.json writes special tokens as a string or as an AddedToken dict with "content"."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else ""


def _token_ids(value: Any) -> list[int]:
    if isinstance(value, int):
        return [value]
    if isinstance(value, list):
        return [v for v in value if isinstance(v, int)]
    return []


def _pick_template(tokenizer_config: dict[str, Any], folder: Path) -> tuple[str, str]:
    jinja = folder / "chat_template.jinja"  # transformers >= 4.43 saves the template beside the config
    if jinja.is_file():
        return jinja.read_text(encoding="utf-8"), "chat_template.jinja"
    template = tokenizer_config.get("chat_template")
    if isinstance(template, list):  # named templates: [{"name": "default", "template": ...}, {"name": "tool_use"...}]
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default") or next(iter(named.values()), None)
    if isinstance(template, str) and template:
        return template, "tokenizer_config.json"
    return chat_template.FALLBACK_TEMPLATE, "fallback: ChatML"


def read_model_folder(path: str | Path) -> ModelFolder:
    folder = Path(path)
    config = _read_json(folder / "config.json")
    if not config:
        raise GenerationError("load", f"{folder.name} has no readable config.json")
    tokenizer_config = _read_json(folder / "tokenizer_config.json")
    generation_config = _read_json(folder / "generation_config.json")
    template, source = _pick_template(tokenizer_config, folder)
    stops: list[int] = []
    for ids in (_token_ids(config.get("eos_token_id")), _token_ids(generation_config.get("eos_token_id"))):
        stops += [i for i in ids if i not in stops]
    return ModelFolder(folder, config, template, source, bos_token=_token_text(tokenizer_config.get("bos_token")),
                       eos_token=_token_text(tokenizer_config.get("eos_token")),
                       add_bos_token=bool(tokenizer_config.get("add_bos_token", False)), stop_token_ids=stops)


def render_prompt(folder: ModelFolder, messages: Prompt, prepared: Prepared | None = None) -> tuple[str, bool]:
    """The prompt text and whether the tokenizer should prepend BOS: only when the model's tokenizer
    adds one (``add_bos_token``, as Hugging Face's would) and the template did not write it already. A conversation
    the chat format prepared (Backend.prepare) is its prompt; else the folder's template renders it."""
    if isinstance(messages, str):  # a raw prompt: no template
        return messages, folder.add_bos_token and not (folder.bos_token and messages.startswith(folder.bos_token))
    try:
        prompt = prepared.prompt if prepared is not None else chat_template.render(
            folder.template, [m.template_dict() for m in messages], bos_token=folder.bos_token,
            eos_token=folder.eos_token)
    except chat_template.TemplateError as exc:
        raise GenerationError("template", str(exc), "the model's chat template cannot be used") from None
    add_bos = folder.add_bos_token and not (folder.bos_token and prompt.startswith(folder.bos_token))
    return prompt, add_bos


# ----------------------------------------------------------------------------------------- sampling


@dataclass(frozen=True)
class SamplerPlan:
    """SamplingSettings in the terms both libraries' samplers take; "off" values are their no-ops
    (top_k 0, top_p 1.0, min_p 0, penalty 1.0)."""

    greedy: bool
    temperature: float
    top_k: int
    top_p: float
    min_p: float
    repetition_penalty: float
    repetition_range: int


def plan_sampler(sampling: SamplingSettings) -> SamplerPlan:
    # Temperature 0 means "always the most likely token": both libraries have an argmax path for it,
    # and exllamav2 would otherwise divide the logits by zero.
    greedy = sampling.temperature == 0 or sampling.top_k == 1
    return SamplerPlan(greedy=greedy, temperature=sampling.temperature, top_k=max(sampling.top_k, 0),
                       top_p=sampling.top_p, min_p=sampling.min_p, repetition_penalty=sampling.repeat_penalty,
                       repetition_range=REPETITION_RANGE)


# ------------------------------------------------------------------------------------ the job loop


def max_new_tokens(prompt_tokens: int, n_ctx: int, max_tokens: int) -> int:
    """How many tokens to let the library generate: one more than the shared loop needs, so its own
    length cut never comes first, but never past the end of the cache."""
    if prompt_tokens >= n_ctx:
        raise GenerationError("context", f"the conversation is {prompt_tokens} tokens long but the context "
                                         f"holds {n_ctx}", "start a new chat or load with a larger context")
    return min(max_tokens + 1, n_ctx - prompt_tokens)


def stream_job(generator: Any, job: Any) -> Iterator[str]:
    """Run one job through a dynamic generator, yielding the text of each sampled token.

    Without a draft model every "streaming" result stands for one sampled token; its "text" is absent
    while the library holds it back (an incomplete UTF-8 character), and arrives with a later token.
    A stop token ends the job with an eos result that carries no text of its own. When the caller
    closes this generator early (max tokens, stop string, cancel), the job is cancelled so its cache
    pages are freed and the generator is empty for the next request.
    """
    generator.enqueue(job)
    finished = False
    try:
        while not finished:
            if not generator.num_remaining_jobs():
                return  # the generator dropped the job without an eos result
            for result in generator.iterate():
                if result.get("job") is not job or result.get("stage") != "streaming":
                    continue  # "started" / "prefill" progress
                if result.get("eos"):
                    finished = True
                    if result.get("eos_reason") != "stop_token":  # max_new_tokens: the last token is real
                        yield result.get("text", "")
                    return
                yield result.get("text", "")
    finally:
        if not finished:
            generator.cancel(job)


# ------------------------------------------------------------------------------------ GPU settings


def check_gpu_split(split: Sequence[float] | None, device_count: int) -> list[float] | None:
    """LoadSettings.gpu_split as the libraries want it (GiB per CUDA device), or None for automatic."""
    if not split:
        return None
    values = [float(v) for v in split]
    if any(v < 0 for v in values) or not any(v > 0 for v in values):
        raise GenerationError("settings",
                              f"GPU split {values} must give each GPU 0 or more GiB, and one GPU more than 0",
                              "leave it empty to split automatically")
    if len(values) > device_count:
        raise GenerationError("settings", f"GPU split names {len(values)} GPUs but CUDA sees {device_count}",
                              "give one value per GPU, or leave it empty to split automatically")
    return values


def cuda_memory(torch: Any) -> dict[str, int]:
    """Bytes this process holds on each GPU (what torch's caching allocator reserved), with the RSS."""
    memory = {"cpu": peak_rss_bytes()}
    for index in range(torch.cuda.device_count()):
        reserved = int(torch.cuda.memory_reserved(index))
        if reserved:
            memory[f"gpu{index}"] = reserved
    return memory


def cuda_allocated(torch: Any) -> dict[str, int]:
    return {f"gpu{i}": int(torch.cuda.memory_allocated(i)) for i in range(torch.cuda.device_count())}


def cuda_peak_bytes(torch: Any) -> int:
    """Peak GPU memory over all devices; the figure users compare against their VRAM."""
    return sum(int(torch.cuda.max_memory_reserved(i)) for i in range(torch.cuda.device_count()))


def release_cuda_memory() -> None:
    """Return freed tensors' memory to the driver, so the VRAM shows as free in nvidia-smi."""
    gc.collect()
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def progress_callback(on_progress: Callable[[float], None] | None) -> Callable[[int, int], None] | None:
    """Both loaders call back with (modules loaded, modules in all)."""
    if on_progress is None:
        return None

    def report(done: int, total: int) -> None:
        on_progress(min(done / total, 1.0) if total else 0.0)

    return report


# ------------------------------------------------------------------------------- the shared backend


class ExLlamaBackendBase(Backend):
    """Loading differs between the two libraries; generating, memory figures and unloading do not.

    A subclass's ``load`` sets ``_folder``, ``_n_ctx``, ``_model``, ``_cache``, ``_tokenizer``,
    ``_generator`` and ``_stop_token_ids``, and supplies ``_encode`` and ``_make_job``.
    """

    formats: ClassVar[tuple[str, ...]]

    def __init__(self) -> None:
        self._folder: ModelFolder | None = None
        self._n_ctx = 0
        # The engine library's objects (untyped: exllamav2 / exllamav3 ship no type information).
        self._model: Any = None
        self._cache: Any = None
        self._tokenizer: Any = None
        self._generator: Any = None
        self._stop_token_ids: list[int] = []

    def _encode(self, prompt: str, add_bos: bool) -> Any:
        """The prompt's token ids as a (1, n) CPU tensor."""
        raise NotImplementedError

    def _make_job(self, input_ids: Any, limit: int, sampling: SamplingSettings) -> Any:
        raise NotImplementedError

    def _count_prompt(self, messages: Prompt) -> int:
        if self._generator is None or self._folder is None:
            raise GenerationError("state", "no model is loaded")
        prompt, add_bos = render_prompt(self._folder, messages, self.reply.prepared)
        return int(self._encode(prompt, add_bos).shape[-1])

    def _stream(self, messages: Prompt, sampling: SamplingSettings) -> Iterator[str]:
        if self._generator is None or self._folder is None:
            raise GenerationError("state", "no model is loaded")
        prompt, add_bos = render_prompt(self._folder, messages, self.reply.prepared)
        # Special tokens written by the template (<|im_start|> ...) must become their ids, not text.
        input_ids = self._encode(prompt, add_bos)
        self.reply.prompt_tokens = int(input_ids.shape[-1])
        limit = max_new_tokens(self.reply.prompt_tokens, self._n_ctx, sampling.max_tokens)
        self.mark_prefill_start()
        yield from stream_job(self._generator, self._make_job(input_ids, limit, sampling))

    def _adopt(self, folder: ModelFolder, library_stop_ids: Sequence[int],
               on_progress: Callable[[float], None] | None) -> None:
        """Finish a load: remember the folder and stop tokens, and refuse a broken or hostile chat
        template now rather than at the first message."""
        try:
            render_prompt(folder, [Message("user", "hi")])
        except GenerationError:
            self.unload()
            raise
        self._folder = folder
        self.chat_template = formats.Template.of(folder.template, folder.bos_token, folder.eos_token)
        self.tool_format = formats.tools_name(folder.template)
        self._stop_token_ids = sorted(set(folder.stop_token_ids) | {int(i) for i in library_stop_ids if i is not None})
        if on_progress:
            on_progress(1.0)

    def _loaded(self, model_path: str, t0: float, details: dict[str, Any]) -> Loaded:
        import torch

        n_layers = self._folder.n_layers if self._folder else 0
        details = {"chat_template": self._folder.template_source if self._folder else "",
                   "allocated_bytes": cuda_allocated(torch), **details}
        return Loaded(backend=self.name, model_path=model_path, n_ctx=self._n_ctx, n_layers=n_layers,
                      gpu_layers=n_layers, gpu_offload_supported=True, memory_bytes=self.memory_in_use(),
                      load_ms=(time.perf_counter() - t0) * 1000, details=details)

    def memory_in_use(self) -> dict[str, int]:
        import torch

        return cuda_memory(torch)

    def peak_memory_bytes(self) -> int:
        import torch

        return cuda_peak_bytes(torch)

    def _unload_model(self, model: Any) -> None:
        model.unload()

    def unload(self) -> None:
        """Drop the generator, cache and model (the model's unload frees its weights and, in
        exllamav3, the attached cache's tensors), then hand the memory back to the driver."""
        model = self._model
        self._generator = self._cache = self._tokenizer = self._model = None
        self._folder = None
        if model is not None:
            self._unload_model(model)
            del model
            release_cuda_memory()
