"""The core and the backends stay Qt-free, and the app never imports an inference library itself."""

from __future__ import annotations

import pkgutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INFERENCE = ("llama_cpp", "mlx", "mlx_lm", "torch", "exllamav2", "exllamav3")


def _core_modules() -> list[str]:
    mods = []
    for pkg in ("app", "backends"):
        for info in pkgutil.walk_packages([str(ROOT / pkg)], prefix=f"{pkg}."):
            if not info.name.startswith("app.ui") and not info.name.endswith("__main__"):
                mods.append(info.name)
    return mods


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
