"""Benchmark: a long chat resumed from its saved state against reading it again (issue 27, "chats that resume").

An ~8k-token conversation on the Qwen2.5-0.5B-shape Q4_K_M (random weights, the fixtures' build): one engine host
answers it and saves its state (app/engine/states.py, as the Chat does after a reply). Then, in paired runs (the
order alternating), a freshly started host (QuantDesk restarted) gets one more message:
- **restored**: the saved state is restored (``restore_state``), then the reply generated;
- **re-read**: the reply generated from an empty KV cache, as before this change.
Time to first token is the parent's clock from the first request (restore, or generate) to the first token; the
model's load is outside both. The greedy replies are compared token for token with each other and with the
reply of the host that never restarted (its KV cache still warm). The state's size on disk is printed.

    python -m tests.bench.resume [--runs 3] [--tokens 8192] [--threads 2] [--model qwen2.5-0.5b-shape] [--no-real]

Then the same on the real models' files where they are cached (tests/fixtures/real_models.py; ``--no-real`` leaves
them out): SmolLM2-135M-Instruct Q4_1 (its conversation kept within its 8,192-token training context, less the
reply's room) and Gemma 3 270M Q4_K_M, whose sliding-window layers keep only their window's KV, so its saved state
is mostly the global layers'. Real weights also say whether the restored reply is the very reply of the re-read.

Goal: restored ≥ 10× faster to the first token, the same reply.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from app.datatypes import Done, LoadSettings, Message, SamplingSettings, Token
from app.engine import states
from app.engine.client import EngineClient
from tests.fixtures import real_models
from tests.fixtures.models import SPECS, TINY, build_model_set

GREEDY = SamplingSettings(temperature=0.0, max_tokens=32, seed=1)
WORDS = ("the lighthouse keeper wrote every evening about the sea, the ships that passed, the weather and the "
         "letters he never sent; ").split()


def conversation(client: EngineClient, target: int) -> list[Message]:
    """User and assistant turns of filler prose, as many as keep the rendered conversation under ``target`` tokens,
    ending with a user's turn."""
    messages = [Message("system", "You are a patient assistant who remembers the whole conversation.")]
    turn = 0
    while True:
        words = [WORDS[(turn * 7 + i) % len(WORDS)] for i in range(220)]
        more = [Message("assistant", f"Noted part {turn - 1}. " + " ".join(reversed(words[:120])))] if turn else []
        more.append(Message("user", f"Part {turn}: " + " ".join(words)))
        if turn and client.count_tokens(messages + more, GREEDY) > target:
            return messages
        messages += more
        turn += 1


def reply(client: EngineClient, messages: list[Message], t0: float) -> tuple[float, Done]:
    """The reply's time to first token from ``t0`` (ms) and its Done."""
    first = None
    for event in client.generate(messages, GREEDY):
        if isinstance(event, Token) and first is None:
            first = time.perf_counter()
        elif isinstance(event, Done):
            return ((first or time.perf_counter()) - t0) * 1000, event
    raise AssertionError("no Done")


REPLY_ROOM = 1024  # the context beyond the conversation


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--tokens", type=int, default=8192, help="the conversation's length in tokens")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--model", default="qwen2.5-0.5b-shape", choices=["tiny", *SPECS])
    real_models.bench_option(parser)
    args = parser.parse_args()
    spec = TINY if args.model == "tiny" else SPECS[args.model]
    bench(str(build_model_set(spec, quants=("Q4_K_M",), mlx=False).gguf_q4_k_m), args.tokens, args)
    for path in real_models.bench_models(args.real).values():
        print()
        bench(str(path), min(args.tokens, trained_context(path) - REPLY_ROOM), args)


def trained_context(path: str) -> int:
    from app.models.metadata import read_model

    return read_model(path).context_length or 1 << 20


def bench(path: str, tokens: int, args) -> None:
    load = LoadSettings(n_ctx=tokens + REPLY_ROOM, threads=args.threads)
    folder = Path(tempfile.mkdtemp(prefix="quantdesk-resume-"))
    cache = states.StateCache(folder, lambda: 64 * 2**30)
    keys = states.StateKeys((states.chat_key(1, 2),), states.chat_key(1, 2))

    with EngineClient() as client:  # the session before the restart: the chat, its reply, its saved state
        client.load(path, load)
        history = conversation(client, tokens)
        _, done = reply(client, history, time.perf_counter())
        history.append(Message("assistant", done.text))
        saved = states.save(client, cache, keys)
        assert saved is not None
        ask = [*history, Message("user", "What was part 3 about? Answer in one sentence.")]
        _, warm = reply(client, ask, time.perf_counter())  # the same host, its KV cache still holding the chat
    print(f"model {Path(path).name}, conversation {saved.n_tokens} tokens in the saved state, "
          f"{len(ask)} messages; context {load.n_ctx}, {args.threads} threads")
    print(f"saved state: {saved.file_bytes / 2**20:.1f} MiB on disk ({saved.file_bytes / saved.n_tokens / 1024:.1f} "
          f"KiB a token), written in {saved.ms:.0f} ms")

    rows = []
    for run in range(args.runs):
        results = {}
        for mode in (("restored", "re-read") if run % 2 == 0 else ("re-read", "restored")):
            with EngineClient() as client:  # QuantDesk restarted: a fresh host, the model loaded again
                client.load(path, load)
                t0 = time.perf_counter()
                restored_ms = 0.0
                if mode == "restored":
                    restored = states.restore(client, cache, keys, ask, GREEDY)
                    assert restored is not None and restored.path, restored
                    restored_ms = restored.ms
                ttft, done = reply(client, ask, t0)
                results[mode] = (ttft, done, restored_ms)
            time.sleep(0.05)
        (t_r, d_r, ms_r), (t_c, d_c, _) = results["restored"], results["re-read"]
        rows.append((t_r, t_c))
        print(f"run {run + 1}: restored {t_r:8.0f} ms to the first token (restore {ms_r:.0f} ms; "
              f"{d_r.stats.cached_tokens}/{d_r.stats.prompt_tokens} prompt tokens from the state) | re-read "
              f"{t_c:8.0f} ms ({d_c.stats.cached_tokens}/{d_c.stats.prompt_tokens} cached) | ×{t_c / t_r:.1f} | "
              f"same reply as re-read: {d_r.text == d_c.text}, as the warm host: {d_r.text == warm.text} "
              f"({d_r.stats.generated_tokens} tokens)")
    ratio = statistics.median(c / r for r, c in rows)
    print(f"median: restored {statistics.median(r for r, _ in rows):.0f} ms, re-read "
          f"{statistics.median(c for _, c in rows):.0f} ms to the first token: ×{ratio:.1f} (goal ≥ 10×)")
    cache.clear()
    folder.rmdir()


if __name__ == "__main__":
    main()
