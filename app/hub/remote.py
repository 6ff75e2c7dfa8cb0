"""Read model headers on the Hub without downloading the model: HTTP Range requests for the first
bytes of a GGUF (growing until the key/values and the tensor table are parsed) or of a safetensors
file, and small files (config.json, the model card's start) whole. Every request goes through
app.hub.config: the current endpoint and the token (HF_TOKEN, else the one ``quantdesk login`` saved).
The bytes are parsed by app.models.metadata, which never touches the network itself."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, TypeVar

from app.hub import config
from app.hub.errors import AccessDenied, HubError, RemoteReadError
from app.models.metadata import (
    GgufHeaderBytes,
    ModelMetadata,
    TensorInfo,
    metadata_from_config,
    metadata_from_gguf,
    parse_gguf_header,
    parse_gguf_header_bytes,
    parse_growing,
    parse_json_object,
    parse_safetensors_header,
)
from app.models.quants import gguf_shard_names

if TYPE_CHECKING:
    from app.models.vision import ProjectorInfo

FIRST_RANGE = 1 << 20  # most headers fit; Llama-3-style 128k-token vocabularies need ~3 MiB
MAX_HEADER = 256 << 20
MAX_JSON = 8 << 20
_TRANSPORT_MODULES = ("httpx", "httpx2", "httpcore", "h11", "ssl", "socket")
T = TypeVar("T")


def fetch_range(url: str, start: int, end: int) -> bytes:
    """Bytes [start, end) of ``url``. A server that ignores Range gets its body cut at ``end``."""
    from huggingface_hub import get_session

    headers = config.auth_headers() | {"Range": f"bytes={start}-{end - 1}"}
    try:
        with get_session().stream("GET", url, headers=headers, follow_redirects=True) as response:
            if response.status_code in (401, 403):
                raise AccessDenied(f"The Hub refused access to {url} (HTTP {response.status_code}): the repo is "
                                   "gated or private.",
                                   "accept the terms on the model page, then set HF_TOKEN or run `quantdesk login`")
            if response.status_code == 404:
                raise RemoteReadError(f"Not found on the Hub: {url}.")
            if response.status_code == 416:
                return b""
            if response.status_code not in (200, 206):
                raise RemoteReadError(f"The Hub answered HTTP {response.status_code} for {url}.")
            skip = start if response.status_code == 200 else 0
            chunks, have = [], 0
            for chunk in response.iter_bytes():
                if skip:
                    cut = min(skip, len(chunk))
                    chunk, skip = chunk[cut:], skip - cut
                chunks.append(chunk)
                have += len(chunk)
                if have >= end - start:
                    break
            return b"".join(chunks)[: end - start]
    except HubError:
        raise
    except Exception as exc:  # httpx2 transport errors and friends become one sentence; anything else is a bug
        if type(exc).__module__.split(".")[0] not in _TRANSPORT_MODULES:
            raise
        raise RemoteReadError(f"Could not read {url}: {exc}.", "check the network or HF_ENDPOINT") from exc


def _read_growing(url: str, parse: Callable[[bytes], T], first: int = FIRST_RANGE) -> T:
    """Fetch a prefix by HTTP Range, parse it, and fetch more while the parser needs more."""
    parsed: T = parse_growing(lambda start, end: fetch_range(url, start, end), parse, url, first=first,
                              limit=MAX_HEADER)  # what ``parse`` returned
    return parsed


def read_remote_gguf(repo_id: str, filename: str, revision: str | None = None) -> ModelMetadata:
    """Metadata of a GGUF on the Hub from its header alone (the first shard of a split model)."""
    url = config.file_url(repo_id, filename, revision)
    kv, tensors, data_start = _read_growing(url, parse_gguf_header)
    meta = metadata_from_gguf(kv, tensors, source=f"{repo_id}/{filename}", file_name=filename)
    meta.header_bytes = data_start
    if meta.shard_count > 1:
        for name in gguf_shard_names(filename)[1:]:
            _, more, _ = _read_growing(config.file_url(repo_id, name, revision), parse_gguf_header, first=1 << 18)
            meta.tensors.extend(more)
    return meta


def read_remote_gguf_bytes(repo_id: str, filename: str, revision: str | None = None) -> GgufHeaderBytes:
    """The header of one GGUF on the Hub as raw bytes per key, to compare with a local copy's."""
    return _read_growing(config.file_url(repo_id, filename, revision), parse_gguf_header_bytes)


def read_remote_projector(repo_id: str, filename: str, revision: str | None = None) -> ProjectorInfo:
    """A vision projector on the Hub from its header alone (app.models.vision reads it)."""
    from app.models import vision

    kv, tensors, _ = _read_growing(config.file_url(repo_id, filename, revision), parse_gguf_header)
    return vision.projector_from_header(kv, tensors, filename)


def read_remote_safetensors(repo_id: str, filename: str, revision: str | None = None) -> list[TensorInfo]:
    url = config.file_url(repo_id, filename, revision)
    return _read_growing(url, lambda data: parse_safetensors_header(data, filename), first=1 << 16)


def read_remote_json(repo_id: str, filename: str, revision: str | None = None) -> dict[str, Any]:
    data = fetch_range(config.file_url(repo_id, filename, revision), 0, MAX_JSON)
    return parse_json_object(data, f"{repo_id}/{filename}")


def read_remote_text(repo_id: str, filename: str, revision: str | None = None, limit: int = 64 << 10) -> str:
    """The first ``limit`` bytes of a text file (a model card), as text."""
    return fetch_range(config.file_url(repo_id, filename, revision), 0, limit).decode("utf-8", errors="replace")


def read_remote_folder(repo_id: str, files: Iterable[str], revision: str | None, *, source: str, name: str,
                       folder_config: dict[str, Any] | None = None) -> ModelMetadata:
    """A model folder on the Hub (MLX, safetensors, EXL2/EXL3): its config.json (unless the caller read it
    already) and the headers of its top-level safetensors files, read by Range requests."""
    if folder_config is None:
        folder_config = read_remote_json(repo_id, "config.json", revision)
    tensors: list[TensorInfo] = []
    for weights in sorted(f for f in files if f.endswith(".safetensors") and "/" not in f):
        tensors.extend(read_remote_safetensors(repo_id, weights, revision))
    return metadata_from_config(folder_config, tensors, source=source, name=name)
