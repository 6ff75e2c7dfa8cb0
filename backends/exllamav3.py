"""ExLlamaV3: EXL3 models on NVIDIA GPUs of the Ampere generation or newer (compute capability 8.0+).

exllamav3 and torch are imported inside ``load``; ``probe`` answers without them. Written against
turboderp-org/exllamav3 1.4 (exllamav3/model/model.py load_gen, exllamav3/cache/cache.py,
exllamav3/generator/generator.py and job.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from backends._exllama_common import (
    ExLlamaBackendBase,
    check_gpu_split,
    kv_cache_bits,
    padded_context,
    plan_sampler,
    probe_exllama,
    progress_callback,
    read_model_folder,
)
from app.datatypes import LoadSettings, Loaded, SamplingSettings
from backends.base import Availability, GenerationError

AMPERE = (8, 0)


class ExLlamaV3Backend(ExLlamaBackendBase):
    name = "exllamav3"
    formats = ("exl3",)

    @classmethod
    def probe(cls) -> Availability:
        return probe_exllama("exllamav3", "exl3", AMPERE, "Ampere (RTX 30xx, A100)")

    def load(self, model_path: str, settings: LoadSettings,
             on_progress: Callable[[float], None] | None = None) -> Loaded:
        settings.validate()
        bits = kv_cache_bits(settings.kv_cache_type)
        folder = read_model_folder(model_path)
        import torch
        from exllamav3 import Cache, CacheLayer_fp16, CacheLayer_quant, Config, Generator, Model, Tokenizer

        split = check_gpu_split(settings.gpu_split, torch.cuda.device_count())
        t0 = time.perf_counter()
        self._n_ctx = padded_context(settings.n_ctx)
        try:
            config = Config.from_directory(str(folder.path))
            self._model = Model.from_config(config)
            # The cache attaches itself to the model: model.load allocates its tensors on the devices
            # that hold each attention layer, and model.unload frees them (exllamav3/cache/cache.py).
            if bits == 16:
                self._cache = Cache(self._model, max_num_tokens=self._n_ctx, layer_type=CacheLayer_fp16)
            else:
                self._cache = Cache(self._model, max_num_tokens=self._n_ctx, layer_type=CacheLayer_quant,
                                    k_bits=bits, v_bits=bits)
            # use_per_device: GiB per device, 0 leaves a device out; None: autosplit with the library's
            # default reserve of 0.5 GiB free on every device (model.py load_gen).
            self._model.load(use_per_device=split, callback=progress_callback(on_progress))
            self._tokenizer = Tokenizer.from_config(config)
            self._generator = Generator(model=self._model, cache=self._cache, tokenizer=self._tokenizer)
        except torch.cuda.OutOfMemoryError:
            self.unload()
            raise GenerationError("memory", f"{folder.path.name} does not fit in GPU memory at {self._n_ctx} tokens",
                                  "try a smaller bpw, a shorter context or a quantized cache (q8/q4)") from None
        except (AssertionError, ValueError, KeyError, NotImplementedError, OSError, RuntimeError) as exc:
            self.unload()
            raise GenerationError("load", f"exllamav3 could not load {folder.path.name}: {exc}",
                                  "see the engine log for exllamav3's reason") from None
        # Tokenizer.__init__ merges tokenizer_config.json's and generation_config.json's end tokens
        # into config.eos_token_id_list (exllamav3/tokenizer/tokenizer.py).
        self._adopt(folder, config.eos_token_id_list or (), on_progress)
        quant = folder.quantization
        return self._loaded(model_path, t0, {
            "bits": quant.get("bits"), "head_bits": quant.get("head_bits"), "cache_bits": bits,
            "architecture": config.architecture, "gpu_split": split or "auto",
        })

    def _encode(self, prompt: str, add_bos: bool) -> Any:
        return self._tokenizer.encode(prompt, add_bos=add_bos, encode_special_tokens=True)

    def _make_job(self, input_ids: Any, limit: int, sampling: SamplingSettings) -> Any:
        from exllamav3 import ComboSampler, Job

        plan = plan_sampler(sampling)
        sampler = ComboSampler(rep_p=plan.repetition_penalty, rep_sustain_range=plan.repetition_range,
                               temperature=0.0 if plan.greedy else plan.temperature, min_p=plan.min_p,
                               top_k=plan.top_k, top_p=plan.top_p)
        # Job keeps max_new_tokens - 1 as its limit but sizes its pages for max_new_tokens
        # (exllamav3/generator/job.py __init__, prepare_for_queue): one more, within the cache.
        room = self._n_ctx - int(input_ids.shape[-1])
        return Job(input_ids=input_ids, max_new_tokens=min(limit + 1, room), sampler=sampler, seed=sampling.seed,
                   stop_conditions=self._stop_token_ids)

