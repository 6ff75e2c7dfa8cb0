"""Benchmark: what QuantDesk adds to every token between llama.cpp and the user.

For each model, the same prompt, greedy, in alternating rounds:
- **QuantDesk**: through the engine host and EngineClient, as the app runs it: the decode rate the user is
  shown (measured in the host) and the rate the parent sees (first to last token arriving);
- **server** (``--server``): the same through the local OpenAI-compatible server, timed in the official
  ``openai`` client from its first to its last streamed chunk;
- **llama.cpp's counter**: llama.cpp's own decode timer (``llama_perf_context``: t_eval_ms / n_eval) over a plain
  ``Llama.generate`` loop in this process, with nothing of QuantDesk around it (its wall clock is printed
  beside it). Each QuantDesk run is paired with the counter of its own round, run just before or after it;
- beside it, the host's own llama.cpp counter for the very same reply (the host writes it to its log): the
  difference is what the token loop itself adds (sampling, Python, events), free of the drift between runs.
  It does not see what slows the decode itself (another process busy on the same cores, a callback inside
  the graph), which is why the first pairing is the measure; the CPU time this process (the client, and
  the server with ``--server``) spends per token is printed too, as it competes with llama.cpp's threads;
- the time to first token of a second chat turn (the first turn and its reply as the prompt's prefix, which
  the engine keeps in its KV cache), QuantDesk beside ``Llama.generate``.

- the time from ``cancel()`` to the Done of a long reply (worst of the rounds; goal < 200 ms).

Medians over ``--runs`` rounds. Goals (issue 14): the tiny model's ms/token at most 0.05 above the counter's;
on real shapes counter ÷ QuantDesk ≥ 0.97, through the server ≥ 0.95.

    python -m tests.bench.token_loop [--runs 7] [--tokens 256] [--threads 2] [--server] [--no-real]
                                     [--models tiny,smollm2-360m-shape,qwen2.5-0.5b-shape,smollm2,gemma3]

The generated shapes are random weights in Q4_K_M; ``smollm2`` and ``gemma3`` are the real models' files as they
come (SmolLM2-135M-Instruct Q4_1, Gemma 3 270M Q4_K_M: tests/fixtures/real_models.py), in the default list where
they are cached: real weights end a reply where they choose to (a short reply gives fewer tokens to time), and
Gemma's 262,144-token vocabulary makes its output layer the largest of all.

Only EngineClient's public calls are used, so the script also runs against older commits (the "before"
figures; a host that logs no llama.cpp timings gets no same-reply figure). ``smollm2-360m-shape`` is
SmolLM2-360M's shapes (~360M parameters, random weights), defined here.
"""

from __future__ import annotations

import argparse
import itertools
import re
import statistics
import time

from app.engine.client import EngineClient
from app.datatypes import Done, LoadSettings, Message, SamplingSettings, Token
from tests.fixtures import real_models
from tests.fixtures.models import SPECS, TINY, ModelSpec, build_model_set

SMOLLM2_360M = ModelSpec("smollm2-360m-shape", "llama", n_embd=960, n_layer=32, n_head=15, n_head_kv=5, n_ff=2560,
                         vocab_size=49152, n_ctx_train=8192, rope_theta=100000.0, tie_embeddings=True)
MODELS = {"tiny": TINY, SMOLLM2_360M.name: SMOLLM2_360M, **SPECS}
FIRST = [Message("user", "Write a short story about a lighthouse keeper who finds a message in a bottle.")]
N_CTX = 2048
# Between runs: llama.cpp's OpenMP threads spin a few milliseconds after their work (7 ms measured here) before
# they sleep, and would take a core from the next run, in the other process.
PAUSE_S = 0.05
TIMINGS = re.compile(r"\[(?P<id>[^\]]+)\] llama\.cpp timings: .* decode (?P<n>\d+) tokens in (?P<ms>[\d.]+) ms")
_ids = itertools.count(1)


