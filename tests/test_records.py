"""app.records: the one "dict → dataclass keeping known fields". A key another version wrote is left out, not
fatal, wherever a saved or sent dict becomes a dataclass; and no module keeps a hand copy of the rule."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from app.records import field_names, from_known, known_fields

ROOT = Path(__file__).resolve().parents[1]


@dataclass(frozen=True)
class Point:
    x: int
    y: int = 0
    tags: tuple[str, ...] = field(default_factory=tuple)


def test_unknown_keys_are_left_out_and_defaults_fill_the_rest():
    assert from_known(Point, {"x": 1, "z": 9, "colour": "red"}) == Point(1)
    assert known_fields(Point, {"x": 1, "tags": ["a"], "z": 9}) == {"x": 1, "tags": ["a"]}
    assert field_names(Point) == {"x", "y", "tags"}


def test_a_missing_required_field_still_fails():
    with pytest.raises(TypeError):
        from_known(Point, {"y": 2})


def test_the_homes_read_a_newer_versions_keys_without_failing(tmp_path, monkeypatch):
    from app import settings
    from app.engine.protocol import from_wire
    from app.datatypes import LoadSettings, SamplingSettings
    from backends.remote import Endpoint

    assert SamplingSettings.from_dict({"temperature": 0.2, "stop": ["x"], "from_the_future": 1}) == SamplingSettings(
        temperature=0.2, stop=("x",))
    assert from_wire(LoadSettings, {"n_ctx": 1024, "from_the_future": 1}) == LoadSettings(n_ctx=1024)
    assert Endpoint.from_dict({"base_url": "http://h/v1", "from_the_future": 1}).base_url == "http://h/v1"
    settings.settings_path().parent.mkdir(parents=True, exist_ok=True)
    settings.settings_path().write_text('{"theme": "dark", "from_the_future": 1, "problem": "not read"}')
    assert settings.load() == settings.Settings(theme="dark")


def test_no_module_keeps_a_hand_copy_of_the_rule():
    """A comprehension over a dataclass's field names that filters a dict is app/records' job. Left: typed
    readers that check each field (hardware/profile._build) and serialisers (chat_format/autoparser)."""
    copy = re.compile(r"__dataclass_fields__|\{f\.name for f in (dataclasses\.)?fields\(|"
                      r"\{f\.name: \w+\[f\.name\] for f in (dataclasses\.)?fields\(")
    found = sorted(path.relative_to(ROOT).as_posix()
                   for path in [*ROOT.glob("app/**/*.py"), *ROOT.glob("backends/**/*.py")]
                   if copy.search(path.read_text(encoding="utf-8")))
    assert found == []
