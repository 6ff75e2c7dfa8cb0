"""Settings → Tools: the MCP servers of ``mcp.json`` (app/mcp/config) with their state (connected with N tools,
failed with the sentence why, off, waiting for the user to confirm its command) and their tools; add a server (a
command over stdio, shown in full and confirmed before its first start; or a URL with an optional bearer token, kept
in the keychain), import another app's mcp.json, remove one; and the tools always allowed, each with Revoke.

The servers are connected by the Chat's ``ChatTools`` (app/ui/chat/chat_tools), which this panel is handed when it is
first shown: one ToolBox for the whole app, so what this panel says is what the Chat's model is given.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import Qt, Slot
from PySide6.QtWidgets import (QComboBox, QFileDialog, QFormLayout, QFrame, QHBoxLayout, QLabel, QLineEdit,
                               QListWidget, QListWidgetItem, QPushButton, QStackedWidget, QVBoxLayout, QWidget)

if TYPE_CHECKING:
    from app.ui.chat.chat_tools import ChatTools

NAME_ROLE = Qt.ItemDataRole.UserRole


class ToolsPanel(QWidget):
    def __init__(self, tools: Callable[[], ChatTools], parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self._provider = tools
        self._tools: ChatTools | None = None
        self._pending: Any = None  # a server waiting for the user to confirm its command
        self.setAccessibleName(self.tr("Tools (MCP)"))
        column = QVBoxLayout(self)
        column.setContentsMargins(0, 0, 0, 0)
        self.list = QListWidget()
        self.list.setAccessibleName(self.tr("MCP servers"))
        self.list.setMaximumHeight(120)
        self.list.currentItemChanged.connect(self._on_selected)
        column.addWidget(self.list)
        self.server_tools = QLabel()
        self.server_tools.setObjectName("caption")
        self.server_tools.setWordWrap(True)
        self.server_tools.setTextFormat(Qt.TextFormat.PlainText)  # a server's words are shown as text
        self.server_tools.setAccessibleName(self.tr("The selected server's tools"))
        column.addWidget(self.server_tools)
        row = QHBoxLayout()
        self.reconnect_button = QPushButton(self.tr("Connect again"))
        self.reconnect_button.setAccessibleName(self.tr("Connect the selected MCP server again"))
        self.reconnect_button.clicked.connect(self._on_reconnect)
        self.remove_button = QPushButton(self.tr("Remove"))
        self.remove_button.setAccessibleName(self.tr("Remove the selected MCP server"))
        self.remove_button.clicked.connect(self._on_remove)
        self.import_button = QPushButton(self.tr("Import mcp.json…"))
        self.import_button.setAccessibleName(self.tr("Import MCP servers from an mcp.json file"))
        self.import_button.setToolTip(self.tr("The file LM Studio, Claude Desktop and Cursor keep their MCP servers "
                                              "in; each command is shown before it first starts"))
        self.import_button.clicked.connect(self._on_import_clicked)
        for button in (self.reconnect_button, self.remove_button, self.import_button):
            row.addWidget(button)
        row.addStretch(1)
        column.addLayout(row)

        form = QFormLayout()
        self.name_edit = QLineEdit()
        self.name_edit.setPlaceholderText(self.tr("files"))
        self.name_edit.setAccessibleName(self.tr("MCP server name"))
        self.kind_box = QComboBox()
        self.kind_box.addItems([self.tr("A command on this computer (stdio)"), self.tr("An address (HTTP)")])
        self.kind_box.setAccessibleName(self.tr("How QuantDesk reaches the server"))
        self.kind_box.currentIndexChanged.connect(self._on_kind_changed)
        self.command_edit = QLineEdit()
        self.command_edit.setPlaceholderText(self.tr("npx -y @modelcontextprotocol/server-filesystem ~/Documents"))
        self.command_edit.setAccessibleName(self.tr("Command"))
        self.url_edit = QLineEdit()
        self.url_edit.setPlaceholderText(self.tr("https://example.com/mcp"))
        self.url_edit.setAccessibleName(self.tr("Server address"))
        self.token_edit = QLineEdit()
        self.token_edit.setEchoMode(QLineEdit.EchoMode.Password)
        self.token_edit.setPlaceholderText(self.tr("optional bearer token, kept in the keychain"))
        self.token_edit.setAccessibleName(self.tr("Bearer token"))
        self.where = QStackedWidget()
        self.where.addWidget(self.command_edit)
        http = QWidget()
        http_row = QHBoxLayout(http)
        http_row.setContentsMargins(0, 0, 0, 0)
        http_row.addWidget(self.url_edit, 2)
        http_row.addWidget(self.token_edit, 1)
        self.where.addWidget(http)
        self.where.setMaximumHeight(self.command_edit.sizeHint().height() + 4)
        self.add_button = QPushButton(self.tr("Add server"))
        self.add_button.setAccessibleName(self.tr("Add the MCP server"))
        self.add_button.clicked.connect(self._on_add)
        form.addRow(self.tr("Name"), self.name_edit)
        form.addRow(self.tr("Kind"), self.kind_box)
        form.addRow(self.tr("Where"), self.where)
        column.addLayout(form)
        column.addWidget(self.add_button, 0, Qt.AlignmentFlag.AlignLeft)

        # A stdio server runs a program: its command line is shown in full and confirmed before its first start.
        self.confirm_box = QFrame()
        self.confirm_box.setObjectName("approvalCard")
        self.confirm_box.setAccessibleName(self.tr("Confirm the server's command"))
        confirm = QVBoxLayout(self.confirm_box)
        self.confirm_text = QLabel()
        self.confirm_text.setWordWrap(True)
        self.confirm_text.setTextFormat(Qt.TextFormat.PlainText)
        self.confirm_command = QLabel()
        self.confirm_command.setObjectName("toolArguments")
        self.confirm_command.setWordWrap(True)
        self.confirm_command.setTextFormat(Qt.TextFormat.PlainText)
        self.confirm_command.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.confirm_command.setAccessibleName(self.tr("The command, in full"))
        confirm_row = QHBoxLayout()
        self.start_button = QPushButton(self.tr("Start it"))
        self.start_button.setObjectName("primary")
        self.start_button.setAccessibleName(self.tr("Confirm the command and start the server"))
        self.start_button.clicked.connect(self._on_start_confirmed)
        self.cancel_button = QPushButton(self.tr("Not now"))
        self.cancel_button.setAccessibleName(self.tr("Do not start the server"))
        self.cancel_button.clicked.connect(self._on_start_cancelled)
        confirm_row.addWidget(self.start_button)
        confirm_row.addWidget(self.cancel_button)
        confirm_row.addStretch(1)
        confirm.addWidget(self.confirm_text)
        confirm.addWidget(self.confirm_command)
        confirm.addLayout(confirm_row)
        self.confirm_box.hide()
        column.addWidget(self.confirm_box)

        allowed_title = QLabel(self.tr("Always allowed"))
        allowed_title.setObjectName("cardTitle")
        column.addWidget(allowed_title)
        self.allowed = QListWidget()
        self.allowed.setAccessibleName(self.tr("Tools always allowed"))
        self.allowed.setMaximumHeight(90)
        column.addWidget(self.allowed)
        self.revoke_button = QPushButton(self.tr("Revoke"))
        self.revoke_button.setAccessibleName(self.tr("Revoke: ask again before this tool runs"))
        self.revoke_button.clicked.connect(self._on_revoke)
        column.addWidget(self.revoke_button, 0, Qt.AlignmentFlag.AlignLeft)
        self.status = QLabel()
        self.status.setWordWrap(True)
        self.status.setTextFormat(Qt.TextFormat.PlainText)
        self.status.setAccessibleName(self.tr("Tools status"))
        column.addWidget(self.status)
        self._update_buttons()

    # --- the app's tools, on first sight --------------------------------------------------------------------

    @property
    def tools(self) -> ChatTools:
        if self._tools is None:
            self._tools = self._provider()
            self._tools.servers_changed.connect(self.refresh)
            self._tools.problem.connect(self._say)
        return self._tools

    def showEvent(self, event: Any) -> None:  # noqa: N802 (Qt's name)
        super().showEvent(event)
        self.refresh()

    # --- what is shown ---------------------------------------------------------------------------------------

    @Slot()
    def refresh(self) -> None:
        tools = self.tools
        selected = self._selected()
        self.list.clear()
        for config in tools.configs():
            item = QListWidgetItem(f"{config.name} — {self._state(config)}")
            item.setData(NAME_ROLE, config.name)
            item.setToolTip(config.command_line())
            self.list.addItem(item)
            if config.name == selected:
                self.list.setCurrentItem(item)
        self.allowed.clear()
        for server, tool in tools.approvals.always():
            item = QListWidgetItem(self.tr("{tool} of {server}").format(tool=tool, server=server))
            item.setData(NAME_ROLE, (server, tool))
            self.allowed.addItem(item)
        self._show_tools()
        self._update_buttons()

    def _state(self, config: Any) -> str:
        if config.disabled:
            return self.tr("off")
        if config.needs_confirmation:
            return self.tr("not started: its command waits for your confirmation")
        if config.name in self.tools.connecting:
            return self.tr("connecting…")
        status = self.tools.status(config.name)
        if status is None:
            return self.tr("not connected")
        if status.state == "ready":
            return self.tr("connected · %n tool(s)", "", status.tools)
        if status.state == "failed":
            return self.tr("failed: {sentence}").format(sentence=status.sentence)
        return self.tr("not connected")

    def _selected(self) -> str | None:
        item = self.list.currentItem()
        return str(item.data(NAME_ROLE)) if item is not None else None

    def _config(self, name: str | None) -> Any:
        return next((c for c in self.tools.configs() if c.name == name), None)

    def _show_tools(self) -> None:
        name = self._selected()
        config = self._config(name)
        if config is None:
            self.server_tools.setText("")
            return
        specs = self.tools.toolbox.list_tools(config.name)
        if specs:
            lines = [f"{spec.name}: {(spec.description or spec.title).strip().splitlines()[0][:160]}"
                     if (spec.description or spec.title).strip() else spec.name for spec in specs]
            self.server_tools.setText("\n".join(lines))
        else:
            self.server_tools.setText(self.tr("No tools listed: the server is not connected."))
        if config.needs_confirmation and self._pending is None:
            self._ask_confirmation(config)

    def _update_buttons(self) -> None:
        has = self._selected() is not None
        self.remove_button.setEnabled(has)
        self.reconnect_button.setEnabled(has)
        self.revoke_button.setEnabled(self.allowed.count() > 0)

    @Slot(str)
    def _say(self, text: str) -> None:
        self.status.setText(text)

    # --- actions ---------------------------------------------------------------------------------------------

    @Slot()
    def _on_selected(self, *_: object) -> None:
        self._show_tools()
        self._update_buttons()

    @Slot(int)
    def _on_kind_changed(self, index: int) -> None:
        self.where.setCurrentIndex(index)

    @Slot()
    def _on_add(self) -> None:
        from app.mcp.config import McpConfigError, McpServerConfig

        name = self.name_edit.text().strip()
        try:
            if self.kind_box.currentIndex() == 0:
                words = shlex.split(self.command_edit.text())
                if not words:
                    raise McpConfigError("give the command that starts the server")
                config = McpServerConfig(name=name, command=words[0], args=words[1:])
                saved = self.tools.servers.save(config)
            else:
                config = McpServerConfig(name=name, url=self.url_edit.text().strip())
                token = self.token_edit.text().strip()
                saved = self.tools.servers.save(config, bearer_token=token or None)
        except (McpConfigError, ValueError) as exc:  # ValueError: shlex's unclosed quote
            self._say(str(exc))
            return
        self.name_edit.clear()
        self.command_edit.clear()
        self.url_edit.clear()
        self.token_edit.clear()
        self._say(self.tr("Added {name}.").format(name=saved.name))
        if saved.needs_confirmation:
            self._ask_confirmation(saved)
        else:
            self.tools.connect_server(saved)
        self.refresh()

    def _ask_confirmation(self, config: Any) -> None:
        self._pending = config
        self.confirm_text.setText(self.tr("“{name}” runs this program on your computer, with your permissions. "
                                          "Start it only if you trust it:").format(name=config.name))
        self.confirm_command.setText(config.command_line())
        self.confirm_box.show()
        self.start_button.setFocus()

    @Slot()
    def _on_start_confirmed(self) -> None:
        from app.mcp.config import McpConfigError

        config, self._pending = self._pending, None
        self.confirm_box.hide()
        if config is None:
            return
        try:
            confirmed = self.tools.servers.confirm(config.name)
        except McpConfigError as exc:
            self._say(str(exc))
            return
        self.tools.connect_server(confirmed)
        self.refresh()

    @Slot()
    def _on_start_cancelled(self) -> None:
        if self._pending is not None:
            self._say(self.tr("{name} is kept but not started; select it to confirm its command later.")
                      .format(name=self._pending.name))
        self._pending = None
        self.confirm_box.hide()

    @Slot()
    def _on_reconnect(self) -> None:
        config = self._config(self._selected())
        if config is None:
            return
        if config.needs_confirmation:
            self._ask_confirmation(config)
        else:
            self.tools.connect_server(config)

    @Slot()
    def _on_remove(self) -> None:
        from app.mcp.config import McpConfigError

        name = self._selected()
        if name is None:
            return
        try:
            self.tools.servers.remove(name)
        except McpConfigError as exc:
            self._say(str(exc))
            return
        self.tools.approvals.revoke(name)  # its tools are no longer always allowed
        self.tools.disconnect_server(name)
        if self._pending is not None and self._pending.name == name:
            self._on_start_cancelled()
        self._say(self.tr("Removed {name}.").format(name=name))
        self.refresh()

    @Slot()
    def _on_import_clicked(self) -> None:
        path, _ = QFileDialog.getOpenFileName(self, self.tr("Import MCP servers"), str(Path.home()),
                                              self.tr("MCP configuration (*.json)"))
        if path:
            self.import_file(path)

    def import_file(self, path: str | Path) -> None:
        from app.mcp.config import McpConfigError

        try:
            report = self.tools.servers.import_file(Path(path))
        except McpConfigError as exc:
            self._say(str(exc))
            return
        said = "; ".join(report.sentences()) or self.tr("nothing to import")
        self._say(self.tr("Imported from {file}: {report}. Select a server to confirm its command before it first "
                          "starts.").format(file=Path(path).name, report=said))
        self.refresh()

    @Slot()
    def _on_revoke(self) -> None:
        item = self.allowed.currentItem() or (self.allowed.item(0) if self.allowed.count() else None)
        if item is None:
            return
        server, tool = item.data(NAME_ROLE)
        self.tools.approvals.revoke(server, tool)
        self._say(self.tr("{tool} of {server} asks again before it runs.").format(tool=tool, server=server))
        self.refresh()
