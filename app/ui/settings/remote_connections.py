"""Remote engines in the app: the Settings page's list of connections (add, test, edit, remove) and the Chat's
"Remote model…" picker. The connections themselves live in app.remote.connections (Qt-free); talking to a server
(listing its models, measuring latency) runs on a background thread.
"""

from __future__ import annotations

from typing import cast

from PySide6.QtCore import Qt, Signal, Slot
from PySide6.QtWidgets import (QComboBox, QDialog, QDialogButtonBox, QDoubleSpinBox, QFileDialog, QFormLayout,
                               QHBoxLayout, QLabel, QLineEdit, QListWidget, QListWidgetItem, QPushButton, QVBoxLayout,
                               QWidget)

from app.remote import connections as remote
from app.ui.common.background import BackgroundCall, sentence
from app.ui.common.translations import QT_TRANSLATE_NOOP

KEY_STORES = {"keychain": QT_TRANSLATE_NOOP("ConnectionsPanel", "key in the system keychain"),
              "file": QT_TRANSLATE_NOOP("ConnectionsPanel", "key in the key file (0600)"),
              "": QT_TRANSLATE_NOOP("ConnectionsPanel", "no key")}  # shown through ConnectionsPanel.tr


def list_connection_models(name: str) -> remote.ConnectionProbe:
    """(background) The connection's models and latency, as ``quantdesk remote test`` prints them."""
    store = remote.Connections()
    return store.probe(store.get(name))


