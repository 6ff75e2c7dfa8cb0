<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<TS version="2.1" language="de_DE">
<context>
    <name>AttachmentStrip</name>
    <message>
        <source>Attached images</source>
        <translation>Angehängte Bilder</translation>
    </message>
    <message>
        <source>Remove</source>
        <translation>Entfernen</translation>
    </message>
    <message>
        <source>Remove {name}</source>
        <translation>{name} entfernen</translation>
    </message>
</context>
<context>
    <name>Composer</name>
    <message>
        <source>Message the model — Enter sends, Shift+Enter for a new line</source>
        <translation>Nachricht an das Modell – Eingabe sendet, Umschalt+Eingabe für eine neue Zeile</translation>
    </message>
    <message>
        <source>Message input</source>
        <translation>Nachrichteneingabe</translation>
    </message>
    <message>
        <source>pasted image</source>
        <translation>eingefügtes Bild</translation>
    </message>
</context>
<context>
    <name>DownloadRow</name>
    <message>
        <source>Progress of {label}</source>
        <translation>Fortschritt von {label}</translation>
    </message>
    <message>
        <source>Pause</source>
        <translation>Pausieren</translation>
    </message>
    <message>
        <source>Resume</source>
        <translation>Fortsetzen</translation>
    </message>
    <message>
        <source>Cancel</source>
        <translation>Abbrechen</translation>
    </message>
    <message>
        <source>Retry</source>
        <translation>Erneut versuchen</translation>
    </message>
    <message>
        <source>Open folder</source>
        <translation>Ordner öffnen</translation>
    </message>
    <message>
        <source>Chat with it</source>
        <translation>Damit chatten</translation>
    </message>
    <message>
        <source>{text} {label}</source>
        <translation>{text}: {label}</translation>
    </message>
</context>
<context>
    <name>DownloadsPage</name>
    <message>
        <source>Downloads</source>
        <translation>Downloads</translation>
    </message>
    <message>
        <source>&lt;h1&gt;Downloads&lt;/h1&gt;</source>
        <translation>&lt;h1&gt;Downloads&lt;/h1&gt;</translation>
    </message>
    <message>
        <source>Nothing is downloading. Pick a model on the Discover page and choose Download.</source>
        <translation>Es wird nichts heruntergeladen. Wählen Sie auf der Seite „Entdecken“ ein Modell und dann „Herunterladen“.</translation>
    </message>
</context>
<context>
    <name>HardwarePage</name>
    <message>
        <source>Hardware</source>
        <translation>Hardware</translation>
    </message>
    <message>
        <source>Detecting this machine…</source>
        <translation>Dieser Rechner wird erkannt …</translation>
    </message>
    <message>
        <source>&lt;h1&gt;Hardware&lt;/h1&gt;</source>
        <translation>&lt;h1&gt;Hardware&lt;/h1&gt;</translation>
    </message>
    <message>
        <source>{cores} cores / {threads} threads</source>
        <translation>{cores} Kerne / {threads} Threads</translation>
    </message>
    <message>
        <source>Summary</source>
        <translation>Übersicht</translation>
    </message>
    <message>
        <source>Memory</source>
        <translation>Speicher</translation>
    </message>
    <message>
        <source>System RAM</source>
        <translation>Arbeitsspeicher</translation>
    </message>
    <message>
        <source>{memory} available</source>
        <translation>{memory} verfügbar</translation>
    </message>
    <message>
        <source>No supported GPU was found: models run on the CPU, from system RAM.</source>
        <translation>Keine unterstützte GPU gefunden: Modelle laufen auf der CPU, aus dem Arbeitsspeicher.</translation>
    </message>
    <message>
        <source> on {disk_path}</source>
        <translation> auf {disk_path}</translation>
    </message>
    <message>
        <source>Disk for models: {free} free{where}</source>
        <translation>Speicherplatz für Modelle: {free} frei{where}</translation>
    </message>
    <message>
        <source>CPU features</source>
        <translation>CPU-Funktionen</translation>
    </message>
    <message>
        <source>No CPU feature flags were found.</source>
        <translation>Keine CPU-Funktionsmerkmale gefunden.</translation>
    </message>
    <message>
        <source>Measured memory bandwidth: {bandwidth} GB/s</source>
        <translation>Gemessene Speicherbandbreite: {bandwidth} GB/s</translation>
    </message>
    <message>
        <source>Inference engines</source>
        <translation>Inferenz-Engines</translation>
    </message>
    <message>
        <source>Worth knowing</source>
        <translation>Gut zu wissen</translation>
    </message>
    <message>
        <source>Probe details: </source>
        <translation>Details der Erkennung: </translation>
    </message>
