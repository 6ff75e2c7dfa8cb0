"""The sampling a model recommends, read from its own files into ``ModelSampling`` (app/datatypes.py): a GGUF's
``general.sampling.*`` keys (the ones llama.cpp's common_init_from_params applies unless the user set them:
common/common.cpp, ``common_params_sampling`` from ``llama_model_meta_val_str``), or a model folder's
``generation_config.json`` (Hugging Face's names; MLX and EXL folders carry it; safetensors.py reads the file).
``model_sampling`` (the package's __init__) is the one entry for a model reference, whatever its format.

Bounded like every field of a stranger's file: a value of the wrong type or outside what an engine takes is left
out with a reason in ``ModelSampling.ignored``, never an error: a model loads and answers with QuantDesk's default
for that value instead.
"""

from __future__ import annotations

from typing import Any

from app.datatypes import ModelSampling
from app.models.fields import ModelMetadataError, real_number, whole_number

# GGUF key → SamplingSettings field. llama.cpp also reads sequence, xtc_*, penalty_last_n and mirostat*; QuantDesk's
# engines have no such settings, so those are not read.
GGUF_SAMPLING_KEYS = {
    "general.sampling.temp": "temperature",
    "general.sampling.top_p": "top_p",
    "general.sampling.top_k": "top_k",
    "general.sampling.min_p": "min_p",
    "general.sampling.penalty_repeat": "repeat_penalty",
}
# generation_config.json key (transformers' GenerationConfig) → SamplingSettings field.
GENERATION_CONFIG_KEYS = {
    "temperature": "temperature",
    "top_p": "top_p",
    "top_k": "top_k",
    "min_p": "min_p",
    "repetition_penalty": "repeat_penalty",
}
GENERATION_CONFIG = "generation_config.json"
MAX_TOP_K = (1 << 31) - 1  # the engines keep top_k in a C int


def _value(field: str, value: Any, what: str) -> float | int:
    """One recommended value, in SamplingSettings.validate()'s bounds, or ModelMetadataError naming ``what``.
    A GGUF keeps them as float32: 0.6 reads 0.6000000238, so a value is kept to 6 significant digits (float32's
    precision), as the model's author wrote it."""
    if field == "top_k":
        return whole_number(value, what, low=0, high=MAX_TOP_K, default=None)
    number = real_number(value, what, high={"top_p": 1.0, "min_p": 1.0}.get(field, 10.0))
    if number == 0 and field in ("top_p", "repeat_penalty"):  # validate() takes (0, 1] and (0, 10]
        raise ModelMetadataError(f"{what} is 0; expected more than 0.")
    return float(f"{number:.6g}")


def sampling_from(values: dict[str, Any], keys: dict[str, str], origin: str) -> ModelSampling:
    """The recommended values among ``values`` (a GGUF header's keys, a generation_config.json), by ``keys``."""
    found: dict[str, Any] = {}
    ignored: list[str] = []
    for key, field in keys.items():
        if values.get(key) is None:
            continue
        try:
            found[field] = _value(field, values[key], key)
        except ModelMetadataError as exc:
            ignored.append(exc.message)
    return ModelSampling(**found, origin=origin if found else "", ignored=tuple(ignored))


def sampling_from_gguf(kv: dict[str, Any]) -> ModelSampling:
    return sampling_from(kv, GGUF_SAMPLING_KEYS, "general.sampling.*")


def sampling_from_generation_config(config: dict[str, Any]) -> ModelSampling:
    """``do_sample: false`` means greedy decoding in transformers, whatever the other values say: temperature 0
    (QuantDesk's engines pick the likeliest token at 0)."""
    if config.get("do_sample") is False:
        return ModelSampling(temperature=0.0, origin=GENERATION_CONFIG)
    return sampling_from(config, GENERATION_CONFIG_KEYS, GENERATION_CONFIG)
