"""What a drop-oldest cut costs the next reply's prompt, with the kept turns' KV cache moved (llama-server's cache
reuse, backends/llama_cpp/loop.py ``_reuse_shifted``) and read again from the system prompt on (without it).

For each new cut of a long conversation (app/engine/overflow.py, drop-oldest): the reply's prompt evaluated after the
cut as QuantDesk does it (the kept turns' cells moved), then the same prompt from a cache that holds only the system
prompt (what the plain prefix reuse gave before), paired on the same engine. Prints per cut the prompt's tokens, the
tokens evaluated each way and the prompt ms side by side, and the median ratio.

    python -m tests.bench.overflow_reuse [--model smollm2-135m-shape] [--ctx 1024] [--cuts 4]
"""

from __future__ import annotations

import argparse
import statistics

from app.datatypes import ContextCut, Done, LoadSettings, Message, SamplingSettings
from app.engine.client import EngineClient
from app.engine.overflow import fit
from tests.fixtures.models import SPECS, build_model_set

SYSTEM = Message("system", "You are a careful assistant who answers in full sentences and keeps track of numbers.")


def _question(i: int) -> str:
    return (f"Turn {i}: here is a longer message, as people write them when they think aloud about a problem: "
            f"I have {i} apples and {i + 3} pears, and my neighbour gives me {2 * i} plums. How many fruits do I "
            f"have, and how would the answer change if I gave away half of the pears?")


def _reply(engine: EngineClient, messages: list[Message], sampling: SamplingSettings) -> Done:
    events = list(engine.generate(messages, sampling))
    assert isinstance(events[-1], Done)
    return events[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="smollm2-135m-shape", help=f"one of {', '.join(SPECS)}")
    parser.add_argument("--ctx", type=int, default=1024)
    parser.add_argument("--reply", type=int, default=48)
    parser.add_argument("--cuts", type=int, default=4)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    path = build_model_set(SPECS[args.model], quants=("Q4_K_M",), mlx=False).gguf_q4_k_m
    sampling = SamplingSettings(max_tokens=args.reply, temperature=0)
    ratios = []
    with EngineClient() as engine:
        engine.load(path, LoadSettings(n_ctx=args.ctx, threads=args.threads))
        print(f"{args.model} Q4_K_M, n_ctx {args.ctx}, replies of {args.reply} tokens, drop-oldest")
        print(f"{'cut':>3} {'prompt':>7} {'moved: evaluated':>17} {'ms':>8}   {'re-read: evaluated':>19} {'ms':>8}"
              f"  {'ratio':>6}")
        history, cut, cuts, i = [SYSTEM], None, 0, 0
        while cuts < args.cuts:
            i += 1
            history.append(Message("user", _question(i)))
            fitted = fit(engine, history, sampling, "drop-oldest", args.ctx, cut)
            new_cut: ContextCut | None = fitted.cut if fitted.cut is not None and (
                cut is None or fitted.cut.dropped != cut.dropped) else None
            done = _reply(engine, fitted.messages, fitted.sampling_for(sampling))
            if new_cut is not None:
                cuts += 1
                moved = done.stats
                _reply(engine, [SYSTEM, Message("user", "Hello.")], SamplingSettings(max_tokens=1))  # system only
                again = _reply(engine, fitted.messages, fitted.sampling_for(sampling)).stats
                ratio = again.prompt_ms / moved.prompt_ms
                ratios.append(ratio)
                print(f"{cuts:>3} {moved.prompt_tokens:>7} {moved.prompt_tokens - moved.cached_tokens:>17} "
                      f"{moved.prompt_ms:>8.1f}   {again.prompt_tokens - again.cached_tokens:>19} "
                      f"{again.prompt_ms:>8.1f}  {ratio:>5.1f}×")
                _reply(engine, fitted.messages, fitted.sampling_for(sampling))  # the cache as the conversation left it
            cut = fitted.cut or cut
            history.append(Message("assistant", done.text))
    print(f"median: a cut's prompt {statistics.median(ratios):.1f}× faster with the kept turns moved")


if __name__ == "__main__":
    main()