class Raw:
    """llama-cpp-python in this process: ``Llama.generate`` and llama.cpp's own decode counter."""

    def __init__(self, path: str, threads: int) -> None:
        import llama_cpp

        from backends.chat_format import template as chat_template

        self.llama_cpp = llama_cpp
        self.llm = llama_cpp.Llama(path, n_ctx=N_CTX, n_threads=threads, n_gpu_layers=0, verbose=False)
        self.template = real_models.chat_template(self.llm.metadata)
        self.parameters = llama_cpp.llama_model_n_params(self.llm.model)
        self.render = chat_template.render

    def run(self, messages: list[Message], n: int) -> dict:
        """Greedy, as QuantDesk runs it (the same sampler chain): the counter's and the wall's ms per token."""
        llm, lc = self.llm, self.llama_cpp
        start, times, out = time.perf_counter(), [], []  # templating included, as in QuantDesk's TTFT
        tokens = llm.tokenize(self.render(self.template, [m.__dict__ for m in messages]).encode(), add_bos=True,
                              special=True)
        lc.llama_perf_context_reset(llm.ctx)
        for token in llm.generate(tokens, temp=0.0, repeat_penalty=1.1):
            times.append(time.perf_counter())
            if lc.llama_vocab_is_eog(llm._model.vocab, token):
                break
            out.append(token)
            if len(out) >= n:
                break
        perf = lc.llama_perf_context(llm.ctx)
        return {"counter_ms": perf.t_eval_ms / perf.n_eval, "wall_ms": (times[-1] - times[0]) * 1000 / (len(times) - 1),
                "ttft_ms": (times[0] - start) * 1000, "text": llm.detokenize(out).decode("utf-8", "replace"),
                "tokens": len(times)}


class Log:
    """The engine host's log lines with llama.cpp's own timings of each reply."""

    def __init__(self, client: EngineClient) -> None:
        self.client = client
        self.taken: set[str] = set()

    def counter_ms(self, request_id: str | None = None, wait_s: float = 5.0) -> float | None:
        """ms per decoded token by llama.cpp's counter, for ``request_id`` (or the newest reply not taken yet);
        None from a host that does not log it."""
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            for line in reversed(self.client.stderr_tail()):
                found = TIMINGS.search(line)
                if found and found["id"] not in self.taken and request_id in (None, found["id"]):
                    self.taken.add(found["id"])
                    return float(found["ms"]) / int(found["n"])
            time.sleep(0.01)  # the log arrives on its own pipe, just after the Done
        return None


def quantdesk_run(client: EngineClient, log: Log, messages: list[Message], n: int) -> dict:
    request_id = f"bench-{next(_ids)}"
    arrivals, count, done = [], 0, None
    cpu = time.process_time()
    for event in client.generate(messages, SamplingSettings(temperature=0.0, max_tokens=n), request_id=request_id):
        if isinstance(event, Token):
            if event.count:
                count += event.count
                arrivals.append((time.perf_counter(), count))
        elif isinstance(event, Done):
            done = event
    cpu = time.process_time() - cpu
    s = done.stats
    (t0, n0), (t1, n1) = arrivals[0], arrivals[-1]
    return {"host_ms": s.decode_ms / s.decode_tokens, "seen_ms": (t1 - t0) * 1000 / (n1 - n0),
            "engine_ms": log.counter_ms(request_id), "ttft_ms": s.ttft_ms, "text": done.text,
            "events": len(arrivals), "parent_cpu_us": cpu * 1e6 / s.generated_tokens}


def server_run(oai, log: Log, model: str, messages: list[Message], n: int) -> dict:
    times, usage = [], None
    cpu = time.process_time()  # the server's threads and the openai client: all in this process
    stream = oai.chat.completions.create(model=model, messages=[m.__dict__ for m in messages], stream=True,
                                         max_tokens=n, temperature=0.0, stream_options={"include_usage": True})
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            times.append(time.perf_counter())
        if chunk.usage:
            usage = chunk.usage
    cpu = time.process_time() - cpu
    return {"server_ms": (times[-1] - times[0]) * 1000 / (usage.completion_tokens - 1),
            "engine_ms": log.counter_ms(), "chunks": len(times), "parent_cpu_us": cpu * 1e6 / usage.completion_tokens}


