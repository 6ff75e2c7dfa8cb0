"""Benchmark: what QuantDesk adds to every token between llama.cpp and the user.

For each model, in one run and alternating so that drift on a noisy machine hits every side alike:
- **llama.cpp's counter**: llama.cpp's own decode timer (``llama_perf_context``: t_eval_ms / n_eval) over a
  plain ``Llama.generate`` loop in this process; its wall clock is printed beside it;
- **QuantDesk**: the same prompt, greedy, through the engine host and EngineClient, as the app runs it: the
  decode rate the user is shown (measured in the host) and the rate the parent sees (first to last token
  arriving);
- **server** (``--server``): the same through the local OpenAI-compatible server, timed in the official
  ``openai`` client from its first to its last streamed chunk;
- the time to first token of a second chat turn (the first turn and its reply as the prompt's prefix, which
  the engine keeps in its KV cache), QuantDesk beside ``Llama.generate``.

Medians over ``--runs`` rounds; the added ms and the ratios are paired per round (each QuantDesk run
against the counter of its own round), so drift between rounds cancels out. Goals (issue 14): the tiny model's ms/token at most 0.05 above the counter's; on
real shapes QuantDesk ÷ counter ≥ 0.97, through the server ≥ 0.95.

    python -m tests.bench.token_loop [--runs 7] [--tokens 256] [--threads 2] [--server]
                                     [--models tiny,smollm2-360m-shape,qwen2.5-0.5b-shape]

Only EngineClient's public calls are used, so the script also runs against older commits (the "before"
figures). ``smollm2-360m-shape`` is SmolLM2-360M's shapes (~360M parameters, random weights), defined here.
"""

from __future__ import annotations

import argparse
import statistics
import time

from app.engine.client import EngineClient
from backends.base import Done, LoadSettings, Message, SamplingSettings, Token
from tests.fixtures.models import SPECS, TINY, ModelSpec, build_model_set

SMOLLM2_360M = ModelSpec("smollm2-360m-shape", "llama", n_embd=960, n_layer=32, n_head=15, n_head_kv=5, n_ff=2560,
                         vocab_size=49152, n_ctx_train=8192, rope_theta=100000.0, tie_embeddings=True)
MODELS = {"tiny": TINY, SMOLLM2_360M.name: SMOLLM2_360M, **SPECS}
FIRST = [Message("user", "Write a short story about a lighthouse keeper who finds a message in a bottle.")]
N_CTX = 2048


def parameters(spec: ModelSpec) -> float:
    per_layer = (2 * spec.n_embd ** 2 + 2 * spec.n_embd * spec.n_head_kv * spec.head_dim
                 + 3 * spec.n_embd * spec.n_ff)
    return spec.vocab_size * spec.n_embd * (1 if spec.tie_embeddings else 2) + spec.n_layer * per_layer


class Raw:
    """llama-cpp-python in this process: ``Llama.generate`` and llama.cpp's own decode counter."""

    def __init__(self, path: str, threads: int) -> None:
        import llama_cpp

        from backends import chat_template

        self.llama_cpp = llama_cpp
        self.llm = llama_cpp.Llama(path, n_ctx=N_CTX, n_threads=threads, n_gpu_layers=0, verbose=False)
        self.template = self.llm.metadata["tokenizer.chat_template"]
        self.render = chat_template.render

    def tokens(self, messages: list[Message]) -> list[int]:
        prompt = self.render(self.template, [m.__dict__ for m in messages])
        return self.llm.tokenize(prompt.encode(), add_bos=True, special=True)

    def run(self, messages: list[Message], n: int) -> dict:
        """Greedy, as QuantDesk runs it (the same sampler chain): the counter's and the wall's ms per token."""
        llm, lc = self.llm, self.llama_cpp
        start, times, out = time.perf_counter(), [], []  # templating included, as in QuantDesk's TTFT
        tokens = self.tokens(messages)
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
                "ttft_ms": (times[0] - start) * 1000, "tokens": len(out),
                "text": llm.detokenize(out).decode("utf-8", "replace")}


def quantdesk_run(client: EngineClient, messages: list[Message], n: int) -> dict:
    arrivals, count, done = [], 0, None
    for event in client.generate(messages, SamplingSettings(temperature=0.0, max_tokens=n)):
        if isinstance(event, Token):
            if event.count:
                count += event.count
                arrivals.append((time.perf_counter(), count))
        elif isinstance(event, Done):
            done = event
    s = done.stats
    (t0, n0), (t1, n1) = arrivals[0], arrivals[-1]
    return {"host_ms": s.decode_ms / s.decode_tokens, "seen_ms": (t1 - t0) * 1000 / (n1 - n0),
            "ttft_ms": s.ttft_ms, "tokens": s.generated_tokens, "text": done.text, "events": len(arrivals)}


def server_run(oai, model: str, messages: list[Message], n: int) -> dict:
    times, usage = [], None
    stream = oai.chat.completions.create(model=model, messages=[m.__dict__ for m in messages], stream=True,
                                         max_tokens=n, temperature=0.0, stream_options={"include_usage": True})
    for chunk in stream:
        if chunk.choices and chunk.choices[0].delta.content:
            times.append(time.perf_counter())
        if chunk.usage:
            usage = chunk.usage
    return {"server_ms": (times[-1] - times[0]) * 1000 / (usage.completion_tokens - 1),
            "tokens": usage.completion_tokens, "chunks": len(times)}