</context>
<context>
    <name>MainWindow</name>
    <message>
        <source>Discover</source>
        <translation>Entdecken</translation>
    </message>
    <message>
        <source>Downloads</source>
        <translation>Downloads</translation>
    </message>
    <message>
        <source>Library</source>
        <translation>Bibliothek</translation>
    </message>
    <message>
        <source>Chat</source>
        <translation>Chat</translation>
    </message>
    <message>
        <source>Hardware</source>
        <translation>Hardware</translation>
    </message>
    <message>
        <source>Lab</source>
        <translation>Labor</translation>
    </message>
    <message>
        <source>Server</source>
        <translation>Server</translation>
    </message>
    <message>
        <source>Settings</source>
        <translation>Einstellungen</translation>
    </message>
    <message>
        <source>Navigation</source>
        <translation>Navigation</translation>
    </message>
    <message>
        <source>{page} page</source>
        <translation>Seite {page}</translation>
    </message>
    <message>
        <source>Hardware detection failed: {error!r}</source>
        <translation>Die Hardware-Erkennung ist fehlgeschlagen: {error!r}</translation>
    </message>
</context>
<context>
    <name>MessageBubble</name>
    <message>
        <source>You</source>
        <translation>Sie</translation>
    </message>
    <message>
        <source>Assistant</source>
        <translation>Assistent</translation>
    </message>
    <message>
        <source>System</source>
        <translation>System</translation>
    </message>
    <message>
        <source>{role} message</source>
        <translation>Nachricht: {role}</translation>
    </message>
    <message>
        <source>Versions of this message</source>
        <translation>Versionen dieser Nachricht</translation>
    </message>
    <message>
        <source>Show the previous version of this message and what followed it</source>
        <translation>Die vorige Version dieser Nachricht und was darauf folgte anzeigen</translation>
    </message>
    <message>
        <source>Previous version</source>
        <translation>Vorige Version</translation>
    </message>
    <message>
        <source>Version</source>
        <translation>Version</translation>
    </message>
    <message>
        <source>Show the next version of this message and what followed it</source>
        <translation>Die nächste Version dieser Nachricht und was darauf folgte anzeigen</translation>
    </message>
    <message>
        <source>Next version</source>
        <translation>Nächste Version</translation>
    </message>
    <message>
        <source>Delete version</source>
        <translation>Version löschen</translation>
    </message>
    <message>
        <source>Delete this version of the message and everything that followed it</source>
        <translation>Diese Version der Nachricht und alles, was darauf folgte, löschen</translation>
    </message>
    <message>
        <source>Delete this version</source>
        <translation>Diese Version löschen</translation>
    </message>
    <message>
        <source>Copy</source>
        <translation>Kopieren</translation>
    </message>
    <message>
        <source>Copy this message</source>
        <translation>Diese Nachricht kopieren</translation>
    </message>
    <message>
        <source>Copy message</source>
        <translation>Nachricht kopieren</translation>
    </message>
    <message>
        <source>Edit</source>
        <translation>Bearbeiten</translation>
    </message>
    <message>
        <source>Edit and resend from here (the old version stays)</source>
        <translation>Bearbeiten und ab hier neu senden (die alte Version bleibt erhalten)</translation>
    </message>
    <message>
        <source>Edit message</source>
        <translation>Nachricht bearbeiten</translation>
    </message>
    <message>
        <source>Regenerate</source>
        <translation>Neu erzeugen</translation>
    </message>
    <message>
        <source>Write this reply again</source>
        <translation>Diese Antwort neu schreiben lassen</translation>
    </message>
    <message>
        <source>Regenerate message</source>
        <translation>Nachricht neu erzeugen</translation>
    </message>
    <message>
        <source>Image {n} of {len}: {width} × {height}</source>
        <translation>Bild {n} von {len}: {width} × {height}</translation>
    </message>
    <message>
        <source>{role} message text</source>
        <translation>Nachrichtentext: {role}</translation>
    </message>
    <message>
        <source>writing…</source>
        <translation>schreibt …</translation>
    </message>
    <message>
        <source>interrupted — the reply was cut off</source>
        <translation>unterbrochen – die Antwort wurde abgeschnitten</translation>
    </message>
    <message>
        <source>Version {index} of {count}</source>
        <translation>Version {index} von {count}</translation>
    </message>
</context>
<context>
    <name>MessageView</name>
    <message>
        <source>Messages</source>
        <translation>Nachrichten</translation>
    </message>
