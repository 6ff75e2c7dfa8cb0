"""Reading a GGUF header with a real model's vocabulary size: gguf.GGUFReader against our reader
(app.models.metadata.read_gguf_header), side by side in one run.

    python -m tests.bench.gguf_header [--vocab 151936] [--rounds 3]

Every load, library listing and fit check reads the header, so this is time a user waits each time.
The file is vocab-only (tokens, scores, types and merges of a Qwen2.5-sized vocabulary, written by the
gguf package), which is all a header holds beyond a few hundred tensor entries.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path


def write_vocab_gguf(path: Path, vocab: int) -> Path:
    import gguf

    writer = gguf.GGUFWriter(str(path), "qwen2")
    writer.add_tokenizer_model("gpt2")
    writer.add_token_list([f"tok{i}" for i in range(vocab)])
    writer.add_token_types([1] * vocab)
    writer.add_token_merges([f"t{i} ok{i}" for i in range(vocab - 256)])
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def best_of(fn, rounds: int) -> tuple[float, float]:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times), statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--vocab", type=int, default=151_936)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    import gguf

    from app.models.metadata import read_gguf_header

    with tempfile.TemporaryDirectory() as tmp:
        path = write_vocab_gguf(Path(tmp) / "vocab.gguf", args.vocab)
        print(f"header of {path.stat().st_size / 2**20:.1f} MiB, {args.vocab:,} tokens; best / median of {args.rounds}")
        package = best_of(lambda: gguf.GGUFReader(path), args.rounds)
        ours = best_of(lambda: read_gguf_header(path), args.rounds)
    print(f"gguf.GGUFReader   {package[0] * 1000:8.0f} ms / {package[1] * 1000:8.0f} ms")
    print(f"read_gguf_header  {ours[0] * 1000:8.0f} ms / {ours[1] * 1000:8.0f} ms")
    print(f"ratio (best)      {package[0] / ours[0]:8.1f}x faster")


if __name__ == "__main__":
    main()
