"""The core and the backends stay Qt-free, and the app never imports an inference library itself."""

from __future__ import annotations

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
