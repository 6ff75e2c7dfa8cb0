"""Vision projectors (``mmproj-*.gguf``): what one is, whether it pairs with a text model, what an image costs.

In GGUF a vision model is two files: the text model and its projector, a CLIP-style vision encoder plus the layers
that map its features into the text model's embedding space (llama.cpp's ``tools/mtmd``). Everything here is read
from the two headers, before anything loads: llama.cpp itself only notices a wrong pair once both are in memory
(``mtmd_init_from_file``: "mismatch between text model (n_embd = …) and mmproj (n_embd = …)"), and a pair of
another family loads but answers nonsense.

Pure: header key/values and tensor tables in, typed results out (no file or network access but ``read_projector``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from app.errors import ModelFileError
from app.models.metadata import ModelMetadata, TensorInfo, read_gguf_header

PROJECTOR_ARCH = "clip"  # general.architecture of every llama.cpp projector file

# Where clip.cpp's clip_n_mmproj_embd reads the width a projector outputs (tools/mtmd/clip.cpp): tensor name and
# the ggml dimension. That width must equal the text model's input embedding width.
_OUTPUT_WIDTH: dict[str, tuple[str, int]] = {
    **{t: ("mm.2.weight", 1) for t in ("mlp", "phi4", "pixtral", "lightonocr", "ultravox", "voxtral", "lfm2",
                                       "kimivl", "paddleocr", "yasa2", "qwen3a", "glma")},
    "mlp_norm": ("mm.3.bias", 0),
    **{t: ("mm.1.bias", 0) for t in ("qwen2vl_merger", "qwen2.5vl_merger", "qwen3vl_merger", "janus_pro",
                                     "youtuvl", "ling3vl")},
    "gemma3": ("mm.input_projection.weight", 0),
    "gemma3nv": ("mm.input_projection.weight", 0),
    **{t: ("mm.input_projection.weight", 1) for t in ("gemma4v", "gemma4uv")},
    **{t: ("mm.model.fc.weight", 1) for t in ("idefics3", "llama4", "deepseekocr")},
    "internvl": ("mm.3.weight", 1),
}

# Text architectures a projector type was made for, where the family is fixed (llama.cpp's convert_hf_to_gguf
# writes both files of each pair). Types not listed (the LLaVA "mlp" family, InternVL, …) pair with many.
_FAMILIES: dict[str, frozenset[str]] = {
    "gemma3": frozenset({"gemma3"}),
    "gemma3nv": frozenset({"gemma3n"}),
    "gemma4v": frozenset({"gemma4"}),
    "gemma4uv": frozenset({"gemma4"}),
    "qwen2vl_merger": frozenset({"qwen2vl"}),
    "qwen2.5vl_merger": frozenset({"qwen2vl"}),
    "qwen3vl_merger": frozenset({"qwen3vl", "qwen3vlmoe"}),
    "llama4": frozenset({"llama4"}),
    "lfm2": frozenset({"lfm2", "lfm2moe"}),
    "idefics3": frozenset({"llama"}),
    "pixtral": frozenset({"llama", "mistral3"}),
    "kimivl": frozenset({"deepseek2"}),
}

# Tokens that merge into one image token, per side, where the header does not say (clip.cpp's load_hparams).
_DEFAULT_MERGE = {"gemma3": 4, "qwen2vl_merger": 2, "qwen2.5vl_merger": 2, "qwen3vl_merger": 2, "idefics3": 3,
                  "lfm2": 2, "kimivl": 2, "llama4": 2, "internvl": 2, "pixtral": 1}


class ProjectorError(ModelFileError):
    """A projector that is not one, or that does not pair with the text model."""


@dataclass(frozen=True)
class ProjectorInfo:
    """A vision projector as its header describes it."""

    file_name: str
    projector_type: str  # clip.projector_type: mlp, gemma3, qwen2.5vl_merger, idefics3, …
    output_width: int  # the text embedding width it produces (0 when the header does not say)
    n_embd: int  # the vision encoder's width
    n_layer: int
    n_head: int
    n_ff: int
    image_size: int  # the encoder's input side, pixels
    patch_size: int
    merge: int  # patches per side that become one token
    max_pixels: int  # dynamic-resolution families: the most pixels an image is resized to (0: fixed size)
    weights_bytes: int
    precision: str  # F16, Q8_0, … (the most common tensor type by bytes)
    class_token: bool = False  # a CLIP class embedding (v.class_embd): one more position in the encoder

    @property
    def patches_per_side(self) -> int:
        return self.image_size // self.patch_size if self.patch_size else 0

    @property
    def image_tokens(self) -> int:
        """Context tokens one image takes, at most: a fixed-size family always takes this many; a dynamic one
        (Qwen-VL) up to this many at its largest resize."""
        if self.max_pixels and self.patch_size:
            return max(self.max_pixels // (self.patch_size * self.merge) ** 2, 1)
        side = self.patches_per_side // max(self.merge, 1)
        return max(side * side, 1)

    @property
    def encoder_positions(self) -> int:
        """Positions the vision encoder attends over for one image (its largest graph)."""
        if self.max_pixels and self.patch_size:
            return self.max_pixels // (self.patch_size ** 2)
        return self.patches_per_side ** 2 + (1 if self.class_token else 0)

    def compute_bytes(self) -> int:
        """The encoder's compute buffer for one image, as ggml's allocator sizes it with flash attention (libmtmd's
        default where the device has it, as on CPUs): at its peak a block holds the MLP's hidden layer and three
        hidden-state-wide tensors per position, and one positions x positions F32 tile. Fitted to llama.cpp's
        "compute buffer size" line on ViT-B/16 and ViT-L/14-336 shapes by tests/bench/fit_vision.py (within 4 %)."""
        n = self.encoder_positions
        return n * (self.n_ff + 3 * self.n_embd) * 4 + n * n * 4

    def embeddings_bytes(self) -> int:
        """One encoded image, F32, as libmtmd holds it until the text model has decoded it."""
        return self.image_tokens * self.output_width * 4


def is_projector(kv: dict[str, Any]) -> bool:
    return kv.get("general.architecture") == PROJECTOR_ARCH


def _int(kv: dict[str, Any], key: str) -> int:
    value = kv.get(key)
    return int(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0


def projector_from_header(kv: dict[str, Any], tensors: list[TensorInfo], file_name: str) -> ProjectorInfo:
    """A projector's header, typed; ProjectorError naming the file for a header that is not a vision projector."""
    if not is_projector(kv):
        raise ProjectorError(f"{file_name} is not a vision projector (its architecture is "
                             f"{kv.get('general.architecture')!r}, not 'clip').")
    if kv.get("clip.has_vision_encoder") is False:
        raise ProjectorError(f"{file_name} has no vision encoder (an audio-only projector).")
    projector_type = str(kv.get("clip.projector_type") or kv.get("clip.vision.projector_type") or "")
    if not projector_type:
        raise ProjectorError(f"{file_name} does not say its projector type (clip.projector_type).")
    by_name = {t.name: t for t in tensors}
    output_width = 0
    where = _OUTPUT_WIDTH.get(projector_type)
    if where and where[0] in by_name and len(by_name[where[0]].shape) > where[1]:
        output_width = int(by_name[where[0]].shape[where[1]])
    if projector_type == "qwen3vl_merger" and output_width:
        deepstack = kv.get("clip.vision.is_deepstack_layers") or []
        output_width *= 1 + sum(1 for flag in deepstack if flag)
    if not output_width:
        output_width = _int(kv, "clip.vision.projection_dim")
    merge = (_int(kv, "clip.vision.spatial_merge_size") or _int(kv, "clip.vision.projector.scale_factor")
             or _DEFAULT_MERGE.get(projector_type, 1))
    by_type: dict[str, int] = {}
    for t in tensors:
        by_type[t.dtype] = by_type.get(t.dtype, 0) + t.n_bytes
    return ProjectorInfo(
        file_name=file_name, projector_type=projector_type, output_width=output_width,
        n_embd=_int(kv, "clip.vision.embedding_length"), n_layer=_int(kv, "clip.vision.block_count"),
        n_head=_int(kv, "clip.vision.attention.head_count"), n_ff=_int(kv, "clip.vision.feed_forward_length"),
        image_size=_int(kv, "clip.vision.image_size"), patch_size=_int(kv, "clip.vision.patch_size"),
        merge=merge, max_pixels=_int(kv, "clip.vision.image_max_pixels"),
        weights_bytes=sum(t.n_bytes for t in tensors),
        precision=max(by_type, key=lambda k: by_type[k]) if by_type else "",
        class_token="v.class_embd" in by_name,
    )