</context>
<context>
    <name>SettingsPage</name>
    <message>
        <source>Follow the system</source>
        <translation>Wie das System</translation>
    </message>
    <message>
        <source>Light</source>
        <translation>Hell</translation>
    </message>
    <message>
        <source>Dark</source>
        <translation>Dunkel</translation>
    </message>
    <message>
        <source>Settings</source>
        <translation>Einstellungen</translation>
    </message>
    <message>
        <source>&lt;h1&gt;Settings&lt;/h1&gt;</source>
        <translation>&lt;h1&gt;Einstellungen&lt;/h1&gt;</translation>
    </message>
    <message>
        <source>Models folder</source>
        <translation>Modellordner</translation>
    </message>
    <message>
        <source>Change…</source>
        <translation>Ändern …</translation>
    </message>
    <message>
        <source>Change the models folder</source>
        <translation>Den Modellordner ändern</translation>
    </message>
    <message>
        <source>Use default</source>
        <translation>Standard verwenden</translation>
    </message>
    <message>
        <source>Use the default models folder</source>
        <translation>Den Standard-Modellordner verwenden</translation>
    </message>
    <message>
        <source>Hugging Face token status</source>
        <translation>Status des Hugging-Face-Tokens</translation>
    </message>
    <message>
        <source>hf_… (for gated and private models)</source>
        <translation>hf_… (für zugangsbeschränkte und private Modelle)</translation>
    </message>
    <message>
        <source>Hugging Face token</source>
        <translation>Hugging-Face-Token</translation>
    </message>
    <message>
        <source>Save token</source>
        <translation>Token speichern</translation>
    </message>
    <message>
        <source>Save the Hugging Face token</source>
        <translation>Das Hugging-Face-Token speichern</translation>
    </message>
    <message>
        <source>Remove</source>
        <translation>Entfernen</translation>
    </message>
    <message>
        <source>Remove the stored Hugging Face token</source>
        <translation>Das gespeicherte Hugging-Face-Token entfernen</translation>
    </message>
    <message>
        <source>Offline mode: never contact the Hugging Face Hub</source>
        <translation>Offline-Modus: nie mit dem Hugging Face Hub verbinden</translation>
    </message>
    <message>
        <source>Offline mode</source>
        <translation>Offline-Modus</translation>
    </message>
    <message>
        <source>Network</source>
        <translation>Netzwerk</translation>
    </message>
    <message>
        <source>Check for model updates</source>
        <translation>Nach Modell-Updates suchen</translation>
    </message>
    <message>
        <source>Updates</source>
        <translation>Updates</translation>
    </message>
    <message>
        <source> tokens</source>
        <translation> Tokens</translation>
    </message>
    <message>
        <source>Default context length</source>
        <translation>Standard-Kontextlänge</translation>
    </message>
    <message>
        <source>Models load with this context, or the largest that fits this machine</source>
        <translation>Modelle laden mit diesem Kontext oder dem größten, der auf diesen Rechner passt</translation>
    </message>
    <message>
        <source>Default context</source>
        <translation>Standard-Kontext</translation>
    </message>
    <message>
        <source>Theme</source>
        <translation>Design</translation>
    </message>
    <message>
        <source>Language</source>
        <translation>Sprache</translation>
    </message>
    <message>
        <source>Remote engines</source>
        <translation>Entfernte Engines</translation>
    </message>
    <message>
        <source>Settings status</source>
        <translation>Status der Einstellungen</translation>
    </message>
    <message>
        <source>Set by QUANTDESK_MODELS_DIR in the environment, which wins over this setting.</source>
        <translation>Durch QUANTDESK_MODELS_DIR in der Umgebung festgelegt; das hat Vorrang vor dieser Einstellung.</translation>
    </message>
    <message>
        <source>New downloads and imports go here. Models already in another folder stay there.</source>
        <translation>Neue Downloads und Importe landen hier. Modelle in einem anderen Ordner bleiben dort.</translation>
    </message>
    <message>
        <source>HF_HUB_OFFLINE is set in the environment, so offline mode stays on.</source>
        <translation>HF_HUB_OFFLINE ist in der Umgebung gesetzt, daher bleibt der Offline-Modus an.</translation>
    </message>
    <message>
        <source>Search and downloads are off; the library and chat work as usual.</source>
        <translation>Suche und Downloads sind aus; Bibliothek und Chat funktionieren wie gewohnt.</translation>
    </message>
    <message>
        <source>Once a day at most, and when you ask: the Hub is sent the name and branch of each repo you downloaded from (and a changed GGUF&apos;s header is read). Never in offline mode.</source>
        <translation>Höchstens einmal am Tag und wenn Sie es anfordern: Der Hub erhält Namen und Branch jedes Repos, aus dem Sie heruntergeladen haben (und der Header einer geänderten GGUF-Datei wird gelesen). Nie im Offline-Modus.</translation>
    </message>
    <message>
        <source>Off: neither the app nor the quantdesk command asks the Hub about updates.</source>
        <translation>Aus: Weder die App noch der Befehl quantdesk fragt den Hub nach Updates.</translation>
    </message>
    <message>
        <source>In use: {masked}</source>
        <translation>In Verwendung: {masked}</translation>
    </message>
    <message>
        <source> (from {from_env})</source>
        <translation> (aus {from_env})</translation>
    </message>
    <message>
        <source>No token: public models only.</source>
        <translation>Kein Token: nur öffentliche Modelle.</translation>
    </message>
    <message>
        <source>{variable} in the environment wins over a stored token.</source>
        <translation>{variable} in der Umgebung hat Vorrang vor einem gespeicherten Token.</translation>
    </message>
    <message>
        <source>Stored where huggingface_hub&apos;s login keeps it ({path}), readable by you only.</source>
        <translation>Gespeichert, wo die Anmeldung von huggingface_hub es ablegt ({path}), nur für Sie lesbar.</translation>
    </message>
    <message>
        <source>Could not save the settings: {reason} ({path}).</source>
        <translation>Die Einstellungen konnten nicht gespeichert werden: {reason} ({path}).</translation>
    </message>
    <message>
        <source>Saved.</source>
        <translation>Gespeichert.</translation>
    </message>
    <message>
        <source>{target} cannot hold models: {reason}. The models folder is unchanged.</source>
        <translation>{target} kann keine Modelle aufnehmen: {reason}. Der Modellordner bleibt unverändert.</translation>
    </message>
    <message>
        <source>Paste a token first (from huggingface.co/settings/tokens).</source>
        <translation>Fügen Sie zuerst ein Token ein (von huggingface.co/settings/tokens).</translation>
    </message>
    <message>
        <source>That does not look like a Hugging Face token: it has spaces or unusual characters. Nothing was saved.</source>
        <translation>Das sieht nicht nach einem Hugging-Face-Token aus: Es enthält Leerzeichen oder ungewöhnliche Zeichen. Nichts wurde gespeichert.</translation>
    </message>
    <message>
        <source>Could not store the token: {reason}. Your typing is kept.</source>
        <translation>Das Token konnte nicht gespeichert werden: {reason}. Ihre Eingabe bleibt erhalten.</translation>
    </message>
    <message>
        <source>Token saved.</source>
        <translation>Token gespeichert.</translation>
    </message>
    <message>
        <source>Token removed.</source>
        <translation>Token entfernt.</translation>
    </message>
    <message>
        <source>{variable}={value} in the environment wins over this setting.</source>
        <translation>{variable}={value} in der Umgebung hat Vorrang vor dieser Einstellung.</translation>
    </message>
    <message>
        <source>Takes effect when QuantDesk starts again.</source>
        <translation>Wird beim nächsten Start von QuantDesk wirksam.</translation>
    </message>
    <message>
        <source>Menus, buttons and messages of the app; models answer in the language you write in.</source>
        <translation>Menüs, Schaltflächen und Meldungen der App; Modelle antworten in der Sprache, in der Sie schreiben.</translation>
    </message>
