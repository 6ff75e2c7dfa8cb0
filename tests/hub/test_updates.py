"""Update checks and updates against the Hub stand-in: a repo that changes after a download is flagged with the
right reason, checks ask once per repo and at most daily (never offline, never when switched off), and an update
fetches only what changed, verified, or leaves the old model working when it fails."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from app import settings
from app.engine.client import EngineClient
from app.hub import updates
from app.hub.download import Downloader, download
from app.hub.errors import DownloadError, DownloadPaused, IntegrityError, OfflineError
from app.hub.library import Library
from app.hub.plan import DownloadRequest
from app.datatypes import LoadSettings, Message, SamplingSettings
from tests.hub.conftest import ENTRY, FILE, README, REPO, payload, sha256, write_gguf

def _api_calls(server) -> list[str]:
    return [r.path for r in server.log if r.path.startswith("/api/")]


def _check(**kwargs) -> updates.CheckReport:
    return updates.check_updates(force=True, **kwargs)


def test_a_repaired_chat_template_is_flagged_as_such_with_one_metadata_request(gguf_repo, fixed_template):
    server, entry = gguf_repo
    new_commit = server.update_repo(REPO, {FILE: fixed_template})
    server.log.clear()
    status = _check().statuses[ENTRY]
    assert status.available and status.headline == "update available: chat template changed"
    assert (status.local_commit, status.remote_commit) == (entry.commit_hash, new_commit)
    assert status.details() == [f"{FILE}: chat template changed"]
    assert _api_calls(server) == [f"/api/models/{REPO}/revision/main"]  # one model_info; no refs, no tree
    header_reads = server.requests_for(FILE)
    assert header_reads and all("range" in r.headers for r in header_reads)  # the header alone, by Range
    assert sum(r.bytes_sent for r in header_reads) < fixed_template.stat().st_size // 2


def test_other_weights_in_the_same_file_are_a_replaced_file_fetched_whole(gguf_repo, tiny_models, fast):
    server, entry = gguf_repo
    server.update_repo(REPO, {FILE: tiny_models.gguf_q8_0})  # same name, other tensors
    status = _check().statuses[ENTRY]
    assert status.headline == "update available: file replaced"
    assert status.details() == [f"{FILE}: file replaced"]
    server.log.clear()
    result = download(updates.update_request(entry, status), settings=fast)
    assert sha256(result.path) == sha256(tiny_models.gguf_q8_0)
    assert server.bytes_sent_for(FILE) == tiny_models.gguf_q8_0.stat().st_size  # the changed file, once


def test_a_template_fix_whose_weights_changed_too_is_fetched_whole(gguf_repo, fixed_template, fast):
    server, entry = gguf_repo
    data = bytearray(fixed_template.read_bytes())
    data[-2] ^= 0xFF  # the header says "template only"; one weight byte says otherwise
    server.update_repo(REPO, {FILE: bytes(data)})
    status = _check().statuses[ENTRY]
    assert status.reasons == ["chat template changed"]  # all a header can tell
    server.log.clear()
    result = download(updates.update_request(entry, status), settings=fast)
    assert result.path.read_bytes() == bytes(data)  # the splice did not verify: the whole file was fetched
    whole = [r for r in server.requests_for(FILE) if "range" not in r.headers and r.status == 200]
    assert len(whole) == 1 and whole[0].bytes_sent == len(data)


def test_same_header_other_weight_bytes_is_a_replaced_file(hub_env, tmp_path, fast):
    old = write_gguf(tmp_path / "a" / "w-Q4_K_M.gguf")
    new = write_gguf(tmp_path / "b" / "w-Q4_K_M.gguf", n=4096)
    data = bytearray(new.read_bytes())
    data[-4:] = b"\x01\x02\x03\x04"  # a weight changed, the header identical
    hub_env.add_repo("acme/w-GGUF", {"w-Q4_K_M.gguf": old.read_bytes()}, tags=["gguf"])
    download(DownloadRequest("acme/w-GGUF", quant="Q4_K_M"), settings=fast)
    hub_env.update_repo("acme/w-GGUF", {"w-Q4_K_M.gguf": bytes(data)})
    [status] = _check().statuses.values()
    assert status.reasons == ["file replaced"]


def test_checking_one_model_keeps_what_was_found_for_the_others(gguf_repo, fixed_template, hub_env, fast):
    server, _ = gguf_repo
    server.update_repo(REPO, {FILE: fixed_template})
    hub_env.add_repo("acme/w-GGUF", {"w-Q8_0.gguf": payload(4096, 5)}, tags=["gguf"])
    download(DownloadRequest("acme/w-GGUF", quant="Q8_0"), settings=fast)
    [other] = [e for e in Library().entries(refresh=False) if e.repo_id == "acme/w-GGUF"]
    assert set(_check().statuses) == {ENTRY, other.id}
    server.log.clear()
    assert set(_check(only=other.id).statuses) == {other.id}
    assert [r.path for r in server.log if r.path.startswith("/api/")] == ["/api/models/acme/w-GGUF/revision/main"]
    assert updates.known_updates()[ENTRY].headline == "update available: chat template changed"


def test_a_readme_change_is_no_update_but_is_said(gguf_repo):
    server, entry = gguf_repo
    new_commit = server.update_repo(REPO, {"README.md": README + b"\nNow with a longer card.\n"})
    status = _check().statuses[ENTRY]
    assert not status.available and status.headline == "up to date" and status.changes == []
    assert status.remote_commit == new_commit != entry.commit_hash
    assert "none of this model's files changed" in status.details()[0]


def test_an_unchanged_repo_is_up_to_date(gguf_repo):
    status = _check().statuses[ENTRY]
    assert status.headline == "up to date" and status.details() == []


def test_checks_are_daily_a_failed_one_does_not_count_and_results_are_kept(gguf_repo, fixed_template, monkeypatch):
    server, _ = gguf_repo
    server.update_repo(REPO, {FILE: fixed_template})
    server.log.clear()
    first = updates.check_updates()
    assert first.asked == [REPO] and len(_api_calls(server)) == 1
    server.log.clear()
    again = updates.check_updates()  # within the day: answered from what was kept
    assert again.asked == [] and server.log == []
    assert again.statuses[ENTRY].headline == "update available: chat template changed"
    later = updates.check_updates(now=first.statuses[ENTRY].checked_at + updates.CHECK_INTERVAL_S + 1)
    assert later.asked == [REPO] and len(_api_calls(server)) == 1

    # a check that cannot reach the Hub is no check: the next one asks again
    server.log.clear()
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # the discard port: nothing listens
    failed = updates.check_updates(now=later.statuses[ENTRY].checked_at + updates.CHECK_INTERVAL_S + 1)
    assert failed.failures and REPO in failed.failures[0]
    monkeypatch.setenv("HF_ENDPOINT", server.url)
    retried = updates.check_updates(now=later.statuses[ENTRY].checked_at + updates.CHECK_INTERVAL_S + 2)
    assert retried.asked == [REPO] and len(_api_calls(server)) == 1


def test_offline_or_switched_off_makes_no_request(gguf_repo, monkeypatch):
    server, _ = gguf_repo
    server.log.clear()
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(OfflineError, match="offline mode is on"):
        _check()
    assert updates.check_if_due() is None
    monkeypatch.delenv("HF_HUB_OFFLINE")
    settings.update(check_updates=False)
    with pytest.raises(updates.UpdateChecksOff, match="Check for model updates"):
        _check()
    assert updates.check_if_due() is None
    assert server.log == []


def test_the_update_fetches_only_the_changed_file_verifies_it_and_keeps_open_files_valid(gguf_repo,
                                                                                         fixed_template, fast):
    server, entry = gguf_repo
    new_commit = server.update_repo(REPO, {FILE: fixed_template, "README.md": README + b"more\n"})
    status = _check().statuses[ENTRY]
    model = settings.models_dir() / "acme" / "tiny-llama-GGUF" / FILE
    old_bytes = model.read_bytes()
    with open(model, "rb") as held:  # as a loaded model holds it (mmap): the update must not truncate it
        server.log.clear()
        result = download(updates.update_request(entry, status), settings=fast)
        assert held.read() == old_bytes  # the old inode lives on for whoever has it open
    assert sha256(result.path) == sha256(fixed_template)  # verified against the Hub's sha256
    reads = server.requests_for(FILE)
    assert reads and all("range" in r.headers for r in reads)  # a template fix: the new header, not the weights
    assert server.bytes_sent_for(FILE) < fixed_template.stat().st_size // 2
    assert server.requests_for("README.md") == []  # not part of the model
    updated = Library().find(ENTRY)
    assert (updated.commit_hash, updated.added_at, updated.path) == (new_commit, entry.added_at, entry.path)
    assert updated.files == [{"path": FILE, "size": fixed_template.stat().st_size, "sha256": sha256(fixed_template)}]
    assert updates.known_updates() == {}  # the kept result described the old commit
    assert updates.check_updates().asked == []  # the repo was asked today already
    assert _check().statuses[ENTRY].headline == "up to date"


def test_a_model_loaded_while_it_updates_keeps_chatting(gguf_repo, fixed_template, fast):
    server, entry = gguf_repo
    server.update_repo(REPO, {FILE: fixed_template})
    status = _check().statuses[ENTRY]
    hello = [Message("user", "Hello")]
    with EngineClient() as client:
        client.load(entry.path, LoadSettings(n_ctx=256))  # llama.cpp maps the file
        download(updates.update_request(entry, status), settings=fast)
        events = list(client.generate(hello, SamplingSettings(max_tokens=8, seed=1)))
        assert events[-1].stats.generated_tokens == 8  # its mapped pages are the old file's, still whole
        client.load(entry.path, LoadSettings(n_ctx=256))  # and the new file loads in its place
        assert list(client.generate(hello, SamplingSettings(max_tokens=4, seed=1)))[-1].stats.generated_tokens == 4


def _folder_repo(server) -> dict[str, bytes]:
    files = {"config.json": json.dumps({"model_type": "llama", "architectures": ["LlamaForCausalLM"]}).encode(),
             "model-00001-of-00002.safetensors": payload(300_000, 1),
             "model-00002-of-00002.safetensors": payload(200_000, 2),
             "tokenizer_config.json": json.dumps({"chat_template": "{{ messages }}", "eos_token": "<e>"}).encode(),
             "README.md": b"# a folder model\n"}
    server.add_repo("acme/folder-model", files, tags=["safetensors"])
    return files


def test_a_folder_model_names_each_change_and_updates_only_those(hub_env, fast):
    _folder_repo(hub_env)
    download(DownloadRequest("acme/folder-model"), settings=fast)
    entry = Library().find("acme/folder-model")
    new_template = json.dumps({"chat_template": "{{ fixed }}", "eos_token": "<e>"}).encode()
    shard = payload(200_000, 3)
    hub_env.update_repo("acme/folder-model", {"tokenizer_config.json": new_template,
                                              "model-00002-of-00002.safetensors": shard,
                                              "generation_config.json": b'{"eos_token_id": 2}',
                                              "README.md": b"# a better card\n"})
    status = _check().statuses["acme/folder-model"]
    assert status.headline == "update available: chat template changed, file replaced, file added"
    assert status.details() == ["generation_config.json: file added", "model-00002-of-00002.safetensors: file replaced",
                                "tokenizer_config.json: chat template changed",
                                "also changed in the repo, not part of the model (no update needed): README.md"]
    hub_env.log.clear()
    download(updates.update_request(entry, status), settings=fast)
    fetched = {r.file for r in hub_env.log if r.file and r.method == "GET" and "range" not in r.headers}
    assert fetched == {"tokenizer_config.json", "model-00002-of-00002.safetensors", "generation_config.json",
                       "README.md"}  # the folder is the model: its card comes with it; the first shard stays
    folder = settings.models_dir() / "acme" / "folder-model"
    assert (folder / "model-00002-of-00002.safetensors").read_bytes() == shard
    assert (folder / "tokenizer_config.json").read_bytes() == new_template
    assert len(Library().find("acme/folder-model").files) == 6


def test_a_file_removed_upstream_is_said_and_removed_by_the_update(hub_env, fast):
    _folder_repo(hub_env)
    download(DownloadRequest("acme/folder-model"), settings=fast)
    entry = Library().find("acme/folder-model")
    hub_env.update_repo("acme/folder-model", {}, removed=("tokenizer_config.json",))
    status = _check().statuses["acme/folder-model"]
    assert status.details() == ["tokenizer_config.json: file removed"]
    hub_env.log.clear()
    download(updates.update_request(entry, status), settings=fast)
    assert not [r for r in hub_env.log if r.file and "range" not in r.headers]  # nothing to fetch
    folder = settings.models_dir() / "acme" / "folder-model"
    assert not (folder / "tokenizer_config.json").exists() and (folder / "config.json").is_file()
    assert "tokenizer_config.json" not in {f["path"] for f in Library().find("acme/folder-model").files}


@pytest.mark.parametrize("fault", ["drop", "wrong_byte"])
def test_a_failed_update_leaves_the_old_model_working(gguf_repo, tiny_models, fast, fault):
    server, entry = gguf_repo
    server.update_repo(REPO, {FILE: tiny_models.gguf_q8_0})  # other weights: the whole file travels
    status = _check().statuses[ENTRY]
    if fault == "drop":  # cut after 1 MB, then at once on every retry: the downloader gives up
        server.faults.add(FILE, "drop", after_bytes=1_000_000)
        server.faults.add(FILE, "drop", times=-1, after_bytes=0)
    else:  # every copy sent has one byte flipped: it never verifies
        server.faults.add(FILE, "wrong_byte", times=-1, offset=123_456)
    model = settings.models_dir() / "acme" / "tiny-llama-GGUF" / FILE
    before = sha256(model)
    with pytest.raises(IntegrityError if fault == "wrong_byte" else DownloadError) as failed:
        download(updates.update_request(entry, status), settings=fast)
    assert ("failed verification" if fault == "wrong_byte" else "Gave up") in str(failed.value)
    assert sha256(model) == before
    assert Library().find(ENTRY) == entry  # the record still names the old commit and files
    assert updates.known_updates()[ENTRY].available  # still offered
    with EngineClient() as client:  # and the old model loads and chats
        client.load(model, LoadSettings(n_ctx=256))
        events = list(client.generate([Message("user", "Hello")], SamplingSettings(max_tokens=4, seed=1)))
    assert events[-1].stats.generated_tokens == 4


def test_a_cancelled_update_keeps_the_old_model(gguf_repo, tiny_models, fast):
    server, entry = gguf_repo
    server.update_repo(REPO, {FILE: tiny_models.gguf_q8_0})
    status = _check().statuses[ENTRY]
    server.faults.add(FILE, "stall", after_bytes=500_000, seconds=30)
    model = settings.models_dir() / "acme" / "tiny-llama-GGUF" / FILE
    before = sha256(model)
    runner: Downloader | None = None

    def on_progress(progress) -> None:
        if progress.state == "downloading" and progress.done >= 500_000 and runner is not None:
            runner.cancel()

    runner = Downloader(updates.update_request(entry, status), on_progress, fast)
    with pytest.raises(DownloadPaused, match="cancelled"):
        runner.run()
    assert sha256(model) == before and Library().find(ENTRY) == entry
    assert not runner.staging.exists()


def test_an_exl_branch_is_checked_and_updated_at_its_branch(hub_env, fast):
    commits = hub_env.add_exl_repo("acme/Tiny-exl2", "exl2", {"4.0bpw": 4.0, "6.0bpw": 6.0}, tags=["exl2"])
    download(DownloadRequest("acme/Tiny-exl2", quant="6.0bpw"), settings=fast)
    entry = Library().find("acme/Tiny-exl2@6.0bpw")
    assert entry.commit_hash == commits["6.0bpw"]
    hub_env.update_repo("acme/Tiny-exl2", {"README.md": b"# new card on main\n"})  # main moving is not this model
    assert not _check().statuses[entry.id].available
    template = b'{"bos_token": "<1>", "eos_token": "<2>", "model_max_length": 8192, "chat_template": "{{ x }}"}'
    new_commit = hub_env.update_repo("acme/Tiny-exl2", {"tokenizer_config.json": template}, revision="6.0bpw")
    hub_env.log.clear()
    status = _check().statuses[entry.id]
    assert status.details() == ["tokenizer_config.json: chat template changed"]
    assert [r.path for r in hub_env.log if r.path.startswith("/api/")] == \
        ["/api/models/acme/Tiny-exl2/revision/6.0bpw"]
    download(updates.update_request(entry, status), settings=fast)
    updated = Library().find(entry.id)
    assert updated.commit_hash == new_commit and (Path(updated.path) / "tokenizer_config.json").read_bytes() == template
