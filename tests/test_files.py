"""app.files: the one atomic write. A write that fails midway leaves the old file whole and no temp file behind;
a write that succeeds reached the disk (fsync) before it took the file's name; and no other module writes a file
it keeps through a hand copy of the rule."""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from app import files

ROOT = Path(__file__).resolve().parents[1]


def test_a_write_replaces_the_file_after_its_bytes_are_synced(tmp_path, monkeypatch):
    target = tmp_path / "deep" / "state.json"
    synced: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.fstat(fd).st_size)  # the temp file, whole, when it is synced
        assert not target.exists()  # ...and before it took the name
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    files.write_text_atomic(target, "ünïcode\n")
    assert target.read_bytes() == "ünïcode\n".encode()
    assert synced == [len("ünïcode\n".encode())]
    assert [p.name for p in target.parent.iterdir()] == ["state.json"]


@pytest.mark.parametrize("failing", ["write", "fsync", "replace"])
def test_a_failed_write_leaves_the_old_file_whole_and_no_temp_file(tmp_path, monkeypatch, failing):
    target = tmp_path / "state.json"
    files.write_text_atomic(target, "old")

    def disk_full(*_args, **_kwargs):
        raise OSError(28, "No space left on device")

    if failing == "write":  # half the bytes reach the temp file, then the disk is full
        real_fdopen = os.fdopen

        class HalfFull:
            def __init__(self, *args, **kwargs) -> None:
                self.fh = real_fdopen(*args, **kwargs)

            def __enter__(self) -> HalfFull:
                return self

            def __exit__(self, *_exc) -> None:
                self.fh.close()

            def write(self, data: bytes) -> int:
                self.fh.write(data[: len(data) // 2])
                self.fh.flush()
                raise OSError(28, "No space left on device")

        monkeypatch.setattr(os, "fdopen", HalfFull)
    else:
        monkeypatch.setattr(os, failing, disk_full)
    with pytest.raises(OSError):
        files.write_bytes_atomic(target, b"new " * 100_000)
    monkeypatch.undo()
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["state.json"]


@pytest.mark.skipif(os.name == "nt", reason="POSIX file modes")
def test_a_private_file_is_the_users_only_from_its_first_byte(tmp_path, monkeypatch):
    modes: list[int] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        modes.append(stat.S_IMODE(os.fstat(fd).st_mode))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    target = files.write_text_atomic(tmp_path / "token", "secret", private=True)
    assert modes == [0o600] and stat.S_IMODE(target.stat().st_mode) == 0o600


def test_no_module_keeps_a_hand_copy_of_the_atomic_write():
    """A temp file moved over a kept file is app/files' job. What may still ``os.replace``: moving a damaged file
    aside, whole folders (a download's set, an import, a runtime build) and streamed large files (a download's
    verified part, a lab reference), which are written chunk by chunk and never held in memory."""
    allowed = {
        "app/files.py": 2,  # a write's temp file, and a hard link's (link_atomic)
        "app/settings.py": 1,  # settings.json.bad: the damaged file kept aside
        "app/hub/download.py": 4,  # verified .part files and the whole set into the models folder
        "app/hub/library.py": 1,  # an imported folder
        "app/runtimes/build.py": 2,  # a built runtime's folder
        "app/runtimes/trials.py": 4,  # a runtime's folder kept as its previous build, and swapped back (rollback)
        "backends/scoring.py": 1,  # a reference file streamed window by window
        "backends/mlx.py": 1,  # a scratch .safetensors for mlx's save/load by name; the kept state goes via app/files
    }
    found: dict[str, int] = {}
    for path in [*ROOT.glob("app/**/*.py"), *ROOT.glob("backends/**/*.py")]:
        text = path.read_text(encoding="utf-8")
        n = len(re.findall(r"os\.replace\(|os\.rename\(|\btmp\.replace\(|NamedTemporaryFile|mkstemp", text))
        if n:
            found[path.relative_to(ROOT).as_posix()] = n
    assert found == allowed