def cancel_ms(client: EngineClient) -> float:
    """From ``cancel()`` to the Done of a long reply, asked as soon as its first tokens arrived (issue 14: < 200 ms)."""
    asked = 0.0
    for event in client.generate(FIRST, SamplingSettings(temperature=0.0, max_tokens=N_CTX - 128)):
        if isinstance(event, Token) and not asked:
            asked = time.perf_counter()
            client.cancel()
        elif isinstance(event, Done):
            assert event.stats.stop_reason == "cancelled", event.stats
            return (time.perf_counter() - asked) * 1000
    raise AssertionError("no Done")


def second_turn(messages: list[Message], reply: str) -> list[Message]:
    return [*messages, Message("assistant", reply), Message("user", "And what did the message say?")]


def model_file(name: str) -> tuple[str, str]:
    """The file a name of --models stands for, and what it is."""
    if name in real_models.REAL_MODELS:
        model = real_models.REAL_MODELS[name]
        return str(real_models.fetch(model)), f"{model.file_name}, real weights"
    return str(build_model_set(MODELS[name], quants=("Q4_K_M",), mlx=False).gguf_q4_k_m), "Q4_K_M, random weights"


def bench(name: str, args) -> dict:
    path, what = model_file(name)
    raw = Raw(path, args.threads)
    rows: dict[str, list[dict]] = {"raw": [], "quantdesk": [], "server": [], "raw2": [], "quantdesk2": [],
                                   "cancel": []}
    with EngineClient() as client:
        client.load(path, LoadSettings(n_ctx=N_CTX, threads=args.threads, gpu_layers=0))
        log = Log(client)
        server = oai = None
        if args.server:
            import openai

            from app.server.app import create_app, model_id
            from app.server.thread import ServerThread

            server = ServerThread(create_app(client)).start()
            oai = openai.OpenAI(base_url=f"{server.url}/v1", api_key="unused", max_retries=0)
            served = model_id(client.loaded.model_path)
        try:
            sides = {"raw": lambda: raw.run(FIRST, args.tokens),
                     "quantdesk": lambda: quantdesk_run(client, log, FIRST, args.tokens)}
            if oai is not None:
                sides["server"] = lambda: server_run(oai, log, served, FIRST, args.tokens)
            for side in sides.values():  # warm-up: first-run allocations and page faults hit no figure
                side()
            order = list(sides)
            for i in range(args.runs):
                for who in order[i % len(order):] + order[:i % len(order)]:
                    time.sleep(PAUSE_S)
                    rows[who].append(sides[who]())
                # A second turn on top of the first (its reply from this run): the engines keep the prefix.
                time.sleep(PAUSE_S)
                qd = quantdesk_run(client, log, FIRST, args.tokens)
                rows["quantdesk2"].append(quantdesk_run(client, log, second_turn(FIRST, qd["text"]), 16))
                time.sleep(PAUSE_S)
                rw = raw.run(FIRST, args.tokens)
                rows["raw2"].append(raw.run(second_turn(FIRST, rw["text"]), 16))
                time.sleep(PAUSE_S)
                rows["cancel"].append({"ms": cancel_ms(client)})
        finally:
            if oai is not None:
                oai.close()
                server.stop()
    return report(name, f"~{raw.parameters / 1e6:.0f}M parameters, {what}", args, rows)


