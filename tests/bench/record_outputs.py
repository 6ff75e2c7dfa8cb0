"""Record what the engine host answers on the tiny models, or compare with a recording: the check that a
change to the token loop leaves text, token counts and stop reasons exactly as they were.

    python -m tests.bench.record_outputs record before.json   # e.g. in a checkout of the old commit
    python -m tests.bench.record_outputs compare before.json  # here: prints every difference, exit 1 if any

Greedy runs and seeded sampling (temperature, top-k, top-p, min-p, repeat penalty), chat and raw prompts,
stop strings, a second chat turn (the KV prefix reused) and a reply that runs into a full context, on every
tiny variant. Only the client's public calls are used, so the script runs against any commit. The figures
depend on the CPU (random weights, SIMD rounding): compare recordings made on the same machine.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from app.engine.client import EngineClient
from app.datatypes import Done, LoadSettings, Message, SamplingSettings, Token
from tests.fixtures.models import TINY, build_model_set

HELLO = [Message("system", "You are terse."), Message("user", "Hello there! How are you?")]
STORY = [Message("user", "Tell me a story about a fox.")]
RAW = "Once upon a time, the quick brown fox"

GREEDY = dict(temperature=0.0)
CASES: list[tuple[str, object, dict]] = [
    ("greedy chat", HELLO, dict(GREEDY, max_tokens=200)),
    ("greedy raw", RAW, dict(GREEDY, max_tokens=64)),
    ("greedy no penalty", STORY, dict(GREEDY, repeat_penalty=1.0, max_tokens=120)),
    ("seeded defaults", HELLO, dict(seed=7, max_tokens=160)),
    ("seeded hot", STORY, dict(seed=11, temperature=1.3, top_k=0, top_p=1.0, min_p=0.0, max_tokens=160)),
    ("seeded narrow", STORY, dict(seed=3, temperature=0.7, top_k=5, top_p=0.8, min_p=0.1, repeat_penalty=1.3,
                                  max_tokens=160)),
    ("seeded raw", RAW, dict(seed=5, max_tokens=80)),
]


def _run(client: EngineClient, prompt, sampling: SamplingSettings) -> dict:
    pieces, counted = [], 0
    done = None
    for event in client.generate(prompt, sampling):
        if isinstance(event, Token):
            pieces.append(event.text)
            counted += event.count
        elif isinstance(event, Done):
            done = event
    s = done.stats
    return {"text": done.text, "streamed_text_equal": "".join(pieces) == done.text, "streamed_count": counted,
            "generated_tokens": s.generated_tokens, "prompt_tokens": s.prompt_tokens, "stop_reason": s.stop_reason}


def record() -> dict:
    models = build_model_set(TINY)
    out: dict[str, dict] = {}
    with EngineClient() as client:
        for variant in ("gguf_f16", "gguf_q8_0", "gguf_q4_k_m", "mlx_f16", "mlx_4bit"):
            client.load(getattr(models, variant), LoadSettings(n_ctx=2048, threads=2, gpu_layers=0))
            for name, prompt, params in CASES:
                out[f"{variant}: {name}"] = _run(client, prompt, SamplingSettings(**params))
            # Stop strings: cut a greedy reply at a piece of its own text.
            greedy = out[f"{variant}: greedy chat"]["text"]
            stop = greedy[len(greedy) // 2:][:3]
            out[f"{variant}: stop string"] = _run(client, HELLO, SamplingSettings(**GREEDY, max_tokens=200,
                                                                                 stop=(stop, "\u2603")))
            # A second turn: the conversation so far is the prefix of the next prompt (llama.cpp reuses its KV).
            first = out[f"{variant}: greedy chat"]["text"]
            turn2 = [*HELLO, Message("assistant", first), Message("user", "And then?")]
            out[f"{variant}: second turn"] = _run(client, turn2, SamplingSettings(**GREEDY, max_tokens=100))
        # A reply that fills the context: it ends where the context is full, not with an error.
        client.load(models.gguf_q8_0, LoadSettings(n_ctx=256, threads=2, gpu_layers=0))
        out["gguf_q8_0 ctx 256: context full"] = _run(client, STORY, SamplingSettings(**GREEDY, max_tokens=1000))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=["record", "compare"])
    parser.add_argument("file", type=Path)
    args = parser.parse_args()
    now = record()
    if args.action == "record":
        args.file.write_text(json.dumps(now, indent=1, ensure_ascii=False))
        print(f"recorded {len(now)} cases in {args.file}")
        return 0
    before = json.loads(args.file.read_text())
    differences = 0
    for case in sorted(set(before) | set(now)):
        if before.get(case) != now.get(case):
            differences += 1
            print(f"DIFFERENT {case}:\n  before {before.get(case)}\n  now    {now.get(case)}")
    print(f"{len(now)} cases, {differences} different")
    return 1 if differences else 0


if __name__ == "__main__":
    sys.exit(main())