def second_turn(messages: list[Message], reply: str) -> list[Message]:
    return [*messages, Message("assistant", reply), Message("user", "And what did the message say?")]


def bench(name: str, spec: ModelSpec, args) -> dict:
    path = str(build_model_set(spec, quants=("Q4_K_M",), mlx=False).gguf_q4_k_m)
    raw = Raw(path, args.threads)
    rows: dict[str, list[dict]] = {"raw": [], "quantdesk": [], "server": [], "raw2": [], "quantdesk2": []}
    with EngineClient() as client:
        client.load(path, LoadSettings(n_ctx=N_CTX, threads=args.threads, gpu_layers=0))
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
                     "quantdesk": lambda: quantdesk_run(client, FIRST, args.tokens)}
            if oai is not None:
                sides["server"] = lambda: server_run(oai, served, FIRST, args.tokens)
            for side in sides.values():  # warm-up: first-run allocations and page faults hit no figure
                side()
            order = list(sides)
            for i in range(args.runs):
                for who in order[i % len(order):] + order[:i % len(order)]:
                    rows[who].append(sides[who]())
                # A second turn on top of the first (its reply from this run): the engines keep the prefix.
                qd = quantdesk_run(client, FIRST, args.tokens)
                rows["quantdesk2"].append(quantdesk_run(client, second_turn(FIRST, qd["text"]), 16))
                rw = raw.run(FIRST, args.tokens)
                rows["raw2"].append(raw.run(second_turn(FIRST, rw["text"]), 16))
        finally:
            if oai is not None:
                oai.close()
                server.stop()
    med = {who: {k: statistics.median(r[k] for r in rs) for k in rs[0] if k != "text"} for who, rs in rows.items()
           if rs}
    counter = med["raw"]["counter_ms"]

    def paired(who: str, key: str) -> tuple[float, float]:
        """Median over runs of (QuantDesk - counter) and of counter / QuantDesk, each run against the counter
        of the same round: drift between rounds (other processes on the machine) cancels out."""
        pairs = [(r[key], raw["counter_ms"]) for r, raw in zip(rows[who], rows["raw"], strict=True)]
        return (statistics.median(q - c for q, c in pairs), statistics.median(c / q for q, c in pairs))

    print(f"\n{name}: ~{parameters(spec) / 1e6:.0f}M parameters, Q4_K_M, {args.threads} threads, greedy, "
          f"{args.tokens} tokens, {args.runs} alternating rounds (medians; +ms and ratio paired per round)")
    print(f"  llama.cpp counter            {counter:8.4f} ms/token  {1000 / counter:8.1f} tok/s")
    print(f"  Llama.generate, wall         {med['raw']['wall_ms']:8.4f} ms/token  "
          f"{1000 / med['raw']['wall_ms']:8.1f} tok/s")
    out = {"name": name, "counter_ms": counter}
    sides = [("QuantDesk, shown (host)", "quantdesk", "host_ms"), ("QuantDesk, seen by client", "quantdesk", "seen_ms")]
    if rows["server"]:
        sides.append(("server + openai client", "server", "server_ms"))
    for label, who, key in sides:
        added, ratio = paired(who, key)
        extra = (f"  ({med[who]['events']:.0f} token events)" if key == "seen_ms" else
                 f"  ({med[who]['chunks']:.0f} chunks)" if who == "server" else "")
        print(f"  {label:<28} {med[who][key]:8.4f} ms/token  {1000 / med[who][key]:8.1f} tok/s   "
              f"+{added:.4f} ms  ratio {ratio:.3f}{extra}")
        out[key] = (added, ratio)
    print(f"  second turn TTFT: QuantDesk {med['quantdesk2']['ttft_ms']:.2f} ms, Llama.generate "
          f"{med['raw2']['ttft_ms']:.2f} ms")
    out["ttft2_ms"] = med["quantdesk2"]["ttft_ms"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--tokens", type=int, default=256)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--server", action="store_true", help="also through the local server and the openai client")
    parser.add_argument("--models", default=f"tiny,{SMOLLM2_360M.name},qwen2.5-0.5b-shape",
                        help=f"comma-separated, of {', '.join(MODELS)}")
    args = parser.parse_args()
    results = [bench(name, MODELS[name], args) for name in args.models.split(",")]
    print("\nsummary (goals: tiny +0.05 ms at most; others ratio >= 0.97, through the server >= 0.95)")
    for r in results:
        line = f"  {r['name']:<22}"
        for key, label in (("host_ms", "shown"), ("seen_ms", "seen"), ("server_ms", "server")):
            if key in r:
                line += f"  {label} +{r[key][0]:.4f} ms (ratio {r[key][1]:.3f})"
        print(line + f"  second-turn TTFT {r['ttft2_ms']:.2f} ms")


if __name__ == "__main__":
    main()
