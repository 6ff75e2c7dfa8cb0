"""A disk that fills up in the middle of a download, for real: the models folder is a small tmpfs
mounted in a private mount namespace (``unshare --user --map-root-user --mount``, no privileges needed
where the kernel allows user namespaces), and another writer takes the free space while the file is
half down. The download must stop with a sentence that says so, keep every byte it had, and finish
with a Range request once space is freed."""

from __future__ import annotations

import textwrap

from tests.fixtures.small_disk import needs_small_disks, run_on_small_disk
from tests.hub.conftest import payload, sha256

SIZE = 4_000_000
NAME = "full-Q4_K_M.gguf"
REPO = "acme/full-GGUF"

# Runs inside the namespace, where QUANTDESK_MODELS_DIR is an 8 MB tmpfs.
DRIVER = textwrap.dedent("""
    import hashlib, json, os, sys, threading, time
    from pathlib import Path
    from app.errors import QuantDeskError
    from app.hub.download import STAGING_DIR_NAME, Downloader, Settings
    from app.hub.plan import DownloadRequest

    repo, name, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
    models = Path(os.environ["QUANTDESK_MODELS_DIR"])
    request = DownloadRequest(repo, quant="Q4_K_M")
    part = models / STAGING_DIR_NAME / request.key() / "files" / (name + ".part")
    settings = Settings(stall_timeout=60, disk_reserve=0, backoff_base=0.01, backoff_max=0.05)
    filler = models / "someone-else.bin"

    def take_the_free_space():  # while the server holds the transfer at half
        while not (part.exists() and part.stat().st_size >= size // 2):
            time.sleep(0.01)
        with open(filler, "wb", buffering=0) as f:
            try:
                while True:
                    f.write(b"x" * 65536)
            except OSError:
                pass

    threading.Thread(target=take_the_free_space, daemon=True).start()
    try:
        Downloader(request, settings=settings).run()
        first = "finished"
    except QuantDeskError as exc:
        first = {"type": type(exc).__name__, "message": str(exc), "hint": exc.hint}
    kept = part.stat().st_size
    filler.unlink()
    result = Downloader(request, settings=settings).run()
    print(json.dumps({"first": first, "kept": kept, "path": str(result.path), "resumed": result.resumed_bytes,
                      "sha256": hashlib.sha256(result.path.read_bytes()).hexdigest()}))
""")


@needs_small_disks
def test_a_disk_that_fills_mid_download_stops_it_in_words_and_the_resume_loses_nothing(hub_env, tmp_path):
    data = payload(SIZE, 11)
    hub_env.add_repo(REPO, {NAME: data}, tags=["gguf"])
    hub_env.faults.add(NAME, "stall", after_bytes=SIZE // 2, seconds=1.0)  # half, a pause, then the rest
    mount = tmp_path / "models"
    outcome = run_on_small_disk(mount, "8m", DRIVER, REPO, NAME, str(SIZE), env={"QUANTDESK_MODELS_DIR": str(mount)})
    first = outcome["first"]
    assert first != "finished", "the disk never filled"
    assert first["type"] == "DownloadError"
    assert "disk is full" in first["message"] and NAME in first["message"]
    assert "free" in first["hint"] and "resume" in first["hint"]
    assert SIZE // 2 <= outcome["kept"] < SIZE  # every byte that reached the disk was kept
    assert outcome["resumed"] == outcome["kept"]
    last = [r for r in hub_env.requests_for(NAME) if r.path.startswith("/lfs/")][-1]
    assert last.status == 206 and last.headers["range"] == f"bytes={outcome['kept']}-"
    assert outcome["path"].startswith(str(mount)) and outcome["sha256"] == sha256(data)