class ConnectionsPanel(QWidget):
    """Add, test, edit and remove connections to OpenAI-compatible servers."""

    changed = Signal()

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setAccessibleName(self.tr("Remote engines"))
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        self.list = QListWidget()
        self.list.setAccessibleName(self.tr("Remote connections"))
        self.list.setMaximumHeight(110)
        self.list.currentItemChanged.connect(self._on_selected)
        column.addWidget(self.list)

        form = QFormLayout()
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText("gpu-box")
        self.name_edit.setAccessibleName(self.tr("Connection name"))
        self.url_edit = QLineEdit()
        self.url_edit.setPlaceholderText("http://192.168.1.20:8080/v1")
        self.url_edit.setAccessibleName(self.tr("Server address"))
        self.key_edit = QLineEdit()
        self.key_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.key_edit.setAccessibleName(self.tr("API key"))
        self.key_edit.setPlaceholderText(self.tr("optional; leave empty to keep the stored key"))
        ca_row = QHBoxLayout()
        self.ca_edit = QLineEdit()
        self.ca_edit.setPlaceholderText(self.tr("optional: the server's CA certificate (PEM)"))
        self.ca_edit.setAccessibleName(self.tr("CA file"))
        self.ca_button = QPushButton(self.tr("Choose…"))
        self.ca_button.setAccessibleName(self.tr("Choose a CA file"))
        self.ca_button.clicked.connect(self._on_choose_ca)
        ca_row.addWidget(self.ca_edit, 1)
        ca_row.addWidget(self.ca_button)
        timeouts = QHBoxLayout()
        self.timeout_box = QDoubleSpinBox()
        self.timeout_box.setRange(0.5, 600)
        self.timeout_box.setValue(remote.Connection.timeout_s)
        self.timeout_box.setSuffix(self.tr(" s to connect"))
        self.timeout_box.setAccessibleName(self.tr("Connect timeout"))
        self.stall_box = QDoubleSpinBox()
        self.stall_box.setRange(1, 3600)
        self.stall_box.setValue(remote.Connection.stall_s)
        self.stall_box.setSuffix(self.tr(" s silent before giving up"))
        self.stall_box.setAccessibleName(self.tr("Stall limit"))
        self.stall_box.setToolTip(self.tr("A reply that sends nothing for this long is given up (a long prompt may "
                                          "take a while)"))
        timeouts.addWidget(self.timeout_box)
        timeouts.addWidget(self.stall_box)
        timeouts.addStretch(1)
        form.addRow(self.tr("Name"), self.name_edit)
        form.addRow(self.tr("Address"), self.url_edit)
        form.addRow(self.tr("API key"), self.key_edit)
        form.addRow(self.tr("TLS"), ca_row)
        form.addRow(self.tr("Timeouts"), timeouts)
        column.addLayout(form)

        buttons = QHBoxLayout()
        self.new_button = QPushButton(self.tr("New"))
        self.new_button.setAccessibleName(self.tr("New connection"))
        self.new_button.clicked.connect(self._on_new)
        self.save_button = QPushButton(self.tr("Save and test"))
        self.save_button.setAccessibleName(self.tr("Save and test the connection"))
        self.save_button.clicked.connect(self._on_save)
        self.test_button = QPushButton(self.tr("Test"))
        self.test_button.setAccessibleName(self.tr("Test the connection"))
        self.test_button.clicked.connect(self._on_test)
        self.remove_button = QPushButton(self.tr("Remove"))
        self.remove_button.setAccessibleName(self.tr("Remove the connection"))
        self.remove_button.clicked.connect(self._on_remove)
        self.forget_key_button = QPushButton(self.tr("Forget key"))
        self.forget_key_button.setAccessibleName(self.tr("Forget the stored API key"))
        self.forget_key_button.clicked.connect(self._on_forget_key)
        for button in (self.new_button, self.save_button, self.test_button, self.forget_key_button, self.remove_button):
            buttons.addWidget(button)
        buttons.addStretch(1)
        column.addLayout(buttons)
        self.result = QLabel()
        self.result.setWordWrap(True)
        self.result.setTextFormat(Qt.TextFormat.PlainText)
        self.result.setAccessibleName(self.tr("Connection test result"))
        column.addWidget(self.result)
        self.storage_note = QLabel(remote.key_storage_sentence())
        self.storage_note.setObjectName("caption")
        self.storage_note.setWordWrap(True)
        column.addWidget(self.storage_note)

        self._tester = BackgroundCall("remote-test")
        self._tester.succeeded.connect(self._on_tested)
        self._tester.failed.connect(self._on_test_failed)
        self.refresh()

    # --- the list

    def refresh(self, select: str | None = None) -> None:
        try:
            saved = remote.Connections().all()
        except remote.RemoteConnectionError as exc:
            saved = []
            self.result.setText(str(exc))
        self.list.blockSignals(True)
        self.list.clear()
        for connection in saved:
            item = QListWidgetItem(f"{connection.name} — {connection.base_url} — "
                                   f"{self.tr(KEY_STORES[connection.key_store])}")
            item.setData(Qt.ItemDataRole.UserRole, connection.name)
            item.setToolTip("\n".join(connection.warnings()))
            self.list.addItem(item)
            if connection.name == select:
                self.list.setCurrentItem(item)
        self.list.blockSignals(False)
        self._update_buttons()

    def selected_name(self) -> str | None:
        item = self.list.currentItem()
        return cast("str | None", item.data(Qt.ItemDataRole.UserRole)) if item is not None else None  # its name

    def _update_buttons(self) -> None:
        chosen = self.selected_name()
        for button in (self.test_button, self.remove_button):
            button.setEnabled(chosen is not None)
        has_key = False
        if chosen is not None:
            try:
                has_key = remote.Connections().get(chosen).has_key
            except remote.RemoteConnectionError:
                pass
        self.forget_key_button.setEnabled(has_key)

    @Slot(QListWidgetItem, QListWidgetItem)
    def _on_selected(self, item: QListWidgetItem | None, _previous: object) -> None:
        self._update_buttons()
        if item is None:
            return
        try:
            connection = remote.Connections().get(item.data(Qt.ItemDataRole.UserRole))
        except remote.RemoteConnectionError as exc:
            self.result.setText(str(exc))
            return
        self.name_edit.setText(connection.name)
        self.url_edit.setText(connection.base_url)
        self.key_edit.clear()
        self.key_edit.setPlaceholderText(self.tr("stored; type to replace it") if connection.has_key
                                         else self.tr("optional; none stored"))
        self.ca_edit.setText(connection.ca_file)
        self.timeout_box.setValue(connection.timeout_s)
        self.stall_box.setValue(connection.stall_s)
        self.result.setText("\n".join(connection.warnings()))

    # --- actions

    @Slot()
    def _on_new(self) -> None:
        self.list.setCurrentItem(None)  # type: ignore[call-overload]  # Qt takes nullptr: no current connection
        for edit in (self.name_edit, self.url_edit, self.key_edit, self.ca_edit):
            edit.clear()
        self.key_edit.setPlaceholderText(self.tr("optional"))
        self.result.clear()
        self.name_edit.setFocus()

    @Slot()
    def _on_choose_ca(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, self.tr("The server's CA certificate"), "",
                                              self.tr("PEM files (*.pem *.crt);;All (*)"))
        if path:
            self.ca_edit.setText(path)

    @Slot()
    def _on_save(self) -> None:
        key = self.key_edit.text().strip()
        connection = remote.Connection(self.name_edit.text().strip(), self.url_edit.text().strip(),
                                       ca_file=self.ca_edit.text().strip(), timeout_s=self.timeout_box.value(),
                                       stall_s=self.stall_box.value())
        try:
            saved = remote.Connections().save(connection, api_key=key or None)
        except (remote.RemoteConnectionError, OSError) as exc:
            # what was typed stays in the fields
            self.result.setText(self.tr("Not saved: {error}").format(error=sentence(exc)))
            return
        self.key_edit.clear()
        self.refresh(select=saved.name)
        self._on_selected(self.list.currentItem(), None)
        self.changed.emit()
        self._on_test()

    @Slot()
    def _on_test(self) -> None:
        name = self.selected_name()
        if name is None:
            return
        self.result.setText(self.tr("Asking {name} for its models…").format(name=name))
        self._tester.start(list_connection_models, name)

    @Slot(int, object)
    def _on_tested(self, ticket: int, result: remote.ConnectionProbe) -> None:
        if ticket != self._tester.latest:
            return
        models = ", ".join(m["id"] for m in result["models"][:6]) or self.tr("no models")
        more = self.tr(" and {count} more").format(count=len(result["models"]) - 6) if len(result["models"]) > 6 \
            else ""
        self.result.setText(self.tr("{name} answered in {latency_ms:.0f} ms: a {kind} server with {models}{more}.")
                            .format(name=result['name'], latency_ms=result['latency_ms'], kind=result['kind'],
                                    models=models, more=more))

    @Slot(int, object)
    def _on_test_failed(self, ticket: int, error: Exception) -> None:
        if ticket == self._tester.latest:
            self.result.setText(sentence(error))

    @Slot()
    def _on_forget_key(self) -> None:
        name = self.selected_name()
        if name is None:
            return
        store = remote.Connections()
        store.save(store.get(name), api_key="")
        self.refresh(select=name)
        self._on_selected(self.list.currentItem(), None)
        self.result.setText(self.tr("The API key of {name} is forgotten.").format(name=name))

    @Slot()
    def _on_remove(self) -> None:
        name = self.selected_name()
        if name is None:
            return
        try:
            remote.Connections().remove(name)
        except (remote.RemoteConnectionError, OSError) as exc:
            self.result.setText(sentence(exc))
            return
        self._on_new()
        self.refresh()
        self.result.setText(self.tr("Removed {name} and its key.").format(name=name))
        self.changed.emit()


