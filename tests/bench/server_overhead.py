"""Benchmark: decode tok/s seen by an OpenAI client through ``quantdesk serve``'s app ÷ the EngineClient direct.

Same engine host, same model, prompt, sampling and seed (so the same tokens), runs alternating server/direct
so drift on a noisy machine hits both. Both sides time the pieces of text as they arrive: the direct side as
EngineClient Token events, the server side as SSE chunks in the official ``openai`` client over a real
socket on 127.0.0.1. Decode rate = (tokens - 1) / (last piece - first piece); TTFT is request to first piece.

    python -m tests.bench.server_overhead [--runs 5] [--tokens 64] [--spec qwen2.5-0.5b-shape]

Goal: ratio >= 0.97, and the server adds a few milliseconds at most to TTFT.
"""

from __future__ import annotations

import argparse
import statistics
import time

import openai

from app.engine.client import EngineClient
from app.server.app import create_app, model_id
from app.server.thread import ServerThread
from app.datatypes import LoadSettings, Message, SamplingSettings, Token
from tests.fixtures.models import SPECS, build_model_set

PROMPT = "Write a short story about a lighthouse keeper who finds a message in a bottle."


def _rate(times: list[float], tokens: int) -> float:
    """Tokens after the first over the time from the first piece of text to the last (tokens come in chunks)."""
    return (tokens - 1) / (times[-1] - times[0]) if len(times) > 1 and tokens > 1 else 0.0


def direct_run(client: EngineClient, sampling: SamplingSettings) -> tuple[float, float, int]:
    start, times, tokens = time.perf_counter(), [], 0
    for event in client.generate([Message("user", PROMPT)], sampling):
        if isinstance(event, Token) and event.text:
            times.append(time.perf_counter())
        if isinstance(event, Token):
            tokens += event.count
    return _rate(times, tokens), (times[0] - start) * 1000 if times else 0.0, tokens


def server_run(oai: openai.OpenAI, model: str, sampling: SamplingSettings) -> tuple[float, float, int]:
    start, times, tokens = time.perf_counter(), [], 0
    stream = oai.chat.completions.create(model=model, messages=[{"role": "user", "content": PROMPT}], stream=True,
                                         max_tokens=sampling.max_tokens, seed=sampling.seed,
                                         temperature=sampling.temperature, top_p=sampling.top_p,
                                         stream_options={"include_usage": True},
                                         extra_body={"top_k": sampling.top_k, "min_p": sampling.min_p,
                                                     "repeat_penalty": sampling.repeat_penalty})
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            times.append(time.perf_counter())
        if chunk.usage:
            tokens = chunk.usage.completion_tokens
    return _rate(times, tokens), (times[0] - start) * 1000 if times else 0.0, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=64)
    parser.add_argument("--spec", default="qwen2.5-0.5b-shape", choices=sorted(SPECS))
    args = parser.parse_args()
    models = build_model_set(SPECS[args.spec])
    direct, served = [], []
    with EngineClient() as client:
        client.load(models.gguf_q4_k_m, LoadSettings(n_ctx=1024))
        name = model_id(client.loaded.model_path)
        with ServerThread(create_app(client)) as server, \
                openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0) as oai:
            # Random weights may end a reply at once: take the seed (of a few) that talks longest. This also
            # warms up, so first-run allocations hit neither side's figures.
            candidates = [SamplingSettings(max_tokens=args.tokens, seed=seed) for seed in range(8)]
            sampling = max(candidates, key=lambda s: direct_run(client, s)[2])
            for _ in range(args.runs):
                direct.append(direct_run(client, sampling))
                served.append(server_run(oai, name, sampling))
    print(f"model: {args.spec} Q4_K_M shapes, random weights; {args.runs} alternating runs, "
          f"tokens/run {min(r[2] for r in direct + served)}-{max(r[2] for r in direct + served)}")
    for label, runs in (("EngineClient direct", direct), ("server + openai client", served)):
        rates, ttfts = [r[0] for r in runs], [r[1] for r in runs]
        print(f"  {label:<24} median {statistics.median(rates):7.2f} tok/s  (min {min(rates):.2f}, "
              f"max {max(rates):.2f}) · TTFT median {statistics.median(ttfts):7.1f} ms")
    ratio = statistics.median(r[0] for r in served) / statistics.median(r[0] for r in direct)
    ttft_added = statistics.median(r[1] for r in served) - statistics.median(r[1] for r in direct)
    print(f"  ratio server/direct = {ratio:.3f}  (goal >= 0.97) · TTFT added {ttft_added:+.1f} ms")


if __name__ == "__main__":
    main()
