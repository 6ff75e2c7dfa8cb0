"""Light and dark: follow the system's colour scheme, or the one the user picked.

Native styles (macOS, Windows 11, recent GNOME/KDE) switch palettes themselves. Where the platform
reports dark but the palette stayed light (older Linux desktops, the offscreen platform), or where
the user picked dark, the Fusion style with a dark palette stands in.

The design tokens live here too: one type scale, spacing steps, radii and one accent colour, and the application
style sheet built from them for the palette in use. Pages name their labels and frames (``pageTitle``,
``sectionTitle``, ``caption``, ``card``, ``chip``, ``badge``, ``emptyState``…) and never set sizes or colours
of their own, so a page looks like the others and follows light and dark.
"""

from __future__ import annotations

from dataclasses import dataclass

from PySide6.QtCore import QObject, Qt, Slot
from PySide6.QtGui import QColor, QGuiApplication, QPainter, QPalette
from PySide6.QtWidgets import QApplication, QProxyStyle, QStyle, QStyleOption, QWidget

THEMES = ("system", "light", "dark")
# The border of an unticked check box or radio button on the dark palette: Fusion derives it from
# the window colour made darker, which on a dark window is all but black on near-black.
DARK_INDICATOR_OUTLINE = "#8a9096"
DARK_INDICATOR_OUTLINE_DISABLED = "#54585d"

# --- design tokens ---------------------------------------------------------------------------------------------
# Type scale, in points: a page's title, a section's header, small notes; running text keeps the platform's size.
TYPE_SCALE = {"title": 20, "section": 13, "caption": 9}
SPACING = (4, 8, 12, 16, 24)  # the only gaps and margins pages use: SPACING[3] around a page, [1] between controls
PAGE_MARGINS = (SPACING[4], SPACING[3], SPACING[4], SPACING[3])  # left, top, right, bottom
RADIUS = {"small": 4, "medium": 6, "large": 10}  # chips and badges; buttons and fields; cards and bubbles
# One accent: the selection, the sidebar's current page, primary buttons, links and the focus ring.
ACCENT = {"light": "#2563eb", "dark": "#5b8def"}


@dataclass(frozen=True)
class Tones:
    """The colours the style sheet adds to a palette: muted text, card surfaces, and the three fit tones."""

    accent: str
    on_accent: str
    muted: str
    card: str
    card_border: str
    chip: str
    good: str
    good_text: str
    warn: str
    warn_text: str
    bad: str
    bad_text: str


LIGHT_TONES = Tones(accent=ACCENT["light"], on_accent="#ffffff", muted="#5f6368", card="#ffffff",
                    card_border="#dadce0", chip="#eef1f5", good="#e6f4ea", good_text="#137333", warn="#fef7e0",
                    warn_text="#8a5a00", bad="#fce8e6", bad_text="#b3261e")
DARK_TONES = Tones(accent=ACCENT["dark"], on_accent="#ffffff", muted="#9aa0a6", card="#26272b",
                   card_border="#3c4043", chip="#33353a", good="#1e3a28", good_text="#81c995", warn="#3d3420",
                   warn_text="#fdd663", bad="#442726", bad_text="#f28b82")


def is_dark(palette: QPalette) -> bool:
    """Whether a palette is a dark one (what icons and code highlighting follow)."""
    return palette.color(QPalette.ColorRole.Window).lightness() < 128


def tones(palette: QPalette) -> Tones:
    return DARK_TONES if is_dark(palette) else LIGHT_TONES


