"""Quant names: what a file or folder name (or a config) says about its format and bits per weight.

Names are hints. Where the file itself is at hand (a GGUF tensor table, an MLX ``quantization``
block, an EXL ``quantization_config``) its figures win; ``bits_per_weight`` here is the nominal
average for the quant type, used to rank candidates before anything is downloaded.

Sources of the tables:
- GGUF file types and their sizes: llama.cpp ``tools/quantize/quantize.cpp`` (sizes quoted there
  for Llama-3-8B, 8.03 B parameters, converted to bits per weight; the ``*_XL`` Unsloth Dynamic mixes
  keep more tensors at higher precision, so they sit between their neighbours).
- Block sizes per ggml tensor type: ``gguf.GGML_QUANT_SIZES`` (the gguf package mirrors ggml).
- MLX: ``mlx.core.quantize`` stores per group one scale and one bias (affine, float16 each) or one
  8-bit scale (mxfp4 / mxfp8, group 32; nvfp4, group 16).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from app.models.fields import real_number, whole_number

# Nominal average bits per weight of each GGUF file type (whole-file, embeddings included).
GGUF_FILE_TYPE_BPW: dict[str, float] = {
    "F32": 32.0, "F16": 16.0, "BF16": 16.0,
    "Q8_0": 8.50, "Q6_K": 6.56, "Q6_K_XL": 7.0, "Q8_K_XL": 9.5,
    "Q5_1": 6.04, "Q5_0": 5.57, "Q5_K_M": 5.70, "Q5_K_S": 5.57, "Q5_K_XL": 6.0,
    "Q4_1": 5.11, "Q4_0": 4.64, "Q4_K_M": 4.90, "Q4_K_S": 4.67, "Q4_K_XL": 5.1,
    "IQ4_NL": 4.50, "IQ4_XS": 4.25, "MXFP4": 4.25, "MXFP4_MOE": 4.25, "NVFP4": 4.5,
    "Q3_K_L": 4.31, "Q3_K_M": 4.00, "Q3_K_S": 3.65, "Q3_K_XL": 4.2,
    "IQ3_M": 3.66, "IQ3_S": 3.44, "IQ3_XS": 3.30, "IQ3_XXS": 3.06,
    "Q2_K": 3.17, "Q2_K_S": 3.10, "Q2_K_L": 3.3, "Q2_K_XL": 3.4,
    "IQ2_M": 2.70, "IQ2_S": 2.50, "IQ2_XS": 2.31, "IQ2_XXS": 2.06,
    "IQ1_M": 1.75, "IQ1_S": 1.56, "TQ2_0": 2.06, "TQ1_0": 1.69, "Q1_0": 1.125,
    # Q4_0 repacked for ARM (removed from llama.cpp in 2024; repacking now happens at load time).
    "Q4_0_4_4": 4.64, "Q4_0_4_8": 4.64, "Q4_0_8_8": 4.64,
}
# Aliases llama.cpp's quantizer accepts, and spellings seen on the Hub.
GGUF_ALIASES = {"Q4_K": "Q4_K_M", "Q5_K": "Q5_K_M", "Q3_K": "Q3_K_M", "FP16": "F16", "FP32": "F32",
                "BF16": "BF16"}

_QUANT_TOKEN = (
    r"IQ[1-4]_(?:XXS|XS|NL|S|M)"
    r"|Q[2-8]_K(?:_(?:XL|S|M|L))?"
    r"|Q[4-8]_[01](?:_\d_\d)?"
    r"|Q1_0|TQ[12]_0|MXFP4(?:_MOE)?|NVFP4"
    r"|BF16|FP16|F16|FP32|F32"
)
_GGUF_QUANT_RE = re.compile(
    rf"(?<![A-Za-z0-9])(?P<prefix>(?:UD|i1|imat)[-_.])?(?P<quant>{_QUANT_TOKEN})(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_SHARD_RE = re.compile(r"-(?P<index>\d{5})-of-(?P<count>\d{5})$")


@dataclass(frozen=True)
class QuantInfo:
    """What a name or config says about one model file or folder."""

    format: str  # gguf | mlx | exl2 | exl3 | safetensors
    quant: str  # canonical: "Q4_K_M", "4bit", "bf16", "4.65bpw"
    bits_per_weight: float | None  # nominal average; None when the name does not say
    prefix: str = ""  # "UD" (Unsloth Dynamic), "i1" (imatrix) ...
    shard_index: int | None = None  # 1-based, GGUF split files
    shard_count: int | None = None
    base_name: str = ""  # the model name with quant and shard removed
    group_size: int | None = None  # MLX
    mode: str = ""  # MLX quantization mode: affine | mxfp4 | nvfp4 | mxfp8; DWQ noted in ``variant``
    variant: str = ""  # DWQ, AWQ, h6 (EXL head bits) ...
    head_bits: int | None = None  # EXL2/EXL3 output layer bits

    @property
    def is_sharded(self) -> bool:
        return bool(self.shard_count and self.shard_count > 1)

    @property
    def is_first_shard(self) -> bool:
        return not self.is_sharded or self.shard_index == 1

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items()}


def canonical_gguf_quant(name: str) -> str:
    upper = name.upper()
    return GGUF_ALIASES.get(upper, upper)


def gguf_bits_per_weight(quant: str) -> float | None:
    return GGUF_FILE_TYPE_BPW.get(canonical_gguf_quant(quant))


def _strip_extension(name: str) -> str:
    base = name.rsplit("/", 1)[-1]
    return base[:-5] if base.lower().endswith(".gguf") else base


def parse_gguf_filename(name: str) -> QuantInfo | None:
    """Parse ``Qwen3-30B-A3B-UD-Q4_K_XL-00001-of-00003.gguf`` and friends.

    Returns None when the name carries no quant type we know (the file's header still can).
    A path is accepted; only its last component is read.
    """
    stem = _strip_extension(name)
    shard_index = shard_count = None
    shard = _SHARD_RE.search(stem)
    if shard:
        shard_index, shard_count = int(shard["index"]), int(shard["count"])
        stem = stem[: shard.start()]
    matches = list(_GGUF_QUANT_RE.finditer(stem))
    if not matches:
        return None
    match = matches[-1]  # the quant comes last; earlier hits are parts of the model name
    quant = canonical_gguf_quant(match["quant"])
    prefix = (match["prefix"] or "")[:-1]
    base = stem[: match.start()].rstrip("-_. ") + stem[match.end():]
    return QuantInfo(
        format="gguf", quant=quant, bits_per_weight=gguf_bits_per_weight(quant), prefix=prefix,
        shard_index=shard_index, shard_count=shard_count, base_name=base.rstrip("-_. "),
    )


def gguf_shard_names(first_shard: str) -> list[str]:
    """All file names of a split GGUF, given any one of them (same folder)."""
    info = parse_gguf_filename(first_shard)
    stem = _strip_extension(first_shard)
    match = _SHARD_RE.search(stem)
    if not match:
        return [first_shard]
    head = first_shard[: len(first_shard) - len(first_shard.rsplit("/", 1)[-1])] + stem[: match.start()]
    count = info.shard_count if info and info.shard_count else int(match["count"])
    return [f"{head}-{i:05d}-of-{count:05d}.gguf" for i in range(1, count + 1)]


# ----------------------------------------------------------------------------------------- MLX

_MLX_NAME_RE = re.compile(
    r"(?<![A-Za-z0-9])(?:(?P<bits>[2-8])[-_]?bits?|(?P<float>bf16|fp16|f16|fp32|f32)|(?P<mx>mxfp4|nvfp4|mxfp8))"
    r"(?:[-_](?P<variant>DWQ|AWQ|GPTQ|DQ|mixed[-_]?\d+[-_]\d+))?(?![A-Za-z0-9])",
    re.IGNORECASE,
)
_MLX_MODE_BITS = {"mxfp4": (4, 32, 8), "nvfp4": (4, 16, 8), "mxfp8": (8, 32, 8)}  # bits, group, scale bits


def mlx_bits_per_weight(bits: int, group_size: int, mode: str = "affine") -> float:
    """Storage bits per weight of an MLX quantized matrix (scales and biases included)."""
    if mode in _MLX_MODE_BITS:
        base, group, scale_bits = _MLX_MODE_BITS[mode]
        return base + scale_bits / (group_size or group)
    return bits + 32 / group_size  # float16 scale + float16 bias per group


def parse_mlx_name(name: str) -> QuantInfo | None:
    """``Qwen3-4B-4bit``, ``...-8bit``, ``...-bf16``, ``...-4bit-DWQ``, ``...-mxfp4`` (repo id or folder)."""
    stem = name.rstrip("/").rsplit("/", 1)[-1]
    matches = list(_MLX_NAME_RE.finditer(stem))
    if not matches:
        return None
    m = matches[-1]
    variant = (m["variant"] or "")
    base = stem[: m.start()].rstrip("-_. ")
    if m["float"]:
        kind = m["float"].lower().replace("fp", "f")
        quant = "bf16" if kind == "bf16" else ("f32" if kind == "f32" else "f16")
        return QuantInfo(format="mlx", quant=quant, bits_per_weight=32.0 if quant == "f32" else 16.0,
                         base_name=base, variant=variant)
    if m["mx"]:
        mode = m["mx"].lower()
        bits, group, _ = _MLX_MODE_BITS[mode]
        return QuantInfo(format="mlx", quant=mode, bits_per_weight=mlx_bits_per_weight(bits, group, mode),
                         base_name=base, group_size=group, mode=mode, variant=variant)
    bits = int(m["bits"])
    return QuantInfo(format="mlx", quant=f"{bits}bit", bits_per_weight=mlx_bits_per_weight(bits, 64),
                     base_name=base, group_size=64, mode="affine", variant=variant)


def parse_mlx_config(config: dict[str, Any], name: str = "") -> QuantInfo:
    """Read ``quantization`` (or ``quantization_config``) from an MLX config.json.

    No quantization block means the weights are stored as float (``torch_dtype`` / ``dtype`` says which).
    Per-layer overrides (mixed recipes) are keys holding dicts; the top-level bits are the default.
    """
    named = parse_mlx_name(name) if name else None
    variant = named.variant if named else ""
    base = named.base_name if named else ""
    quant = config.get("quantization") or config.get("quantization_config")
    if not isinstance(quant, dict) or "bits" not in quant:
        dtype = str(config.get("torch_dtype") or config.get("dtype") or "bfloat16")
        short = {"bfloat16": "bf16", "float16": "f16", "float32": "f32"}.get(dtype, dtype)
        return QuantInfo(format="mlx", quant=short, bits_per_weight=32.0 if short == "f32" else 16.0,
                         base_name=base, variant=variant)
    label = f"{name or 'config.json'}: quantization"
    bits = whole_number(quant["bits"], f"{label} bits", low=1, high=64, default=None)
    group = whole_number(quant.get("group_size", 64), f"{label} group_size", low=1, high=1 << 20, default=None)
    mode = str(quant.get("mode", "affine"))
    overrides = [v for v in quant.values() if isinstance(v, dict) and "bits" in v]
    label = mode if mode in _MLX_MODE_BITS else f"{bits}bit"
    if overrides and not variant:
        variant = "mixed"
    return QuantInfo(format="mlx", quant=label, bits_per_weight=mlx_bits_per_weight(bits, group, mode),
                     base_name=base, group_size=group, mode=mode, variant=variant)


# ----------------------------------------------------------------------------------------- EXL2 / EXL3

_BPW_RE = re.compile(r"(?<![0-9.])(?P<bpw>\d{1,2}(?:[._]\d{1,3})?)[-_ ]?bpw(?:[-_]?h(?P<head>\d))?",
                     re.IGNORECASE)
_HEAD_RE = re.compile(r"(?<![A-Za-z0-9])h(?P<head>[4-8])(?![A-Za-z0-9])", re.IGNORECASE)


def format_bpw(bpw: float) -> str:
    """4.0 -> "4.0bpw", 4.65 -> "4.65bpw" (the way EXL branches are named)."""
    text = f"{bpw:.2f}".rstrip("0")
    return (text + "0" if text.endswith(".") else text) + "bpw"


def parse_exl_name(name: str, fmt: str = "") -> QuantInfo | None:
    """Bits per weight from a branch or folder name: ``4.0bpw``, ``4_65bpw``, ``Model-6.0bpw-h6-exl2``.

    ``fmt`` is "exl2" or "exl3" when the caller already knows; otherwise the name decides, and a name
    with no ``exl3`` in it is taken as EXL2 (the older, more common convention on the Hub).
    """
    match = _BPW_RE.search(name)
    if not match:
        return None
    bpw = float(match["bpw"].replace("_", "."))
    head = match["head"] or (head_match["head"] if (head_match := _HEAD_RE.search(name)) else None)
    if not fmt:
        fmt = "exl3" if "exl3" in name.lower() else "exl2"
    return QuantInfo(format=fmt, quant=format_bpw(bpw), bits_per_weight=bpw,
                     head_bits=int(head) if head else None, variant=f"h{head}" if head else "")


def parse_exl_config(config: dict[str, Any], name: str = "") -> QuantInfo | None:
    """EXL2/EXL3 config.json: ``quantization_config: {quant_method: exl2|exl3, bits, head_bits}``."""
    quant = config.get("quantization_config")
    if not isinstance(quant, dict):
        return None
    method = str(quant.get("quant_method", "")).lower()
    if method not in ("exl2", "exl3"):
        return None
    bits = quant.get("bits")
    if bits is None:
        from_name = parse_exl_name(name, method) if name else None
        return from_name
    label = f"{name or 'config.json'}: quantization_config"
    bpw = real_number(bits, f"{label} bits", low=1, high=64)
    head = whole_number(quant.get("head_bits"), f"{label} head_bits", high=64)
    return QuantInfo(format=method, quant=format_bpw(bpw), bits_per_weight=bpw,
                     head_bits=head or None, variant=f"h{head}" if head else "")


def quant_method(config: dict[str, Any]) -> str:
    """``exl2`` / ``exl3`` / ``mlx`` / another ``quant_method`` (gptq, awq ...) / "" for plain weights."""
    quant = config.get("quantization_config")
    if isinstance(quant, dict) and quant.get("quant_method"):
        return str(quant["quant_method"]).lower()
    if isinstance(config.get("quantization"), dict):
        return "mlx"
    return ""
