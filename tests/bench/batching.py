"""Benchmark: continuous batching (issue 38), side by side in one run on SmolLM2-135M-Instruct Q4_1.

1. Aggregate greedy decode tok/s of 4 concurrent streaming clients through ``quantdesk serve``'s app (its model loaded
   with ``--parallel 4``, its stream chunks as serve sends them by default: at most every 40 ms; also every token in
   a chunk of its own), against llama.cpp's own batched decode of the same 4 prompts through llama-cpp-python's
   low-level API (one ``llama_batch`` of 4 sequences per step in a unified cache, argmax off each row, each sequence
   as many tokens as QuantDesk's reply to it had), and against QuantDesk's single stream (the same prompts one after
   the other). Also the 4 clients on a model loaded with ``--parallel 1`` (the queue before issue 38).
   The same 4 clients with each decode step on the thread of the reply that handed in last (QUANTDESK_DECODE_ON_CALLERS=1,
   several OpenMP teams, the way before every step got one decode thread; backends/llama_cpp/batch.py says why).
   Aggregate rate = (tokens - one per stream) / (last token of any - first token of any).
2. Time to first token of a 20-token request sent while a 500-token reply streams, against the same request alone.
3. With ``--mlx FOLDER`` instead: an MLX model (mlx-lm's BatchGenerator, backends/mlx_batch.py): the 4 clients
   through serve's app with the model loaded with ``--parallel 4``, against ``--parallel 1`` (the queue, mlx-lm's
   generate_step one reply at a time) and the single stream; for instance the generated tiny MLX model
   (``$QUANTDESK_TEST_MODELS/tiny-llama-*/mlx-f16``: random weights, every reply runs to its token limit).

    python -m tests.bench.batching [--tokens 128] [--threads N] [--runs 2] [--extra-buffer-types] [--mlx FOLDER]

Both sides load alike: llama.cpp's extra buffer types (the CPU repack, AMX) off unless asked, as the issue measured.
On a machine whose cores other work shares, llama.cpp's threads wait for each other at every graph node and a side's
figure can drop tenfold: run it on a quiet machine, and compare only figures of one run.

Goals (issue 38): batched >= 0.9x llama.cpp's batched decode, >= 1.5x the single stream; TTFT within 2x alone.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import threading
import time
import urllib.parse

from app.datatypes import LoadSettings
from app.engine.client import EngineClient
from app.server.app import STREAM_EVERY_S, create_app, model_id
from app.server.thread import ServerThread
from backends.base import physical_cores
from backends.llama_cpp.batch import DECODE_ON_CALLERS
from tests.fixtures import real_models

PROMPTS = ["Write a long story about a lighthouse keeper who finds a message in a bottle.",
           "Explain in detail how a steam engine works, step by step.",
           "Describe a journey through a busy market in a large city, with every sound and smell.",
           "Write a long letter from a sailor to his family about life at sea."]
LONG_PROMPT = ("Write a very long, detailed history of the Roman Empire, from the founding of Rome to the fall of "
               "Constantinople, with many chapters.")
SHORT_PROMPT = "What is the capital of France?"


def _body(name: str, prompt: str, max_tokens: int) -> dict:
    return {"model": name, "messages": [{"role": "user", "content": prompt}], "max_tokens": max_tokens,
            "temperature": 0, "repeat_penalty": 1.0, "stream": True, "stream_options": {"include_usage": True}}


def stream(url: str, body: dict, out: dict, ready: threading.Event | None = None, after: int = 0) -> None:
    """One streaming client: its request's send time, each content piece's arrival and its completion tokens.
    ``ready`` is set once ``after`` pieces arrived (for the TTFT test). Read with the standard library's
    http.client: the clients share the machine's cores with the decode they measure, and httpx's streaming reader
    cost 0.22-0.24 ms of CPU a token here against 0.07-0.10 (four streams, SmolLM2, a loaded 2-core machine)."""
    out["sent"], out["times"], out["tokens"] = time.perf_counter(), [], 0
    address = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(address.hostname, address.port, timeout=600)
    try:
        connection.request("POST", "/v1/chat/completions", json.dumps(body), {"Content-Type": "application/json"})
        reply = connection.getresponse()
        for line in reply:
            if not line.startswith(b"data: ") or b"[DONE]" in line:
                continue
            chunk = json.loads(line[6:])
            if chunk.get("choices") and chunk["choices"][0]["delta"].get("content"):
                out["times"].append(time.perf_counter())
                if ready is not None and len(out["times"]) >= after:
                    ready.set()
            if chunk.get("usage"):
                out["tokens"] = chunk["usage"]["completion_tokens"]
    finally:
        connection.close()
    if ready is not None:
        ready.set()


def aggregate(outs: list[dict]) -> float:
    first = min(o["times"][0] for o in outs)
    last = max(o["times"][-1] for o in outs)
    return sum(o["tokens"] - 1 for o in outs) / (last - first)


def together(url: str, name: str, tokens: int) -> tuple[float, list[int]]:
    outs = [{} for _ in PROMPTS]
    threads = [threading.Thread(target=stream, args=(url, _body(name, p, tokens), o))
               for p, o in zip(PROMPTS, outs, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return aggregate(outs), [o["tokens"] for o in outs]


def single(url: str, name: str, tokens: int) -> float:
    rates = []
    for prompt in PROMPTS:
        out: dict = {}
        stream(url, _body(name, prompt, tokens), out)
        rates.append((out["tokens"] - 1) / (out["times"][-1] - out["times"][0]))
    return statistics.mean(rates)


def ttft(url: str, name: str) -> tuple[float, float, int]:
    """TTFT (ms) of a 20-token request alone, then sent while a 500-token reply streams (after its 20th piece)."""
    alone: dict = {}
    stream(url, _body(name, SHORT_PROMPT, 20), alone)
    long_out: dict = {}
    ready = threading.Event()
    runner = threading.Thread(target=stream, args=(url, _body(name, LONG_PROMPT, 500), long_out, ready, 20))
    runner.start()
    ready.wait()
    beside: dict = {}
    stream(url, _body(name, SHORT_PROMPT, 20), beside)
    still_streaming = long_out["times"][-1] > beside["times"][0] if long_out["times"] else False
    runner.join()
    if not still_streaming:
        print("  (the long reply ended before the short one's first token)", file=sys.stderr)
    return ((alone["times"][0] - alone["sent"]) * 1000, (beside["times"][0] - beside["sent"]) * 1000,
            long_out["tokens"])


def llama_batched(path: str, threads: int, lengths: list[int], extra_buffer_types: bool) -> float:
    """llama.cpp's own batched decode: the 4 chat prompts read in one batch, then one llama_batch of the 4
    sequences' next tokens per step, the argmax of each row, each sequence ending after its length in tokens."""
    import llama_cpp
    import numpy as np

    from backends.chat_format import template as chat_template
    from backends.llama_cpp.load import choosing_extra_buffer_types, sequences

    with sequences(llama_cpp, len(PROMPTS)), choosing_extra_buffer_types(llama_cpp, extra_buffer_types):
        llm = llama_cpp.Llama(str(path), n_ctx=4096, n_threads=threads, n_gpu_layers=0, verbose=False, swa_full=False)
    try:
        ctx, n_vocab = llm.ctx, llm.n_vocab()
        template = real_models.chat_template(llm.metadata)
        batch = llama_cpp.llama_batch_init(512, 0, 1)
        positions, next_tokens, times = [], [], [[] for _ in PROMPTS]
        k, last_rows = 0, []
        for seq, prompt in enumerate(PROMPTS):  # the 4 prompts read in one batch, as llama-server's slots start
            text = chat_template.render(template, [{"role": "user", "content": prompt}])
            tokens = llm.tokenize(text.encode(), add_bos=True, special=True)
            for i, t in enumerate(tokens):
                batch.token[k], batch.pos[k], batch.n_seq_id[k], batch.seq_id[k][0] = t, i, 1, seq
                batch.logits[k] = i == len(tokens) - 1
                k += 1
            last_rows.append(k - 1)
            positions.append(len(tokens))
        batch.n_tokens = k
        assert llama_cpp.llama_decode(ctx, batch) == 0
        for seq, row in enumerate(last_rows):
            logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, row), shape=(n_vocab,))
            next_tokens.append(int(logits.argmax()))
            times[seq].append(time.perf_counter())
        made = [1] * len(PROMPTS)
        while True:
            live = [s for s in range(len(PROMPTS)) if made[s] < lengths[s]]
            if not live:
                break
            for row, seq in enumerate(live):
                batch.token[row], batch.pos[row], batch.n_seq_id[row], batch.seq_id[row][0] = \
                    next_tokens[seq], positions[seq], 1, seq
                batch.logits[row] = True
            batch.n_tokens = len(live)
            assert llama_cpp.llama_decode(ctx, batch) == 0
            for row, seq in enumerate(live):
                logits = np.ctypeslib.as_array(llama_cpp.llama_get_logits_ith(ctx, row), shape=(n_vocab,))
                next_tokens[seq] = int(logits.argmax())
                positions[seq] += 1
                made[seq] += 1
                times[seq].append(time.perf_counter())
        llama_cpp.llama_batch_free(batch)
    finally:
        llm.close()
    return aggregate([{"times": t, "tokens": len(t)} for t in times])