def read_projector(path: str | Path) -> ProjectorInfo:
    path = Path(path)
    if not path.is_file():
        raise ProjectorError(f"No such projector file: {path}.")
    kv, tensors, _ = read_gguf_header(path)
    return projector_from_header(kv, tensors, path.name)


def check_pair(model: ModelMetadata, projector: ProjectorInfo) -> None:
    """Refuse a projector that cannot work with ``model``, in a sentence naming both files: another embedding
    width (llama.cpp would refuse it only after loading both) or another family's projector."""
    model_name = Path(model.source).name
    width = model.embedding_length
    if width and projector.output_width and projector.output_width != width:
        raise ProjectorError(
            f"{projector.file_name} does not fit {model_name}: the projector outputs embeddings "
            f"{projector.output_width} wide, the model takes {width}.",
            "use the mmproj file from the same repository as the model")
    families = _FAMILIES.get(projector.projector_type)
    if families and model.architecture and model.architecture not in families:
        raise ProjectorError(
            f"{projector.file_name} is a {projector.projector_type} projector, made for "
            f"{' / '.join(sorted(families))} models; {model_name} is a {model.architecture} model.",
            "use the mmproj file from the same repository as the model")


def _precision_rank(info: ProjectorInfo) -> tuple[int, str]:
    """F16 first (llama.cpp's own default for projectors: quantizing a vision encoder costs more quality than
    it saves memory), then BF16, F32, then quantized ones."""
    order = {"F16": 0, "BF16": 1, "F32": 2}
    return order.get(info.precision, 3), info.file_name


