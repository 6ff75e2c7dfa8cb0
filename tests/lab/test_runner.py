"""The quant lab against real engines on the generated tiny models, through the real engine host.

Random weights make the quality figures meaningless as quality, but the plumbing is real: the reference
must score KL 0 and same top p 1.0 against itself, a Q4_K_M of the same weights must differ from it, and the
same weights through another engine (MLX), scored on the reference's token ids, must agree with it almost
everywhere. (That the figures are llama-perplexity's: tests/lab/test_llama_perplexity.py.)
"""

from __future__ import annotations

import io
import json
import math
import threading

import pytest

from app.engine.client import EngineClient
from app.engine.host import Host
from app.errors import EngineError, QuantDeskError
from app.lab import corpus
from app.lab.results import QUALITY_METRICS, SPEED_METRICS, BenchSettings
from app.lab.runner import LabCancelled, plan_variants, run_bench
from backends.base import Backend, GenerationError
from tests.fixtures.models import TINY, ModelSpec, write_gguf_f16, write_hf_folder

SMALL = BenchSettings(prompt_tokens=64, gen_tokens=8, reps=2, ctx=64, chunks=4)
POSITIONS = 4 * (64 - 1 - 32)  # the second half of each window, less its last token (which predicts nothing)


@pytest.fixture(scope="module")
def tiny_bench(tiny_models, tmp_path_factory):
    """One real run, shared by the tests that read it (each run loads every variant several times)."""
    home = tmp_path_factory.mktemp("lab-home")
    with pytest.MonkeyPatch.context() as mp:
        for var in ("XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_CONFIG_HOME"):
            mp.setenv(var, str(home / var))
        progress = []
        result = run_bench([tiny_models.gguf_q4_k_m, tiny_models.gguf_f16, tiny_models.mlx_f16], SMALL,
                           on_progress=progress.append)
    return result, progress


def test_the_highest_precision_variant_is_the_reference_and_scores_zero_against_itself(tiny_bench):
    result, _ = tiny_bench
    assert result.reference == "tiny-llama-F16"  # F16 GGUF and MLX f16 tie at 16 bpw: the first given wins
    reference = result.variant("tiny-llama-F16")
    assert reference.is_reference and result.variants[0] is reference
    q = reference.quality
    assert q.kld.value == 0.0 and q.kld_percentiles["max"] == 0.0 and q.same_top.value == 1.0
    assert q.ppl.value == q.ppl_base.value == reference.perplexity and q.ppl_ratio.value == 1.0
    assert q.positions == POSITIONS
    assert result.reference_file["chunks"] == 4 and result.reference_file["n_ctx"] == 64
    assert result.reference_file["positions"] == POSITIONS and result.reference_file["n_vocab"] == TINY.vocab_size


def test_a_q4_k_m_of_the_same_weights_diverges_and_mlx_of_the_same_weights_agrees(tiny_bench):
    result, _ = tiny_bench
    q4 = result.variant("tiny-llama-Q4_K_M").quality
    assert q4.kld.value > 1e-5 and q4.kld.se > 0
    assert q4.kld_percentiles["max"] >= q4.kld_percentiles["99"] >= q4.kld_percentiles["median"] >= 0
    assert q4.same_top.value < 1.0 and q4.positions == POSITIONS
    mlx = result.variant("mlx-f16")
    assert mlx.backend == "mlx" and mlx.format == "safetensors"  # float MLX weights: no quantization block
    assert mlx.quality.kld.value < q4.kld.value / 10, "F16 weights through MLX should sit far closer than a 4-bit quant"
    assert mlx.quality.same_top.value > 0.9
    for v in result.variants:
        assert not v.error and not v.unavailable, (v.label, v.error, v.unavailable)
        assert math.isfinite(v.perplexity) and v.perplexity > 1
        assert v.quality.ppl_base.value == result.variant("tiny-llama-F16").perplexity  # one reference for all
    # Random weights over a 1024-token vocabulary guess close to uniformly.
    assert 500 < result.variant("tiny-llama-F16").perplexity < 2000


