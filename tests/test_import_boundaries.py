"""The core and the backends stay Qt-free, the app never imports an inference library itself, every module
imports without POSIX-only modules, and the imports run one way: no circle."""

from __future__ import annotations

import ast
import pkgutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INFERENCE = ("llama_cpp", "mlx", "mlx_lm", "torch", "exllamav2", "exllamav3")


def _all_modules() -> list[str]:
    mods = []
    for pkg in ("app", "backends"):
        for info in pkgutil.walk_packages([str(ROOT / pkg)], prefix=f"{pkg}."):
            if not info.name.endswith("__main__"):
                mods.append(info.name)
    return mods


def _core_modules() -> list[str]:
    return [name for name in _all_modules() if not name.startswith("app.ui")]


def _run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_core_and_backends_import_without_qt():
    code = (
        "import importlib, sys\n"
        "sys.modules['PySide6'] = None  # any import of Qt now raises\n"
        f"for name in {_core_modules()!r}:\n"
        "    importlib.import_module(name)\n"
        f"leaked = sorted(m for m in sys.modules if m.split('.')[0] in {INFERENCE!r})\n"
        "assert not leaked, leaked\n"
        "print('ok')\n"
    )
    result = _run(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_walk_finds_the_modules_it_checks():
    mods = _core_modules()
    assert "backends.base" in mods and "app.engine.client" in mods


# Windows has no ``resource`` module: a module-level ``import resource`` anywhere the GUI reaches kills the app at
# start there. psutil is imported first because on Linux it needs ``resource`` itself (its Windows build does not).
WITHOUT_RESOURCE = """
import importlib, sys
import psutil
sys.modules.pop("resource", None)

class NoResource:
    def find_spec(self, name, path=None, target=None):
        if name == "resource":
            raise ModuleNotFoundError("No module named 'resource' (as on Windows)", name="resource")
        return None

sys.meta_path.insert(0, NoResource())
"""


def test_every_module_imports_without_the_posix_resource_module():
    code = WITHOUT_RESOURCE + (
        f"for name in {_all_modules()!r}:\n"
        "    importlib.import_module(name)\n"
        "assert 'resource' not in sys.modules\n"
        "print('ok')\n"
    )
    result = _run(code)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "ok"


def test_the_check_without_resource_catches_a_module_level_import(tmp_path):
    (tmp_path / "posix_only.py").write_text("import resource\n")
    code = WITHOUT_RESOURCE + f"sys.path.insert(0, {str(tmp_path)!r})\nimport posix_only\n"
    result = _run(code)
    assert result.returncode != 0 and "No module named 'resource' (as on Windows)" in result.stderr


# --- the import graph, read from the source (every import statement, also those inside functions) ----------

def _source_files() -> dict[str, Path]:
    """Module name -> file, for every module and package of app/ and backends/."""
    found = {}
    for pkg in ("app", "backends"):
        for path in (ROOT / pkg).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imported_names(module: str, path: Path) -> set[str]:
    """Every module name an import statement in ``path`` names (relative imports resolved; for
    ``from package import name`` both the package and ``package.name``)."""
    names = set()
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def import_graph() -> dict[str, set[str]]:
    """Our modules -> our modules they import (``from app.hub import config`` is an edge to app.hub.config)."""
    files = _source_files()
    graph = {}
    for module, path in files.items():
        targets = set()
        for name in imported_names(module, path):
            if name in files:
                targets.add(name)
        # "from app.hub import config" named both app.hub and app.hub.config: keep the module, not its package
        graph[module] = {t for t in targets if t != module and not any(o.startswith(t + ".") for o in targets)}
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, targets = work[-1]
            for target in targets:
                if target not in index:
                    index[target] = low[target] = len(index)
                    stack.append(target)
                    on_stack.add(target)
                    work.append((target, iter(sorted(graph[target]))))
                    break
                if target in on_stack:
                    low[node] = min(low[node], index[target])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        found.append(sorted(group))
    return found


def test_no_import_circle():
    assert circles(import_graph()) == []


def test_the_circle_check_finds_circles():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []
    graph = import_graph()
    assert "app.settings" in graph["app.hub.config"]  # lazy imports inside functions count as well
    assert "app.hub.config" in graph["app.hub.download"]


NETWORKED = ("app.hub", "huggingface_hub", "urllib.request", "httpx", "httpx2", "requests", "socket")


def _reach(graph: dict[str, set[str]], start: list[str]) -> set[str]:
    seen, todo = set(start), list(start)
    while todo:
        for target in graph[todo.pop()] - seen:
            seen.add(target)
            todo.append(target)
    return seen


def test_the_models_core_is_pure_nothing_it_imports_reaches_the_network():
    """app/models parses bytes it is given and does the fit math; the Hub and the network are app/hub's. Checked
    for every module app/models reaches, through any import statement."""
    files = _source_files()
    graph = import_graph()
    reached = _reach(graph, [m for m in files if m == "app.models" or m.startswith("app.models.")])
    offending = {module: sorted(n for n in imported_names(module, files[module])
                                if any(n == bad or n.startswith(bad + ".") for bad in NETWORKED))
                 for module in sorted(reached)}
    assert {m: names for m, names in offending.items() if names} == {}
    assert "app.models.metadata" in reached and "app.hardware.profile" in reached  # the walk walks


def test_nothing_but_the_cli_imports_the_command_line_faces():
    graph = import_graph()
    importers = {m for m, targets in graph.items() if any(t.startswith("app.commands") for t in targets)}
    assert importers <= {"app.cli"} | {m for m in graph if m.startswith("app.commands")}
