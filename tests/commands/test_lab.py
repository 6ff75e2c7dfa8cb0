"""``quantdesk bench`` as a user runs it: a real process, real engines, real tiny models."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from app.lab import uploaders
from app.lab.export import read_csv
from tests.lab.uploaders_hub import BASE, VOCAB_ONLY, add_uploaders

ROOT = Path(__file__).resolve().parents[2]
QUICK = ("--reps", "1", "--prompt-tokens", "32", "--gen-tokens", "4", "--ctx", "32", "--chunks", "8")


def quantdesk(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, timeout=280, cwd=ROOT)


def test_bench_json_then_history_show_and_export(tiny_models, tmp_path):
    result = quantdesk("bench", str(tiny_models.gguf_q4_k_m), str(tiny_models.gguf_f16), *QUICK, "--json")
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads(result.stdout)
    assert data["reference"] == "tiny-llama-F16"
    by_label = {v["label"]: v for v in data["variants"]}
    reference, q4 = by_label["tiny-llama-F16"]["quality"], by_label["tiny-llama-Q4_K_M"]["quality"]
    assert reference["kld"]["value"] == 0.0 and reference["same_top"]["value"] == 1.0
    assert q4["kld"]["value"] > 0 and q4["kld"]["se"] > 0 and q4["positions"] == 8 * 15
    assert set(q4["dp_percentiles"]) >= {"max", "75", "median", "25", "min"} and q4["rms_dp"]["se"] > 0
    assert "[1/4] speed: repetition 1/1" in result.stderr and f"saved as {data['id']}" in result.stderr
    assert "quality: perplexity and KL divergence: tiny-llama-Q4_K_M" in result.stderr

    history = quantdesk("bench", "--history")
    assert history.returncode == 0 and history.stdout.startswith(data["id"])
    assert "reference tiny-llama-F16" in history.stdout

    table = quantdesk("bench", "--show", data["id"])
    assert table.returncode == 0, table.stderr
    header, rule, first, second = table.stdout.splitlines()[:4]
    assert header.split()[:4] == ["variant", "backend", "quant", "bpw"] and set(rule) <= {"-", " "}
    assert first.startswith("tiny-llama-F16 (ref)") and "100.00 ± 0.00 %" in first
    assert second.startswith("tiny-llama-Q4_K_M") and "Q4_K_M" in second
    # Every statistic, laid out as llama-perplexity prints them, to read the two side by side.
    assert "tiny-llama-Q4_K_M against tiny-llama-F16:" in table.stdout
    for line in ("Mean PPL(Q)/PPL(base)         :", "Mean KLD                      :",
                 "99.9% KLD                     :", "RMS Δp                        :", "Same top p                    :"):
        assert line in table.stdout

    out = tmp_path / "bench.csv"
    exported = quantdesk("bench", "--show", data["id"], "--out", str(out))
    assert exported.returncode == 0 and f"wrote {out}" in exported.stderr
    rows = read_csv(out.read_text())
    assert [r["variant"] for r in rows] == ["tiny-llama-F16", "tiny-llama-Q4_K_M"]
    assert rows[1]["kld_mean"] == q4["kld"]["value"] and rows[1]["same_top_p_se"] == q4["same_top"]["se"]


def test_bench_csv_to_stdout_without_saving(tiny_models):
    result = quantdesk("bench", str(tiny_models.mlx_f16), *QUICK, "--no-quality", "--csv", "--no-save")
    assert result.returncode == 0, result.stderr[-3000:]
    (row,) = read_csv(result.stdout)
    assert row["backend"] == "mlx" and row["decode_tps_median"] > 0 and row["perplexity"] is None
    assert "skipped (--no-quality)" in row["unavailable"] and "saved as" not in result.stderr
    assert quantdesk("bench", "--history").stderr.strip() == "no saved bench results"


def test_bad_input_exits_non_zero_with_a_sentence(tmp_path):
    result = quantdesk("bench")
    assert result.returncode == 1 and result.stderr.startswith("quantdesk: name the models to compare")
    missing = tmp_path / "missing.gguf"
    result = quantdesk("bench", str(missing))
    assert result.returncode == 1 and result.stderr.strip() == f"quantdesk: {missing} does not exist"
    result = quantdesk("bench", str(missing), "--reps", "0")
    assert result.returncode == 1 and "--reps must be between 1 and 100, not 0" in result.stderr
    result = quantdesk("bench", str(missing), "--contexts", "512,2k")
    assert result.returncode == 1 and "--contexts takes whole numbers separated by commas, not '512,2k'" in \
        result.stderr
    result = quantdesk("bench", "--show", "20200101-000000-abcdef")
    assert result.returncode == 1 and "no saved bench result 20200101-000000-abcdef" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_sweep_of_caches_and_contexts_is_one_bench_with_a_row_each(tiny_models):
    result = quantdesk("bench", str(tiny_models.gguf_f16), str(tiny_models.gguf_q4_k_m), "--no-speed", "--ctx", "64",
                       "--chunks", "2", "--kv-types", "f16,q8_0", "--contexts", "32,96", "--csv", "--no-save")
    assert result.returncode == 0, result.stderr[-3000:]
    rows = read_csv(result.stdout)
    assert [(r["variant"], r["kv_cache_type"], r["ctx"]) for r in rows] == [
        ("tiny-llama-F16", "", 64), ("tiny-llama-Q4_K_M · KV f16 · ctx 32", "f16", 32),
        ("tiny-llama-Q4_K_M · KV f16 · ctx 96", "f16", 96), ("tiny-llama-Q4_K_M · KV q8_0 · ctx 32", "q8_0", 32),
        ("tiny-llama-Q4_K_M · KV q8_0 · ctx 96", "q8_0", 96)]
    assert all(r["kld_mean"] > 0 for r in rows[1:]) and [r["positions"] for r in rows] == [62, 30, 94, 30, 94]


def test_bench_fetches_quants_of_a_hub_repo_then_compares_them(tiny_models, hub_server, hub_env):
    hub_server.add_repo("acme/tiny-llama-GGUF", tags=["gguf"], files={
        "tiny-llama-F16.gguf": tiny_models.gguf_f16, "tiny-llama-Q4_K_M.gguf": tiny_models.gguf_q4_k_m,
        "tiny-llama-Q8_0.gguf": tiny_models.gguf_q8_0})
    result = quantdesk("bench", "--repo", "acme/tiny-llama-GGUF", "--quant", "Q4_K_M", "--quant", "F16", *QUICK,
                       "--json", "--no-save")
    assert result.returncode == 0, result.stderr[-3000:]
    data = json.loads(result.stdout)
    assert sorted(v["label"] for v in data["variants"]) == ["acme/tiny-llama-GGUF/tiny-llama-F16",
                                                            "acme/tiny-llama-GGUF/tiny-llama-Q4_K_M"]
    assert data["reference"] == "acme/tiny-llama-GGUF/tiny-llama-F16"
    assert {v["origin"] for v in data["variants"]} == {"acme/tiny-llama-GGUF/tiny-llama-F16.gguf",
                                                       "acme/tiny-llama-GGUF/tiny-llama-Q4_K_M.gguf"}
    assert hub_server.bytes_sent_for("tiny-llama-Q8_0.gguf") == 0  # only the asked-for quants were fetched
    assert hub_server.bytes_sent_for("tiny-llama-Q4_K_M.gguf") == tiny_models.gguf_q4_k_m.stat().st_size
    # Fetched into the lab's cache, never the library, and removed after the bench (--keep-downloads keeps them).
    assert json.loads(quantdesk("ls", "--json").stdout)["models"] == []
    assert "removed acme/tiny-llama-GGUF/tiny-llama-Q4_K_M (0.00 GB)" in result.stderr
    assert not any(p.is_file() for p in uploaders.cache_root().rglob("*"))


def test_repo_without_quant_is_refused(hub_env):
    result = quantdesk("bench", "--repo", "acme/x")
    assert result.returncode == 1 and "--repo and --uploaders need a --quant to compare" in result.stderr
    result = quantdesk("bench", "--quant", "Q4_K_M")
    assert result.returncode == 1 and "--quant goes with --repo or --uploaders" in result.stderr
    result = quantdesk("bench", "--list")
    assert result.returncode == 1 and "--pick and --list go with --uploaders" in result.stderr


def test_uploaders_of_a_base_model_are_found_on_the_hub_checked_and_listed(tiny_models, hub_server, hub_env,
                                                                           tmp_path):
    add_uploaders(hub_server, tiny_models, tmp_path)
    listed = quantdesk("bench", "--uploaders", BASE, "--quant", "q4_k_m", "--list")
    assert listed.returncode == 0, listed.stderr[-3000:]
    assert listed.stdout.splitlines() == [
        f"5 GGUF file(s) of Q4_K_M among the Hub's quantizations of {BASE} (architecture and vocabulary checked "
        "against careful/tiny-llama-GGUF/tiny-llama-F16.gguf):",
        f"  compared: careful/tiny-llama-GGUF/tiny-llama-Q4_K_M.gguf — {_gb(tiny_models.gguf_q4_k_m)}, 300 downloads",
        f"  compared: pure/tiny-llama-GGUF/tiny-llama-Q4_K_M.gguf — {_gb(tmp_path / 'pure.gguf')}, 299 downloads",
        f"  compared: q4-output/tiny-llama-GGUF/tiny-llama-Q4_K_M.gguf — {_gb(tmp_path / 'out.gguf')}, 298 downloads",
        "  left out: mixup/tiny-llama-GGUF/tiny-llama-Q4_K_M.gguf — 0.00 GB, 50 downloads: its architecture is "
        "starcoder2, the reference's llama",
        "  left out: spm/tiny-llama-GGUF/tiny-llama-Q4_K_M.gguf — 0.00 GB, 45 downloads: its vocabulary has 32,000 "
        "tokens, the reference's 1,024",
        "  not compared: eights/tiny-llama-GGUF has no Q4_K_M (it has: Q8_0)",
        "reference: careful/tiny-llama-GGUF/tiny-llama-F16.gguf (F16, the highest precision found; fetched too)"]
    # Only the headers were read (by Range): nothing was downloaded to list them.
    reads = hub_server.requests_for("tiny-llama-Q4_K_M.gguf")
    assert reads and all(r.headers.get("range") and r.bytes_sent <= 1 << 20 for r in reads)
    searches = [r for r in hub_server.log if r.path == "/api/models"]
    assert len(searches) == 1 and f"filter=base_model%3Aquantized%3A{BASE.replace('/', '%2F')}" in searches[0].query
    # With a local reference of another architecture, every file found is left out, in words.
    other = quantdesk("bench", "--reference", str(VOCAB_ONLY / "ggml-vocab-starcoder.gguf"),
                      "--uploaders", BASE, "--quant", "Q4_K_M", "--list")
    assert other.returncode == 0 and "checked against ggml-vocab-starcoder.gguf" in other.stdout
    assert other.stdout.count("its architecture is llama, the reference's starcoder2") == 4
    assert "reference:" not in other.stdout
    nothing = quantdesk("bench", "--uploaders", "meta-test/none", "--quant", "Q4_K_M")
    assert nothing.returncode == 1 and "the Hub lists no GGUF quantizations of meta-test/none" in nothing.stderr
    picked = quantdesk("bench", "--uploaders", BASE, "--quant", "Q4_K_M", "--pick", "someone/else", "--list")
    assert picked.returncode == 1 and "--pick: someone/else is not among the repos found" in picked.stderr


def test_the_same_quant_from_three_uploaders_ranked_with_verified_downloads_cleaned_up(tiny_models, hub_server,
                                                                                       hub_env, tmp_path):
    made = add_uploaders(hub_server, tiny_models, tmp_path)
    # The reference's download arrives damaged once (a byte past the header, which its first read takes whole).
    hub_server.faults.add("tiny-llama-F16.gguf", "wrong_byte", times=2, offset=2_000_000)
    result = quantdesk("bench", "--uploaders", BASE, "--quant", "Q4_K_M", "--no-speed", "--ctx", "64", "--chunks",
                       "8", "--no-save")
    assert result.returncode == 0, result.stderr[-3000:]
    # Each fetched whole, verified by the Hub's sha256: the damaged transfer was thrown away and fetched again.
    assert hub_server.bytes_sent_for("tiny-llama-Q4_K_M.gguf") >= sum(path.stat().st_size for path in made.values())
    assert hub_server.bytes_sent_for("tiny-llama-F16.gguf") >= 2 * tiny_models.gguf_f16.stat().st_size
    for repo in made:
        assert f"removed {repo}/tiny-llama-Q4_K_M" in result.stderr
    assert "removed careful/tiny-llama-GGUF/tiny-llama-F16" in result.stderr  # the reference, fetched too
    assert hub_server.bytes_sent_for("tiny-llama-Q8_0.gguf") == 0
    assert not any(p.is_file() for p in uploaders.cache_root().rglob("*"))  # cleaned up after the bench
    assert json.loads(quantdesk("ls", "--json").stdout)["models"] == []  # and never in the library
    reference = "careful/tiny-llama-GGUF/tiny-llama-F16"
    ranking = result.stdout.split(f"ranked by mean KLD from {reference}:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert len(ranking) == 3 and ranking[0].startswith("1. careful/tiny-llama-GGUF/tiny-llama-Q4_K_M: mean KLD ")
    klds = [float(line.split("mean KLD ")[1].split(" ± ")[0]) for line in ranking]
    assert klds == sorted(klds) and klds[0] < klds[1]  # the file that kept some layers in 6 bits is the closest
    assert all(" KLD×GB" in line for line in ranking)

    kept = quantdesk("bench", str(tiny_models.gguf_f16), "--uploaders", BASE, "--quant", "Q4_K_M", "--pick",
                     "pure/tiny-llama-GGUF", "--no-speed", "--ctx", "64", "--chunks", "2", "--no-save",
                     "--keep-downloads", "--json")
    assert kept.returncode == 0, kept.stderr[-3000:]
    assert "removed" not in kept.stderr and "fetching careful" not in kept.stderr  # the local F16 is the reference
    assert "checked against tiny-llama-F16.gguf" in kept.stderr and "the highest precision found" not in kept.stderr
    data = json.loads(kept.stdout)
    assert [v["label"] for v in data["variants"]] == ["tiny-llama-F16", "pure/tiny-llama-GGUF/tiny-llama-Q4_K_M"]
    cached = uploaders.cache_root() / "pure" / "tiny-llama-GGUF" / "tiny-llama-Q4_K_M.gguf"
    assert cached.read_bytes() == made["pure/tiny-llama-GGUF"].read_bytes()

    def downloads() -> int:  # whole-file GETs, not the headers' Range reads
        return sum(1 for r in hub_server.requests_for("tiny-llama-Q4_K_M.gguf") if not r.headers.get("range"))

    before = downloads()
    again = quantdesk("bench", str(tiny_models.gguf_f16), "--uploaders", BASE, "--quant", "Q4_K_M", "--pick",
                      "pure/tiny-llama-GGUF", "--no-speed", "--ctx", "64", "--chunks", "2", "--no-save")
    assert again.returncode == 0 and "pure/tiny-llama-GGUF/tiny-llama-Q4_K_M: kept from an earlier bench" in \
        again.stderr
    assert before > 0 and downloads() == before  # headers only: no new download
    assert cached.is_file()  # kept before: a later bench does not remove it


def _gb(path: Path) -> str:
    return f"{path.stat().st_size / 1e9:.2f} GB"


def test_recommend_says_what_the_lab_measured_here(tiny_models, tmp_path):
    folder = tmp_path / "models"
    folder.mkdir()
    for path in (tiny_models.gguf_f16, tiny_models.gguf_q8_0, tiny_models.gguf_q4_k_m):
        (folder / path.name).symlink_to(path)
    before = json.loads(quantdesk("recommend", str(folder), "--json").stdout)
    assert before["measured"] == {}
    bench = quantdesk("bench", str(folder / tiny_models.gguf_f16.name), str(folder / tiny_models.gguf_q4_k_m.name),
                      *QUICK)
    assert bench.returncode == 0, bench.stderr[-3000:]
    after = json.loads(quantdesk("recommend", str(folder), "--json").stdout)
    (label, sentence), = after["measured"].items()  # the quant the lab compared; not the reference, nor Q8_0
    assert label.endswith("tiny-llama-Q4_K_M.gguf")
    assert sentence.startswith("KLD ") and "from F16 measured here" in sentence and "× the generation speed of F16" \
        in sentence