def test_speed_runs_are_repeated_interleaved_and_summarised(tiny_bench):
    result, progress = tiny_bench
    n = len(result.variants)
    for v in result.variants:
        assert [r.rep for r in v.runs] == [0, 1]
        for run in v.runs:
            assert abs(run.prompt_tokens - SMALL.prompt_tokens) <= 0.1 * SMALL.prompt_tokens
            assert 1 <= run.generated_tokens <= SMALL.gen_tokens
            assert run.load_ms > 0 and run.prompt_tps > 0 and run.ttft_ms >= run.prompt_ms > 0
            assert run.peak_memory_bytes > 0 and run.memory_after_load["cpu"] > 0
        for metric in SPEED_METRICS:
            spread = v.speed[metric]
            assert spread.n == 2 and spread.low <= spread.median <= spread.high
    for rep in (0, 1):
        assert sorted(r.position for v in result.variants for r in v.runs if r.rep == rep) == list(range(n))
    first = [v.label for v in sorted(result.variants, key=lambda v: v.runs[0].position)]
    second = [v.label for v in sorted(result.variants, key=lambda v: v.runs[1].position)]
    assert first != second and second == first[1:] + first[:1]  # the order rotates
    assert [p.step for p in progress if p.fraction is None] == list(range(1, 2 * n + n + 1))
    assert {p.phase for p in progress} == {"speed", "quality"}
    within = [p for p in progress if p.fraction is not None]  # the scoring passes, window by window
    assert {p.phase for p in within} == {"quality"} and {p.fraction for p in within} == {0.25, 0.5, 0.75, 1.0}
    assert all("%" in p.message for p in within)


def test_settings_hardware_and_corpus_are_kept_with_the_result(tiny_bench):
    result, _ = tiny_bench
    assert result.settings == SMALL
    assert result.hardware["cpu"]["logical_cores"] >= 1 and result.hardware["ram_total_bytes"] > 0
    assert "Pride and Prejudice" in result.corpus["source"] and result.corpus["chars"] == len(corpus.perplexity_text())
    assert result.reference_file["corpus"] == result.corpus and result.reference_file["producer"].startswith("QuantDesk")
    q4 = result.variant("tiny-llama-Q4_K_M")
    assert q4.quant == "Q4_K_M" and q4.bits_per_weight == 4.9 and q4.size_bytes > 0


def test_variants_of_another_vocabulary_are_refused_in_a_sentence(tiny_models, tmp_path):
    other = ModelSpec("other-vocab", "llama", n_embd=TINY.n_embd, n_layer=1, n_head=TINY.n_head,
                      n_head_kv=TINY.n_head_kv, n_ff=TINY.n_ff, vocab_size=TINY.vocab_size, bpe_merges=100, seed=9)
    other_gguf = write_gguf_f16(other, write_hf_folder(other, tmp_path / "hf"), tmp_path / "other-vocab-F16.gguf")
    result = run_bench([other_gguf], BenchSettings(reps=1, ctx=64, chunks=2, speed=False),
                       reference=tiny_models.gguf_f16)
    assert result.reference == "tiny-llama-F16"
    refused = result.variant("other-vocab-F16")
    assert refused.quality is None and refused.perplexity is None
    assert refused.unavailable["kld_mean"].startswith("n/a: this model does not share the reference's vocabulary "
                                                      "(token ")
    assert set(refused.unavailable) >= set(QUALITY_METRICS)
    assert result.variant("tiny-llama-F16").quality.kld.value == 0.0


def test_a_second_run_reuses_the_reference_and_measures_the_same(tiny_models):
    settings = BenchSettings(reps=1, ctx=64, chunks=3, speed=False)
    first = run_bench([tiny_models.gguf_f16, tiny_models.gguf_q4_k_m], settings)
    second = run_bench([tiny_models.gguf_f16, tiny_models.gguf_q4_k_m], settings)
    assert not any("reused" in n for n in first.variants[0].notes)
    assert any("reference reused from" in n for n in second.variants[0].notes)
    assert second.variants[0].quality_ms is None  # the reference model did not run
    assert second.reference_file["path"] == first.reference_file["path"]
    assert second.variant("tiny-llama-Q4_K_M").quality == first.variant("tiny-llama-Q4_K_M").quality
    other_windows = run_bench([tiny_models.gguf_f16, tiny_models.gguf_q4_k_m],
                              BenchSettings(reps=1, ctx=32, chunks=3, speed=False))
    assert other_windows.reference_file["path"] != first.reference_file["path"]  # another context, another file


