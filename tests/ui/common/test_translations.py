"""The UI's languages: every tr() string has its German translation, the compiled .qm files are what lrelease makes
of the .ts files, and with German chosen the real window, Qt's own buttons, numbers and dates are German."""

from __future__ import annotations

import ast
import re
import shutil
import xml.etree.ElementTree as ET
from datetime import datetime
from pathlib import Path

import pytest
from PySide6.QtCore import QTimer, QTranslator
from PySide6.QtWidgets import QDialogButtonBox

from app import cli
from app import settings as app_settings
from app.datatypes import ContextUse
from app.ui.common import translations
from app.ui.common.formatting import human_memory, short_date_time, stats_summary, tokens_per_second
from app.ui.common.translations import chosen_language, install, uninstall
from app.ui.settings.settings_page import SettingsPage
from tests.ui.test_main import Closer


@pytest.fixture
def language(qapp, monkeypatch):
    """language("de") -> installs that language as app.ui.main does at start-up; taken off after the test."""
    done = []

    def choose(code: str) -> translations.Installed:
        monkeypatch.setenv(translations.LANGUAGE_VAR, code)
        installed = install(chosen_language("system"))
        done.append(installed)
        return installed

    yield choose
    for installed in reversed(done):
        uninstall(installed)


@pytest.mark.parametrize("ts", translations.ts_files(), ids=lambda p: p.name)
def test_every_ui_string_has_its_translation(ts, tmp_path):
    fresh = tmp_path / ts.name
    shutil.copy(ts, fresh)
    translations.run_lupdate(fresh)  # what the sources hold now, merged with the translations we have
    missing = translations.unfinished(fresh)
    assert not missing, (f"{len(missing)} strings of app/ui lack a translation in {ts.name}: run "
                         f"`python -m app.ui.common.translations update` and translate them: {missing}")


@pytest.mark.parametrize("ts", translations.ts_files(), ids=lambda p: p.name)
def test_each_qm_is_what_lrelease_makes_of_its_ts(ts, tmp_path):
    compiled = tmp_path / ts.with_suffix(".qm").name
    translations.run_lrelease(ts, compiled)
    if compiled.read_bytes() == ts.with_suffix(".qm").read_bytes():
        return
    # Another Qt's lrelease may lay the file out differently: then every message must still read the same.
    fresh, committed = QTranslator(), QTranslator()
    assert fresh.load(str(compiled)) and committed.load(str(ts.with_suffix(".qm")))
    stale = [(context.findtext("name"), message.findtext("source"))
             for context in ET.parse(ts).getroot().iter("context") for message in context.iter("message")
             for n in (1, 2) if committed.translate(context.findtext("name"), message.findtext("source"), None, n)
             != fresh.translate(context.findtext("name"), message.findtext("source"), None, n)]
    assert not stale, f"{ts.with_suffix('.qm').name} is stale: run `python -m app.ui.common.translations update` ({stale})"


def placeholders(text: str) -> set[str]:
    """{name}, {name:.1f}, {name!r} -> "name"; %n too: .format() raises on a name the source does not fill."""
    return {m.group(1) for m in re.finditer(r"(?<!\{)\{(\w*)[^{}]*\}", text)} | ({"%n"} if "%n" in text else set())


@pytest.mark.parametrize("ts", translations.ts_files(), ids=lambda p: p.name)
def test_translations_keep_the_placeholders_of_their_source(ts):
    wrong = []
    for message in ET.parse(ts).getroot().iter("message"):
        source = message.findtext("source", "")
        translation = message.find("translation")
        forms = [f.text or "" for f in translation] if len(translation) else [translation.text or ""]
        wrong += [(source, form) for form in forms if placeholders(form) != placeholders(source)]
    assert not wrong, f"translations whose {{placeholders}} differ from their source: {wrong}"


def test_the_language_comes_from_the_environment_then_the_setting(monkeypatch):
    monkeypatch.delenv(translations.LANGUAGE_VAR, raising=False)
    assert chosen_language("de") == "de"
    assert chosen_language("en") == "en"
    monkeypatch.setenv(translations.LANGUAGE_VAR, "de")
    assert chosen_language("en") == "de"
    monkeypatch.setenv(translations.LANGUAGE_VAR, "xx")  # one we lack: the system's, else English
    assert chosen_language("de") in translations.LANGUAGE_NAMES