</context>
<context>
    <name>StatsStrip</name>
    <message>
        <source>Generation statistics</source>
        <translation>Statistik der Generierung</translation>
    </message>
    <message>
        <source>Figures of</source>
        <translation>Werte von</translation>
    </message>
    <message>
        <source>Speed</source>
        <translation>Tempo</translation>
    </message>
    <message>
        <source>Speed over time</source>
        <translation>Tempo im Verlauf</translation>
    </message>
    <message>
        <source>First token</source>
        <translation>Erstes Token</translation>
    </message>
    <message>
        <source>Prompt</source>
        <translation>Prompt</translation>
    </message>
    <message>
        <source>Tokens</source>
        <translation>Tokens</translation>
    </message>
    <message>
        <source>Memory</source>
        <translation>Speicher</translation>
    </message>
    <message numerus="yes">
        <source>after %n server request(s)</source>
        <translation>
            <numerusform>nach %n Server-Anfrage</numerusform>
            <numerusform>nach %n Server-Anfragen</numerusform>
        </translation>
    </message>
    <message>
        <source>peak {memory}</source>
        <translation>Spitze {memory}</translation>
    </message>
    <message>
        <source>on the server</source>
        <translation>auf dem Server</translation>
    </message>
    <message>
        <source>{speed} · server {server_speed}</source>
        <translation>{speed} · Server {server_speed}</translation>
    </message>
    <message>
        <source>Measured here, as the tokens arrive · the server&apos;s own figure</source>
        <translation>Hier gemessen, während die Tokens eintreffen · der eigene Wert des Servers</translation>
    </message>
