"""Benchmark: a local model reached as a remote engine (QuantDesk's server on this machine, through the remote
backend in its own engine host) ÷ the same model through the local engine host directly.

One engine host holds the model; a QuantDesk server runs over it on 127.0.0.1; a second engine host runs the remote
backend against that server. Same prompt, sampling and seed, so the same tokens; runs alternate so drift on a noisy
machine hits both. Decode tok/s and TTFT come from each side's own GenerationStats, as the Chat shows them: for the
remote side they are measured in its engine host as the chunks arrive over HTTP.

    python -m tests.bench.remote_overhead [--runs 7] [--tokens 64] [--spec qwen2.5-0.5b-shape]

Goal: remote ÷ local decode tok/s >= 0.95.
"""

from __future__ import annotations

import argparse
import os
import statistics

from app.engine.client import EngineClient
from app.remote.connections import Connection, Connections, model_ref
from app.server.app import create_app, model_id
from app.server.thread import ServerThread
from app.datatypes import Done, LoadSettings, Message, SamplingSettings
from tests.fixtures.models import SPECS, build_model_set

PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."


def run(client: EngineClient, sampling: SamplingSettings):
    return next(e for e in client.generate([Message("user", PROMPT)], sampling) if isinstance(e, Done)).stats


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--spec", default="qwen2.5-0.5b-shape", choices=sorted(SPECS))
    args = parser.parse_args()
    models = build_model_set(SPECS[args.spec])
    local_runs, remote_runs = [], []
    with EngineClient() as local:
        local.load(models.gguf_q4_k_m, LoadSettings(n_ctx=1024))
        # A connection of its own in the user's list for the length of the run (the remote backend's host finds
        # connections there), removed again whatever happens.
        name = f"quantdesk-bench-{os.getpid()}"
        with ServerThread(create_app(local)) as server, EngineClient() as remote:
            Connections().save(Connection(name, f"{server.url}/v1"))
            try:
                remote.load(model_ref(name, model_id(local.loaded.model_path)))
            finally:
                Connections().remove(name)
            # Random weights may end a reply at once: take the seed (of a few) that talks longest (also a warm-up).
            candidates = [SamplingSettings(max_tokens=args.tokens, seed=seed) for seed in range(8)]
            sampling = max(candidates, key=lambda s: run(local, s).generated_tokens)
            run(remote, sampling)
            for _ in range(args.runs):
                local_runs.append(run(local, sampling))
                remote_runs.append(run(remote, sampling))
    print(f"model: {args.spec} Q4_K_M shapes, random weights; {args.runs} alternating runs, "
          f"{local_runs[0].generated_tokens} tokens a run")
    for label, runs in (("local engine host", local_runs), ("remote (QuantDesk server)", remote_runs)):
        rates, ttfts = [s.decode_tps for s in runs], [s.ttft_ms for s in runs]
        print(f"  {label:<26} median {statistics.median(rates):7.2f} tok/s (min {min(rates):.2f}, max "
              f"{max(rates):.2f}) · TTFT median {statistics.median(ttfts):7.1f} ms")
    ratio = statistics.median(s.decode_tps for s in remote_runs) / statistics.median(s.decode_tps for s in local_runs)
    added = statistics.median(s.ttft_ms for s in remote_runs) - statistics.median(s.ttft_ms for s in local_runs)
    print(f"  ratio remote/local = {ratio:.3f}  (goal >= 0.95) · TTFT added {added:+.1f} ms")


if __name__ == "__main__":
    main()
