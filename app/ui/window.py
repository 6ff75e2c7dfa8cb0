"""The main window: a navigation sidebar and one page per task."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, cast

from PySide6.QtCore import QSettings, QSize, Qt, Slot
from PySide6.QtGui import QCloseEvent, QKeySequence, QShortcut
from PySide6.QtWidgets import (QApplication, QHBoxLayout, QLabel, QListWidget, QListWidgetItem, QMainWindow,
                               QStackedWidget, QVBoxLayout, QWidget)

from app.settings import load as load_settings
from app.chats.store import ChatStore
from app.errors import QuantDeskError
from app.ui.common.background import BackgroundCall
from app.ui.common.focus_ring import FocusRingFollower
from app.ui.common.icons import icon
from app.ui.common.theme import stylesheet
from app.ui.common.translations import QT_TRANSLATE_NOOP

if TYPE_CHECKING:  # the pages are imported when first shown (app.ui.window.MainWindow.page), not before
    from app.hardware.profile import HardwareProfile
    from app.hub.plan import DownloadRequest
    from app.settings import Settings
    from app.ui.chat.chat_page import ChatPage
    from app.ui.chat.chat_tools import ChatTools
    from app.ui.chat.engine_bridge import EngineBridge
    from app.ui.documents.documents_page import DocumentsPage
    from app.ui.documents.documents_service import DocumentsService
    from app.ui.hardware.hardware_page import HardwarePage
    from app.ui.lab.lab_page import LabPage
    from app.ui.library.discover_page import DiscoverPage
    from app.ui.library.downloads_page import DownloadsPage
    from app.ui.library.first_run import FirstRunPage, ImportFlow
    from app.ui.library.library_page import LibraryPage
    from app.ui.server.server_page import ServerPage
    from app.ui.settings.settings_page import SettingsPage

# The first run's page (app/ui/library/first_run.py): in the stack while offered, not in the sidebar
WELCOME = "Welcome"
PAGES = ("Discover", "Downloads", "Library", "Chat", "Hardware", "Lab", "Server", "Documents", "Settings")
# The pages' names as the sidebar shows them (PAGES are also keys: in window.ini, in show_page).
PAGE_TITLES = {"Discover": QT_TRANSLATE_NOOP("MainWindow", "Discover"),
               "Downloads": QT_TRANSLATE_NOOP("MainWindow", "Downloads"),
               "Library": QT_TRANSLATE_NOOP("MainWindow", "Library"), "Chat": QT_TRANSLATE_NOOP("MainWindow", "Chat"),
               "Documents": QT_TRANSLATE_NOOP("MainWindow", "Documents"),
               "Hardware": QT_TRANSLATE_NOOP("MainWindow", "Hardware"), "Lab": QT_TRANSLATE_NOOP("MainWindow", "Lab"),
               "Server": QT_TRANSLATE_NOOP("MainWindow", "Server"),
               "Settings": QT_TRANSLATE_NOOP("MainWindow", "Settings")}


def focus_chain(page: QWidget) -> list[QWidget]:
    """The widgets inside ``page`` that Tab stops at, in Tab order (hidden ones too: the caller checks)."""
    found = []
    widget = page.nextInFocusChain()
    while widget is not None and widget is not page:  # the chain is a ring through the whole window
        if page.isAncestorOf(widget) and widget.focusPolicy().value & Qt.FocusPolicy.TabFocus.value:
            found.append(widget)
        widget = widget.nextInFocusChain()
    return found


def default_detect() -> HardwareProfile:
    from app import machine

    return machine.profile(fresh=True)  # at start, and again when the runtimes change: the process's probe anew


class _Pages(Mapping[str, QWidget]):
    """``window.pages[name]``: the page, made on first access as a visit makes it (tests, screenshots)."""

    def __init__(self, window: MainWindow) -> None:
        self._window = window

    def __getitem__(self, name: str) -> QWidget:
        if name not in PAGES:
            raise KeyError(name)
        return self._window.page(name)

    def __iter__(self) -> Iterator[str]:
        return iter(PAGES)

    def __len__(self) -> int:
        return len(PAGES)


class MainWindow(QMainWindow):
    """The sidebar and a stack of pages. A page is built on its first visit (``page``): until then its place in
    the stack holds an empty widget, and nothing of it is imported, so the window shows after building only the
    page it opens on. What reaches a page before it exists waits for it here: the hardware profile (or the probe's
    failure), applied when it is built; a page that does not exist has nothing to refresh or stop."""

    def __init__(self, store: ChatStore, bridge: EngineBridge, settings: QSettings,
                 parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.store = store
        self.bridge = bridge
        self.settings = settings
        self._tools: ChatTools | None = None  # MCP servers' tools: made when the Chat or Settings → Tools needs them
        self._documents: DocumentsService | None = None  # the user's documents: made when the Chat or its page needs
        self.setWindowTitle("QuantDesk")
        app = QApplication.instance()
        assert isinstance(app, QApplication)  # app.ui.main.application() made it
        if not app.styleSheet():  # app.ui.main's ThemeFollower sets it (and again on every theme change)
            app.setStyleSheet(stylesheet(app.palette()))
        self.sidebar = QListWidget()
        self.sidebar.setObjectName("sidebar")
        self.sidebar.setAccessibleName(self.tr("Navigation"))
        self.sidebar.setIconSize(QSize(20, 20))
        self.stack = QStackedWidget()
        self._built: dict[str, QWidget] = {}
        self.pages = _Pages(self)
        self.profile: HardwareProfile | None = None  # the latest detection, for the pages built after it
        self._hardware_message: str | None = None  # the probe's failure, for a Hardware page built after it
        self._importer: ImportFlow | None = None
        self.first_run: FirstRunPage | None = None  # the welcome page, while it is in the stack
        self._before_welcome = "Chat"  # the page a skipped welcome gives way to
        for name in PAGES:
            title = self.tr(PAGE_TITLES[name])
            item = QListWidgetItem(icon(name), title)
            item.setData(Qt.ItemDataRole.AccessibleTextRole, self.tr("{page} page").format(page=title))
            self.sidebar.addItem(item)
            self.stack.addWidget(QWidget())  # the page's place, until its first visit
        self.sidebar.currentRowChanged.connect(self._on_row_changed)
        central = QWidget()
        layout = QHBoxLayout(central)
        layout.setContentsMargins(0, 0, 0, 0)
        layout.setSpacing(0)
        side = QWidget()
        side.setObjectName("sidePanel")
        side.setFixedWidth(176)
        side_layout = QVBoxLayout(side)
        side_layout.setContentsMargins(0, 14, 0, 8)
        brand = QLabel("QuantDesk")
        brand.setObjectName("brand")
        side_layout.addWidget(brand)
        side_layout.addWidget(self.sidebar, 1)
        layout.addWidget(side)
        layout.addWidget(self.stack, 1)
        self.setCentralWidget(central)
        # No Qt parent: the probe thread holds its own reference, so a window closed (and deleted)
        # before detection ends leaves the probe alive to emit into nothing instead of raising.
        self._probe = BackgroundCall("hardware-probe")
        self._probe.succeeded.connect(self._on_hardware_detected)
        self._probe.failed.connect(self._on_hardware_failed)
        self._shortcuts()
        self.focus_ring = FocusRingFollower(self)
        self._restore()

    # --- pages, each built on its first visit -------------------------------------------------------

    def page(self, name: str) -> QWidget:
        """The page called ``name``, built now if this is its first use (it takes its place in the stack)."""
        page = self._built.get(name)
        if page is None:
            page = getattr(self, f"_build_{name.lower()}")()
            self._built[name] = page
            index = PAGES.index(name)
            placeholder = self.stack.widget(index)
            current = self.stack.currentIndex()
            self.stack.insertWidget(index, page)
            assert placeholder is not None  # every page's index holds its placeholder until built
            self.stack.removeWidget(placeholder)
            placeholder.deleteLater()
            self.stack.setCurrentIndex(current)
        return page

    def built(self, name: str) -> QWidget | None:
        """The page if it has been built; None leaves it unbuilt (for what only matters to a page on screen)."""
        return self._built.get(name)

    @Slot(int)
    def _on_row_changed(self, row: int) -> None:
        if row >= 0:
            self.stack.setCurrentWidget(self.page(PAGES[row]))
            if self.first_run is not None:  # left for a page of the sidebar: offered again at the next start
                self._drop_first_run()

    # Each page by its attribute, built on first use like a visit builds it (page() builds "X" by _build_x).
    @property
    def discover(self) -> DiscoverPage:
        return cast("DiscoverPage", self.page("Discover"))

    @property
    def downloads(self) -> DownloadsPage:
        return cast("DownloadsPage", self.page("Downloads"))

    @property
    def library(self) -> LibraryPage:
        return cast("LibraryPage", self.page("Library"))

    @property
    def chat(self) -> ChatPage:
        return cast("ChatPage", self.page("Chat"))

    @property
    def documents(self) -> DocumentsPage:
        return cast("DocumentsPage", self.page("Documents"))

    @property
    def hardware(self) -> HardwarePage:
        return cast("HardwarePage", self.page("Hardware"))

    @property
    def lab(self) -> LabPage:
        return cast("LabPage", self.page("Lab"))

    @property
    def server(self) -> ServerPage:
        return cast("ServerPage", self.page("Server"))

    @property
    def app_settings(self) -> SettingsPage:
        return cast("SettingsPage", self.page("Settings"))

    @property
    def importer(self) -> ImportFlow:
        if self._importer is None:
            from app.ui.library.first_run import ImportFlow

            self._importer = ImportFlow(self)
            self._importer.imported.connect(self._on_chat_requested)
            self._importer.failed.connect(self._on_import_failed)
        return self._importer

    def _build_discover(self) -> DiscoverPage:
        from app.ui.library.discover_page import DiscoverPage

        page = DiscoverPage()
        page.download_requested.connect(self._on_download_requested)
        page.import_requested.connect(self._on_import_requested)
        if self.profile is not None:
            page.set_profile(self.profile)
        return page

    def _build_downloads(self) -> DownloadsPage:
        from app.ui.library.downloads_page import DownloadsPage

        page = DownloadsPage()
        page.chat_requested.connect(self._on_chat_requested)
        page.go_to.connect(self.show_page)  # an empty state's button
        page.installed.connect(self._refresh_library)
        return page

    def _build_library(self) -> LibraryPage:
        from app.ui.library.library_page import LibraryPage

        page = LibraryPage()
        page.load_requested.connect(self._on_chat_requested)
        page.update_requested.connect(self._on_download_requested)
        page.go_to.connect(self.show_page)
        page.refresh()  # the listing, then the daily update check
        return page

    def _build_chat(self) -> ChatPage:
        from app.ui.chat.chat_page import ChatPage

        page = ChatPage(self.store, self.bridge, tools=self._chat_tools, documents=self.documents_service)
        page.go_to.connect(self.show_page)
        page.set_default_context(load_settings().default_n_ctx)  # as saved (Settings saves each change)
        if self.profile is not None:
            page.set_profile(self.profile)
        return page

    def documents_service(self) -> DocumentsService:
        """The user's documents (store and indexer; its thread embeds through the Chat's model pool), made on first
        use: by the Documents page, the Chat's attach, or after the first paint when a collection has work."""
        if self._documents is None:
            from app.ui.documents.documents_service import DocumentsService

            self._documents = DocumentsService(self.bridge)
        return self._documents

    def start_documents(self) -> None:
        """After the first paint: the indexer starts only when a collection has work (nothing is opened or made
        for a user who never added documents)."""
        from app.documents.store import default_path

        if self._documents is not None or default_path().exists():
            self.documents_service().start_if_work()

    def _build_documents(self) -> DocumentsPage:
        from app.ui.documents.documents_page import DocumentsPage

        return DocumentsPage(self.documents_service())

    def _build_hardware(self) -> HardwarePage:
        from app.ui.hardware.hardware_page import HardwarePage

        page = HardwarePage()
        page.runtimes_panel.changed.connect(self._on_runtimes_changed)
        if self.profile is not None:
            page.set_profile(self.profile)
        elif self._hardware_message is not None:
            page.show_message(self._hardware_message)
        return page

    def _build_lab(self) -> LabPage:
        from app.ui.lab.lab_page import LabPage

        page = LabPage()
        page.go_to.connect(self.show_page)
        return page

    def _build_server(self) -> ServerPage:
        from app.ui.server.server_page import ServerPage

        page = ServerPage(self.bridge)
        page.go_to.connect(self.show_page)
        return page

    def _chat_tools(self) -> ChatTools:
        """The app's MCP tools: the Chat gives them to its models, Settings → Tools shows and changes them."""
        if self._tools is None:
            from app.ui.chat.chat_tools import ChatTools

            self._tools = ChatTools(parent=self)
        return self._tools

    def _build_settings(self) -> SettingsPage:
        from app.ui.settings.settings_page import SettingsPage

        page = SettingsPage(tools=self._chat_tools)
        page.models_dir_changed.connect(self._refresh_library)
        page.update_checks_changed.connect(self._refresh_library)  # off: the badges go
        page.default_context_changed.connect(self._on_default_context_changed)
        page.theme_changed.connect(self._on_theme_changed)
        page.pool_limits_changed.connect(self._on_pool_limits_changed)
        return page

    @Slot()
    @Slot(str)
    def _refresh_library(self, _path: str = "") -> None:
        library = cast("LibraryPage | None", self.built("Library"))
        if library is not None:  # else it lists the models when first shown
            library.refresh()

    @Slot(int)
    def _on_default_context_changed(self, n_ctx: int) -> None:
        chat = cast("ChatPage | None", self.built("Chat"))
        if chat is not None:  # else it reads the setting when built
            chat.set_default_context(n_ctx)

    @Slot()
    def _on_stop_shortcut(self) -> None:
        chat = cast("ChatPage | None", self.built("Chat"))
        if chat is not None:  # no Chat page yet: no reply to stop
            chat.stop()

    def _shortcuts(self) -> None:
        for keys, slot in ((QKeySequence.StandardKey.New, self._on_new_chat_shortcut),
                           (QKeySequence(Qt.Key.Key_Escape), self._on_stop_shortcut)):
            shortcut = QShortcut(keys, self)
            shortcut.activated.connect(slot)
        for index, _name in enumerate(PAGES):
            shortcut = QShortcut(QKeySequence(f"Ctrl+{index + 1}"), self)
            shortcut.activated.connect(self._on_page_shortcut)
            shortcut.setProperty("page", index)

    def show_page(self, name: str) -> None:
        self.sidebar.setCurrentRow(PAGES.index(name))

    @property
    def current_page(self) -> str:
        """The name of the page shown: one of PAGES, or WELCOME while the first run's page is."""
        if self.first_run is not None and self.stack.currentWidget() is self.first_run:
            return WELCOME
        return PAGES[self.stack.currentIndex()]

    @Slot()
    def _on_new_chat_shortcut(self) -> None:
        self.show_page("Chat")
        self.chat.new_conversation()

    @Slot()
    def _on_page_shortcut(self) -> None:
        self.sidebar.setCurrentRow(self.sender().property("page"))
        self.focus_page()

    def focus_page(self) -> None:
        """Put the keyboard focus in the current page: where it was last, else the page's first field.

        Switching pages from inside one already does this (QStackedLayout moves the focus along); a shortcut
        pressed in the sidebar, or a page that must start somewhere particular, needs it said."""
        page = self.stack.currentWidget()
        assert page is not None  # the stack holds every page (or its placeholder)
        chat = cast("ChatPage | None", self.built("Chat"))
        first = chat.composer if page is chat and chat is not None else None
        for widget in (page.focusWidget(), first, *focus_chain(page)):
            if widget is not None and widget.isVisibleTo(self) and widget.isEnabled():
                widget.setFocus(Qt.FocusReason.ShortcutFocusReason)
                return

    def detect_hardware(self, detect: Callable[[], HardwareProfile] = default_detect) -> None:
        self._probe.start(detect)  # a probe bug must not leave the page saying "Detecting…" forever: failed says it

    @Slot(int, object)
    def _on_hardware_detected(self, ticket: int, profile: HardwareProfile) -> None:
        self.profile = profile
        self._hardware_message = None
        for name in ("Hardware", "Chat", "Discover"):  # the others get it when built
            page = cast("HardwarePage | ChatPage | DiscoverPage | None", self.built(name))
            if page is not None:
                page.set_profile(profile)
        if self.first_run is not None:
            self.first_run.set_profile(profile)

    # --- Discover, Downloads, first run ---------------------------------------------------------

    @Slot(object, str)
    def _on_download_requested(self, request: DownloadRequest, label: str) -> None:
        row = self.downloads.enqueue(request, label)
        self.show_page("Downloads")
        row.focus_action()  # on the new job, not on the first row, where QStackedLayout would put it

    @Slot(str)
    def _on_chat_requested(self, model_path: str) -> None:
        self.show_page("Chat")
        self.chat.composer.setFocus(Qt.FocusReason.OtherFocusReason)  # type while it loads
        self.chat.open_model(model_path)  # settings prefilled from the estimator, then loaded

    @Slot(object)
    def _on_pool_limits_changed(self, settings: Settings) -> None:
        if self.bridge.pool is None:  # none made yet: it reads the settings when made
            return
        from app.engine.pool import limits_from

        self.bridge.pool.set_limits(limits_from(settings))

    @Slot(str)
    def _on_theme_changed(self, theme: str) -> None:
        follower = getattr(QApplication.instance(), "theme", None)  # app.ui.main keeps its ThemeFollower there
        if follower is not None:
            follower.set_theme(theme)

    @Slot()
    def _on_import_requested(self) -> None:
        self.importer.ask(self)

    @Slot(str)
    def _on_import_failed(self, message: str) -> None:
        self.statusBar().showMessage(message)

    @Slot(str)
    def _on_first_run_model(self, repo_id: str) -> None:
        self.show_page("Discover")
        self.discover.open_model(repo_id)

    @Slot()
    def _on_first_run_import(self) -> None:
        self.show_page("Chat")  # where the imported model opens
        self._on_import_requested()

    @Slot()
    def _on_first_run_skipped(self) -> None:
        self.show_page(self._before_welcome)

    def offer_first_run(self) -> FirstRunPage | None:
        """The welcome, when this is a first run (no chats, no models, not done or skipped before): a page of its
        own in the stack, shown instead of the page the window opened on, and gone once left."""
        from app.ui.library.first_run import should_offer

        if not self.isVisible() or not should_offer(self.settings, self.store):  # closed before it came up
            return None
        return self.show_welcome()

    def show_welcome(self) -> FirstRunPage:
        """The first run's page, in the stack and shown (offer_first_run asks whether this is a first run)."""
        from app.ui.library.first_run import FirstRunPage

        if self.first_run is None:
            self.first_run = page = FirstRunPage(self.settings)
            page.model_chosen.connect(self._on_first_run_model)
            page.import_chosen.connect(self._on_first_run_import)
            page.skipped.connect(self._on_first_run_skipped)
            if self.profile is not None:
                page.set_profile(self.profile)
            self.stack.addWidget(page)
        self._before_welcome = self.current_page if self.current_page != WELCOME else self._before_welcome
        self.stack.setCurrentWidget(self.first_run)
        self.sidebar.blockSignals(True)  # after the switch (before it, Qt's stack crashes laying the old page out)
        self.sidebar.setCurrentRow(-1)  # no page of the sidebar is shown: a click on any goes there
        self.sidebar.blockSignals(False)
        self.first_run.models.setFocus(Qt.FocusReason.OtherFocusReason)
        return self.first_run

    def _drop_first_run(self) -> None:
        page, self.first_run = self.first_run, None
        if page is not None:
            self.stack.removeWidget(page)
            page.deleteLater()

    @Slot()
    def _on_runtimes_changed(self) -> None:
        self.detect_hardware()  # the runtimes' devices, and so every fit, depend on which are installed

    @Slot(int, object)
    def _on_hardware_failed(self, ticket: int, error: Exception) -> None:
        message = str(error) if isinstance(error, QuantDeskError) else self.tr(
            "Hardware detection failed: {error!r}").format(error=error)
        self._hardware_message = message
        hardware = cast("HardwarePage | None", self.built("Hardware"))
        if hardware is not None:
            hardware.show_message(message)

    def _restore(self) -> None:
        geometry = self.settings.value("window/geometry")
        if geometry is None or not self.restoreGeometry(geometry):
            self.resize(1280, 800)
        page = self.settings.value("window/page", "Chat")
        self.show_page(page if page in PAGES else "Chat")
        self.focus_page()  # the page's first field has the focus once the window shows, not the sidebar

    def closeEvent(self, event: QCloseEvent) -> None:  # noqa: N802 (Qt's name)
        self.settings.setValue("window/geometry", self.saveGeometry())
        self.settings.setValue("window/page", self._before_welcome if self.current_page == WELCOME else
                               self.current_page)
        self.settings.sync()
        self.focus_ring.stop()
        for name in ("Chat", "Downloads"):
            page = cast("ChatPage | DownloadsPage | None", self.built(name))
            if page is not None:
                page.shutdown()
        if self._tools is not None:  # every MCP server process stopped
            self._tools.shutdown()
        if self._documents is not None:  # the indexer stopped where it is (it goes on from there next time)
            self._documents.shutdown()
        super().closeEvent(event)
