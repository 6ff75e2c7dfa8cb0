"""Read model headers on the Hub without downloading the model: HTTP Range requests for the first
bytes of a GGUF (growing until the key/values and the tensor table are parsed) or of a safetensors
file, through huggingface_hub's shared session, URL builder and auth headers."""

from __future__ import annotations

import os
from typing import Any

from app.errors import QuantDeskError
from app.models.metadata import (
    ModelMetadata,
    TensorInfo,
    metadata_from_gguf,
    parse_gguf_header,
    parse_growing,
    parse_json_object,
    parse_safetensors_header,
)

FIRST_RANGE = 1 << 20  # most headers fit; Llama-3-style 128k-token vocabularies need ~3 MiB
MAX_HEADER = 256 << 20


class RemoteReadError(QuantDeskError):
    """The Hub (or a mirror) could not serve the bytes we asked for."""


def _endpoint() -> str:
    # huggingface_hub reads HF_ENDPOINT once at import; honour a value set later (tests, settings).
    from huggingface_hub import constants

    return os.environ.get("HF_ENDPOINT") or constants.ENDPOINT


def file_url(repo_id: str, filename: str, revision: str | None = None) -> str:
    from huggingface_hub import hf_hub_url

    return hf_hub_url(repo_id, filename, revision=revision, endpoint=_endpoint())


def fetch_range(url: str, start: int, end: int, token: str | bool | None = None) -> bytes:
    """Bytes [start, end) of ``url``. A server that ignores Range gets its body cut at ``end``."""
    from huggingface_hub.utils import build_hf_headers, get_session

    headers = build_hf_headers(token=token)
    headers["Range"] = f"bytes={start}-{end - 1}"
    try:
        with get_session().stream("GET", url, headers=headers, follow_redirects=True) as response:
            if response.status_code in (401, 403):
                raise RemoteReadError(f"The Hub refused access to {url} (HTTP {response.status_code}).",
                                      "the repo may be gated or private: accept its terms and log in with a token")
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
    except RemoteReadError:
        raise
    except Exception as exc:  # httpx2 transport errors and friends: one sentence for the user
        if type(exc).__module__.split(".")[0] not in ("httpx", "httpx2", "httpcore", "h11", "ssl", "socket"):
            raise
        raise RemoteReadError(f"Could not read {url}: {exc}.", "check the network or HF_ENDPOINT") from exc


def _read_growing(url: str, parse, token, first: int = FIRST_RANGE, limit: int = MAX_HEADER):
    """Fetch a prefix by HTTP Range, parse it, and fetch more while the parser needs more."""
    return parse_growing(lambda start, end: fetch_range(url, start, end, token), parse, url, first=first, limit=limit)


def read_remote_gguf(repo_id: str, filename: str, revision: str | None = None,
                     token: str | bool | None = None) -> ModelMetadata:
    """Metadata of a GGUF on the Hub from its header alone (the first shard of a split model)."""
    url = file_url(repo_id, filename, revision)
    kv, tensors, data_start = _read_growing(url, parse_gguf_header, token)
    meta = metadata_from_gguf(kv, tensors, source=f"{repo_id}/{filename}", file_name=filename)
    meta.header_bytes = data_start
    if meta.shard_count > 1:
        from app.models.quants import gguf_shard_names

        for name in gguf_shard_names(filename)[1:]:
            _, more, _ = _read_growing(file_url(repo_id, name, revision), parse_gguf_header, token, first=1 << 18)
            meta.tensors.extend(more)
    return meta


def read_remote_safetensors(repo_id: str, filename: str, revision: str | None = None,
                            token: str | bool | None = None) -> list[TensorInfo]:
    url = file_url(repo_id, filename, revision)
    return _read_growing(url, lambda d: parse_safetensors_header(d, filename), token, first=1 << 16)


def read_remote_json(repo_id: str, filename: str, revision: str | None = None,
                     token: str | bool | None = None) -> dict[str, Any]:
    data = fetch_range(file_url(repo_id, filename, revision), 0, 8 << 20, token)
    return parse_json_object(data, f"{repo_id}/{filename}")
