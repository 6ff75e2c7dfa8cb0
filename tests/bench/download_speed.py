"""Benchmark: our verified, resumable download vs a plain ``hf_hub_download`` of the same file, same run.

Both fetch one file (1 GB by default) from the local Hub stand-in on loopback (served with sendfile, so the
server is not the bottleneck). Runs alternate and the best of each is compared; the goal is ratio >= 0.95.
Ours also hashes every byte (sha256) and checks it; hf_hub_download checks only the size.

    .venv/bin/python -m tests.bench.download_speed [--size-mb 1024] [--rounds 3]
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from pathlib import Path


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size-mb", type=int, default=1024)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="qd-bench-"))
    os.environ.update(XDG_DATA_HOME=str(work / "data"), HF_HOME=str(work / "hf"), HF_HUB_DISABLE_TELEMETRY="1")
    from tests.fixtures.hub_server import HubServer

    blob = work / "bench-Q4_K_M.gguf"
    with open(blob, "wb") as fh:
        chunk = os.urandom(16 * 1024 * 1024)
        for _ in range(args.size_mb // 16):
            fh.write(chunk)
    server = HubServer().start()
    try:
        server.add_repo("bench/big-GGUF", {blob.name: blob}, tags=["gguf"])
        os.environ["HF_ENDPOINT"] = server.url
        from huggingface_hub import hf_hub_download

        from app.hub.download import Settings, download
        from app.hub.plan import DownloadRequest
        from app.hub.library import Library

        size = blob.stat().st_size
        ours, theirs = [], []
        for round_no in range(args.rounds):
            cache = work / f"hf-cache-{round_no}"
            t0 = time.perf_counter()
            hf_hub_download("bench/big-GGUF", blob.name, cache_dir=cache, endpoint=server.url, token=False)
            theirs.append(time.perf_counter() - t0)
            shutil.rmtree(cache)

            t0 = time.perf_counter()
            result = download(DownloadRequest("bench/big-GGUF", quant="Q4_K_M"), settings=Settings(disk_reserve=0))
            ours.append(time.perf_counter() - t0)
            Library().remove("bench/big-GGUF:Q4_K_M")
            assert not result.path.exists()
            print(f"round {round_no + 1}: hf_hub_download {size / theirs[-1] / 1e6:7.0f} MB/s   "
                  f"quantdesk (sha256-verified) {size / ours[-1] / 1e6:7.0f} MB/s", flush=True)
        best_ours, best_theirs = min(ours), min(theirs)
        print(f"file {size / 1e9:.2f} GB; best of {args.rounds}: hf_hub_download {size / best_theirs / 1e6:.0f} MB/s, "
              f"quantdesk {size / best_ours / 1e6:.0f} MB/s")
        print(f"throughput ratio quantdesk / hf_hub_download = {best_theirs / best_ours:.3f} (goal >= 0.95)")
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
