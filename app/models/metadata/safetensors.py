"""MLX / EXL2 / EXL3 / plain safetensors folders: ``config.json`` and the safetensors headers read into
``ModelMetadata`` (``read_model_folder``)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

from app.models.fields import INT64_MAX, MAX_LAYERS, U32_MAX, ModelMetadataError, shown, whole_number
from app.models.metadata.architectures import sliding_window_layers
from app.models.metadata.gguf import NeedMoreData
from app.models.metadata.model import ModelMetadata, TensorInfo, token_id
from app.models.metadata.sampling import GENERATION_CONFIG, sampling_from_generation_config
from app.datatypes import ModelSampling
from app.models.quants import QuantInfo, parse_exl_config, parse_mlx_config, quant_method

_SAFETENSORS_DTYPE_BYTES = {"F64": 8, "I64": 8, "U64": 8, "F32": 4, "I32": 4, "U32": 4, "F16": 2, "BF16": 2,
                            "I16": 2, "U16": 2, "F8_E4M3": 1, "F8_E5M2": 1, "I8": 1, "U8": 1, "BOOL": 1}


def parse_json_object(raw: bytes | str, what: str) -> dict[str, Any]:
    """JSON text that must hold an object (config.json, a safetensors header), or ModelMetadataError."""
    try:
        value = json.loads(raw)
    except RecursionError:  # json's own signal for nesting deeper than the interpreter's stack
        raise ModelMetadataError(f"{what} nests too deeply to be read.") from None
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, a number of more than 4,300 digits
        raise ModelMetadataError(f"{what} is not valid JSON: {exc}.") from None
    if not isinstance(value, dict):
        raise ModelMetadataError(f"{what} does not hold a JSON object.")
    return value


def parse_safetensors_header(data: bytes, name: str = "") -> list[TensorInfo]:
    """Tensors of a safetensors file from its first bytes (8-byte length + JSON header)."""
    label = name or "safetensors file"
    if len(data) < 8:
        raise NeedMoreData(8)
    (length,) = struct.unpack("<Q", data[:8])
    if length > 100 << 20:
        raise ModelMetadataError(f"{label}: header claims {length} bytes; not safetensors.")
    if len(data) < 8 + length:
        raise NeedMoreData(8 + length)
    header = parse_json_object(bytes(data[8:8 + length]), f"the header of {label}")
    tensors = []
    for tname, info in header.items():
        if tname == "__metadata__":
            continue
        what = f"{label}: tensor {shown(tname)}"
        if not isinstance(info, dict) or not isinstance(info.get("dtype"), str) \
                or not isinstance(info.get("shape"), list) or not isinstance(info.get("data_offsets"), list) \
                or len(info["data_offsets"]) != 2:
            raise ModelMetadataError(f"{what} has a malformed entry.")
        shape = tuple(whole_number(d, f"{what}: a dimension", high=INT64_MAX) for d in info["shape"])
        start, end = (whole_number(o, f"{what}: an offset", high=INT64_MAX) for o in info["data_offsets"])
        if end < start:
            raise ModelMetadataError(f"{what} ends at {end}, before it starts at {start}.")
        tensors.append(TensorInfo(tname, shape, info["dtype"], end - start))
    return tensors


def read_safetensors_file(path: Path) -> list[TensorInfo]:
    with path.open("rb") as fh:
        head = fh.read(8)
        if len(head) < 8:
            raise ModelMetadataError(f"{path.name} is too short to be a safetensors file.")
        (length,) = struct.unpack("<Q", head)
        if length > 100 << 20:
            raise ModelMetadataError(f"{path.name} is not a safetensors file (header length {length}).")
        body = fh.read(length)
    try:
        return parse_safetensors_header(head + body, path.name)
    except NeedMoreData as exc:
        raise ModelMetadataError(f"{path.name} is truncated inside its header.") from exc


def _text_config(config: dict[str, Any]) -> dict[str, Any]:
    """Multimodal configs nest the language model's settings under ``text_config``."""
    text = config.get("text_config")
    return {**config, **text} if isinstance(text, dict) else config