def test_german_window_buttons_numbers_and_dates(language, make_window):
    installed = language("de")
    window = make_window()
    titles = [window.sidebar.item(i).text() for i in range(window.sidebar.count())]
    assert titles == ["Entdecken", "Downloads", "Bibliothek", "Chat", "Hardware", "Labor", "Server", "Dokumente",
                      "Einstellungen"]
    assert window.app_settings.token_save.text() == "Token speichern"
    assert window.app_settings.language_box.currentText() == "Wie das System"
    assert window.downloads.empty_label.title.text() == "Es wird nichts heruntergeladen"
    assert window.chat.stats.tps.text() == "– Tok./s"
    # PySide6-Essentials ships Qt's own translations (PySide6/Qt/translations): the standard buttons speak German too
    assert installed.qt_translations, "qtbase_de.qm was not found under QLibraryInfo's TranslationsPath"
    buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
    assert buttons.button(QDialogButtonBox.StandardButton.Cancel).text() == "Abbrechen"
    assert tokens_per_second(12.5) == "12,5 Tok./s"
    assert human_memory(1.2 * 2**30) == "1,2 GiB"
    assert stats_summary({"generated_tokens": 3, "decode_tps": 33.3}) == "3 Tokens · 33,3 Tok./s"
    assert short_date_time(datetime(2026, 11, 24, 16, 5)) == "24.11.26 16:05"
    assert window.chat.stats.tr("after %n server request(s)", "", 2) == "nach 2 Server-Anfragen"
    meter = window.chat.model_bar.context_meter
    meter.show_use(ContextUse(3900, 4096), 512, "/m/model.gguf")
    assert meter.label.text() == "3,9 Tsd. / 4,1 Tsd. Tokens · fast voll"
    assert meter.toolTip().startswith("Der Chat belegt 3.900 der 4.096 Kontext-Tokens des Modells (95 %)")


def test_english_changes_nothing(language, make_window):
    language("en")
    window = make_window()
    titles = [window.sidebar.item(i).text() for i in range(window.sidebar.count())]
    assert titles == ["Discover", "Downloads", "Library", "Chat", "Hardware", "Lab", "Server", "Documents", "Settings"]
    assert window.app_settings.token_save.text() == "Save token"
    assert tokens_per_second(12.5) == "12.5 tok/s"
    assert human_memory(1.2 * 2**30) == "1.2 GiB"
    assert window.chat.stats.tr("after %n server request(s)", "", 1) == "after 1 server request"  # English plurals
    assert window.chat.stats.tr("after %n server request(s)", "", 2) == "after 2 server requests"


def test_the_app_starts_in_the_language_of_its_settings_and_leaves_none_behind(qtbot, monkeypatch):
    monkeypatch.delenv(translations.LANGUAGE_VAR, raising=False)
    app_settings.update(language="de")
    closer = Closer()
    QTimer.singleShot(0, closer.close_when_shown)
    assert cli.main([]) == 0
    assert [window.sidebar.item(0).text() for window in closer.seen] == ["Entdecken"]
    assert tokens_per_second(1.5) == "1.5 tok/s"  # the run's translators and locale are gone with it


def test_a_language_change_in_settings_says_when_it_takes_effect(qtbot, monkeypatch):
    monkeypatch.delenv(translations.LANGUAGE_VAR, raising=False)
    page = SettingsPage()
    qtbot.addWidget(page)
    page.language_box.setCurrentIndex(page.language_box.findText("Deutsch"))
    assert app_settings.load().language == "de"
    assert page.language_note.text() == "Takes effect when QuantDesk starts again."
    page.language_box.setCurrentIndex(page.language_box.findText("Follow the system"))
    assert app_settings.load().language == "system"
    monkeypatch.setenv(translations.LANGUAGE_VAR, "de")
    page.show_settings()
    assert page.language_note.text() == "QUANTDESK_LANGUAGE=de in the environment wins over this setting."


# Calls whose text argument the user sees; a literal there (other than the exceptions below) was not wrapped in tr().
SHOWN_BY = {"setText", "setToolTip", "setAccessibleName", "setAccessibleDescription", "setPlaceholderText",
            "setWindowTitle", "setTitle", "addRow", "addItem", "addItems", "setStatusTip", "showMessage", "QLabel",
            "QPushButton", "QCheckBox", "QGroupBox", "QRadioButton", "QListWidgetItem", "QTableWidgetItem", "addTab",
            "announce", "setSuffix", "setPrefix", "setSpecialValueText", "addAction", "addButton", "setFormat"}
NOT_WORDS = {"QuantDesk", "gpu-box", "http://192.168.1.20:8080/v1", "GGUF", "MLX", "EXL2", "EXL3", "CPU"}
UI = Path(translations.__file__).parents[1]  # app/ui, with every page's folder


def untranslated_literals(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        if name not in SHOWN_BY:
            continue
        for arg in node.args[:1]:
            words = arg.value if isinstance(arg, ast.Constant) and isinstance(arg.value, str) else "".join(
                part.value for part in arg.values if isinstance(part, ast.Constant)) if isinstance(
                arg, ast.JoinedStr) else ""
            is_json = words.startswith("{")  # an example of what to type
            if re.search(r"[A-Za-z]{2,}", re.sub(r"<[^>]*>", "", words)) and words not in NOT_WORDS and not is_json:
                found.append(f"{path.name}:{node.lineno}: {words!r}")
    return found


def test_shown_text_in_app_ui_goes_through_tr():
    found = [hit for path in sorted(UI.rglob("*.py")) if path.name != "platform_check.py"  # runs before Qt
             for hit in untranslated_literals(path)]
    assert not found, f"wrap these in self.tr() / QCoreApplication.translate(), then run the update command: {found}"
