"""Vision projector sizing against llama.cpp itself (a benchmark script, not a test).

For each projector shape: write it with random weights (tests/fixtures/models.write_mmproj, LLaVA-style "mlp"
projectors as clip.cpp loads them), load it IN A CHILD PROCESS through libmtmd beside the tiny text model (as
backends/llama_cpp/vision.py does, warm-up included), encode one image, and compare app.models.vision's prediction with
what llama.cpp logs: the projector's weights ("load_hparams: model size"), its compute buffer
("reserve_compute_meta: CPU compute buffer size") and the tokens one image takes ("image_tokens->nx/ny" of the
chunk mtmd makes). Prints predicted / measured ratios; the acceptance bound is max(3 %, 32 MiB) on weights +
compute + the image's embeddings.

    .venv/bin/python -m tests.bench.fit_vision [--out DIR]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from app.models.vision import read_projector  # noqa: E402
from tests.fixtures.models import TINY, TINY_PROJECTOR, ProjectorSpec, build_model_set, write_mmproj  # noqa: E402

MiB = 1 << 20
SHAPES = [
    ("tiny test projector (ViT 64x2, 32 px)", TINY_PROJECTOR),
    ("ViT-B/16 shape (768x12, 224 px)", ProjectorSpec("vit-b16-shape", text_embd=TINY.n_embd, n_embd=768, n_head=12,
                                                      n_ff=3072, n_layer=12, image_size=224, patch_size=16)),
    ("CLIP ViT-L/14-336 shape, 6 of 24 layers", ProjectorSpec("vit-l14-336-shape", text_embd=TINY.n_embd,
                                                              n_embd=1024, n_head=16, n_ff=4096, n_layer=6,
                                                              image_size=336, patch_size=14)),
    # Not used to fit compute_bytes: a check of the formula on a shape it has not seen.
    ("SigLIP-So400m/14-384 shape, 3 of 27 layers", ProjectorSpec("siglip-so400m-shape", text_embd=TINY.n_embd,
                                                                 n_embd=1152, n_head=16, n_ff=4304, n_layer=3,
                                                                 image_size=384, patch_size=14)),
]

CHILD = r"""
import ctypes, sys
import llama_cpp
from llama_cpp import mtmd_cpp as m
from PIL import Image
llm = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=2048, n_gpu_layers=0, verbose=False)
p = m.mtmd_context_params_default()
p.use_gpu = False
p.n_threads = 2
ctx = m.mtmd_init_from_file(sys.argv[2].encode(), llm.model, p)
assert ctx, "mtmd_init_from_file failed"
image = Image.new("RGB", (640, 480), (120, 30, 200))
rgb = image.tobytes()
bitmap = m.mtmd_bitmap_init(640, 480, (ctypes.c_ubyte * len(rgb)).from_buffer_copy(rgb))
marker = m.mtmd_default_marker()
text = b"look: " + marker
inp = m.mtmd_input_text()
inp.text, inp.text_len, inp.add_special, inp.parse_special = text, len(text), True, True
chunks = m.mtmd_input_chunks_init()
assert m.mtmd_tokenize(ctx, chunks, ctypes.byref(inp), (m.mtmd_bitmap_p_ctypes * 1)(bitmap), 1) == 0
for i in range(m.mtmd_input_chunks_size(chunks)):
    chunk = m.mtmd_input_chunks_get(chunks, i)
    if m.mtmd_input_chunk_get_type(chunk) == m.MTMD_INPUT_CHUNK_TYPE_IMAGE:
        print(f"IMAGE_TOKENS {m.mtmd_input_chunk_get_n_tokens(chunk)}", file=sys.stderr, flush=True)
"""


def _logged(stderr: str) -> dict[str, float]:
    def mib(pattern: str) -> float:
        found = re.findall(pattern, stderr)
        if not found:
            raise SystemExit(f"llama.cpp's log has no {pattern!r}:\n{stderr[-3000:]}")
        return float(found[-1]) * MiB

    return {"weights": mib(r"load_hparams: model size:\s+([\d.]+) MiB"),
            "compute": mib(r"CPU compute buffer size =\s+([\d.]+) MiB"),
            "image_tokens": float(re.findall(r"IMAGE_TOKENS (\d+)", stderr)[-1])}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, help="where to write the projectors (default: a temporary folder)")
    args = parser.parse_args()
    text = build_model_set(TINY, mlx=False).gguf_q8_0
    out = args.out or Path(tempfile.mkdtemp(prefix="fit-vision-"))
    out.mkdir(parents=True, exist_ok=True)
    print(f"{'projector':42} {'':>8} {'predicted':>11} {'llama.cpp':>11} {'ratio':>7}")
    worst = 0.0
    for label, spec in SHAPES:
        path = write_mmproj(spec, out / f"mmproj-{spec.name}-F16.gguf")
        info = read_projector(path)
        child = subprocess.run([sys.executable, "-c", CHILD, str(text), str(path)], capture_output=True, text=True,
                               timeout=1800)
        if child.returncode != 0:
            print(child.stderr[-3000:], file=sys.stderr)
            return 1
        measured = _logged(child.stderr)
        image_embd = measured["image_tokens"] * info.output_width * 4  # the encoded image, F32, before decoding
        predicted = {"weights": info.weights_bytes, "compute": info.compute_bytes(),
                     "image_tokens": info.image_tokens}
        for key, unit in (("weights", "MiB"), ("compute", "MiB"), ("image_tokens", "tokens")):
            scale = MiB if unit == "MiB" else 1
            ratio = predicted[key] / measured[key] if measured[key] else float("nan")
            print(f"{label if key == 'weights' else '':42} {key:>12} {predicted[key] / scale:>9.2f} "
                  f"{measured[key] / scale:>9.2f} {unit:>6} {ratio:>6.3f}")
        total_predicted = predicted["weights"] + predicted["compute"] + info.embeddings_bytes()
        total_measured = measured["weights"] + measured["compute"] + image_embd
        error = abs(total_predicted - total_measured)
        bound = max(0.03 * total_measured, 32 * MiB)
        worst = max(worst, error / bound)
        print(f"{'':42} {'total':>12} {total_predicted / MiB:>9.2f} {total_measured / MiB:>9.2f} {'MiB':>6} "
              f"{total_predicted / total_measured:>6.3f}  error {error / MiB:.2f} MiB, bound {bound / MiB:.1f} MiB "
              f"{'ok' if error <= bound else 'OVER'}")
    print(f"worst error / bound: {worst:.3f} ({'within' if worst <= 1 else 'outside'} max(3 %, 32 MiB))")
    return 0 if worst <= 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