</context>
<context>
    <name>chat_view</name>
    <message>
        <source>(image missing)</source>
        <translation>(Bild fehlt)</translation>
    </message>
</context>
<context>
    <name>downloads_page</name>
    <message>
        <source>Waiting</source>
        <translation>Wartet</translation>
    </message>
    <message>
        <source>Looking up the files</source>
        <translation>Dateien werden ermittelt</translation>
    </message>
    <message>
        <source>Downloading</source>
        <translation>Wird heruntergeladen</translation>
    </message>
    <message>
        <source>Retrying</source>
        <translation>Neuer Versuch</translation>
    </message>
    <message>
        <source>Checking</source>
        <translation>Wird geprüft</translation>
    </message>
    <message>
        <source>Installing</source>
        <translation>Wird installiert</translation>
    </message>
    <message>
        <source>Finished</source>
        <translation>Fertig</translation>
    </message>
    <message>
        <source>Paused</source>
        <translation>Pausiert</translation>
    </message>
    <message>
        <source>Failed</source>
        <translation>Fehlgeschlagen</translation>
    </message>
    <message>
        <source>Cancelled</source>
        <translation>Abgebrochen</translation>
    </message>
    <message>
        <source>{seconds} s left</source>
        <translation>noch {seconds} s</translation>
    </message>
    <message>
        <source>{minutes} min left</source>
        <translation>noch {minutes} min</translation>
    </message>
    <message>
        <source>{hours} h left</source>
        <translation>noch {hours} h</translation>
    </message>
    <message>
        <source>Saved to {path}</source>
        <translation>Gespeichert unter {path}</translation>
    </message>
    <message>
        <source>The download failed.</source>
        <translation>Der Download ist fehlgeschlagen.</translation>
    </message>
    <message>
        <source>Cancelled; the partial files were deleted.</source>
        <translation>Abgebrochen; die unvollständigen Dateien wurden gelöscht.</translation>
    </message>
    <message>
        <source>{done} of {total}</source>
        <translation>{done} von {total}</translation>
    </message>
    <message>
        <source>{amount} kept. </source>
        <translation>{amount} behalten. </translation>
    </message>
    <message>
        <source>Resume continues where it stopped.</source>
        <translation>„Fortsetzen“ macht dort weiter, wo es aufgehört hat.</translation>
    </message>
    <message>
        <source>Waiting for the download before it to finish.</source>
        <translation>Wartet, bis der vorherige Download fertig ist.</translation>
    </message>
</context>
<context>
    <name>formatting</name>
    <message>
        <source>{value} %</source>
        <translation>{value} %</translation>
    </message>
    <message>
        <source>{value} tok/s</source>
        <translation>{value} Tok./s</translation>
    </message>
    <message>
        <source>— tok/s</source>
        <translation>– Tok./s</translation>
    </message>
    <message>
        <source>unknown</source>
        <translation>unbekannt</translation>
    </message>
    <message>
        <source>{count} tokens</source>
        <translation>{count} Tokens</translation>
    </message>
    <message>
        <source>server says {speed}</source>
        <translation>laut Server {speed}</translation>
    </message>
    <message>
        <source>first token {time}</source>
        <translation>erstes Token {time}</translation>
    </message>
    <message>
        <source>prompt {speed}</source>
        <translation>Prompt {speed}</translation>
    </message>
    <message>
        <source>stopped</source>
        <translation>gestoppt</translation>
    </message>
    <message>
        <source>hit max tokens</source>
        <translation>Token-Grenze erreicht</translation>
    </message>
    <message>
        <source>Copy code</source>
        <translation>Code kopieren</translation>
    </message>
    <message>
        <source>1 layer</source>
        <translation>1 Schicht</translation>
    </message>
    <message>
        <source>{count} layers</source>
        <translation>{count} Schichten</translation>
    </message>
</context>
<context>
    <name>hardware_page</name>
    <message>
        <source>unified memory</source>
        <translation>gemeinsamer Speicher</translation>
    </message>
    <message>
        <source>GPU may use up to {memory}</source>
        <translation>GPU darf bis zu {memory} nutzen</translation>
    </message>
    <message>
        <source>compute {compute_capability}</source>
        <translation>Compute {compute_capability}</translation>
    </message>
    <message>
        <source>driver {driver}</source>
        <translation>Treiber {driver}</translation>
    </message>
</context>
</TS>