def metadata_from_config(config: dict[str, Any], tensors: list[TensorInfo], *, source: str,
                         name: str = "") -> ModelMetadata:
    """config.json (+ safetensors tensor table) → ModelMetadata for MLX / EXL2 / EXL3 / plain weights."""
    method = quant_method(config)
    if method in ("exl2", "exl3"):
        fmt, quant = method, parse_exl_config(config, name)
    elif method == "mlx":
        fmt, quant = "mlx", parse_mlx_config(config, name)
    else:
        fmt, quant = "safetensors", parse_mlx_config(config, name) if not method else None
        if method:
            quant = QuantInfo(format="safetensors", quant=method, bits_per_weight=None)
    cfg = _text_config(config)
    label = f"{name or source}: config.json"

    def number(*keys: str, high: int = U32_MAX) -> int:
        """The first of ``keys`` that is set (and not 0), checked; 0 when none is."""
        key = next((k for k in keys if cfg.get(k)), keys[0])
        return whole_number(cfg.get(key), f"{label} {key}", high=high)

    archs = config.get("architectures")
    first_arch = archs[0] if isinstance(archs, list) and archs else ""
    arch = next((a for a in (cfg.get("model_type"), config.get("model_type"), first_arch) if a and isinstance(a, str)),
                "")
    n_layers = number("num_hidden_layers", "n_layer", high=MAX_LAYERS)
    n_embd = number("hidden_size")
    heads = number("num_attention_heads")
    heads_kv = heads if cfg.get("num_key_value_heads") is None else number("num_key_value_heads")
    head_dim = number("head_dim") or (n_embd // heads if heads else 0)
    window = number("sliding_window") if cfg.get("use_sliding_window", True) else 0
    layer_types = cfg.get("layer_types")
    notes: list[str] = []
    if isinstance(layer_types, list) and len(layer_types) == n_layers:
        swa = [t == "sliding_attention" for t in layer_types]
    else:
        swa = sliding_window_layers(None, arch, n_layers, window, notes) if window else [False] * n_layers
        pattern = cfg.get("sliding_window_pattern")
        if window and isinstance(pattern, int) and not isinstance(pattern, bool) and pattern > 0:
            swa = [il % pattern < pattern - 1 for il in range(n_layers)]
    meta = ModelMetadata(
        format=fmt, source=source, architecture=arch, name=name, quant=quant, block_count=n_layers,
        context_length=number("max_position_embeddings"), embedding_length=n_embd,
        vocab_size=number("vocab_size"), head_count=[heads] * n_layers,
        head_count_kv=[heads_kv] * n_layers, key_length=head_dim, value_length=head_dim,
        sliding_window=window if any(swa) else 0, swa_layers=swa,
        expert_count=number("num_experts", "num_local_experts", "n_routed_experts"),
        expert_used_count=number("num_experts_per_tok"),
        kv_lora_rank=number("kv_lora_rank"),
        rope_dim_mla=number("qk_rope_head_dim"),
        tied_embeddings=bool(cfg.get("tie_word_embeddings", config.get("tie_word_embeddings", False))),
        bos_token_id=token_id(cfg.get("bos_token_id")), eos_token_id=token_id(cfg.get("eos_token_id")),
        tensors=list(tensors), notes=notes,
    )
    return meta


def read_model_folder(folder: str | Path) -> ModelMetadata:
    """An MLX / EXL2 / EXL3 / safetensors model folder: config.json and every *.safetensors header."""
    folder = Path(folder)
    config_path = folder / "config.json"
    if not config_path.is_file():
        raise ModelMetadataError(f"{folder} has no config.json.", "is this a model folder?")
    config = parse_json_object(config_path.read_bytes(), str(config_path))
    tensors: list[TensorInfo] = []
    for st in sorted(folder.glob("*.safetensors")):
        tensors.extend(read_safetensors_file(st))
    meta = metadata_from_config(config, tensors, source=str(folder), name=folder.name)
    meta.sampling = read_generation_config(folder)
    meta.notes.extend(f"recommended sampling ignored: {reason}" for reason in meta.sampling.ignored)
    if not tensors:
        meta.notes.append("no safetensors files found; weight size estimated from the config")
    return meta


def read_generation_config(folder: str | Path) -> ModelSampling:
    """A model folder's generation_config.json as the sampling it recommends; an empty ModelSampling where there is
    none, one whose ``ignored`` says why where it cannot be read."""
    path = Path(folder) / GENERATION_CONFIG
    try:
        if not path.is_file() or path.stat().st_size > 1 << 20:  # a generation config is a few hundred bytes
            return ModelSampling()
        return sampling_from_generation_config(parse_json_object(path.read_bytes(), GENERATION_CONFIG))
    except (OSError, ModelMetadataError) as exc:
        return ModelSampling(ignored=(f"{GENERATION_CONFIG} not read: {shown(str(exc), 200)}",))