def report(name: str, what: str, args, rows: dict[str, list[dict]]) -> dict:
    def median(who: str, key: str) -> float:
        return statistics.median(r[key] for r in rows[who])

    def paired(who: str, key: str, against: str) -> tuple[float, float]:
        """Medians of (QuantDesk - counter) and of counter / QuantDesk, each run against the counter of its round
        (``raw``: Llama.generate in this process, run just before or after it) or of its own reply (``engine``:
        the host's log)."""
        pairs = [(r[key], raw["counter_ms"] if against == "raw" else r["engine_ms"])
                 for r, raw in zip(rows[who], rows["raw"], strict=True)]
        return statistics.median(q - c for q, c in pairs), statistics.median(c / q for q, c in pairs)

    print(f"\n{name}: {what}, {args.threads} threads, greedy, up to {args.tokens} tokens, {args.runs} alternating "
          f"rounds (medians; replies of {median('raw', 'tokens'):.0f} tokens)")
    print(f"  llama.cpp's counter (Llama.generate here) {median('raw', 'counter_ms'):8.4f} ms/token   "
          f"Llama.generate's wall {median('raw', 'wall_ms'):.4f} ms/token")
    out = {"name": name}
    sides = [("QuantDesk, shown (host)", "quantdesk", "host_ms"), ("QuantDesk, seen by client", "quantdesk", "seen_ms")]
    if rows["server"]:
        sides.append(("server + openai client", "server", "server_ms"))
    for label, who, key in sides:
        added, ratio = paired(who, key, "raw")
        extra = (f"; {median(who, 'events'):.0f} token events, parent CPU {median(who, 'parent_cpu_us'):.1f} µs/token"
                 if key == "seen_ms" else f"; {median(who, 'chunks'):.0f} chunks, server and client CPU "
                 f"{median(who, 'parent_cpu_us'):.1f} µs/token" if who == "server" else "")
        line = f"  {label:<26} {median(who, key):8.4f} ms/token   +{added:.4f} ms   counter/QuantDesk {ratio:.3f}"
        if all(r["engine_ms"] is not None for r in rows[who]):
            own_added, _ = paired(who, key, "engine")
            line += f"   (+{own_added:.4f} ms over the host's own counter for the same reply)"
        print(line + (f"\n  {'':<26} ({extra[2:]})" if extra else ""))
        out[key] = (added, ratio)
    print(f"  second turn TTFT: QuantDesk {median('quantdesk2', 'ttft_ms'):.2f} ms, Llama.generate "
          f"{median('raw2', 'ttft_ms'):.2f} ms")
    out["ttft2_ms"] = median("quantdesk2", "ttft_ms")
    cancels = [r["ms"] for r in rows["cancel"]]
    print(f"  cancel to Done: median {statistics.median(cancels):.1f} ms, worst {max(cancels):.1f} ms (goal < 200 ms)")
    out["cancel_ms"] = max(cancels)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--server", action="store_true", help="also through the local server and the openai client")
    parser.add_argument("--models", help=f"comma-separated, of {', '.join([*MODELS, *real_models.REAL_MODELS])} "
                                         f"(default: tiny,{SMOLLM2_360M.name},qwen2.5-0.5b-shape and the real models)")
    real_models.bench_option(parser)
    args = parser.parse_args()
    names = args.models.split(",") if args.models else ["tiny", SMOLLM2_360M.name, "qwen2.5-0.5b-shape",
                                                         *real_models.bench_models(args.real)]
    results = [bench(name, args) for name in names]
    print("\nsummary (goals: tiny +0.05 ms at most; others counter/QuantDesk >= 0.97, through the server >= 0.95)")
    for r in results:
        line = f"  {r['name']:<22}"
        for key, label in (("host_ms", "shown"), ("seen_ms", "seen"), ("server_ms", "server")):
            if key in r:
                line += f"  {label} +{r[key][0]:.4f} ms ({r[key][1]:.3f})"
        print(line + f"  second-turn TTFT {r['ttft2_ms']:.2f} ms  worst cancel {r['cancel_ms']:.0f} ms")


if __name__ == "__main__":
    main()
