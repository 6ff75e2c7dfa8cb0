"""The Qt desktop app. The only package that imports Qt (tests/test_import_boundaries.py keeps the rest honest).

Its modules lie in one folder per page of the window, each folder's ``__init__`` saying what it holds: ``chat/``,
``library/``, ``documents/``, ``hardware/``, ``lab/``, ``server/`` and ``settings/``; ``common/`` holds what every page
shares and imports no page (``tests/ui/test_page_folders.py``). At the top stay ``crash``, ``main``, ``platform_check``
and ``window``: the app's start and the window.

In detail (each module's job, read with docs/architecture.md's module map):

Start-up, the window: every QWidget; the only place that imports Qt. ``main`` is ``quantdesk`` with no arguments:
the application, the chat store and the window; the Chat's model pool is made by its first use
(``EngineBridge.over(main.chat_pool)``), the server when switched on, and the hardware probe (on its own thread),
the first-run check (``first_run``) and the documents' indexer (``MainWindow.start_documents``: only where a
collection has work) start after the first paint (``main.AfterFirstPaint``). ``window.MainWindow``: the sidebar and
the page table (``PAGES``, ``PAGE_TITLES``), each page built on its first visit (``MainWindow.page`` calls its
``_build_<name>``; ``window.pages[name]`` and ``window.chat``… build it too), so before the first paint only the
page it opens on is imported (``tests/ui/test_startup_imports.py`` holds it to that). ``platform_check``: can Qt
open a window here, asked by ``app/cli.py`` before QtGui is imported; ``crash``: errors nobody caught, logged and
said in words; ``translations``: the UI's languages (see Qt rules)

Off the GUI thread: ``background.BackgroundCall`` is the one way a page runs work off the GUI thread (results,
progress and cancel as queued signals; a runtime build's plan and progress too); the engine's work is not a page's:
``engine_bridge.EngineBridge`` keeps one worker thread that serves the Chat's loads and generations in order, and on
a model that decodes several replies together each chat's reply on a thread of its own, its events routed by request
id (Eject runs on a thread of its own; a chat's documents are retrieved there before its reply:
``retrieve.with_documents``,
the question embedded and the passages reranked through the same pool, said by ``retrieved`` before the tokens); the
Qt-free homes keep their own workers (the download queue's, whose progress the Downloads page forwards as signals;
the documents' ``Indexer``, owned by the window's ``documents_service.DocumentsService``, whose progress reaches the
Documents page and the Chat as a queued signal, the newest per collection; the server's ``ServerThread``, whose
request count the Server page polls)

Pages: one module a page: ``discover_page`` (its ``CardList`` of ``ModelCard``s, shared with the first run's
``first_run.FirstRunPage``: the welcome, a page of the window's stack outside the sidebar while offered,
``MainWindow.show_welcome``), ``downloads_page``, ``library_page``, ``chat_page``, ``hardware_page`` (its runtimes
in ``runtimes_panel``), ``lab_page``, ``server_page``, ``settings_page`` (remote connections in
``remote_connections``, MCP servers in ``tools_settings``, with the Chat's "Remote model…" picker; llama-server
preset files imported and exported through ``hub/preset_ini``). The Chat page (``chat_page``: its layout and the
request, under 450 lines) shows the Qt-free ``app/chats/session.ChatSession``; its parts beside it: ``chat_actions``
(the chat list's rename, delete and undo, export and settings; a bubble's edit, regenerate, versions and pin),
``chat_stream`` (each reply as the bridge sends it, routed to its own chat: tokens, cut, passages, its end or a tool
step, failures),
``chat_banner`` (the one notice line with Reload, Load anyway and Save now), ``chat_images`` (images for the next
message, checked first), ``chat_tool_cards`` (the page's side of its MCP tools: the cards and approvals on the
bubble, the reply going on after a step). It lists its chats in
``conversation_list.ConversationList`` (the side panel: search, new, the undo bar, the open chat's actions), loads
models through ``model_load.ModelLoadController`` (the estimate, the load, “Load anyway”, the pool's loads and
unloads in the model bar, ``model_bar``, whose ``ContextMeter`` shows the open chat's context used after its latest
reply, its "Decode together" field how many chats the model answers at once, and whose label says the chat
template the model is served with and where it came from where it is not the file's own, and the generic tool
format) and shows replies whose lifecycle and saving are ``reply_session.ReplySession``'s (one ``Reply`` a chat,
several at once); ``chat_bubble`` a message's bubble and its parts (a thinking model's thinking
in ``chat_bubble.ThinkingBlock`` above the answer, folded once the answer starts; a reply's tool calls as
``chat_bubble.ToolCardView``s under its text, each with its ``ApprovalCard`` while it waits; the overflow policy's
``CutMark``), ``chat_view`` the message view, the composer, its image strip and the stats strip;
``chat_tools.ChatTools`` the Chat's MCP tools (the servers connected on ``BackgroundCall`` threads through
``app/mcp``'s ToolBox, the tools a chat's model is given, and a reply's tool step: a card per call, the approval
asked in the card unless the tool is always allowed, each call on a worker of its own that Stop cancels, the results
saved with the reply as tool cards, then the generation goes on with them, up to a step limit: the step is
``app/mcp/loop.ToolStep``, the state machine ``quantdesk chat --tools`` drives too;
``tools_settings.ToolsPanel`` is Settings → Tools over the same ChatTools); ``chat_settings`` a chat's system
prompt, which servers' tools its model sees, sampling (each value's source beside it: the chat's own, the model's
preset, the model's recommendation, QuantDesk's default; only the chat's own are saved), thinking, JSON schema,
presets, the model's chat template (a local GGUF's: the rule's choice said with where it comes from, or a bundled
one, kept in the model's preset for its next load) and its overflow policy (the choices' names in
``widgets.OVERFLOW_CHOICES``, shared with the Settings page's default); the bridge's worker fits the prompt to the
context by the chat's policy (``app/engine/overflow.py``) before the reply and says a cut (``EngineBridge.cut``),
which the page keeps with the reply and ``chat_bubble.CutMark`` marks on it (the compact note folded behind the line);
a bubble's Pin / Unpin (its "Pinned" mark, ``MessageBubble.set_pinned``) saved at once and handed to the rule as the
pinned messages' engine-turn indices, and "Save as this model's defaults" (the model's preset, ``hub/presets``, with
the model bar's load settings). The Lab page's parts: the variant picker ``lab_variants``, the results table
``lab_table``, the charts ``lab_chart`` (QPainter), past results ``lab_history``, "From uploaders…"
``lab_uploaders``

The look: ``theme`` holds the design tokens (type scale, spacing, radii, one accent) and the application style sheet
built from them for the palette in use (in code: no style files); pages name their labels and frames for it
(``pageTitle``, ``card``, ``chip``, ``badge_good``…) and take text sizes from its type scale; what a sheet does not
reach they colour from the palette's roles (muted table cells, the charts, the Server page's switch), with a few
fixed colours chosen to read on both themes (Discover's best pick, the Library's update badge, the charts' series),
and give some fields fixed widths. ``icons`` the navigation's and actions' icons (qtawesome glyphs painted in the
palette's colour); ``focus_ring`` a focus ring that can be seen; ``code_highlight`` the chat's code blocks in
pygments' light or dark style; ``formatting`` numbers, sizes, rates and dates in the user's language; ``widgets``
the helpers pages share (page titles, the empty state, lists that elide long names, the memory bar, the undo bar,
``Flow``: a row that wraps its widgets onto more lines rather than cut them, as the model bar's controls and
Discover's chips do). Every page fits 1024×700 to 1920×1080 in both themes and in German:
``tests/ui/test_layout_fits.py`` with the rules in ``tests/ui/layout_check.py``

Documents: ``documents_page`` the Documents page (collections, add a folder or files, the embedding model and
re-embedding, progress with time left, pause and resume, remove, the report); ``documents_service`` the window's one
``DocumentStore`` and ``Indexer`` (made on first use, started after the first paint only when a collection has work;
progress to the GUI as a queued signal); ``chat_documents`` the composer's Documents button (a chat's own collection
for attached or dropped files, "Use a collection…"), the attached collections as chips, the citations kept with the
reply; ``citations`` the reply's numbered Sources chips and the side panel that opens a cited passage (the ``[n]``
marks in the text are links to it); retrieval runs on the engine bridge's worker before the reply
(``engine_bridge``, ``retrieve.with_documents``)
"""
