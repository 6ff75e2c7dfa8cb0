"""Remote models in the quant lab beside a local quant: speed always, perplexity where the endpoint echoes prompt
log-probabilities (llama-cpp-python's server with logits_all), and the KL-divergence figures as n/a with the
reason."""

from __future__ import annotations

import pytest

from app.errors import QuantDeskError
from app.lab.results import BenchSettings
from app.lab.runner import REMOTE_NO_DISTRIBUTIONS, plan_variants, run_bench
from app.remote.connections import Connection, Connections, model_ref
from app.server.app import create_app, model_id
from app.server.thread import ServerThread
from tests.remote.test_real_servers import llama_cpp_server_process, local_engine  # noqa: F401 - fixtures

SMALL = BenchSettings(prompt_tokens=64, gen_tokens=8, reps=1, ctx=64)


@pytest.fixture(scope="module")
def echoing_server(tiny_models, tmp_path_factory):
    """llama-cpp-python's server keeping every logit, so /completions can echo prompt log-probabilities."""
    yield from llama_cpp_server_process(tiny_models, tmp_path_factory, "--logits_all", "true")


def test_remote_models_beside_a_local_quant(tiny_models, local_engine, echoing_server):  # noqa: F811
    server = ServerThread(create_app(local_engine)).start()
    try:
        Connections().save(Connection("qd", f"{server.url}/v1"))
        Connections().save(Connection("lcp", echoing_server))
        qd = model_ref("qd", model_id(local_engine.loaded.model_path))
        lcp = model_ref("lcp", "tiny")
        result = run_bench([tiny_models.gguf_q8_0, qd, lcp], SMALL)
    finally:
        server.stop()
    local, through_qd, through_lcp = (result.variant(label) for label in
                                      ("tiny-llama-Q8_0", "tiny-llama-Q8_0 @ qd", "tiny @ lcp"))
    assert result.reference == "tiny-llama-Q8_0"  # a remote model is never the reference
    for remote in (through_qd, through_lcp):
        assert remote.format == "remote" and remote.backend == "remote" and not remote.error
        assert remote.speed["decode_tps"].median > 0 and remote.speed["ttft_ms"].median > 0
        assert remote.unavailable["kld_mean"] == remote.unavailable["same_top_p"] == \
            f"n/a: {REMOTE_NO_DISTRIBUTIONS}"
    # QuantDesk's server refuses echo/logprobs, and says so; llama-cpp-python's echoes them.
    assert through_qd.perplexity is None and "qd returned no prompt log-probabilities" in \
        through_qd.unavailable["perplexity"]
    assert through_lcp.perplexity is not None and through_lcp.quality is None
    assert any("the server's own" in note and "not comparable" in note for note in through_lcp.notes)
    # The same weights scored there (every position of its first 64 tokens) and here (the second half of each
    # window): random weights guess near uniformly either way, so the two land close, though not on one method.
    print(f"perplexity here {local.perplexity:.3f}, through llama_cpp.server {through_lcp.perplexity:.3f}")
    assert through_lcp.perplexity == pytest.approx(local.perplexity, rel=0.1)


def test_a_remote_model_cannot_be_the_reference(tiny_models):
    Connections().save(Connection("qd", "http://127.0.0.1:9/v1"))
    with pytest.raises(QuantDeskError, match="cannot be the reference"):
        plan_variants([tiny_models.gguf_q8_0], reference=model_ref("qd", "m"))
    with pytest.raises(QuantDeskError, match="no remote connection named 'nope'"):
        plan_variants([model_ref("nope", "m")])