class _NoLogitsBackend(Backend):
    """An engine that exposes no logits (as an ExLlama build without them would): the defaults apply."""

    name = "no-logits"
    formats = ("gguf",)

    @classmethod
    def probe(cls):
        raise NotImplementedError

    def load(self, model_path, settings, on_progress=None):
        raise NotImplementedError

    def _stream(self, messages, sampling):
        yield ""


def test_a_backend_without_logits_answers_scoring_with_an_honest_label():
    with pytest.raises(GenerationError) as err:
        _NoLogitsBackend().score("s1", text="hello there")
    assert err.value.kind == "unavailable" and err.value.message == "n/a: no-logits exposes no next-token logits"
    channel = io.BytesIO()  # the real host's score op turns it into an error event, and lives on
    host = Host(channel)
    host._backend = _NoLogitsBackend()
    host.read_requests(io.BytesIO(b'{"op": "score", "id": "s1", "text": "hello"}\n'))  # then end of input
    host.serve()
    event = json.loads(channel.getvalue())
    assert event == {"type": "error", "kind": "unavailable", "message": "n/a: no-logits exposes no next-token logits",
                     "hint": "", "request_id": "s1"}


class _ClientOfAnEngineWithoutLogits(EngineClient):
    """The real host and engine, answering score as an engine without logits does (see the test above)."""

    def score(self, **kwargs):
        raise EngineError("n/a: no-logits exposes no next-token logits", kind="unavailable")


def test_the_bench_labels_quality_unavailable_and_still_measures_speed(tiny_models):
    result = run_bench([tiny_models.gguf_q8_0], BenchSettings(prompt_tokens=32, gen_tokens=2, reps=1, ctx=32),
                       client_factory=_ClientOfAnEngineWithoutLogits)
    (v,) = result.variants
    assert v.perplexity is None and v.quality is None
    assert v.unavailable == dict.fromkeys(QUALITY_METRICS, "n/a: the reference tiny-llama-Q8_0 could not be scored: "
                                                           "no-logits exposes no next-token logits")
    assert v.speed["decode_tps"].median > 0 and len(v.runs) == 1


def test_cancel_stops_the_bench_between_steps(tiny_models):
    cancel = threading.Event()

    def stop_after_the_first_run(progress):
        if progress.step == 2:
            cancel.set()

    with pytest.raises(LabCancelled):
        run_bench([tiny_models.gguf_q8_0, tiny_models.gguf_q4_k_m],
                  BenchSettings(prompt_tokens=32, gen_tokens=2, reps=3, ctx=32),
                  on_progress=stop_after_the_first_run, cancel=cancel)


def test_cancel_stops_a_scoring_pass_between_windows(tiny_models):
    cancel = threading.Event()
    seen = []

    def stop_in_the_reference_pass(progress):
        seen.append(progress.fraction)
        if progress.fraction is not None and progress.fraction > 0:
            cancel.set()

    with pytest.raises(LabCancelled):
        run_bench([tiny_models.gguf_f16, tiny_models.gguf_q8_0], BenchSettings(ctx=32, speed=False),
                  on_progress=stop_in_the_reference_pass, cancel=cancel)
    fractions = [f for f in seen if f is not None]
    assert fractions and max(fractions) < 1  # the engine stopped after a window, not at the end of the text


def test_plan_names_the_reference_first_and_rejects_what_is_no_model(tiny_models, tmp_path):
    planned = plan_variants([tiny_models.gguf_q4_k_m, tiny_models.mlx_4bit], reference=tiny_models.gguf_q8_0)
    assert [v.label for v in planned] == ["tiny-llama-Q8_0", "tiny-llama-Q4_K_M", "mlx-4bit"]
    assert [v.is_reference for v in planned] == [True, False, False]
    assert planned[2].quant == "4bit" and planned[2].bits_per_weight == 4.5
    same_twice = plan_variants([tiny_models.gguf_q4_k_m, tiny_models.gguf_q4_k_m])
    assert len(same_twice) == 1
    from app.errors import ModelFileError

    with pytest.raises(ModelFileError):
        plan_variants([tmp_path / "missing.gguf"])
    with pytest.raises(ValueError, match="--reps must be between 1 and 100"):
        run_bench([tiny_models.gguf_q4_k_m], BenchSettings(reps=0))
    with pytest.raises(ValueError, match="--ctx must be an even number between 16 and 131072, not 33"):
        run_bench([tiny_models.gguf_q4_k_m], BenchSettings(ctx=33))
    with pytest.raises(ValueError, match="leave nothing to measure"):
        run_bench([tiny_models.gguf_q4_k_m], BenchSettings(speed=False, quality=False))


