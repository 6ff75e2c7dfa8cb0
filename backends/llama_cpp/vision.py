"""Images through llama.cpp's multimodal library (libmtmd, llama-cpp-python's ``mtmd_cpp``): the projector checked and
loaded beside the model, a prompt with images cut into text and image chunks, and an image chunk evaluated into the
model's KV cache. The token loop (backends/llama_cpp/loop.py) decides what of the cache each prompt reuses.
"""

from __future__ import annotations

import ctypes
import hashlib
import zlib
from collections.abc import Sequence
from types import ModuleType
from typing import TYPE_CHECKING, Any

from app.datatypes import LoadSettings, Message
from backends.base import GenerationError, physical_cores

if TYPE_CHECKING:
    from llama_cpp import Llama

    from app.models.vision import ProjectorInfo

# One chunk of a prompt with images: the chunk, the units it puts in the KV cache (its tokens, or a marker per
# position of an image, made from the image's id), and whether it is text.
ChunkUnits = tuple[Any, list[int], bool]


def checked_projector(model_path: str, mmproj: str) -> ProjectorInfo:
    """The projector's header, checked against the model's before either loads (app/models/vision)."""
    from app.errors import ModelFileError
    from app.models import metadata, vision

    try:
        projector = vision.read_projector(mmproj)
        vision.check_pair(metadata.read_model(model_path), projector)
    except ModelFileError as exc:
        raise GenerationError("projector", exc.message, exc.hint) from None
    return projector


def load_projector(llm: Llama, settings: LoadSettings, projector: ProjectorInfo) -> Any:
    """llama.cpp's multimodal context (libmtmd) for the projector, on the model just loaded: it encodes images
    into embeddings the text model decodes. On the GPU when the model's layers are there. The caller unloads the
    model when this raises."""
    from llama_cpp import mtmd_cpp

    params = mtmd_cpp.mtmd_context_params_default()
    params.use_gpu = settings.gpu_layers != 0
    params.n_threads = settings.threads or physical_cores()
    params.print_timings = False
    ctx = mtmd_cpp.mtmd_init_from_file(settings.mmproj.encode(), llm.model, params)
    if not ctx:
        raise GenerationError("projector", f"llama.cpp could not load the vision projector {projector.file_name}",
                              "see the engine log for llama.cpp's reason")
    if not mtmd_cpp.mtmd_support_vision(ctx):
        mtmd_cpp.mtmd_free(ctx)
        raise GenerationError("projector", f"{projector.file_name} has no vision encoder")
    return ctx


def free(mtmd: Any) -> None:
    from llama_cpp import mtmd_cpp

    mtmd_cpp.mtmd_free(mtmd)


def content(message: Message, marker: str) -> str:
    """A message's text for the template, with one media marker per image ahead of it (libmtmd puts each image's
    embeddings where its marker is). In a prompt with images a marker typed in any text is dropped, or images and
    markers would not pair up."""
    if not marker:
        return message.content
    text = message.content.replace(marker, "")
    return marker * len(message.images) + "\n" + text if message.images else text


def default_marker() -> str:
    from llama_cpp import mtmd_cpp

    return str(mtmd_cpp.mtmd_default_marker().decode())


