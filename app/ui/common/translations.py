"""The UI's languages, through Qt's translation system.

Every user-visible string in app/ui goes through ``self.tr()`` (in a QObject subclass; lupdate files it under the
class's name) or ``QCoreApplication.translate("context", ...)`` (module-level code), and ``QT_TRANSLATE_NOOP`` (this
module's, typed) marks a table's words that are translated where they are shown.
``resources/translations/quantdesk_LANG.ts`` hold the translations (``quantdesk_en.ts`` only the English plural forms
of ``%n`` strings), compiled into the ``.qm`` files the app loads. One command refreshes the .ts files from the
sources and compiles them:

    python -m app.ui.common.translations update

Then translate what it lists as unfinished (in the .ts, by hand or with ``pyside6-linguist``) and run it again;
``tests/ui/common/test_translations.py`` fails while any string lacks its translation. ``add LANG`` starts a language.

At start-up ``install`` puts QuantDesk's translator and Qt's own (qtbase: the standard dialog buttons) on the
application and sets the default QLocale, which app.ui.common.formatting formats numbers and dates with. The language
is read once, at start: a change in Settings takes effect at the next start (see ``SettingsPage``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from importlib.resources import files
from pathlib import Path

from PySide6.QtCore import QCoreApplication, QLibraryInfo, QLocale, QTranslator

LANGUAGE_VAR = "QUANTDESK_LANGUAGE"  # wins over the Settings page: "en", "de" or "system"
# The languages QuantDesk has, by code, each named in its own language (as a language menu shows them).
LANGUAGE_NAMES = {"en": "English", "de": "Deutsch"}
SOURCE_LANGUAGE = "en"
ROOT = Path(__file__).resolve().parents[3]


def QT_TRANSLATE_NOOP(context: str, message: str) -> str:  # lupdate finds the marked words by this name
    """Qt's marker of a word translated where it is shown, typed: PySide6's stub answers ``object``, Qt's own
    function returns ``message`` unchanged, as this one does."""
    del context  # lupdate reads it from the call
    return message


def translations_dir() -> Path:
    return Path(str(files("resources") / "translations"))


def chosen_language(setting: str) -> str:
    """The language to show: QUANTDESK_LANGUAGE, else the setting; "system" (or one we lack) follows the OS locale,
    falling back to English."""
    wanted = (os.environ.get(LANGUAGE_VAR) or setting or "system").strip().lower()
    if wanted not in LANGUAGE_NAMES:
        wanted = QLocale.system().name().split("_")[0]
    return wanted if wanted in LANGUAGE_NAMES else SOURCE_LANGUAGE


def locale_for(language: str) -> QLocale:
    """The locale numbers and dates use: the system's when it speaks ``language`` (de_AT, en_GB keep their own
    formats), else that language's main one. Digit grouping is left out, as QuantDesk has always shown figures."""
    system = QLocale.system()
    locale = system if system.name().split("_")[0] == language else QLocale(language)
    locale.setNumberOptions(locale.numberOptions() | QLocale.NumberOption.OmitGroupSeparator)
    return locale


@dataclass
class Installed:
    """What ``install`` put on the application, so ``uninstall`` can take it off again (tests switch languages)."""

    language: str
    previous_locale: QLocale
    translators: list[QTranslator] = field(default_factory=list)
    qt_translations: bool = False  # Qt's own qtbase translation for the language was found and loaded


def install(language: str) -> Installed:
    """Load QuantDesk's and Qt's translators for ``language`` onto the running application and make its locale
    the default. English needs one too: it holds the English plural forms of the ``%n`` strings."""
    app = QCoreApplication.instance()
    assert app is not None, "the QApplication comes first"
    installed = Installed(language, QLocale())
    QLocale.setDefault(locale_for(language))
    own = [SOURCE_LANGUAGE] + ([language] if language != SOURCE_LANGUAGE else [])
    for code in own:  # the chosen language last: the translator installed last is asked first
        translator = QTranslator(app)
        if translator.load(str(translations_dir() / f"quantdesk_{code}.qm")):
            app.installTranslator(translator)
            installed.translators.append(translator)
    if language != SOURCE_LANGUAGE:
        qt = QTranslator(app)
        # PySide6-Essentials ships Qt's translations here; a frozen build keeps those of our languages.
        if qt.load(QLocale(language), "qtbase", "_", QLibraryInfo.path(QLibraryInfo.LibraryPath.TranslationsPath)):
            app.installTranslator(qt)
            installed.translators.append(qt)
            installed.qt_translations = True
    return installed


