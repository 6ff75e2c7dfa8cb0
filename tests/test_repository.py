"""The repository stands alone: a user who clones it gets every file it points to. No tracked file refers to a
sibling folder (the design notes once lived in one, issue 21) or to a path on the machine it was written on, and
every relative link in the Markdown files resolves to a tracked file inside the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Spelled in pieces, so this file does not match itself.
OUTSIDE = re.compile("|".join([
    re.escape("../" + "shared"),                      # the sibling folder of the development checkouts
    r"(?<![\w.~-])/" + "work" + r"/",                  # the development machine's checkouts and library
]))
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _tracked() -> list[Path]:
    try:
        names = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout: the tracked files are unknown")
    return [ROOT / name for name in names.decode().split("\0") if name]


def _text(path: Path) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, IsADirectoryError, FileNotFoundError):
        return None  # binary (models, icons) or a deleted file still in the index


def test_no_tracked_file_points_outside_the_repository():
    found = []
    for path in _tracked():
        text = _text(path)
        for number, line in enumerate((text or "").splitlines(), start=1):
            if OUTSIDE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:120]}")
    assert found == []


def test_markdown_links_resolve_inside_the_repository():
    tracked = set(_tracked())
    broken = []
    for path in (p for p in tracked if p.suffix == ".md"):
        for target in LINK.findall(_text(path) or ""):
            if re.match(r"[a-z]+:", target) or target.startswith("#"):
                continue  # a web address or an anchor on the same page
            resolved = (path.parent / target.split("#", 1)[0]).resolve()
            inside = resolved == ROOT or ROOT in resolved.parents
            if not inside or not (resolved in tracked or any(p.is_relative_to(resolved) for p in tracked)):
                broken.append(f"{path.relative_to(ROOT)}: {target}")
    assert broken == []


def test_every_dependency_says_why_it_is_there():
    """docs/architecture.md, "Why each dependency": one row per entry of pyproject's dependencies and extras."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    requirements = list(project["dependencies"])
    for extra in project["optional-dependencies"].values():
        requirements += extra
    names = {re.match(r"[A-Za-z0-9_.-]+(\[[a-z,]+\])?", r)[0] for r in requirements}
    doc = (ROOT / "docs" / "architecture.md").read_text()
    table = doc.split("## Why each dependency", 1)[1].split("\n## ", 1)[0]
    rows = {m for m in re.findall(r"^\| `([^`]+)` \|", table, re.MULTILINE)}
    assert rows == names


def _quick_start_blocks() -> list[list[str]]:
    readme = (ROOT / "README.md").read_text()
    quick_start = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    return [block.strip().splitlines() for block in re.findall(r"```bash\n(.*?)```", quick_start, re.DOTALL)]


def test_ci_runs_the_readme_test_command_as_written():
    """The README's two commands: the start command installs the `app` extra only, and .ci/run runs every line of the
    test command (install and pytest) exactly as the README writes it."""
    start, test = _quick_start_blocks()[:2]
    assert start == ["python3 -m venv .venv && .venv/bin/pip install -e '.[app]' && .venv/bin/quantdesk"]
    assert any("pytest" in line for line in test)
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert [line for line in test if line not in ci_lines] == []
