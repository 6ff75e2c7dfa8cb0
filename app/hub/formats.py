"""Which format a repo or a local file/folder is, and its quant and architecture, for the Hub and the library.
Quant names come from app.models.quants (the one parser of the project); this file only wires it up."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from app.models.detect import folder_format
from app.models.quants import (
    QuantInfo,
    parse_exl_config,
    parse_exl_name,
    parse_gguf_filename,
    parse_mlx_config,
)

FORMATS = ("gguf", "mlx", "safetensors", "exl2", "exl3")
EXL_FORMATS = ("exl2", "exl3")
_BARE_BIT_RATE = re.compile(r"\d{1,2}[._]\d{1,3}")
_EXL_IN_NAME = re.compile(r"(?<![a-z0-9])(exl[23])(?![a-z0-9])")
EXL2_MEASUREMENT = "measurement.json"  # exllamav2's convert.py writes it; uploaders keep it on main


def quant_from_name(name: str) -> str | None:
    """The quant in a GGUF file name: 'Llama-3-8B-Q4_K_M-00001-of-00002.gguf' -> 'Q4_K_M'."""
    info = parse_gguf_filename(name)
    return info.quant if info else None


def format_of_repo(tags: list[str] | None, files: list[str], config: dict[str, Any] | None = None) -> str:
    """The tags decide, then .gguf files, then config.json (when the caller read it: untagged EXL2/EXL3 and MLX
    repos are told by their ``quantization_config`` / ``quantization`` block)."""
    lowered = [t.lower() for t in tags or []]
    for fmt in ("exl3", "exl2", "mlx", "gguf"):
        if fmt in lowered:
            return fmt
    if any(f.endswith(".gguf") for f in files):
        return "gguf"
    return folder_format(config) if isinstance(config, dict) else "safetensors"


def exl_format_hint(repo_id: str, tags: Iterable[str] | None = None, files: Iterable[str] = ()) -> str:
    """"exl2" / "exl3" when a repo shows it is an ExLlama one before any config.json is read: its tags, its name
    (``bartowski/Model-exl2``, ``turboderp/Model-exl3``) or EXL2's measurement.json among its files; else "".
    Only such a repo has its bare-number branches (``6_5``, ``8_0``) taken for bit rates."""
    lowered = {t.lower() for t in tags or []}
    for fmt in ("exl3", "exl2"):
        if fmt in lowered:
            return fmt
    named = _EXL_IN_NAME.search(repo_id.lower())
    if named:
        return named.group(1)
    return "exl2" if EXL2_MEASUREMENT in set(files) else ""


def is_bare_bit_rate(name: str) -> bool:
    """``6_5``, ``4.25``, ``8_0``: a branch name that is a bit rate only in a repo known to be EXL."""
    return bool(_BARE_BIT_RATE.fullmatch(name))


def exl_quant_of(name: str, fmt: str, bare_numbers: bool = False) -> QuantInfo | None:
    """The bit rate a branch (or a ``--quant``) names: ``4.0bpw``, ``6_5bpw-h8``; with ``bare_numbers`` also the
    ``6_5`` / ``8_0`` some uploaders name their EXL2 branches (only where the repo is known to be EXL: a bare
    number alone could be a version)."""
    info = parse_exl_name(name, fmt)
    if info is None and bare_numbers and is_bare_bit_rate(name):
        info = parse_exl_name(name + "bpw", fmt)
    return info


def exl_branches(repo_id: str, branches: Iterable[str], fmt: str = "",
                 bare_numbers: bool = False) -> dict[str, QuantInfo]:
    """The branches of an EXL2/EXL3 repo that hold one bit rate each, lowest first. Without ``fmt`` (tags and
    configs not read yet) the repo's name decides: EXL3 when it says so, else EXL2, the older convention."""
    fmt = fmt if fmt in EXL_FORMATS else ("exl3" if "exl3" in repo_id.lower() else "exl2")
    found = {name: info for name in branches if (info := exl_quant_of(name, fmt, bare_numbers))}
    return dict(sorted(found.items(), key=lambda item: item[1].bits_per_weight or 0))


def describe_gguf(path: Path) -> tuple[str | None, str | None]:
    """(quant, architecture) from the GGUF header (general.file_type, general.architecture), the name as fallback."""
    quant = quant_from_name(path.name)
    arch = None
    try:
        import gguf  # for the file-type names; imported on use to keep start-up light

        from app.models.metadata import read_gguf_header

        kv, _tensors, _start = read_gguf_header(path)
        arch = kv.get("general.architecture") if isinstance(kv.get("general.architecture"), str) else None
        file_type = kv.get("general.file_type")
        if isinstance(file_type, int) and quant is None:
            try:
                quant = gguf.LlamaFileType(file_type).name.removeprefix("MOSTLY_").removeprefix("ALL_")
            except ValueError:
                quant = None
    except Exception:  # noqa: BLE001 - a header we cannot read still lists, with what the name says
        pass
    return quant, arch


def describe_folder(folder: Path) -> tuple[str, str | None, str | None]:
    """(format, quant, architecture) of a safetensors-style folder from its config.json."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        if not isinstance(config, dict):
            config = {}
    except (OSError, ValueError):
        config = {}
    fmt = folder_format(config)
    arch = (config.get("architectures") or [None])[0] or config.get("model_type")
    quant = None
    try:
        if fmt == "mlx":
            quant = parse_mlx_config(config, folder.name).quant
        elif fmt in ("exl2", "exl3"):
            info = parse_exl_config(config, folder.name)
            quant = info.quant if info else None
    except Exception:  # noqa: BLE001 - an odd config still lists, without a quant
        quant = None
    return fmt, quant, arch
