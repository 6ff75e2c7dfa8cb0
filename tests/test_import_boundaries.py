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
        elif (isinstance(node, ast.Call) and _imports_by_name(node) and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            names.add(node.args[0].value)  # importlib.import_module("app.x") is an import of app.x like any other
    return names


def _imports_by_name(call: ast.Call) -> bool:
    """Whether ``call`` is ``importlib.import_module(...)``, ``import_module(...)`` or ``__import__(...)``."""
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    return name in ("import_module", "__import__")


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


# Modules that import modules by a name they compute: the only places where an import hides from the graph above.
# Each is a true plugin lookup, not a way round a circle (a module whose import would close a circle is imported
# with a plain statement once its shared types move below both, as backends/chat_format/request.py did for
# formats, the families and the autoparser).
IMPORTS_BY_NAME: dict[str, str] = {
    "backends.registry": "backends are plugins: the built-in ones and third-party entry points, found by name",
    "app.cli": "each command's module is imported only when that command runs (start-up time), and app.ui is "
               "absent from a build without the desktop app",
}


def imports_by_name(files: dict[str, Path]) -> dict[str, list[int]]:
    """Module -> the lines where it imports a module by a computed name (a non-literal argument), or imports one of
    ours by a literal name, outside IMPORTS_BY_NAME."""
    found: dict[str, list[int]] = {}
    for module, path in files.items():
        if module in IMPORTS_BY_NAME:
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and _imports_by_name(node):
                literal = node.args and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
                ours = literal and str(node.args[0].value).split(".")[0] in ("app", "backends")
                if not literal or ours:
                    found.setdefault(module, []).append(node.lineno)
    return found


def test_no_import_by_name_dodges_the_graph():
    """An import_module of one of our modules (or of a computed name) is what hid the chat format's circle from the
    circle check: plain import statements only, outside the plugin lookups listed in IMPORTS_BY_NAME."""
    assert imports_by_name(_source_files()) == {}


def test_the_check_of_imports_by_name_finds_a_dodge(tmp_path):
    dodge = tmp_path / "dodge.py"
    dodge.write_text("import importlib\n"
                     "def f(name):\n"
                     "    a = importlib.import_module('backends.chat_format.autoparser')\n"
                     "    b = importlib.import_module(f'backends.chat_format.families.{name}')\n"
                     "    return a, b, importlib.import_module('json')\n")
    assert imports_by_name({"app.dodge": dodge}) == {"app.dodge": [3, 4]}
    assert "backends.chat_format.autoparser" in imported_names("app.dodge", dodge)  # and the graph sees the literal
    assert set(IMPORTS_BY_NAME) <= set(_source_files())  # the listed modules exist


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


# --- the layers: no import from a layer above ---------------------------------------------------------------
# Lowest first. A module may import modules of its own home and of the homes on lower layers; never one on a higher
# layer, nor one of another home on its own layer (hardware and runtimes know nothing of each other: app/machine
# composes them). docs/architecture.md ("The flow") shows this table; test_the_documented_layers_are_these keeps
# the two the same.
LAYERS: list[tuple[str, ...]] = [
    ("app", "app.records"),
    ("app.datatypes", "app.errors", "app.paths", "app.files", "app.databases"),
    ("app.settings", "app.logs", "app.images", "app.keychain"),
    ("app.hardware", "app.runtimes", "app.chats"),
    ("app.models",),
    ("app.hub", "backends"),
    ("app.remote", "app.machine", "app.mcp"),
    ("app.engine",),
    # side by side: the lab never reads documents, documents never score; the Chat's session (app/chats/session.py)
    # goes with neither, above the engine and the tool loop it holds
    ("app.lab", "app.documents", "app.chats.session"),
    ("app.server",),  # above the lab: its MCP tools run the lab's bench and read what it measured (app/server/mcp.py)
    ("app.commands", "app.ui"),
    ("app.cli",),
    ("app.__main__",),
]
# Arrows that break the layers for now, (importer's home, imported home): reason. The list may only shrink.
LAYER_EXCEPTIONS: dict[tuple[str, str], str] = {}
LAYER_OF = {home: i for i, homes in enumerate(LAYERS) for home in homes}


def home_of(module: str) -> str:
    """The home a module belongs to: the longest name in LAYERS that it is or lies under."""
    found = [h for h in LAYER_OF if module == h or module.startswith(h + ".")]
    assert found, f"{module} is on no layer: add its home to LAYERS (and to docs/architecture.md)"
    return max(found, key=len)


def arrows_against_the_layers(graph: dict[str, set[str]]) -> list[tuple[str, str]]:
    wrong = []
    for module, targets in graph.items():
        for target in targets:
            mine, theirs = home_of(module), home_of(target)
            if mine != theirs and LAYER_OF[theirs] >= LAYER_OF[mine] and (mine, theirs) not in LAYER_EXCEPTIONS:
                wrong.append((module, target))
    return sorted(wrong)


def test_every_module_has_a_layer():
    for module in _source_files():
        home_of(module)


def test_no_import_from_a_layer_above_or_a_neighbour_on_the_same_layer():
    assert arrows_against_the_layers(import_graph()) == []


def test_the_layer_exceptions_are_still_needed():
    """An exception that no arrow needs any more is struck from the list."""
    graph = import_graph()
    used = {(home_of(m), home_of(t)) for m, targets in graph.items() for t in targets}
    assert set(LAYER_EXCEPTIONS) <= used


def test_the_layer_check_finds_wrong_arrows():
    assert arrows_against_the_layers({"app.models.recommend": {"app.engine.client"}}) == [
        ("app.models.recommend", "app.engine.client")]  # up
    assert arrows_against_the_layers({"app.hardware.hints": {"app.runtimes.choose"}}) == [
        ("app.hardware.hints", "app.runtimes.choose")]  # sideways, between neighbours
    assert arrows_against_the_layers({"app.engine.client": {"app.machine", "app.datatypes"},
                                      "app.hardware.detect": {"app.hardware.gpus"}}) == []  # down, and inside a home


def test_the_documented_layers_are_these():
    """docs/architecture.md's table of layers ("The flow") names the same homes, top layer first."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| L")]
    documented = []
    for row in rows:
        cells = row.split("|")
        names = [n.strip("`/ ").removesuffix(".py").replace("/", ".") for n in cells[2].split(",")]
        documented.append(tuple(n for n in names if n))
    assert documented == [tuple(h for h in homes if h != "app") for homes in reversed(LAYERS)]


def test_hardware_and_runtimes_do_not_import_each_other_and_hardware_imports_no_engine():
    graph = import_graph()
    hardware = [m for m in graph if home_of(m) == "app.hardware"]
    runtimes = [m for m in graph if home_of(m) == "app.runtimes"]
    assert not {t for m in hardware for t in graph[m] if home_of(t) in ("app.runtimes", "backends")}
    assert not {t for m in runtimes for t in graph[m] if home_of(t) == "app.hardware"}


def test_names_are_imported_from_their_home_not_through_backends_base():
    """backends/base.py is the Backend contract and the loop; the types it uses are app/datatypes.py's, imported
    from there (base re-exports nothing)."""
    tree = ast.parse((ROOT / "backends" / "base.py").read_text(encoding="utf-8"))
    defined = {n.name for n in tree.body if isinstance(n, ast.ClassDef | ast.FunctionDef)}
    defined |= {t.id for n in tree.body if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)}
    defined |= {n.target.id for n in tree.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    through = {}
    for folder in ("app", "backends", "tests"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.ImportFrom) and node.module == "backends.base":
                    names = sorted(a.name for a in node.names if a.name not in defined)
                    if names:
                        through[str(path.relative_to(ROOT))] = names
    assert through == {}