def test_a_kv_cache_sweep_measures_each_gguf_variant_once_per_cache_type(tiny_models):
    settings = BenchSettings(ctx=64, chunks=6, speed=False, flash_attention=True, kv_types=("f16", "q8_0", "q4_0"))
    result = run_bench([tiny_models.gguf_f16, tiny_models.gguf_q8_0, tiny_models.mlx_f16], settings)
    assert [v.label for v in result.variants] == ["tiny-llama-F16", "tiny-llama-Q8_0 · KV f16",
                                                  "tiny-llama-Q8_0 · KV q8_0", "tiny-llama-Q8_0 · KV q4_0", "mlx-f16"]
    assert [v.kv_cache_type for v in result.variants] == ["", "f16", "q8_0", "q4_0", ""]  # MLX has no such setting
    kld = [result.variants[i].quality.kld for i in (1, 2, 3)]
    # A quantized cache adds its own error to the weights': the 4-bit cache's is far above the others'.
    assert kld[2].value > kld[1].value and not kld[2].overlaps(kld[0]) and kld[2].value > 2 * kld[0].value
    with pytest.raises(ValueError, match="--kv-types takes f16, q8_0, q4_0, not q2"):
        run_bench([tiny_models.gguf_f16], BenchSettings(kv_types=("q2",)))


def test_a_sweep_of_kv_caches_and_context_lengths_is_one_run(tiny_models):
    settings = BenchSettings(prompt_tokens=64, gen_tokens=8, reps=1, ctx=64, chunks=3, flash_attention=True,
                             kv_types=("f16", "q4_0"), contexts=(32, 128))
    result = run_bench([tiny_models.gguf_f16, tiny_models.gguf_q8_0], settings)
    assert [v.label for v in result.variants] == [
        "tiny-llama-F16", "tiny-llama-Q8_0 · KV f16 · ctx 32", "tiny-llama-Q8_0 · KV f16 · ctx 128",
        "tiny-llama-Q8_0 · KV q4_0 · ctx 32", "tiny-llama-Q8_0 · KV q4_0 · ctx 128"]
    assert {v.sweep_of for v in result.variants[1:]} == {"tiny-llama-Q8_0"} and result.variants[0].sweep_of == ""
    reference, rows = result.variants[0], result.variants[1:]
    assert reference.quality.positions == 3 * (64 - 1 - 32)  # the reference row: the bench's --ctx
    for v in rows:
        assert not v.error and not v.unavailable, (v.label, v.unavailable)
        # Each row is scored in windows of its own length, against the reference's windows of that length ...
        assert result.window(v) == v.ctx and v.quality.positions == 3 * (v.ctx - 1 - v.ctx // 2)
        # ... and its speed run fills that context: the prompt and the generated tokens.
        assert abs(v.runs[0].prompt_tokens - (v.ctx - 8)) <= 3, (v.label, v.runs[0].prompt_tokens)
    by_ctx = {v.ctx: v.quality.ppl_base.value for v in rows}
    assert by_ctx[32] != by_ctx[128] != reference.quality.ppl.value  # three reference files, one per window length
    assert rows[0].quality.ppl_base.value == rows[2].quality.ppl_base.value  # one reference per length, shared
    assert rows[3].quality.kld.value > rows[1].quality.kld.value  # the 4-bit cache adds its error at 128 tokens
    with pytest.raises(ValueError, match="--contexts takes even numbers between 16 and 131072, not 33"):
        run_bench([tiny_models.gguf_f16], BenchSettings(contexts=(33, 64)))
    with pytest.raises(ValueError, match="a context of 64 tokens leaves no room for a prompt beside the 128 "):
        run_bench([tiny_models.gguf_f16], BenchSettings(contexts=(64, 512)))
    with pytest.raises(QuantDeskError, match="a context sweep needs the reference model"):
        run_bench([tiny_models.gguf_q8_0], BenchSettings(contexts=(64,), speed=False),
                  reference_file=result.reference_file["path"])
