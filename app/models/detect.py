"""What is at a path, and is it a model we can run? Answers before any engine is started, so a bad file
gets a sentence naming the file and the problem instead of an engine crash."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.errors import ModelFileError

GGUF_MAGIC = b"GGUF"
_SHARD = re.compile(r"-(\d{5})-of-(\d{5})\.gguf$")


@dataclass(frozen=True)
class ModelRef:
    path: Path  # the file to load (a GGUF, the first shard) or the model folder
    format: str  # gguf | mlx | safetensors | exl2 | exl3

    @property
    def display_name(self) -> str:
        return self.path.name


def detect_model(path: str | Path) -> ModelRef:
    """Classify ``path`` and check it is whole enough to load; raise ModelFileError otherwise."""
    path = Path(path).expanduser()
    if not path.exists():
        raise ModelFileError(f"{path} does not exist")
    if path.is_dir():
        return _detect_folder(path)
    with path.open("rb") as f:
        magic = f.read(4)
    if magic == GGUF_MAGIC:
        check_gguf(path)
        return ModelRef(path, "gguf")
    if path.suffix.lower() == ".gguf":
        raise ModelFileError(f"{path.name} is not a GGUF file: it starts with {magic!r}, not {GGUF_MAGIC!r}",
                             "the file may be corrupt or an HTML error page saved by a failed download")
    if path.suffix.lower() == ".safetensors":
        raise ModelFileError(f"{path.name} is a lone weights file",
                             "open the folder that holds it together with config.json and the tokenizer")
    raise ModelFileError(f"{path.name} is not a model file QuantDesk can run",
                         "pick a .gguf file or a model folder (MLX, safetensors, EXL2, EXL3)")


def check_gguf(path: Path) -> None:
    """Parse the GGUF header and tensor table and check every tensor's data lies inside the file."""
    from app.models.metadata import ModelMetadataError, read_gguf_header

    size = path.stat().st_size
    try:
        _kv, tensors, data_start = read_gguf_header(path)
    except ModelMetadataError as exc:
        raise ModelFileError(f"{path.name} is truncated or corrupt: its header or tensor table cannot be read "
                             f"({size:,} bytes; {exc.message})", "download it again") from None
    end = max((data_start + t.offset + t.n_bytes for t in tensors), default=data_start)
    if end > size:
        raise ModelFileError(f"{path.name} is truncated: its tensors need {end:,} bytes, the file has {size:,}",
                             "download it again")
    if not tensors:
        raise ModelFileError(f"{path.name} holds no tensors (a vocabulary-only GGUF cannot chat)")


def _first_gguf(folder: Path) -> Path | None:
    ggufs = sorted(p for p in folder.glob("*.gguf") if not p.name.startswith("."))
    if not ggufs:
        return None
    firsts = [p for p in ggufs if (m := _SHARD.search(p.name)) is None or m.group(1) == "00001"]
    if len(firsts) > 1:
        names = ", ".join(p.name for p in firsts[:4])
        raise ModelFileError(f"{folder.name} holds several GGUF models ({names})", "pick one of the files")
    return firsts[0] if firsts else ggufs[0]


def folder_format(config: dict[str, Any]) -> str:
    quant = config.get("quantization_config") or {}
    method = str(quant.get("quant_method", "")).lower()
    if method in ("exl2", "exl3"):
        return method
    if "quantization" in config or "quantization" in quant:
        return "mlx"
    return "safetensors"


def _detect_folder(folder: Path) -> ModelRef:
    config_path = folder / "config.json"
    weights = list(folder.glob("*.safetensors"))
    if config_path.exists() and weights:
        try:
            config = json.loads(config_path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ModelFileError(f"{folder.name}/config.json cannot be read: {exc}") from None
        if not isinstance(config, dict):
            raise ModelFileError(f"{folder.name}/config.json is not a JSON object")
        return ModelRef(folder, folder_format(config))
    gguf_file = _first_gguf(folder)
    if gguf_file is not None:
        check_gguf(gguf_file)
        return ModelRef(gguf_file, "gguf")
    missing = "safetensors weights" if config_path.exists() else "config.json" if weights else \
        "a .gguf file or config.json with safetensors weights"
    raise ModelFileError(f"{folder} holds no model: no {missing} found")
