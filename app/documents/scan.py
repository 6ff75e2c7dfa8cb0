"""A folder's document files, found within bounds: what the indexer looks at on each pass of a watched folder.

Only files whose suffix ``extract`` reads are yielded (everything else is ignored and counted nowhere: a photo
folder is not a report of 10,000 lines). Hidden files and folders (a leading dot: .git, .venv, .cache) and the
folders tools fill (node_modules, __pycache__, venv, site-packages) are not entered: their files are not the user's
documents and can be many. Symbolic links are followed, each folder entered once: a link back to a folder above it
(a loop) or to one scanned already is a ``Skipped`` line, so is a broken link. A file over ``max_bytes`` or one that
cannot be read is a ``Skipped`` line with its sentence; past ``max_files`` found, one line says so and the scan stops.
The order is by name, folder by folder, so two scans of an unchanged folder agree.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from app.documents.extract import DEFAULT_MAX_BYTES, SUPPORTED_SUFFIXES, too_large, unsupported

SKIPPED_FOLDERS = frozenset({"node_modules", "__pycache__", "venv", "site-packages", "bower_components"})


@dataclass(frozen=True)
class FoundFile:
    path: Path
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class Skipped:
    path: Path
    reason: str  # the report line's sentence


def scan(root: Path, *, max_files: int = 100_000, max_bytes: int = DEFAULT_MAX_BYTES) -> Iterator[FoundFile | Skipped]:
    """The document files under ``root`` (or ``root`` itself when it is a file), lazily, with what was skipped."""
    root = Path(root)
    try:
        info = root.stat()
    except OSError as exc:
        yield Skipped(root, _os_reason(exc, root))
        return
    if not stat.S_ISDIR(info.st_mode):
        # a file named by hand: its suffix alone decides (a hidden name too), and one it cannot read is a line
        if root.suffix.lower() not in SUPPORTED_SUFFIXES:
            yield Skipped(root, unsupported(root))
        elif stat.S_ISREG(info.st_mode):
            yield _file(root, info, max_bytes)
        else:
            yield Skipped(root, "unreadable: not a regular file")
        return
    found = 0
    # Folders to enter, depth first: (path, the (device, inode)s of the folders above it and itself). Each folder's
    # identity is its target's, so a link into it and its real path are one folder.
    visited: dict[tuple[int, int], Path] = {(info.st_dev, info.st_ino): root}
    stack: list[tuple[Path, frozenset[tuple[int, int]]]] = [(root, frozenset({(info.st_dev, info.st_ino)}))]
    while stack:
        folder, above = stack.pop()
        try:
            with os.scandir(folder) as listing:
                entries = sorted(listing, key=lambda e: e.name)
        except OSError as exc:
            yield Skipped(folder, _os_reason(exc, folder))
            continue
        subfolders: list[tuple[Path, frozenset[tuple[int, int]]]] = []
        for entry in entries:
            if entry.name.startswith("."):
                continue
            path = Path(entry.path)
            try:
                link = entry.is_symlink()
                is_dir = entry.is_dir(follow_symlinks=True)
            except OSError as exc:
                yield Skipped(path, _os_reason(exc, path))
                continue
            if is_dir:
                if entry.name in SKIPPED_FOLDERS:
                    continue
                try:
                    target = entry.stat(follow_symlinks=True)
                except OSError as exc:
                    yield Skipped(path, _os_reason(exc, path))
                    continue
                key = (target.st_dev, target.st_ino)
                if key in above:
                    yield Skipped(path, f"a symbolic link loop: it leads back to {visited.get(key, folder)}")
                elif key in visited:
                    if link:
                        yield Skipped(path, f"a link to a folder scanned already ({visited[key]})")
                else:
                    visited[key] = path
                    subfolders.append((path, above | {key}))
                continue
            if not _wanted(entry.name):
                continue
            if link and not os.path.exists(path):
                yield Skipped(path, _broken_or_loop(path))
                continue
            try:
                info = entry.stat(follow_symlinks=True)
            except OSError as exc:
                yield Skipped(path, _os_reason(exc, path))
                continue
            if not stat.S_ISREG(info.st_mode):
                continue  # a socket, fifo or device named like a document: nothing to read
            if found >= max_files:
                yield Skipped(root, f"more than {max_files:,} files: the rest of the folder was not scanned")
                return
            item = _file(path, info, max_bytes)
            if isinstance(item, FoundFile):
                found += 1
            yield item
        stack.extend(reversed(subfolders))  # popped in name order


def _wanted(name: str) -> bool:
    return not name.startswith(".") and os.path.splitext(name)[1].lower() in SUPPORTED_SUFFIXES


def _file(path: Path, info: os.stat_result, max_bytes: int) -> FoundFile | Skipped:
    if info.st_size > max_bytes:
        return Skipped(path, too_large(info.st_size, max_bytes))
    if not os.access(path, os.R_OK):
        return Skipped(path, "unreadable: permission denied")
    return FoundFile(path, info.st_size, info.st_mtime_ns)


def _broken_or_loop(path: Path) -> str:
    try:
        os.stat(path)
    except OSError as exc:
        return _os_reason(exc, path)
    return "a broken link"


def _os_reason(exc: OSError, path: Path) -> str:
    import errno

    if exc.errno == errno.ELOOP:
        return "a symbolic link loop: the link leads back to itself"
    if exc.errno == errno.ENOENT:
        return "a broken link: what it points to is gone" if os.path.islink(path) else "not found"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "unreadable: permission denied"
    return f"unreadable: {exc.strerror or exc}"