def on_a_thread(work, *args):
    """``work(*args)`` called on a thread of its own, as the engine host calls llama.cpp (docs/facts.md:
    a decode called from the main thread measured several times slower on a shared machine)."""
    result = []
    thread = threading.Thread(target=lambda: result.append(work(*args)))
    thread.start()
    thread.join()
    return result[0]


def on_callers(path, args: argparse.Namespace) -> float:
    """The 4 clients through serve --parallel 4 with each decode step on its caller's thread (the way before:
    backends/llama_cpp/batch.py says why one decode thread is the default)."""
    with EngineClient(env={**os.environ, DECODE_ON_CALLERS: "1"}) as client:
        client.load(path, LoadSettings(n_ctx=4096, parallel=4, threads=args.threads,
                                       extra_buffer_types=args.extra_buffer_types))
        name = model_id(client.loaded.model_path)
        with ServerThread(create_app(client)) as server:
            together(server.url, name, 8)  # warm-up
            return together(server.url, name, args.tokens)[0]


def mlx_rows(folder: str, tokens: int, runs: int) -> None:
    """The MLX rows (3. above): aggregate tok/s of the 4 clients batched and queued, and the single stream."""
    rows: dict[str, list[float]] = {"batched": [], "queued": [], "single": []}
    lengths: list[int] = []
    for _ in range(runs):
        for parallel in (4, 1):
            with EngineClient() as client:
                client.load(folder, LoadSettings(n_ctx=4096, parallel=parallel))
                assert client.loaded.details["parallel"] == parallel, client.loaded.details
                name = model_id(client.loaded.model_path)
                with ServerThread(create_app(client)) as server:
                    together(server.url, name, 8)  # warm-up
                    rate, lengths = together(server.url, name, tokens)
                    rows["batched" if parallel == 4 else "queued"].append(rate)
                    if parallel == 4:
                        rows["single"].append(single(server.url, name, tokens))
    med = {key: statistics.median(values) for key, values in rows.items()}
    print(f"MLX {os.path.basename(folder.rstrip('/'))}, 4 streams of up to {tokens} tokens (replies {lengths}), "
          f"median of {runs} runs, load average {os.getloadavg()[0]:.2f}")
    print(f"  quantdesk serve --parallel 4, 4 clients : {med['batched']:7.1f} tok/s aggregate (mlx-lm BatchGenerator)")
    for key, label in (("queued", "quantdesk serve --parallel 1, 4 clients"),
                       ("single", "quantdesk single stream                ")):
        print(f"  {label} : {med[key]:7.1f} tok/s   ratio {med['batched'] / med[key]:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=128, help="max tokens of each of the 4 replies")
    parser.add_argument("--threads", type=int, default=physical_cores())
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--extra-buffer-types", action=argparse.BooleanOptionalAction, default=False)
    parser.add_argument("--mlx", metavar="FOLDER", help="measure this MLX model folder instead (3. above)")
    args = parser.parse_args()
    if args.mlx:
        mlx_rows(args.mlx, args.tokens, args.runs)
        return
    path = real_models.cached("smollm2")
    if path is None:
        raise SystemExit("SmolLM2 is not cached: python -m tests.fixtures.real_models")
    rows: dict[str, list[float]] = {"batched": [], "every_token": [], "llama": [], "single": [], "queued": [],
                                    "on_callers": [], "ttft_alone": [], "ttft_beside": []}
    lengths: list[int] = []
    long_tokens = 0
    for _ in range(args.runs):
        for parallel in (4, 1):
            with EngineClient() as client:
                client.load(path, LoadSettings(n_ctx=4096, parallel=parallel, threads=args.threads,
                                               extra_buffer_types=args.extra_buffer_types))
                name = model_id(client.loaded.model_path)
                # as quantdesk serve streams by default (a chunk at most every STREAM_EVERY_S), and every token apart
                with ServerThread(create_app(client)) as server, \
                        ServerThread(create_app(client, stream_every_s=0)) as every_token:
                    together(server.url, name, 8)  # warm-up
                    rate, lengths = together(server.url, name, args.tokens)
                    if parallel == 4:
                        rows["batched"].append(rate)
                        rows["llama"].append(on_a_thread(llama_batched, str(path), args.threads, lengths,
                                                         args.extra_buffer_types))
                        rows["every_token"].append(together(every_token.url, name, args.tokens)[0])
                        rows["single"].append(single(server.url, name, args.tokens))
                        alone_ms, beside_ms, long_tokens = ttft(server.url, name)
                        rows["ttft_alone"].append(alone_ms)
                        rows["ttft_beside"].append(beside_ms)
                    else:
                        rows["queued"].append(rate)
        rows["on_callers"].append(on_callers(path, args))
    med = {key: statistics.median(values) for key, values in rows.items()}
    print(f"SmolLM2-135M-Instruct Q4_1, {args.threads} threads, 4 streams of up to {args.tokens} tokens "
          f"(replies {lengths}), median of {args.runs} runs, load average {os.getloadavg()[0]:.2f}")
    print(f"  quantdesk serve --parallel 4, 4 clients : {med['batched']:7.1f} tok/s aggregate "
          f"(chunks every {STREAM_EVERY_S * 1000:g} ms at most, serve's default)")
    for key, label, goal in (("llama", "llama.cpp batched decode, 4 sequences  ", "goal >= 0.9"),
                             ("single", "quantdesk single stream                ", "goal >= 1.5"),
                             ("queued", "quantdesk serve --parallel 1, 4 clients", "the queue before")):
        print(f"  {label} : {med[key]:7.1f} tok/s   ratio {med['batched'] / med[key]:.2f}  ({goal})")
    print(f"  each step on its caller's thread ({DECODE_ON_CALLERS}=1) : {med['on_callers']:7.1f} tok/s   "
          f"ratio {med['on_callers'] / med['llama']:.2f} of llama.cpp's")
    print(f"  every token its own chunk (--stream-every-ms 0) : {med['every_token']:7.1f} tok/s   "
          f"ratio {med['every_token'] / med['llama']:.2f} of llama.cpp's")
    print(f"  TTFT of a 20-token request: alone {med['ttft_alone']:.0f} ms, beside a {long_tokens}-token stream "
          f"{med['ttft_beside']:.0f} ms   ratio {med['ttft_beside'] / med['ttft_alone']:.2f}  (goal <= 2)")


if __name__ == "__main__":
    main()