class RemoteModelDialog(QDialog):
    """Pick a model served by one of the connections; ``chosen_ref`` is ``remote:NAME/MODEL``."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setWindowTitle(self.tr("Load a remote model"))
        self.setAccessibleName(self.tr("Load a remote model"))
        self.chosen_ref = ""
        column = QVBoxLayout(self)
        self.connection_box = QComboBox()
        self.connection_box.setAccessibleName(self.tr("Connection"))
        self.models = QListWidget()
        self.models.setAccessibleName(self.tr("Models on the server"))
        self.models.itemDoubleClicked.connect(self._on_accept)
        self.models.currentItemChanged.connect(self._on_model_selected)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setAccessibleName(self.tr("Status"))
        self.buttons = QDialogButtonBox(QDialogButtonBox.StandardButton.Cancel)
        self.load_button = self.buttons.addButton(self.tr("Load"), QDialogButtonBox.ButtonRole.AcceptRole)
        self.load_button.setEnabled(False)
        self.buttons.accepted.connect(self._on_accept)
        self.buttons.rejected.connect(self.reject)
        column.addWidget(QLabel(self.tr("Connection")))
        column.addWidget(self.connection_box)
        column.addWidget(self.models, 1)
        column.addWidget(self.status)
        column.addWidget(self.buttons)
        self.resize(460, 360)
        self._lister = BackgroundCall("remote-models")
        self._lister.succeeded.connect(self._on_listed)
        self._lister.failed.connect(self._on_list_failed)
        try:
            names = [c.name for c in remote.Connections().all()]
        except remote.RemoteConnectionError as exc:
            names = []
            self.status.setText(str(exc))
        self.connection_box.addItems(names)
        self.connection_box.currentTextChanged.connect(self._on_connection_changed)
        if names:
            self._on_connection_changed(names[0])
        elif not self.status.text():
            self.status.setText(self.tr("No remote connections yet: add one in Settings → Remote engines."))

    @Slot(str)
    def _on_connection_changed(self, name: str) -> None:
        self.models.clear()
        self.load_button.setEnabled(False)
        self.status.setText(self.tr("Asking {name} for its models…").format(name=name))
        self._lister.start(list_connection_models, name)

    @Slot(int, object)
    def _on_listed(self, ticket: int, result: remote.ConnectionProbe) -> None:
        if ticket != self._lister.latest:
            return
        for model in result["models"]:
            ctx = self.tr(" · context {n_ctx}").format(n_ctx=model['n_ctx']) if model["n_ctx"] else ""
            item = QListWidgetItem(f"{model['id']}{ctx}")
            item.setData(Qt.ItemDataRole.UserRole, remote.model_ref(result["name"], model["id"]))
            self.models.addItem(item)
        self.status.setText(self.tr("A {kind} server, {latency_ms:.0f} ms away.").format(kind=result['kind'],
                                                                                         latency_ms=result['latency_ms']))
        if self.models.count():
            self.models.setCurrentRow(0)

    @Slot(int, object)
    def _on_list_failed(self, ticket: int, error: Exception) -> None:
        if ticket == self._lister.latest:
            self.status.setText(sentence(error))

    @Slot(QListWidgetItem, QListWidgetItem)
    def _on_model_selected(self, item: QListWidgetItem | None, _previous: object) -> None:
        self.load_button.setEnabled(item is not None)

    @Slot()
    def _on_accept(self) -> None:
        item = self.models.currentItem()
        if item is not None:
            self.chosen_ref = item.data(Qt.ItemDataRole.UserRole)
            self.accept()