def find_projector(model_path: str | Path) -> Path | None:
    """The projector lying beside a GGUF model that pairs with it (``mmproj*.gguf`` in the same folder, as
    vision repos ship them), F16 preferred; None when there is none. Files that are not projectors, or do not
    pair, are skipped."""
    from app.models.metadata import read_model

    model_path = Path(model_path)
    candidates = sorted(p for p in model_path.parent.glob("*.gguf") if "mmproj" in p.name.lower() and p != model_path)
    if not candidates:
        return None
    model = read_model(model_path)
    paired: list[tuple[ProjectorInfo, Path]] = []
    for path in candidates:
        try:
            info = read_projector(path)
            check_pair(model, info)
        except ModelFileError:
            continue
        paired.append((info, path))
    return min(paired, key=lambda pair: _precision_rank(pair[0]))[1] if paired else None


def with_projector(meta: ModelMetadata, projector: str | Path | None = None) -> ModelMetadata:
    """``meta`` with the projector that loads with it attached for the estimator: ``projector`` when named (checked
    against the model), else the one beside a local GGUF that pairs with it, if any."""
    if meta.format != "gguf":
        return meta
    if projector is not None:
        info = read_projector(projector)
        check_pair(meta, info)
        meta.projector = info
        return meta
    path = Path(meta.source)
    if path.is_file():
        found = find_projector(path)
        meta.projector = read_projector(found) if found else None
    return meta