def media_chunks(mtmd: Any, prompt: str, images: Sequence[str]) -> Any:
    """The prompt cut by libmtmd into text chunks and image chunks (each image decoded and checked first,
    app/images); the caller frees them with ``free_chunks``."""
    from llama_cpp import mtmd_cpp

    from app import images as image_files

    if mtmd is None:
        raise GenerationError("vision", "this model does not see images: it was loaded without a vision projector",
                              "remove the image, or load a vision model with its mmproj file")
    bitmaps = []
    try:
        for n, encoded in enumerate(images, 1):
            try:
                width, height, rgb = image_files.decode_rgb(image_files.from_base64(encoded))
            except image_files.ImageError as exc:
                raise GenerationError("image", f"image {n}: {exc.message}") from None
            bitmap = mtmd_cpp.mtmd_bitmap_init(width, height, (ctypes.c_ubyte * len(rgb)).from_buffer_copy(rgb))
            if not bitmap:
                raise GenerationError("image", f"image {n}: llama.cpp could not take it")
            bitmaps.append(bitmap)
            # the image's chunk carries this id: the next prompt with the same image reuses its KV cells
            mtmd_cpp.mtmd_bitmap_set_id(bitmap, hashlib.sha256(encoded.encode()).hexdigest().encode())
        text = prompt.encode("utf-8")
        inp = mtmd_cpp.mtmd_input_text()
        inp.text, inp.text_len, inp.add_special, inp.parse_special = text, len(text), True, True
        chunks = mtmd_cpp.mtmd_input_chunks_init()
        array = (mtmd_cpp.mtmd_bitmap_p_ctypes * len(bitmaps))(*bitmaps)
        status = mtmd_cpp.mtmd_tokenize(mtmd, chunks, ctypes.byref(inp), array, len(bitmaps))
        if status != 0:
            mtmd_cpp.mtmd_input_chunks_free(chunks)
            raise GenerationError("image", f"llama.cpp could not place the images in the prompt (mtmd_tokenize "
                                           f"returned {status})", "see the engine log for llama.cpp's reason")
        return chunks
    finally:
        for bitmap in bitmaps:  # the chunks hold their own copies of the images' tokens
            mtmd_cpp.mtmd_bitmap_free(bitmap)


def free_chunks(chunks: Any) -> None:
    from llama_cpp import mtmd_cpp

    mtmd_cpp.mtmd_input_chunks_free(chunks)


def n_positions(chunks: Any) -> int:
    """How many positions of the context the prompt's chunks take."""
    from llama_cpp import mtmd_cpp

    return int(mtmd_cpp.mtmd_helper_get_n_pos(chunks))


def chunk_units(chunks: Any) -> list[ChunkUnits]:
    """Each chunk with the units it puts in the KV cache: a text chunk's tokens, or for an image a marker per
    position made from its id (so the same image in the next prompt is the same units, and its cells are reused)."""
    from llama_cpp import mtmd_cpp

    pieces: list[ChunkUnits] = []
    for i in range(mtmd_cpp.mtmd_input_chunks_size(chunks)):
        chunk = mtmd_cpp.mtmd_input_chunks_get(chunks, i)
        if mtmd_cpp.mtmd_input_chunk_get_type(chunk) == mtmd_cpp.MTMD_INPUT_CHUNK_TYPE_TEXT:
            n = ctypes.c_size_t()
            tokens = mtmd_cpp.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
            pieces.append((chunk, list(tokens[:n.value]), True))
        else:
            marker = -1 - (zlib.crc32(mtmd_cpp.mtmd_input_chunk_get_id(chunk) or b"") & 0x3FFFFFFF)
            pieces.append((chunk, [marker] * int(mtmd_cpp.mtmd_input_chunk_get_n_pos(chunk)), False))
    return pieces


def uses_mrope(mtmd: Any) -> bool:
    """Whether the model places an image's positions otherwise than one per cell (M-RoPE, Qwen-VL): then no prefix
    of the cache is reused."""
    from llama_cpp import mtmd_cpp

    return bool(mtmd_cpp.mtmd_decode_use_mrope(mtmd))


def eval_image(llama_cpp: ModuleType, mtmd: Any, llm: Llama, chunk: Any, position: int, last: bool) -> int:
    """Encode an image chunk with the projector and decode its embeddings at ``position``
    (mtmd_helper_eval_chunk_single); llama_decode's status."""
    from llama_cpp import mtmd_cpp

    n_past = llama_cpp.llama_pos(0)
    return int(mtmd_cpp.mtmd_helper_eval_chunk_single(mtmd, llm.ctx, chunk, position, 0, llm.n_batch, last,
                                                      ctypes.byref(n_past)))
