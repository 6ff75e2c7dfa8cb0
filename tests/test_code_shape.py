"""The code's shape (issue 40): no module of app/ or backends/ over 800 lines, no function over 80, so each file can
be read as one concern and each function as its steps. Exempt for good: the ported parsers, which follow llama.cpp's
own files line by line (backends/chat_format/analysis.py, backends/chat_format/families/), and the Qt form
constructors of app/ui (``__init__`` and ``_build*``, a form's widgets laid out top to bottom)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_MODULE_LINES = 800
MAX_FUNCTION_LINES = 80

# Files and functions over the limits while a branch cuts them down (empty since issue 40 landed); an entry names who
# cuts it, and test_the_todo_lists_are_still_needed fails for one that no longer needs to be here.
TODO_MODULES: dict[str, str] = {
}
TODO_FUNCTIONS: dict[tuple[str, str], str] = {
}

# Exempt for good, with the reason.
PORTED_PARSERS = ("backends/chat_format/analysis.py", "backends/chat_format/families/")  # ported from llama.cpp
LONG_MODULES: dict[str, str] = {
    "backends/chat_format/analysis.py": "llama.cpp's common/chat-diff-analyzer.cpp, ported line by line",
}


def _sources() -> list[Path]:
    return sorted((ROOT / "app").rglob("*.py")) + sorted((ROOT / "backends").rglob("*.py"))


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def long_modules(files: dict[str, str]) -> dict[str, int]:
    """Module path -> its line count, for each over MAX_MODULE_LINES that is not exempt."""
    found = {}
    for name, text in files.items():
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES and name not in LONG_MODULES:
            found[name] = lines
    return found


def _exempt_function(path: str, name: str) -> bool:
    if path.startswith(PORTED_PARSERS):
        return True
    return path.startswith("app/ui/") and (name == "__init__" or name.startswith("_build"))


def long_functions(files: dict[str, str]) -> dict[tuple[str, str], int]:
    """(module path, function name) -> its length in lines (decorators left out, its docstring in), for each
    function or method over MAX_FUNCTION_LINES that is not exempt; a nested function counts on its own too."""
    found = {}
    for path, text in files.items():
        for node in ast.walk(ast.parse(text)):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > MAX_FUNCTION_LINES and not _exempt_function(path, node.name):
                    found[path, node.name] = max(lines, found.get((path, node.name), 0))
    return found


def _files() -> dict[str, str]:
    return {_relative(p): p.read_text(encoding="utf-8") for p in _sources()}


def test_no_module_over_800_lines():
    over = {path: lines for path, lines in long_modules(_files()).items() if path not in TODO_MODULES}
    assert over == {}, "split these along a real seam (a concern of their own), or see LONG_MODULES"


def test_no_function_over_80_lines():
    over = {key: lines for key, lines in long_functions(_files()).items() if key not in TODO_FUNCTIONS}
    assert over == {}, "split these along their steps"


def test_the_todo_lists_are_still_needed():
    """An entry whose file or function is short now (or gone) is struck from the TODO lists."""
    files = _files()
    modules, functions = long_modules(files), long_functions(files)
    assert [path for path in TODO_MODULES if path not in modules] == []
    assert [key for key in TODO_FUNCTIONS if key not in functions] == []
    assert all(path in files for path in LONG_MODULES)


def _function(name: str, indent: str = "", statements: int = 80) -> str:
    """A function of its def and ``statements`` lines (81 lines: one too many)."""
    return f"{indent}def {name}(self):\n" + "".join(f"{indent}    x{i} = {i}\n" for i in range(statements))


def test_the_shape_checks_find_what_is_too_long():
    too_long = _function("f") + "\n\nclass C:\n" + _function("m", "    ")
    form = "class F:\n" + "".join(_function(name, "    ") for name in ("__init__", "_build_row", "set_profile"))
    short = "def g():\n    return 1\n"
    files = {"app/thing.py": too_long, "app/ui/form.py": form, "backends/thing.py": form,
             "backends/chat_format/families/x.py": too_long, "app/short.py": short + _function("h", statements=79),
             "app/big.py": short * 401, "backends/chat_format/analysis.py": short * 401}
    assert long_functions(files) == {("app/thing.py", "f"): 81, ("app/thing.py", "m"): 81,
                                     ("app/ui/form.py", "set_profile"): 81, ("backends/thing.py", "__init__"): 81,
                                     ("backends/thing.py", "_build_row"): 81, ("backends/thing.py", "set_profile"): 81}
    assert long_modules(files) == {"app/big.py": 802}
