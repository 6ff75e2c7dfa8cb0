"""Rules of the code that no linter states the way the project means them.

A blind ``except`` (bare, ``Exception`` or ``BaseException``) that does not raise again must say why it may
swallow everything, in a comment on its line (or a comment line right under it): "a missing summary must not
fail the details", not a bare ``noqa``."""

from __future__ import annotations

import ast
import io
import re
import tokenize
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BLIND = {"Exception", "BaseException"}
NOQA = re.compile(r"noqa(:\s*[A-Z]+\d+(,\s*[A-Z]+\d+)*)?", re.IGNORECASE)


def _comments(source: str) -> dict[int, str]:
    out = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            out[token.start[0]] = token.string
    return out


def _is_blind(handler: ast.ExceptHandler) -> bool:
    kinds = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
    return handler.type is None or any(isinstance(k, ast.Name) and k.id in BLIND for k in kinds)


def _reason(comment: str) -> str:
    return NOQA.sub("", comment.lstrip("#")).strip(" -:—")


def blind_excepts_without_a_reason(source: str, name: str = "<source>") -> list[str]:
    lines = source.splitlines()
    comments = _comments(source)
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.ExceptHandler) or not _is_blind(node):
            continue
        if any(isinstance(statement, ast.Raise) for statement in node.body):
            continue  # it lets the error go on (translated or not): nothing is swallowed
        next_line = lines[node.lineno].strip() if node.lineno < len(lines) else ""
        said = comments.get(node.lineno, "") + (" " + next_line if next_line.startswith("#") else "")
        if len(_reason(said).split()) < 2:
            found.append(f"{name}:{node.lineno}: {lines[node.lineno - 1].strip()}")
    return found


def test_every_blind_except_says_why():
    found = []
    for folder in ("app", "backends", "packaging", "tests"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            found += blind_excepts_without_a_reason(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert found == []


def test_the_rule_finds_a_silent_catch_all():
    silent = "try:\n    x()\nexcept Exception:\n    pass\n"
    noqa_only = "try:\n    x()\nexcept Exception:  # noqa: BLE001\n    pass\n"
    said = "try:\n    x()\nexcept Exception:  # noqa: BLE001 - a probe must never stop the start\n    pass\n"
    said_below = "try:\n    x()\nexcept BaseException:\n    # closing: what is left is lost anyway\n    pass\n"
    raised = "try:\n    x()\nexcept Exception as exc:\n    raise Other() from exc\n"
    narrow = "try:\n    x()\nexcept OSError:\n    pass\n"
    assert blind_excepts_without_a_reason(silent) == ["<source>:3: except Exception:"]
    assert blind_excepts_without_a_reason(noqa_only) == ["<source>:3: except Exception:  # noqa: BLE001"]
    assert blind_excepts_without_a_reason("try:\n    x()\nexcept:\n    pass\n") == ["<source>:3: except:"]
    for fine in (said, said_below, raised, narrow):
        assert blind_excepts_without_a_reason(fine) == []
