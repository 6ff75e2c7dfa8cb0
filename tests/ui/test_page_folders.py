"""app/ui reads as the window's pages (issue 40): every module lies in the folder of its page
(chat/, library/, lab/, ...) or in common/, what every page shares, but the few that start the app and hold the
window; and common/ imports no page, so a page's folder can be read knowing only common/ and the homes below app/ui."""

from __future__ import annotations

from pathlib import Path

from tests.test_import_boundaries import import_graph

ROOT = Path(__file__).resolve().parents[2]
TOP = {"crash", "main", "platform_check", "window", "__init__"}  # the app's start and the window
FOLDERS = {"chat", "library", "documents", "hardware", "lab", "server", "settings", "common"}


def ui_modules() -> list[str]:
    return sorted(".".join(p.relative_to(ROOT).with_suffix("").parts) for p in (ROOT / "app" / "ui").rglob("*.py"))


def strays(modules: list[str]) -> list[str]:
    """Modules of app/ui outside a page's folder or common/ (and not one of the top's few)."""
    return [m for m in modules if m.split(".")[2] not in TOP | FOLDERS]


def common_imports_of_pages(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    return {m: sorted(t for t in targets if t.startswith("app.ui.") and not t.startswith("app.ui.common"))
             for m, targets in graph.items() if m.startswith("app.ui.common.") and
             any(t.startswith("app.ui.") and not t.startswith("app.ui.common") for t in targets)}


def test_every_ui_module_lies_in_a_page_folder_or_common():
    modules = ui_modules()
    assert "app.ui.chat.chat_page" in modules and "app.ui.common.theme" in modules  # the walk walks
    assert strays(modules) == []
    assert sorted(f for f in FOLDERS if not (ROOT / "app" / "ui" / f / "__init__.py").exists()) == []


def test_common_imports_no_page():
    assert common_imports_of_pages(import_graph()) == {}


def test_the_checks_find_a_stray_module_and_a_common_module_importing_a_page():
    assert strays(["app.ui.main", "app.ui.chat.chat_page", "app.ui.chat_thing", "app.ui.__init__"]) == [
        "app.ui.chat_thing"]
    graph = {"app.ui.common.widgets": {"app.ui.common.theme", "app.ui.chat.chat_view"},
             "app.ui.chat.chat_view": {"app.ui.common.widgets"}}
    assert common_imports_of_pages(graph) == {"app.ui.common.widgets": ["app.ui.chat.chat_view"]}
