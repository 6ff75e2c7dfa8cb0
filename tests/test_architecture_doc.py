"""docs/architecture.md's module map names every module under app/ and backends/, so a newcomer reading it finds
each file's home, and a module added or moved without its line fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "architecture.md"


def module_map() -> dict[str, str]:
    """The module map's rows: each home named in the first column (`app/lab/`, `app/cli.py`, …) → its description; a
    home with several rows, one per concern (`app/ui/` (pages), `app/ui/` (the look)), → all of them together."""
    text = DOC.read_text(encoding="utf-8")
    table = text.split("### Module map", 1)[1].split("\n### ", 1)[0]
    rows = {}
    for line in table.splitlines():
        cells = line.split("|")
        if len(cells) < 3 or set(cells[1].strip()) <= {"-", " "}:
            continue
        for home in re.findall(r"`([^`]+)`", cells[1]):
            rows[home] = f"{rows[home]} |{cells[2]}" if home in rows else cells[2]
    return rows


def unnamed_modules(rows: dict[str, str]) -> list[str]:
    """Modules whose home row does not name them: a module is named by its own row (`app/files.py`), or, in the
    row of the nearest package above it that has one, by its path below that package (`lab_uploaders`,
    `chat_format/families/`, `families/gpt_oss`) or its file name with or without `.py`."""
    missing = []
    for path in sorted((ROOT / "app").rglob("*.py")) + sorted((ROOT / "backends").rglob("*.py")):
        relative = path.relative_to(ROOT).as_posix()
        if path.name in ("__init__.py", "__main__.py") or relative in rows:
            continue
        parents = [p for p in path.relative_to(ROOT).parents if p.as_posix() != "."]
        home = next((p for p in parents if f"{p.as_posix()}/" in rows), None)
        if home is None:
            missing.append(f"{relative} (no row for any folder above it)")
            continue
        below = path.relative_to(ROOT / home).with_suffix("").as_posix()
        names = {below, path.stem, path.name, f"{path.parent.relative_to(ROOT / home).as_posix()}/",
                 f"{home.name}/{path.name}", f"{home.name}/{below}"}
        text = rows[f"{home.as_posix()}/"]
        if not any(re.search(rf"(?<![\w/.]){re.escape(name)}(?![\w])", text) for name in names if name != "./"):
            missing.append(f"{relative} (not named in the `{home.as_posix()}/` row)")
    return missing


def test_every_module_has_its_line_in_the_module_map():
    assert unnamed_modules(module_map()) == []


def test_the_check_finds_a_module_left_out():
    rows = module_map()
    rows["app/lab/"] = rows["app/lab/"].replace("uploaders", "up-loaders")
    rows["app/ui/lab/"] = rows["app/ui/lab/"].replace("lab_chart", "lab-chart")  # the Lab folder's row
    missing = unnamed_modules(rows)
    assert "app/lab/uploaders.py (not named in the `app/lab/` row)" in missing
    assert "app/ui/lab/lab_chart.py (not named in the `app/ui/lab/` row)" in missing


def _code_words() -> set[str]:
    words: set[str] = set()
    for folder in ("app", "backends", "tests", "resources", "packaging"):
        for path in (ROOT / folder).rglob("*"):
            if path == Path(__file__):
                continue  # the names its own test makes up are no code's
            words.add(path.stem)
            if path.suffix in (".py", ".json", ".jinja", ".toml", ".yaml", ".txt"):
                words.update(re.findall(r"\w+", path.read_text(encoding="utf-8", errors="replace")))
    return words


def unknown_names(rows: dict[str, str], words: set[str]) -> list[str]:
    """The names the module map writes as code (`pool.ModelPool`, `plan_load()`, `chat_format/families/`) that no
    module, folder or identifier in the code has: a map row that still names what was renamed or never written."""
    unknown = []
    for home, text in rows.items():
        for span in re.findall(r"`([^`]+)`", text):
            if (name := re.fullmatch(r"([A-Za-z_]\w*(?:[./][A-Za-z_]\w*)*)/?(?:\(\))?", span)) is None:
                continue
            if missing := [part for part in re.split(r"[./]", name.group(1)) if part not in words]:
                unknown.append(f"`{span}` in the `{home}` row ({missing[0]})")
    return unknown


def test_every_name_the_module_map_writes_as_code_exists():
    assert unknown_names(module_map(), _code_words()) == []


def test_the_check_finds_a_name_that_does_not_exist():
    rows = module_map()
    rows["app/engine/"] += " the pool's free memory (`machine_free_memory`)"
    assert unknown_names(rows, _code_words()) == ["`machine_free_memory` in the `app/engine/` row (machine_free_memory)"]


def test_every_path_the_page_names_exists():
    """The rules table's tests and every other file or folder the page names in code style (`tests/…`, `app/…`,
    `backends/…`, `docs/…`, a module with or without `.py`) are there: a rule whose test was renamed or removed
    fails here."""
    text = DOC.read_text(encoding="utf-8")
    named = {m for m in re.findall(r"`((?:tests|app|backends|docs|resources|packaging)/[\w./-]*)`", text)
             if "*" not in m and "NAME" not in m}
    assert named, "the page names no path"

    def exists(path: str) -> bool:  # `app/files`, `app/files.write_parts_atomic`: the module app/files.py
        module = path.rstrip("/").split(".", 1)[0]
        return any((ROOT / candidate).exists() for candidate in (path.rstrip("/"), f"{module}.py", module))

    assert sorted(path for path in named if not exists(path)) == []