def stylesheet(palette: QPalette) -> str:
    """The application style sheet for ``palette``: the type scale, the surfaces and the accent."""
    t = tones(palette)
    title, section, caption = TYPE_SCALE["title"], TYPE_SCALE["section"], TYPE_SCALE["caption"]
    small, medium, large = RADIUS["small"], RADIUS["medium"], RADIUS["large"]
    card_edge = f"border: 1px solid {t.card_border}; border-radius: {large}px;"
    pill = f"border-radius: {small}px; padding: 1px {SPACING[1]}px; font-size: {caption}pt;"
    badges = "\n".join(f"QLabel#badge_{tone} {{ background: {back}; color: {text}; {pill} font-weight: 600; }}"
                        for tone, back, text in (("good", t.good, t.good_text), ("warn", t.warn, t.warn_text),
                                                 ("bad", t.bad, t.bad_text)))
    return f"""
QLabel#pageTitle {{ font-size: {title}pt; font-weight: 600; padding-bottom: {SPACING[1]}px; }}
QLabel#sectionTitle {{ font-size: {section}pt; font-weight: 600; padding-top: {SPACING[1]}px; }}
QLabel#caption, QLabel#meta {{ color: {t.muted}; font-size: {caption}pt; }}
QLabel#brand {{ font-size: 15pt; font-weight: 700; padding: 0 0 {SPACING[2]}px {SPACING[3]}px; }}
QListWidget#sidebar {{ border: none; background: palette(window); font-size: 11pt; padding-top: {SPACING[0]}px; }}
QListWidget#sidebar::item {{
    padding: {SPACING[1]}px {SPACING[2]}px; border-radius: {medium}px; margin: 1px {SPACING[1]}px; }}
QListWidget#sidebar::item:selected {{ background: {t.accent}; color: {t.on_accent}; }}
QListWidget#sidebar::item:hover:!selected {{ background: {t.chip}; }}
QFrame#modelBar, QFrame#statsStrip {{ border: none; background: palette(alternate-base); }}
QFrame#banner {{
    background: #fff4d6; color: #4a3b00; border: 1px solid #e6c65c; border-radius: {medium}px;
    margin: {SPACING[1]}px {SPACING[2]}px; }}
QFrame#banner QLabel {{ color: #4a3b00; }}
QFrame#bubble_user {{ background: palette(alternate-base); {card_edge} }}
QFrame#bubble_assistant, QFrame#card {{ background: {t.card}; {card_edge} }}
QFrame#bubble_user[pinned="true"], QFrame#bubble_assistant[pinned="true"] {{ border: 1px solid {t.accent}; }}
QLabel#pinMark {{ background: {t.accent}; color: {t.on_accent}; {pill} font-size: {caption}pt; font-weight: 600; }}
QFrame#thinking {{ border: none; border-left: 2px solid {t.card_border}; padding-left: {SPACING[1]}px; }}
QToolButton#thinkingToggle {{ color: {t.muted}; font-size: {caption}pt; border: none; background: transparent; }}
QToolButton#thinkingToggle:hover {{ background: {t.chip}; border-radius: {small}px; }}
QTextBrowser#thinkingText {{ color: {t.muted}; font-size: {caption}pt; }}
QFrame#card[selected="true"] {{ border: 2px solid {t.accent}; }}
QFrame#toolCard {{ background: {t.chip}; border: none; border-left: 2px solid {t.accent}; border-radius: {small}px; }}
QToolButton#toolToggle {{
    font-size: {caption}pt; font-weight: 600; border: none; background: transparent; text-align: left; }}
QLabel#toolArguments, QTextBrowser#toolResult {{ font-family: monospace; font-size: {caption}pt; }}
QFrame#approvalCard {{ background: {t.warn}; border: 1px solid {t.card_border}; border-radius: {medium}px; }}
QFrame#approvalCard QLabel {{ color: {t.warn_text}; }}
QLabel#cardTitle {{ font-weight: 600; }}
QLabel#chip {{ background: {t.chip}; {pill} }}
QToolButton#citationChip, QToolButton#documentChip {{
    background: {t.chip}; {pill} border: 1px solid transparent; }}
QToolButton#citationChip:hover, QToolButton#documentChip:hover {{ border: 1px solid {t.accent}; }}
QFrame#citationPanel {{ background: {t.card}; border: none; border-left: 1px solid {t.card_border}; }}
QGroupBox {{
    background: {t.card}; {card_edge} margin-top: {TYPE_SCALE["section"] + SPACING[2]}pt;
    padding: {SPACING[2]}px {SPACING[1]}px {SPACING[1]}px {SPACING[1]}px; }}
QGroupBox::title {{
    subcontrol-origin: margin; subcontrol-position: top left; left: {SPACING[0]}px; padding: 0 0 {SPACING[0]}px 0;
    color: palette(window-text); }}
{badges}
QLabel#emptyTitle {{ font-size: {section}pt; font-weight: 600; }}
QLabel#emptyText {{ color: {t.muted}; }}
QPushButton#primary {{
    background: {t.accent}; color: {t.on_accent}; border: none; border-radius: {medium}px;
    padding: {SPACING[1] - 2}px {SPACING[3]}px; font-weight: 600; }}
QPushButton#primary:disabled {{ background: {t.chip}; color: {t.muted}; }}
QLabel#ok {{ color: {t.good_text}; font-weight: bold; }}
QLabel#no {{ color: {t.bad_text}; font-weight: bold; }}
"""


def with_accent(palette: QPalette) -> QPalette:
    """``palette`` with the accent as its selection and link colour, in every colour group but Disabled."""
    t = tones(palette)
    accent = QColor(t.accent)
    out = QPalette(palette)
    for group in (QPalette.ColorGroup.Active, QPalette.ColorGroup.Inactive):
        out.setColor(group, QPalette.ColorRole.Highlight, accent)
        out.setColor(group, QPalette.ColorRole.HighlightedText, QColor(t.on_accent))
        out.setColor(group, QPalette.ColorRole.Link, accent)
    return out


