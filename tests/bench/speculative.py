"""Benchmark: speculative decoding on llama.cpp, decode tok/s with a draft ÷ without, with the acceptance rate.

Random-weight models agree with each other about as often as dice, so a draft of a test shape guesses nothing
right unless the pair is built to agree. Four engine hosts, each its own model loaded; each arm runs right next to
its baseline, which goes first every other pair (drift on a noisy machine hits both alike), greedy:

- ``plain``: the model alone (``--spec``, F16 or ``--quant``);
- ``built draft``: the model's first ``--draft-layers`` layers as the draft, with the model's extra layers' output
  projections scaled by ``--quiet`` (tests/fixtures/models.build_draft_pair): the extra layers add little to the
  residual stream, so the model's argmax mostly is the draft's — agreement that is real, made on purpose;
- ``unrelated draft``: a model of the same vocabulary and ``--draft-layers`` layers but another seed: the honest
  case of a draft that knows nothing the model knows. Its distribution is flat, so with the default minimum
  probability (``--draft-p-min``, llama-server's 0.75) it guesses nothing. The built pair's logits are sharpened
  (tests/fixtures/models.DRAFT_PAIR_SHARPNESS), so its draft is as sure of its guesses as a trained one;
- ``built, p_min 0`` and ``unrelated, p_min 0``: the same drafts guessing whatever their probability, in the same
  rounds (with a ``--draft-p-min`` above 0);
- ``prompt lookup``: no draft model; a prompt that asks to repeat a given text, so there are n-grams to find (the
  random model does not obey, but its greedy reply falls into loops prompt lookup then copies from);
- ``smollm2 prompt lookup``, ``gemma3 prompt lookup`` (``--real``, on by default where the files are cached:
  tests/fixtures/real_models.py): the same against the same prompt without it, on the real models' own files, which
  do repeat the text as asked: the case prompt lookup is for.

    python -m tests.bench.speculative [--runs 5] [--tokens 128] [--spec smollm2-135m-shape] [--draft-layers 4]
                                      [--quiet 0.05] [--draft-tokens 8] [--draft-p-min 0.75] [--threads 2]
                                      [--quant F16] [--trace] [--no-real]

The model and the built draft are exact in their first layers: with ``--quiet 0`` every guess is accepted (the most
speculation can give on this machine); the larger ``--quiet``, the less the two agree.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics

from app.engine.client import EngineClient
from app.datatypes import DEFAULT_DRAFT_P_MIN, Done, LoadSettings, Message, PROMPT_LOOKUP, SamplingSettings
from tests.fixtures import real_models
from tests.fixtures.models import SPECS, build_draft_pair, build_model_set, quantize_gguf

TEXT = ("The lighthouse keeper climbed the stairs every evening at dusk, lit the lamp, wound the clockwork, "
        "and wrote the weather in the log: wind from the west, sea calm, one ship passing north.")
PROMPTS = {"story": [Message("user", "Write a short story about a lighthouse keeper.")],
           "repeat": [Message("user", f"Repeat this text exactly, then once more:\n\n{TEXT}")]}


def _quantized(path, quant: str):
    """A quantized copy of an F16 GGUF beside it, made once (under a temporary name, then renamed)."""
    out = path.with_name(path.name.replace("-F16.gguf", f"-{quant}.gguf"))
    if not out.exists():
        os.replace(quantize_gguf(path, out.with_name(out.name + ".partial"), quant), out)
    return out


def run(client: EngineClient, prompt, sampling: SamplingSettings) -> Done:
    return next(e for e in client.generate(prompt, sampling) if isinstance(e, Done))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=128)
    parser.add_argument("--spec", default="smollm2-135m-shape", choices=sorted(SPECS))
    parser.add_argument("--draft-layers", type=int, default=4)
    parser.add_argument("--quiet", type=float, default=0.05)
    parser.add_argument("--draft-tokens", type=int, default=8)
    parser.add_argument("--draft-p-min", type=float, default=DEFAULT_DRAFT_P_MIN)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quant", default="F16", help="F16, or a llama.cpp quant (Q4_K_M, Q8_0) made of each model")
    parser.add_argument("--trace", action="store_true",
                        help="no timing: where each draft's greedy reply first differs from the plain one, and why")
    real_models.bench_option(parser, "prompt lookup")
    args = parser.parse_args()
    spec = SPECS[args.spec]
    pair = build_draft_pair(spec, args.draft_layers, quiet=args.quiet)
    other_spec = dataclasses.replace(spec, name=f"{spec.name}-other{args.draft_layers}", n_layer=args.draft_layers,
                                     seed=spec.seed + 1)
    unrelated = build_model_set(other_spec, quants=(), mlx=False).gguf_f16
    target, built = pair.target, pair.draft
    if args.quant != "F16":  # quantized copies beside the F16 files, made once
        target, built, unrelated = (_quantized(path, args.quant) for path in (target, built, unrelated))
    if args.trace:
        for name, draft in (("built draft", built), ("unrelated draft", unrelated)):
            trace(name, target, draft, args)
        return
    p_min = args.draft_p_min
    arms = {  # name: (model, draft, prompt, the draft's minimum probability)
        "plain": (target, "", "story", p_min),
        "built draft": (target, str(built), "story", p_min),
        "unrelated draft": (target, str(unrelated), "story", p_min),
        "plain (repeat)": (target, "", "repeat", p_min),
        "prompt lookup": (target, PROMPT_LOOKUP, "repeat", p_min),
    }
    baseline = {"built draft": "plain", "unrelated draft": "plain", "prompt lookup": "plain (repeat)"}
    if p_min:  # the same drafts guessing whatever their probability, in the same rounds
        arms.update({"built, p_min 0": (target, str(built), "story", 0.0),
                     "unrelated, p_min 0": (target, str(unrelated), "story", 0.0)})
        baseline.update({"built, p_min 0": "plain", "unrelated, p_min 0": "plain"})
    for key, path in real_models.bench_models(args.real).items():  # trained weights that repeat the text as asked
        arms.update({f"{key} (repeat)": (path, "", "repeat", p_min),
                     f"{key} prompt lookup": (path, PROMPT_LOOKUP, "repeat", p_min)})
        baseline[f"{key} prompt lookup"] = f"{key} (repeat)"
    sampling = SamplingSettings(temperature=0.0, max_tokens=args.tokens)
    # A host per arm, so that each sees one prompt only: llama.cpp keeps the KV cache of the previous reply's prefix,
    # and a prompt evaluated after another prompt's prefix (in a batch of another size) can round its logits
    # differently and change a greedy reply where two tokens are nearly tied, draft or no draft (llama-server's
    # `cache_prompt` documents the same). With one prompt per host, the arms go through the same cache states.
    clients = {name: EngineClient() for name in arms}
    rates: dict[str, list[float]] = {name: [] for name in baseline}  # each arm's runs
    base_rates: dict[str, list[float]] = {name: [] for name in baseline}  # the baseline run next to each
    accepted: dict[str, list[float]] = {name: [] for name in baseline}
    per_pass: dict[str, list[float]] = {name: [] for name in baseline}
    texts: dict[str, list[str]] = {name: [] for name in arms}  # each arm's replies, the first from a cold cache

    def measure(i: int, name: str) -> float:
        prompt = arms[name][2]
        done = run(clients[name], PROMPTS[prompt], sampling)
        s = done.stats
        texts[name].append(done.text)
        extra = ""
        if s.tokens_per_pass is not None:
            per_pass[name].append(s.tokens_per_pass)
            extra = f", {s.tokens_per_pass:.2f} tokens a pass"
        if s.acceptance_rate is not None:
            accepted[name].append(s.acceptance_rate)
            extra = f", accepted {s.accepted_tokens}/{s.draft_tokens} ({s.acceptance_rate:.0%}){extra}"
        print(f"run {i + 1} {name:>18}: {s.decode_tps:7.1f} tok/s ({s.generated_tokens} tokens{extra})", flush=True)
        return s.decode_tps

    try:
        for name, client in clients.items():
            model, draft, _, arm_p_min = arms[name]
            client.load(model, LoadSettings(n_ctx=2048, threads=args.threads, draft=draft,
                                             draft_tokens=args.draft_tokens, draft_p_min=arm_p_min))
        for name in arms:  # warm-up
            measure(-1, name)
        for i in range(args.runs):  # each arm right next to its baseline, which goes first every other round
            for name, base in baseline.items():
                if i % 2:
                    rates[name].append(measure(i, name))
                    base_rates[name].append(measure(i, base))
                else:
                    base_rates[name].append(measure(i, base))
                    rates[name].append(measure(i, name))
    finally:
        for client in clients.values():
            client.close()
    print(f"\n{spec.name} {args.quant} ({spec.n_layer} layers) · drafts of {args.draft_layers} layers · built pair's "
          f"extra layers at x{args.quiet:g} · {args.draft_tokens} tokens a check, p_min {args.draft_p_min:g} · "
          f"{args.tokens} tokens greedy · {args.runs} pairs each · {args.threads} threads")
    for name, base in baseline.items():
        ratios = [d / p for d, p in zip(rates[name], base_rates[name], strict=True)]
        # The first replies come from a cold cache in both hosts; the later ones after the same prompt's prefix
        # kept in the KV cache (see the clients above): a difference there is the cache's, not the draft's.
        same = (f"first replies {'the same' if texts[name][0] == texts[base][0] else 'DIFFER'}, distinct replies "
                f"over the runs {len(set(texts[name]))} with and {len(set(texts[base]))} without")
        # On a busy machine other processes only ever slow a run down: the best run of each arm is the least disturbed.
        print(f"{name:>18} vs {base}: with ÷ without, pair by pair median {statistics.median(ratios):.3f} (min "
              f"{min(ratios):.3f}, max {max(ratios):.3f}); best runs {max(rates[name]):.1f} ÷ "
              f"{max(base_rates[name]):.1f} = {max(rates[name]) / max(base_rates[name]):.3f} · acceptance median "
              f"{_median(accepted[name], '.0%')} · {_median(per_pass[name], '.2f')} tokens a pass · {same}")


def trace(name: str, target, draft, args) -> None:
    """In this process, the plain and the drafted greedy reply token by token, each choice with its logits row (the
    repetition penalty applied): at the first token where they part, how far apart the two tokens' logits were on
    each path, and how much the two paths' logits differ at all (a token decoded alone, or as a row of a verified
    batch: llama.cpp's CPU kernels for a quantized matrix times a batch round otherwise than times one vector).
    A parting where each path's margin is inside that difference is rounding, not a wrong token kept."""
    import threading

    import numpy as np

    import backends.llama_cpp as llama_backend
    from backends.llama_cpp import sampling

    class Recorded(sampling.GreedySampler):
        def sample(self, chain, ctx, idx) -> int:
            row = np.ctypeslib.as_array(self._lib.llama_get_logits_ith(self._ctx, idx), shape=(self._n_vocab,))
            row = row.copy()
            if self._penalty != 1 and self._recent:
                ids = np.fromiter(set(self._recent), dtype=np.int64)
                row[ids] = np.where(row[ids] <= 0, row[ids] * self._penalty, row[ids] / self._penalty)
            token = super().sample(chain, ctx, idx)
            chosen.append((token, row))  # every sample is the reply's next token, drafted or not
            return token

    def reply(with_draft: str) -> list:
        chosen.clear()
        backend = llama_backend.LlamaCppBackend()
        backend.load(str(target), LoadSettings(n_ctx=2048, threads=args.threads, draft=with_draft,
                                               draft_tokens=args.draft_tokens, draft_p_min=args.draft_p_min))
        try:
            list(backend.generate("trace", PROMPTS["story"], SamplingSettings(temperature=0.0, max_tokens=args.tokens),
                                  threading.Event()))
        finally:
            backend.unload()
        return list(chosen)

    chosen: list = []
    real, sampling.GreedySampler = sampling.GreedySampler, Recorded  # the token loop looks it up there
    try:
        plain, drafted = reply(""), reply(str(draft))
    finally:
        sampling.GreedySampler = real
    n = min(len(plain), len(drafted))
    at = next((i for i in range(n) if plain[i][0] != drafted[i][0]), None)
    spread = [abs(float(a[1][a[0]] - b[1][a[0]])) for a, b in zip(plain[:at], drafted[:at], strict=False)]
    print(f"{name}: {'the same ' + str(n) + ' tokens' if at is None else f'first differs at token {at} of {n}'}; "
          f"{'over the reply' if at is None else 'before that'} the chosen token's logit differs between the paths "
          f"by median {statistics.median(spread):.4f}, max {max(spread):.4f}")
    if at is not None:
        (a, row_a), (b, row_b) = plain[at], drafted[at]
        print(f"  plain chose {a} by {row_a[a] - row_a[b]:.4f} over {b}; drafted chose {b} by {row_b[b] - row_b[a]:.4f}"
              f" over {a}; the paths' logits there differ by up to {float(np.abs(row_a - row_b).max()):.4f}")


def _median(values: list[float], spec: str) -> str:
    """The median, or a dash where nothing was guessed (a draft that was never sure enough)."""
    return format(statistics.median(values), spec) if values else "—"


if __name__ == "__main__":
    main()
