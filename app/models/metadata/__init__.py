"""Model metadata: what the estimator needs to know about a model, read from its own files.

One ``ModelMetadata`` shape for every format (model.py):
- GGUF: the header's key/value pairs and tensor table, read by our own byte parser (gguf.py: ``parse_gguf_header``
  reads a byte prefix, for local and remote headers alike), then read into the shape with llama.cpp's
  per-architecture rules (architectures.py: ``metadata_from_gguf``); ``read_gguf_file`` for a local file;
- MLX / EXL2 / EXL3 / plain safetensors: ``config.json`` plus the safetensors headers (safetensors.py:
  ``read_model_folder``);
- the sampling a model recommends (GGUF ``general.sampling.*``, ``generation_config.json``) into
  ``ModelMetadata.sampling`` (sampling.py), and ``model_sampling`` for any model reference.

``read_model`` takes either. Malformed input raises ``ModelMetadataError`` with the reason, never a bare struct or
JSON error.
"""

from __future__ import annotations

import logging
from pathlib import Path

from app.models.fields import ModelMetadataError
from app.models.metadata.architectures import (
    CHUNKED_WINDOWS,
    POOLING_NAMES,
    RECURRENT_ARCHS,
    SWA_PATTERNS,
    metadata_from_gguf,
    pooling_name,
)
from app.models.metadata.gguf import (
    CHAT_TEMPLATE_KEY,
    GGUF_MAGIC,
    ArrayLength,
    GgufHeaderBytes,
    NeedMoreData,
    parse_gguf_header,
    parse_gguf_header_bytes,
    parse_growing,
    read_gguf_header,
    read_gguf_header_bytes,
)
from app.models.metadata.model import ModelMetadata, RecurrentShape, TensorInfo
from app.models.metadata.safetensors import (
    metadata_from_config,
    parse_json_object,
    read_generation_config,
    parse_safetensors_header,
    read_model_folder,
    read_safetensors_file,
)
from app.models.metadata.sampling import GENERATION_CONFIG, sampling_from_gguf
from app.models.quants import QuantInfo, parse_gguf_filename
from app.datatypes import ModelSampling

log = logging.getLogger(__name__)

__all__ = [
    "ArrayLength", "CHAT_TEMPLATE_KEY", "CHUNKED_WINDOWS", "GGUF_MAGIC", "GgufHeaderBytes", "ModelMetadata",
    "ModelMetadataError", "NeedMoreData", "POOLING_NAMES", "RECURRENT_ARCHS", "RecurrentShape", "SWA_PATTERNS",
    "TensorInfo", "metadata_from_config", "metadata_from_gguf", "model_pooling", "model_sampling",
    "parse_gguf_header", "parse_gguf_header_bytes", "parse_growing", "parse_json_object", "parse_safetensors_header",
    "pooling_name", "read_generation_config", "read_gguf_file", "read_gguf_header", "read_gguf_header_bytes",
    "read_model", "read_model_folder", "read_safetensors_file",
]


def read_gguf_file(path: str | Path) -> ModelMetadata:
    """Read a local GGUF (the first shard is enough: shards 2..n only add tensors, which we size from
    their own headers when they are next to it)."""
    path = Path(path)
    if not path.is_file():
        raise ModelMetadataError(f"No such model file: {path}.")
    kv, tensors, data_start = read_gguf_header(path)
    meta = metadata_from_gguf(kv, tensors, source=str(path), file_name=path.name)
    meta.header_bytes = data_start
    if meta.shard_count > 1:
        _add_local_shards(meta, path)
    return meta


def _add_local_shards(meta: ModelMetadata, first: Path) -> None:
    from app.models.quants import gguf_shard_names

    names = gguf_shard_names(first.name)
    missing = []
    for name in names[1:]:
        shard = first.with_name(name)
        if not shard.is_file():
            missing.append(name)
            continue
        _, tensors, _ = read_gguf_header(shard)
        meta.tensors.extend(tensors)
    if missing:
        meta.notes.append(f"shards not found next to the first one: {', '.join(missing)}; "
                          "weights counted from the first shard only")


def read_model(path: str | Path) -> ModelMetadata:
    """A local .gguf file or a model folder (a folder holding .gguf files reads the first one)."""
    path = Path(path)
    if path.is_file():
        if path.suffix.lower() == ".gguf":
            return read_gguf_file(path)
        raise ModelMetadataError(f"{path.name} is not a .gguf file or a model folder.")
    if path.is_dir():
        if (path / "config.json").is_file():
            return read_model_folder(path)
        ggufs = sorted(p for p in path.glob("*.gguf") if (parse_gguf_filename(p.name) or
                                                           QuantInfo("gguf", "", None)).is_first_shard)
        if ggufs:
            return read_gguf_file(ggufs[0])
        raise ModelMetadataError(f"{path} holds neither a config.json nor a .gguf file.")
    raise ModelMetadataError(f"No such model file or folder: {path}.")


def model_sampling(model: str | Path | None) -> ModelSampling:
    """What the model at ``model`` recommends: a local GGUF's header (read once per process: gguf.py), a folder's
    generation_config.json, or a folder's first GGUF (read_model's rule). Nothing for a remote model, a file that
    is gone or no model: the chat then uses QuantDesk's defaults, and the load that follows says what is wrong."""
    if not model:
        return ModelSampling()
    path = Path(model)
    try:
        if path.is_file() and path.suffix.lower() == ".gguf":
            return sampling_from_gguf(read_gguf_header(path)[0])
        if path.is_dir():
            if (path / GENERATION_CONFIG).is_file() or (path / "config.json").is_file():
                return read_generation_config(path)
            if any(path.glob("*.gguf")):
                return read_model(path).sampling
    except (OSError, ModelMetadataError) as exc:
        log.info("the recommended sampling of %s was not read: %s", path.name, exc)
    return ModelSampling()


def model_pooling(model: str | Path | None) -> str:
    """The pooling a local GGUF declares (``pooling_name``: "rank" a reranker, "mean"/"cls"/"last" an embedding model,
    "" a chat model), from its header (read once per process: gguf.py) or a folder's first GGUF; "" for anything else
    (a folder of safetensors, a file that is gone or unreadable: its load says what is wrong)."""
    if not model:
        return ""
    path = Path(model)
    try:
        if path.is_dir():
            first = sorted(p for p in path.glob("*.gguf") if (parse_gguf_filename(p.name) or
                                                              QuantInfo("gguf", "", None)).is_first_shard)
            if not first or (path / "config.json").is_file():
                return ""
            path = first[0]
        if path.is_file() and path.suffix.lower() == ".gguf":
            return pooling_name(read_gguf_header(path)[0])
    except (OSError, ModelMetadataError) as exc:
        log.info("the pooling of %s was not read: %s", path.name, exc)
    return ""