def dark_palette() -> QPalette:
    palette = QPalette()
    roles = {
        QPalette.ColorRole.Window: "#202124", QPalette.ColorRole.WindowText: "#e8eaed",
        QPalette.ColorRole.Base: "#17181a", QPalette.ColorRole.AlternateBase: "#2a2b2f",
        QPalette.ColorRole.Text: "#e8eaed", QPalette.ColorRole.Button: "#2d2e32",
        QPalette.ColorRole.ButtonText: "#e8eaed", QPalette.ColorRole.Highlight: "#3d7bd9",
        QPalette.ColorRole.HighlightedText: "#ffffff", QPalette.ColorRole.ToolTipBase: "#2d2e32",
        QPalette.ColorRole.ToolTipText: "#e8eaed", QPalette.ColorRole.Link: "#8ab4f8",
        QPalette.ColorRole.PlaceholderText: "#9aa0a6", QPalette.ColorRole.Mid: "#3c4043",
        QPalette.ColorRole.Dark: "#111214", QPalette.ColorRole.Light: "#3c4043",
    }
    for role, colour in roles.items():
        palette.setColor(role, QColor(colour))
    for role in (QPalette.ColorRole.Text, QPalette.ColorRole.ButtonText, QPalette.ColorRole.WindowText):
        palette.setColor(QPalette.ColorGroup.Disabled, role, QColor("#6f7378"))
    return palette


class DarkFusionStyle(QProxyStyle):
    """Fusion for the dark palette, with check box and radio button outlines that show.

    Fusion draws those outlines in the window colour made darker (``QFusionStylePrivate::outline``:
    ``window().darker(140)``; radio buttons ``darker(150)``), fine on a light window, invisible on
    a dark one. The indicators are drawn by Fusion itself, from a palette whose window colour is
    light enough that "darker" lands on a visible grey; nothing else in them uses the window colour.
    """

    def __init__(self) -> None:
        super().__init__("Fusion")

    def drawPrimitive(self, element: QStyle.PrimitiveElement, option: QStyleOption,  # noqa: N802 (Qt's name)
                      painter: QPainter, widget: QWidget | None = None) -> None:
        if element in (QStyle.PrimitiveElement.PE_IndicatorCheckBox,
                       QStyle.PrimitiveElement.PE_IndicatorRadioButton):
            option = type(option)(option)
            palette = QPalette(option.palette)
            for group, colour in ((QPalette.ColorGroup.Active, DARK_INDICATOR_OUTLINE),
                                  (QPalette.ColorGroup.Inactive, DARK_INDICATOR_OUTLINE),
                                  (QPalette.ColorGroup.Disabled, DARK_INDICATOR_OUTLINE_DISABLED)):
                palette.setColor(group, QPalette.ColorRole.Window, QColor(colour).lighter(140))
            option.palette = palette
        super().drawPrimitive(element, option, painter, widget)


class ThemeFollower(QObject):
    """Applies a theme now and again whenever the system's colour scheme changes: the style, the palette (with the
    accent) and the application style sheet built for it. Setting the style sheet again re-polishes every widget,
    which is what makes a widget that a style sheet styled take the new palette (a palette change alone does not
    reach those)."""

    def __init__(self, app: QApplication, theme: str = "system") -> None:
        super().__init__(app)
        self.app = app
        self._native_style = app.style().name()
        self._native_palette = QPalette(app.palette())
        self.theme = theme if theme in THEMES else "system"
        QGuiApplication.styleHints().colorSchemeChanged.connect(self._on_color_scheme_changed)
        self.apply()

    def wants_dark(self) -> bool:
        if self.theme == "system":
            return QGuiApplication.styleHints().colorScheme() == Qt.ColorScheme.Dark
        return self.theme == "dark"

    def set_theme(self, theme: str) -> None:
        self.theme = theme if theme in THEMES else "system"
        self.apply()

    def apply(self) -> None:
        if self.wants_dark() and not is_dark(self._native_palette):
            self.app.setStyle(DarkFusionStyle())  # the application takes ownership
            self.app.setPalette(with_accent(dark_palette()))
        elif not self.wants_dark() and is_dark(self.app.palette()) and self.theme == "light":
            self.app.setStyle("Fusion")
            self.app.setPalette(with_accent(self.app.style().standardPalette()))
        else:
            self.app.setStyle(self._native_style)
            self.app.setPalette(with_accent(self._native_palette))
        self.app.setStyleSheet(stylesheet(self.app.palette()))

    @Slot(Qt.ColorScheme)
    def _on_color_scheme_changed(self, _scheme: Qt.ColorScheme) -> None:
        self._native_palette = QPalette(QGuiApplication.palette())
        self.apply()
