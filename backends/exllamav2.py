"""ExLlamaV2: EXL2 models on NVIDIA GPUs.

exllamav2 has had no release since 2025 (0.3.2) and the field moved to EXL3; it stays for the many
EXL2 quants on the Hub. exllamav2 and torch are imported inside ``load``; ``probe`` answers without
them. Written against turboderp-org/exllamav2 0.3.2 (exllamav2/model.py load / load_autosplit,
exllamav2/cache.py, exllamav2/generator/dynamic.py, exllamav2/generator/sampler.py).
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


class ExLlamaV2Backend(ExLlamaBackendBase):
    name = "exllamav2"
    formats = ("exl2",)

    @classmethod
    def probe(cls) -> Availability:
        return probe_exllama("exllamav2", "exl2")

    def load(self, model_path: str, settings: LoadSettings,
             on_progress: Callable[[float], None] | None = None) -> Loaded:
        settings.validate()
        bits = kv_cache_bits(settings.kv_cache_type)
        folder = read_model_folder(model_path)
        import torch
        from exllamav2 import (
            ExLlamaV2,
            ExLlamaV2Cache,
            ExLlamaV2Cache_Q4,
            ExLlamaV2Cache_Q6,
            ExLlamaV2Cache_Q8,
            ExLlamaV2Config,
            ExLlamaV2Tokenizer,
        )
        from exllamav2.attn import has_flash_attn_with_paged
        from exllamav2.generator import ExLlamaV2DynamicGenerator

        cache_class = {16: ExLlamaV2Cache, 8: ExLlamaV2Cache_Q8, 6: ExLlamaV2Cache_Q6, 4: ExLlamaV2Cache_Q4}[bits]
        split = check_gpu_split(settings.gpu_split, torch.cuda.device_count())
        t0 = time.perf_counter()
        self._n_ctx = padded_context(settings.n_ctx)
        callback = progress_callback(on_progress)
        try:
            config = ExLlamaV2Config(str(folder.path))
            config.arch_compat_overrides()
            config.max_seq_len = self._n_ctx
            self._model = ExLlamaV2(config)
            if split:
                # Manual split: gpu_split covers weights and fixed buffers only; the cache is allocated
                # afterwards on whichever device holds each attention layer (model.py load()).
                self._model.load(gpu_split=split, callback=callback)
                self._cache = cache_class(self._model, max_seq_len=self._n_ctx)
            else:
                # Autosplit fills GPU 0, then the next, building the lazy cache layer by layer as it goes.
                self._cache = cache_class(self._model, max_seq_len=self._n_ctx, lazy=True)
                self._model.load_autosplit(self._cache, callback=callback)
            self._tokenizer = ExLlamaV2Tokenizer(config)
            # Paged attention (several jobs sharing the cache) needs flash-attn >= 2.5.7; without it the
            # dynamic generator runs one job at a time over a contiguous cache (generator/dynamic.py).
            paged = bool(has_flash_attn_with_paged)
            self._generator = ExLlamaV2DynamicGenerator(model=self._model, cache=self._cache,
                                                        tokenizer=self._tokenizer, paged=paged,
                                                        **({} if paged else {"max_batch_size": 1}))
        except torch.cuda.OutOfMemoryError:
            self.unload()
            raise GenerationError("memory", f"{folder.path.name} does not fit in GPU memory at {self._n_ctx} tokens",
                                  "try a smaller bpw, a shorter context or a quantized cache (q8/q4)") from None
        except (AssertionError, ValueError, KeyError, NotImplementedError, OSError, RuntimeError) as exc:
            self.unload()
            raise GenerationError("load", f"exllamav2 could not load {folder.path.name}: {exc}",
                                  "see the engine log for exllamav2's reason") from None
        # ExLlamaV2Config keeps only the first of a list of eos ids; the folder reader has them all.
        self._adopt(folder, [self._tokenizer.eos_token_id], on_progress)
        quant = folder.quantization
        return self._loaded(model_path, t0, {
            "bits": quant.get("bits"), "head_bits": quant.get("head_bits"), "cache_bits": bits,
            "architecture": config.architecture, "gpu_split": split or "auto", "paged_attention": paged,
        })

    def _encode(self, prompt: str, add_bos: bool) -> Any:
        return self._tokenizer.encode(prompt, add_bos=add_bos, encode_special_tokens=True)

    def _make_job(self, input_ids: Any, limit: int, sampling: SamplingSettings) -> Any:
        from exllamav2.generator import ExLlamaV2DynamicJob, ExLlamaV2Sampler

        plan = plan_sampler(sampling)
        if plan.greedy:
            settings = ExLlamaV2Sampler.Settings.greedy()  # top_k 1, top_p 0, temperature 1 (sampler.py)
        else:
            settings = ExLlamaV2Sampler.Settings(temperature=plan.temperature, top_k=plan.top_k, top_p=plan.top_p,
                                                 min_p=plan.min_p)
        settings.token_repetition_penalty = plan.repetition_penalty
        settings.token_repetition_range = plan.repetition_range
        return ExLlamaV2DynamicJob(input_ids=input_ids, max_new_tokens=limit, gen_settings=settings,
                                   seed=sampling.seed, stop_conditions=self._stop_token_ids)