def uninstall(installed: Installed) -> None:
    app = QCoreApplication.instance()
    assert app is not None  # the translators were installed on it
    for translator in installed.translators:
        app.removeTranslator(translator)
    QLocale.setDefault(installed.previous_locale)


# --- the update command --------------------------------------------------------------------------------------

def _tool(name: str) -> str:
    """pyside6-lupdate / pyside6-lrelease: PySide6-Essentials installs them beside the interpreter."""
    beside = Path(sys.executable).parent / name
    return str(beside) if beside.exists() else name


def ui_sources() -> list[str]:
    return sorted(str(p.relative_to(ROOT)) for p in (ROOT / "app" / "ui").rglob("*.py"))


def ts_files() -> list[Path]:
    return sorted(translations_dir().glob("quantdesk_*.ts"))


def run_lupdate(ts: Path) -> None:
    """Refresh one .ts from the sources: new strings come in unfinished, vanished ones go. No line numbers in it,
    so moving code does not change the file (merges stay clean)."""
    options = ["-locations", "none", "-no-obsolete"]
    if ts.stem.endswith(f"_{SOURCE_LANGUAGE}"):
        options.append("-pluralonly")  # English needs only the forms of "%n ..." strings
    subprocess.run([_tool("pyside6-lupdate"), *ui_sources(), *options, "-ts", str(ts)], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL)


def run_lrelease(ts: Path, qm: Path) -> None:
    subprocess.run([_tool("pyside6-lrelease"), str(ts), "-qm", str(qm)], check=True, stdout=subprocess.DEVNULL)


def unfinished(ts: Path) -> list[tuple[str, str]]:
    """(context, source) of every message in ``ts`` without a finished translation."""
    import xml.etree.ElementTree as ET  # the update command's and the tests': not at the app's start

    missing = []
    for context in ET.parse(ts).getroot().iter("context"):
        name = context.findtext("name", "")
        for message in context.iter("message"):
            translation = message.find("translation")
            forms = [translation.text] if translation is not None and not len(translation) else [
                form.text for form in (translation if translation is not None else [])]
            if translation is None or translation.get("type") in ("unfinished", "vanished", "obsolete") or \
                    not all((form or "").strip() for form in forms):
                missing.append((name, message.findtext("source", "")))
    return missing


def update() -> int:
    """Refresh every .ts from app/ui and compile each into its .qm; list what still needs translating."""
    todo = 0
    for ts in ts_files():
        run_lupdate(ts)
        run_lrelease(ts, ts.with_suffix(".qm"))
        for context, source in unfinished(ts):
            todo += 1
            print(f"{ts.name}: [{context}] {source!r} needs a translation")
    print(f"{len(ts_files())} translation files updated; {todo} strings to translate" if todo else
          f"{len(ts_files())} translation files updated; every string is translated")
    return 1 if todo else 0


def add(language: str) -> int:
    """Start a new language: its .ts from the sources (every string unfinished), then name it in LANGUAGE_NAMES
    and app.settings.LANGUAGES."""
    ts = translations_dir() / f"quantdesk_{language}.ts"
    if ts.exists():
        print(f"{ts.name} exists already: translate it, then run update", file=sys.stderr)
        return 1
    subprocess.run([_tool("pyside6-lupdate"), *ui_sources(), "-locations", "none", "-target-language", language,
                    "-ts", str(ts)], cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    print(f"{ts} created: translate it, add {language!r} to LANGUAGE_NAMES (app/ui/common/translations.py) and "
          "LANGUAGES (app/settings.py), then run: python -m app.ui.common.translations update")
    return 0


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args == ["update"]:
        return update()
    if len(args) == 2 and args[0] == "add" and args[1].isalpha():
        return add(args[1].lower())
    print("usage: python -m app.ui.common.translations update | add LANGUAGE_CODE", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
