<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<TS version="2.1" language="de_DE">
<context>
    <name>ApprovalCard</name>
    <message>
        <source>Approve the tool call {name}</source>
        <translation>Den Tool-Aufruf {name} freigeben</translation>
    </message>
    <message>
        <source>Run the tool “{name}” of the server “{server}” with these arguments?</source>
        <translation>Das Tool „{name}“ des Servers „{server}“ mit diesen Argumenten ausführen?</translation>
    </message>
    <message>
        <source>What the tool says it does</source>
        <translation>Was das Tool nach eigener Angabe tut</translation>
    </message>
    <message>
        <source>Allow once</source>
        <translation>Einmal erlauben</translation>
    </message>
    <message>
        <source>Run this call; ask again next time</source>
        <translation>Diesen Aufruf ausführen; beim nächsten Mal wieder fragen</translation>
    </message>
    <message>
        <source>Always allow this tool</source>
        <translation>Dieses Tool immer erlauben</translation>
    </message>
    <message>
        <source>Run this call and later calls of this tool without asking (Settings → Tools can revoke it)</source>
        <translation>Diesen und spätere Aufrufe dieses Tools ohne Nachfrage ausführen (unter Einstellungen → Tools widerrufbar)</translation>
    </message>
    <message>
        <source>Deny</source>
        <translation>Ablehnen</translation>
    </message>
    <message>
        <source>Do not run it; the model is told you denied it</source>
        <translation>Nicht ausführen; das Modell erfährt, dass Sie abgelehnt haben</translation>
    </message>
    <message>
        <source>{answer}: {name}</source>
        <translation>{answer}: {name}</translation>
    </message>
</context>
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
    <name>ChatActions</name>
    <message>
        <source>Rename chat</source>
        <translation>Chat umbenennen</translation>
    </message>
    <message>
        <source>New name:</source>
        <translation>Neuer Name:</translation>
    </message>
    <message>
        <source>Chat “{title}” deleted</source>
        <translation>Chat „{title}“ gelöscht</translation>
    </message>
    <message>
        <source>Export chat</source>
        <translation>Chat exportieren</translation>
    </message>
    <message>
        <source>Markdown (*.md);;JSON (*.json)</source>
        <translation>Markdown (*.md);;JSON (*.json)</translation>
    </message>
    <message>
        <source>Message pinned: it is always sent to the model.</source>
        <translation>Nachricht angeheftet: Sie wird immer an das Modell gesendet.</translation>
    </message>
    <message>
        <source>Message unpinned.</source>
        <translation>Nachricht gelöst.</translation>
    </message>
</context>
<context>
    <name>ChatBanner</name>
    <message>
        <source>Notice</source>
        <translation>Hinweis</translation>
    </message>
    <message>
        <source>Reload model</source>
        <translation>Modell neu laden</translation>
    </message>
    <message>
        <source>Save now</source>
        <translation>Jetzt speichern</translation>
    </message>
    <message>
        <source>Save the reply now</source>
        <translation>Die Antwort jetzt speichern</translation>
    </message>
    <message>
        <source>Try again to save the reply that is not saved yet</source>
        <translation>Erneut versuchen, die noch nicht gespeicherte Antwort zu speichern</translation>
    </message>
    <message>
        <source>Load anyway</source>
        <translation>Trotzdem laden</translation>
    </message>
    <message>
        <source>Load the model anyway</source>
        <translation>Das Modell trotzdem laden</translation>
    </message>
    <message>
        <source>Load it past what the fit check counts as free on this machine</source>
        <translation>Über das hinaus laden, was die Passprüfung auf diesem Rechner als frei zählt</translation>
    </message>
    <message>
        <source>{message}. The reply is shown here but is not saved yet: {hint}, then click “Save now” (QuantDesk also tries again every few seconds).</source>
        <translation>{message}. Die Antwort wird hier angezeigt, ist aber noch nicht gespeichert: {hint}, dann klicken Sie auf „Jetzt speichern“ (QuantDesk versucht es auch alle paar Sekunden erneut).</translation>
    </message>
</context>
<context>
    <name>ChatDocuments</name>
    <message>
        <source>Documents</source>
        <translation>Dokumente</translation>
    </message>
    <message>
        <source>Documents for this chat</source>
        <translation>Dokumente für diesen Chat</translation>
    </message>
    <message>
        <source>Attach files or collections: each question searches them and the reply cites the passages it used. Nothing leaves this computer.</source>
        <translation>Dateien oder Sammlungen anhängen: Jede Frage durchsucht sie, und die Antwort nennt die verwendeten Stellen. Nichts verlässt diesen Computer.</translation>
    </message>
    <message>
        <source>Attach files…</source>
        <translation>Dateien anhängen…</translation>
    </message>
    <message>
        <source>Use a collection…</source>
        <translation>Sammlung verwenden…</translation>
    </message>
    <message>
        <source>This chat&apos;s files</source>
        <translation>Dateien dieses Chats</translation>
    </message>
    <message numerus="yes">
        <source>This chat&apos;s files (%n)</source>
        <translation>
            <numerusform>Dateien dieses Chats (%n)</numerusform>
            <numerusform>Dateien dieses Chats (%n)</numerusform>
        </translation>
    </message>
    <message>
        <source>{name} detached from this chat.</source>
        <translation>{name} ist nicht mehr an diesen Chat angehängt.</translation>
    </message>
    <message>
        <source>Attach files</source>
        <translation>Dateien anhängen</translation>
    </message>
    <message>
        <source>Documents ({patterns})</source>
        <translation>Dokumente ({patterns})</translation>
    </message>
    <message numerus="yes">
        <source>%n file(s)</source>
        <translation>
            <numerusform>%n Datei</numerusform>
            <numerusform>%n Dateien</numerusform>
        </translation>
    </message>
    <message>
        <source>There are no collections yet: add a folder on the Documents page, or attach files to this chat.</source>
        <translation>Es gibt noch keine Sammlungen: Fügen Sie auf der Seite Dokumente einen Ordner hinzu, oder hängen Sie Dateien an diesen Chat an.</translation>
    </message>
</context>
<context>
    <name>ChatImages</name>
    <message>
        <source>Attach images</source>
        <translation>Bilder anhängen</translation>
    </message>
    <message>
        <source>Images ({patterns})</source>
        <translation>Bilder ({patterns})</translation>
    </message>
    <message>
        <source>Cannot read the image {name}: {reason}.</source>
        <translation>Das Bild {name} kann nicht gelesen werden: {reason}.</translation>
    </message>
    <message>
        <source>the model</source>
        <translation>das Modell</translation>
    </message>
    <message>
        <source>{name} does not see images: it is a text-only model, or its vision projector (an mmproj GGUF file) is not beside it. Load a vision model to send images; your message stays here.</source>
        <translation>{name} versteht keine Bilder: Es ist ein reines Textmodell, oder sein Vision-Projektor (eine mmproj-GGUF-Datei) liegt nicht daneben. Laden Sie ein Vision-Modell, um Bilder zu senden; Ihre Nachricht bleibt hier.</translation>
    </message>
    <message>
        <source>image {n} ({width} × {height})</source>
        <translation>Bild {n} ({width} × {height})</translation>
    </message>
</context>
<context>
    <name>ChatPage</name>
    <message>
        <source>Send (Enter)</source>
        <translation>Senden (Eingabe)</translation>
    </message>
    <message>
        <source>No model loaded</source>
        <translation>Kein Modell geladen</translation>
    </message>
    <message>
        <source>Load a model you have with “Load model…” above, or find one that fits this machine and download it.</source>
        <translation>Laden Sie oben mit „Modell laden …“ ein Modell, das Sie haben, oder finden Sie eines, das auf diesen Rechner passt, und laden Sie es herunter.</translation>
    </message>
    <message>
        <source>Find a model</source>
        <translation>Modell finden</translation>
    </message>
    <message>
        <source>Image…</source>
        <translation>Bild …</translation>
    </message>
    <message>
        <source>Attach an image</source>
        <translation>Ein Bild anhängen</translation>
    </message>
    <message>
        <source>Attach a PNG, JPEG or WebP image (or paste one, or drop it on the message box); the model must see images</source>
        <translation>Ein PNG-, JPEG- oder WebP-Bild anhängen (oder einfügen oder auf das Nachrichtenfeld ziehen); das Modell muss Bilder verstehen</translation>
    </message>
    <message>
        <source>Send</source>
        <translation>Senden</translation>
    </message>
    <message>
        <source>Send message</source>
        <translation>Nachricht senden</translation>
    </message>
    <message>
        <source>Stop</source>
        <translation>Stopp</translation>
    </message>
    <message>
        <source>Stop the reply</source>
        <translation>Die Antwort anhalten</translation>
    </message>
    <message>
        <source>Stop the reply (Esc)</source>
        <translation>Die Antwort anhalten (Esc)</translation>
    </message>
    <message>
        <source>{busy_reason} Your message stays here until then.</source>
        <translation>{busy_reason} Ihre Nachricht bleibt bis dahin hier.</translation>
    </message>
    <message>
        <source>Load a model first: choose a GGUF file with “Load model…”.</source>
        <translation>Laden Sie zuerst ein Modell: Wählen Sie eine GGUF-Datei mit „Modell laden …“.</translation>
    </message>
    <message>
        <source>Your message is not sent yet: it stays in the box below.</source>
        <translation>Ihre Nachricht ist noch nicht gesendet: Sie bleibt im Feld unten.</translation>
    </message>
    <message>
        <source>Image</source>
        <translation>Bild</translation>
    </message>
    <message>
        <source>{message}. It stays in the box below: {hint}, then send it again.</source>
        <translation>{message}. Sie bleibt im Feld unten: {hint}, dann senden Sie sie erneut.</translation>
    </message>
    <message>
        <source>{message}. Your message stays in the box below.</source>
        <translation>{message}. Ihre Nachricht bleibt im Feld unten.</translation>
    </message>
    <message>
        <source>Reply stopped during a tool call.</source>
        <translation>Antwort während eines Tool-Aufrufs angehalten.</translation>
    </message>
    <message numerus="yes">
        <source>%n replies are being written, as many as this model writes at once: wait for one to finish, or stop one, to send here.</source>
        <translation>
            <numerusform>%n Antwort wird geschrieben, so viele, wie dieses Modell gleichzeitig schreibt: Warte, bis sie fertig ist, oder stoppe sie, um hier zu senden.</numerusform>
            <numerusform>%n Antworten werden geschrieben, so viele, wie dieses Modell gleichzeitig schreibt: Warte, bis eine fertig ist, oder stoppe eine, um hier zu senden.</numerusform>
        </translation>
    </message>
    <message>
        <source>another chat</source>
        <translation>einem anderen Chat</translation>
    </message>
    <message>
        <source>A reply is being written in “{title}”: wait for it to finish, or stop it, to send here.</source>
        <translation>In „{title}“ wird gerade eine Antwort geschrieben: Warten Sie, bis sie fertig ist, oder halten Sie sie an, um hier zu senden.</translation>
    </message>
    <message>
        <source>Stop the reply in “{title}” (Esc)</source>
        <translation>Die Antwort in „{title}“ anhalten (Esc)</translation>
    </message>
</context>
<context>
    <name>ChatSettingsDialog</name>
    <message>
        <source>Settings for “{title}”</source>
        <translation>Einstellungen für „{title}“</translation>
    </message>
    <message>
        <source>Chat settings</source>
        <translation>Chat-Einstellungen</translation>
    </message>
    <message>
        <source>Preset</source>
        <translation>Vorlage</translation>
    </message>
    <message>
        <source>Save as preset…</source>
        <translation>Als Vorlage speichern …</translation>
    </message>
    <message>
        <source>How the model should behave, e.g. “Answer briefly, in British English.”</source>
        <translation>Wie sich das Modell verhalten soll, z. B. „Antworte kurz und auf Deutsch.“</translation>
    </message>
    <message>
        <source>System prompt</source>
        <translation>Systemprompt</translation>
    </message>
    <message>
        <source>Temperature</source>
        <translation>Temperatur</translation>
    </message>
    <message>
        <source>Top-p</source>
        <translation>Top-p</translation>
    </message>
    <message>
        <source>Min-p</source>
        <translation>Min-p</translation>
    </message>
    <message>
        <source>Repeat penalty</source>
        <translation>Wiederholungsstrafe</translation>
    </message>
    <message>
        <source>off</source>
        <translation>aus</translation>
    </message>
    <message>
        <source>Top-k</source>
        <translation>Top-k</translation>
    </message>
    <message>
        <source>Forget this chat&apos;s own sampling values: this model&apos;s preset and its recommended ones apply, and QuantDesk&apos;s defaults where neither has one</source>
        <translation>Die eigenen Sampling-Werte dieses Chats vergessen: Es gelten die Voreinstellung des Modells und seine empfohlenen Werte, und die Standardwerte von QuantDesk, wo keines von beiden einen hat</translation>
    </message>
    <message>
        <source>Maximum reply length in tokens</source>
        <translation>Maximale Antwortlänge in Tokens</translation>
    </message>
    <message>
        <source>Max reply tokens</source>
        <translation>Max. Antwort-Tokens</translation>
    </message>
    <message>
        <source>random</source>
        <translation>zufällig</translation>
    </message>
    <message>
        <source>Seed</source>
        <translation>Seed</translation>
    </message>
    <message>
        <source>Answer as JSON with this schema</source>
        <translation>Als JSON nach diesem Schema antworten</translation>
    </message>
    <message>
        <source>Answer as JSON with a schema</source>
        <translation>Als JSON nach einem Schema antworten</translation>
    </message>
    <message>
        <source>JSON schema of the answers</source>
        <translation>JSON-Schema der Antworten</translation>
    </message>
    <message>
        <source>Draft for speculative decoding</source>
        <translation>Entwurfsmodell für spekulatives Dekodieren</translation>
    </message>
    <message>
        <source>A draft guesses tokens the model checks several at a time: replies come faster where the guesses are right, and stay the model&apos;s own. Takes effect when the model next loads.</source>
        <translation>Ein Entwurf rät Tokens, die das Modell mehrere auf einmal prüft: Antworten kommen schneller, wo die Vermutungen stimmen, und bleiben die des Modells. Wirkt, wenn das Modell das nächste Mal lädt.</translation>
    </message>
    <message>
        <source>Draft</source>
        <translation>Entwurf</translation>
    </message>
    <message>
        <source>Why the settings were not saved</source>
        <translation>Warum die Einstellungen nicht gespeichert wurden</translation>
    </message>
    <message>
        <source>Off</source>
        <translation>Aus</translation>
    </message>
    <message>
        <source>Model default</source>
        <translation>Wie das Modell</translation>
    </message>
    <message>
        <source>On</source>
        <translation>An</translation>
    </message>
    <message>
        <source>Low</source>
        <translation>Niedrig</translation>
    </message>
    <message>
        <source>Medium</source>
        <translation>Mittel</translation>
    </message>
    <message>
        <source>High</source>
        <translation>Hoch</translation>
    </message>
    <message>
        <source>Use the model&apos;s values</source>
        <translation>Die Werte des Modells verwenden</translation>
    </message>
    <message>
        <source>Use the default values</source>
        <translation>Die Standardwerte verwenden</translation>
    </message>
    <message>
        <source>Save as this model&apos;s defaults</source>
        <translation>Als Standard dieses Modells speichern</translation>
    </message>
    <message>
        <source>Every chat with this model starts from these values (sampling, system prompt, thinking, and the model bar&apos;s load settings) where it has none of its own</source>
        <translation>Jeder Chat mit diesem Modell beginnt mit diesen Werten (Sampling, Systemprompt, Denken und die Ladeeinstellungen der Modellleiste), wo er keine eigenen hat</translation>
    </message>
    <message>
        <source>{name} ({state})</source>
        <translation>{name} ({state})</translation>
    </message>
    <message>
        <source>Tools of {name}</source>
        <translation>Tools von {name}</translation>
    </message>
    <message>
        <source>No MCP servers yet: add them in Settings → Tools.</source>
        <translation>Noch keine MCP-Server: Fügen Sie sie unter Einstellungen → Tools hinzu.</translation>
    </message>
    <message>
        <source>About tools in this chat</source>
        <translation>Hinweis zu den Tools in diesem Chat</translation>
    </message>
    <message>
        <source>Tools</source>
        <translation>Tools</translation>
    </message>
    <message>
        <source>When the context is full</source>
        <translation>Wenn der Kontext voll ist</translation>
    </message>
    <message>
        <source>What happens once the conversation no longer fits the model&apos;s context: whatever is left out is marked in the conversation.</source>
        <translation>Was geschieht, sobald das Gespräch nicht mehr in den Kontext des Modells passt: Was ausgelassen wird, ist im Gespräch markiert.</translation>
    </message>
    <message>
        <source>Settings&apos; default ({choice})</source>
        <translation>Standard aus den Einstellungen ({choice})</translation>
    </message>
    <message>
        <source>Chat template</source>
        <translation>Chatvorlage</translation>
    </message>
    <message>
        <source>How the conversation is written for the model. Kept for this model; takes effect when it next loads.</source>
        <translation>Wie das Gespräch für das Modell geschrieben wird. Gilt für dieses Modell; wirkt beim nächsten Laden.</translation>
    </message>
    <message>
        <source>Automatic: {title} ({origin})</source>
        <translation>Automatisch: {title} ({origin})</translation>
    </message>
    <message>
        <source>{title} (bundled)</source>
        <translation>{title} (mitgeliefert)</translation>
    </message>
    <message>
        <source>Thinking</source>
        <translation>Nachdenken</translation>
    </message>
    <message>
        <source>Whether a thinking model thinks before it answers; the model&apos;s default is what its chat template does when not told</source>
        <translation>Ob ein denkendes Modell vor der Antwort nachdenkt; „Wie das Modell“ ist, was seine Chat-Vorlage ohne Vorgabe tut</translation>
    </message>
    <message>
        <source>Thinking effort</source>
        <translation>Denkaufwand</translation>
    </message>
    <message>
        <source>How hard the model thinks before it answers (gpt-oss reads it)</source>
        <translation>Wie gründlich das Modell vor der Antwort nachdenkt (gpt-oss liest das)</translation>
    </message>
    <message>
        <source>no limit</source>
        <translation>unbegrenzt</translation>
    </message>
    <message>
        <source> tokens</source>
        <translation> Tokens</translation>
    </message>
    <message>
        <source>Thinking budget in tokens</source>
        <translation>Denkbudget in Tokens</translation>
    </message>
    <message>
        <source>After this many tokens of thinking the model is made to stop thinking and answer; 0: no thinking at all</source>
        <translation>Nach so vielen Tokens Nachdenken muss das Modell aufhören nachzudenken und antworten; 0: gar kein Nachdenken</translation>
    </message>
    <message>
        <source>Thinking budget</source>
        <translation>Denkbudget</translation>
    </message>
    <message>
        <source>{name} does not read a thinking effort: its chat template has no reasoning_effort (gpt-oss&apos;s template has one)</source>
        <translation>{name} liest keinen Denkaufwand: Seine Chat-Vorlage hat kein reasoning_effort (die von gpt-oss hat es)</translation>
    </message>
    <message>
        <source>your setting</source>
        <translation>Ihre Einstellung</translation>
    </message>
    <message>
        <source>from the model</source>
        <translation>vom Modell</translation>
    </message>
    <message>
        <source>this model&apos;s preset</source>
        <translation>Voreinstellung des Modells</translation>
    </message>
    <message>
        <source>QuantDesk default</source>
        <translation>QuantDesk-Standard</translation>
    </message>
    <message>
        <source>Recommended by the model&apos;s own file ({origin})</source>
        <translation>Von der Datei des Modells selbst empfohlen ({origin})</translation>
    </message>
    <message>
        <source>This model&apos;s preset: {prompt}</source>
        <translation>Voreinstellung des Modells: {prompt}</translation>
    </message>
    <message>
        <source>Prompt lookup (copies from the conversation)</source>
        <translation>Prompt-Lookup (übernimmt aus dem Gespräch)</translation>
    </message>
    <message>
        <source>{name} (draft model)</source>
        <translation>{name} (Entwurfsmodell)</translation>
    </message>
    <message>
        <source>the JSON schema is not valid JSON ({exc})</source>
        <translation>das JSON-Schema ist kein gültiges JSON ({exc})</translation>
    </message>
    <message>
        <source>the JSON schema must be an object, such as {&quot;type&quot;: &quot;object&quot;}</source>
        <translation>das JSON-Schema muss ein Objekt sein, etwa {&quot;type&quot;: &quot;object&quot;}</translation>
    </message>
    <message>
        <source>Not saved: {message}.</source>
        <translation>Nicht gespeichert: {message}.</translation>
    </message>
    <message>
        <source>Not saved: {exc}.</source>
        <translation>Nicht gespeichert: {exc}.</translation>
    </message>
    <message>
        <source>Save preset</source>
        <translation>Vorlage speichern</translation>
    </message>
    <message>
        <source>Preset name:</source>
        <translation>Name der Vorlage:</translation>
    </message>
</context>
<context>
    <name>ChatStream</name>
    <message>
        <source>Reply stopped</source>
        <translation>Antwort angehalten</translation>
    </message>
    <message>
        <source>Reply done</source>
        <translation>Antwort fertig</translation>
    </message>
    <message>
        <source>{ended}: {text}</source>
        <translation>{ended}: {text}</translation>
    </message>
    <message>
        <source>{ended}: the model only thought, it did not answer.</source>
        <translation>{ended}: Das Modell hat nur nachgedacht und nicht geantwortet.</translation>
    </message>
    <message>
        <source>{ended}, empty.</source>
        <translation>{ended}, leer.</translation>
    </message>
    <message>
        <source>the reply so far is kept and marked interrupted.</source>
        <translation>die bisherige Antwort bleibt erhalten und ist als unterbrochen markiert.</translation>
    </message>
    <message>
        <source>{error} Your conversation is saved; {kept}</source>
        <translation>{error} Ihre Unterhaltung ist gespeichert; {kept}</translation>
    </message>
    <message>
        <source>Reply being written in “{title}”:</source>
        <translation>Antwort in Arbeit in „{title}“:</translation>
    </message>
    <message>
        <source>Last reply in “{title}”:</source>
        <translation>Letzte Antwort in „{title}“:</translation>
    </message>
</context>
<context>
    <name>ChatToolCards</name>
    <message>
        <source>off</source>
        <translation>aus</translation>
    </message>
    <message numerus="yes">
        <source>connected · %n tool(s)</source>
        <translation>
            <numerusform>verbunden · %n Tool</numerusform>
            <numerusform>verbunden · %n Tools</numerusform>
        </translation>
    </message>
    <message>
        <source>failed</source>
        <translation>fehlgeschlagen</translation>
    </message>
    <message>
        <source>not connected</source>
        <translation>nicht verbunden</translation>
    </message>
    <message>
        <source>The model wants to run the tool {name}: allow or deny it.</source>
        <translation>Das Modell möchte das Tool {name} ausführen: Erlauben Sie es oder lehnen Sie es ab.</translation>
    </message>
    <message numerus="yes">
        <source>The reply made %n tool step(s), the most one reply may: it ends here.</source>
        <translation>
            <numerusform>Die Antwort hat %n Tool-Schritt ausgeführt, mehr darf eine Antwort nicht: Sie endet hier.</numerusform>
            <numerusform>Die Antwort hat %n Tool-Schritte ausgeführt, mehr darf eine Antwort nicht: Sie endet hier.</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>CitationChips</name>
    <message>
        <source>Sources</source>
        <translation>Quellen</translation>
    </message>
    <message>
        <source>Sources:</source>
        <translation>Quellen:</translation>
    </message>
    <message>
        <source>Source {number}: {where}</source>
        <translation>Quelle {number}: {where}</translation>
    </message>
</context>
<context>
    <name>CitationPanel</name>
    <message>
        <source>Cited passage</source>
        <translation>Zitierte Stelle</translation>
    </message>
    <message>
        <source>File</source>
        <translation>Datei</translation>
    </message>
    <message>
        <source>Close the passage</source>
        <translation>Stelle schließen</translation>
    </message>
    <message>
        <source>Where in the file</source>
        <translation>Wo in der Datei</translation>
    </message>
    <message>
        <source>Passage</source>
        <translation>Stelle</translation>
    </message>
    <message>
        <source>File path</source>
        <translation>Dateipfad</translation>
    </message>
    <message>
        <source>Open file</source>
        <translation>Datei öffnen</translation>
    </message>
    <message>
        <source>Open the cited file</source>
        <translation>Die zitierte Datei öffnen</translation>
    </message>
    <message>
        <source>collection “{name}”</source>
        <translation>Sammlung „{name}“</translation>
    </message>
    <message>
        <source>{path} (no longer there)</source>
        <translation>{path} (nicht mehr vorhanden)</translation>
    </message>
    <message>
        <source>Open {name} in the system&apos;s viewer</source>
        <translation>{name} im Programm des Systems öffnen</translation>
    </message>
    <message>
        <source>The file is no longer where it was indexed</source>
        <translation>Die Datei ist nicht mehr dort, wo sie indexiert wurde</translation>
    </message>
    <message>
        <source>Source {number}: {where}</source>
        <translation>Quelle {number}: {where}</translation>
    </message>
</context>
<context>
    <name>CollectionPicker</name>
    <message>
        <source>Use a collection</source>
        <translation>Sammlung verwenden</translation>
    </message>
    <message>
        <source>Each question in this chat searches the collections checked here; the reply cites the passages it was given.</source>
        <translation>Jede Frage in diesem Chat durchsucht die hier angehakten Sammlungen; die Antwort nennt die Stellen, die sie erhalten hat.</translation>
    </message>
    <message>
        <source>Collections</source>
        <translation>Sammlungen</translation>
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
    <name>ConnectionsPanel</name>
    <message>
        <source>key in the system keychain</source>
        <translation>Schlüssel im Schlüsselbund des Systems</translation>
    </message>
    <message>
        <source>key in the key file (0600)</source>
        <translation>Schlüssel in der Schlüsseldatei (0600)</translation>
    </message>
    <message>
        <source>no key</source>
        <translation>kein Schlüssel</translation>
    </message>
    <message>
        <source>Remote engines</source>
        <translation>Entfernte Engines</translation>
    </message>
    <message>
        <source>Remote connections</source>
        <translation>Entfernte Verbindungen</translation>
    </message>
    <message>
        <source>Connection name</source>
        <translation>Name der Verbindung</translation>
    </message>
    <message>
        <source>Server address</source>
        <translation>Serveradresse</translation>
    </message>
    <message>
        <source>API key</source>
        <translation>API-Schlüssel</translation>
    </message>
    <message>
        <source>optional; leave empty to keep the stored key</source>
        <translation>optional; leer lassen, um den gespeicherten Schlüssel zu behalten</translation>
    </message>
    <message>
        <source>optional: the server&apos;s CA certificate (PEM)</source>
        <translation>optional: das CA-Zertifikat des Servers (PEM)</translation>
    </message>
    <message>
        <source>CA file</source>
        <translation>CA-Datei</translation>
    </message>
    <message>
        <source>Choose…</source>
        <translation>Auswählen …</translation>
    </message>
    <message>
        <source>Choose a CA file</source>
        <translation>Eine CA-Datei auswählen</translation>
    </message>
    <message>
        <source> s to connect</source>
        <translation> s zum Verbinden</translation>
    </message>
    <message>
        <source>Connect timeout</source>
        <translation>Zeitlimit für den Verbindungsaufbau</translation>
    </message>
    <message>
        <source> s silent before giving up</source>
        <translation> s Stille bis zum Aufgeben</translation>
    </message>
    <message>
        <source>Stall limit</source>
        <translation>Stillstandsgrenze</translation>
    </message>
    <message>
        <source>A reply that sends nothing for this long is given up (a long prompt may take a while)</source>
        <translation>Eine Antwort, die so lange nichts sendet, wird aufgegeben (ein langer Prompt kann eine Weile dauern)</translation>
    </message>
    <message>
        <source>Name</source>
        <translation>Name</translation>
    </message>
    <message>
        <source>Address</source>
        <translation>Adresse</translation>
    </message>
    <message>
        <source>TLS</source>
        <translation>TLS</translation>
    </message>
    <message>
        <source>Timeouts</source>
        <translation>Zeitlimits</translation>
    </message>
    <message>
        <source>New</source>
        <translation>Neu</translation>
    </message>
    <message>
        <source>New connection</source>
        <translation>Neue Verbindung</translation>
    </message>
    <message>
        <source>Save and test</source>
        <translation>Speichern und testen</translation>
    </message>
    <message>
        <source>Save and test the connection</source>
        <translation>Die Verbindung speichern und testen</translation>
    </message>
    <message>
        <source>Test</source>
        <translation>Testen</translation>
    </message>
    <message>
        <source>Test the connection</source>
        <translation>Die Verbindung testen</translation>
    </message>
    <message>
        <source>Remove</source>
        <translation>Entfernen</translation>
    </message>
    <message>
        <source>Remove the connection</source>
        <translation>Die Verbindung entfernen</translation>
    </message>
    <message>
        <source>Forget key</source>
        <translation>Schlüssel vergessen</translation>
    </message>
    <message>
        <source>Forget the stored API key</source>
        <translation>Den gespeicherten API-Schlüssel vergessen</translation>
    </message>
    <message>
        <source>Connection test result</source>
        <translation>Ergebnis des Verbindungstests</translation>
    </message>
    <message>
        <source>stored; type to replace it</source>
        <translation>gespeichert; zum Ersetzen neu eingeben</translation>
    </message>
    <message>
        <source>optional; none stored</source>
        <translation>optional; keiner gespeichert</translation>
    </message>
    <message>
        <source>optional</source>
        <translation>optional</translation>
    </message>
    <message>
        <source>The server&apos;s CA certificate</source>
        <translation>Das CA-Zertifikat des Servers</translation>
    </message>
    <message>
        <source>PEM files (*.pem *.crt);;All (*)</source>
        <translation>PEM-Dateien (*.pem *.crt);;Alle (*)</translation>
    </message>
    <message>
        <source>Not saved: {error}</source>
        <translation>Nicht gespeichert: {error}</translation>
    </message>
    <message>
        <source>Asking {name} for its models…</source>
        <translation>{name} wird nach seinen Modellen gefragt …</translation>
    </message>
    <message>
        <source>no models</source>
        <translation>keinen Modellen</translation>
    </message>
    <message>
        <source> and {count} more</source>
        <translation> und {count} weiteren</translation>
    </message>
    <message>
        <source>{name} answered in {latency_ms:.0f} ms: a {kind} server with {models}{more}.</source>
        <translation>{name} hat in {latency_ms:.0f} ms geantwortet: ein {kind}-Server mit {models}{more}.</translation>
    </message>
    <message>
        <source>The API key of {name} is forgotten.</source>
        <translation>Der API-Schlüssel von {name} ist vergessen.</translation>
    </message>
    <message>
        <source>Removed {name} and its key.</source>
        <translation>{name} und sein Schlüssel wurden entfernt.</translation>
    </message>
</context>
<context>
    <name>ContextMeter</name>
    <message>
        <source>Context used</source>
        <translation>Kontext belegt</translation>
    </message>
    <message>
        <source>{used} / {total} tokens</source>
        <translation>{used} / {total} Tokens</translation>
    </message>
    <message>
        <source>The chat holds {used} of the model&apos;s {total} context tokens ({share}): system prompt, history, images, thinking and tools&apos; results. {left} tokens are left for the next message and reply.</source>
        <translation>Der Chat belegt {used} der {total} Kontext-Tokens des Modells ({share}): Systemprompt, Verlauf, Bilder, Denken und Ergebnisse der Werkzeuge. {left} Tokens bleiben für die nächste Nachricht und Antwort.</translation>
    </message>
    <message>
        <source>{figures} · documents {share}</source>
        <translation>{figures} · Dokumente {share}</translation>
    </message>
    <message>
        <source>Of these, {documents} tokens ({share}) are passages of the chat&apos;s documents, found for the latest question.</source>
        <translation>Davon sind {documents} Tokens ({share}) Stellen aus den Dokumenten des Chats, gefunden für die letzte Frage.</translation>
    </message>
    <message>
        <source>{figures} · nearly full</source>
        <translation>{figures} · fast voll</translation>
    </message>
    <message>
        <source>The next reply may not fit: when the context is full the model cannot answer. Start a new chat, or load the model with a larger context.</source>
        <translation>Die nächste Antwort passt vielleicht nicht mehr: Ist der Kontext voll, kann das Modell nicht antworten. Beginnen Sie einen neuen Chat oder laden Sie das Modell mit einem größeren Kontext.</translation>
    </message>
    <message>
        <source>When the context is full, this chat&apos;s overflow policy leaves its oldest turns out (and marks them where it happens); the model goes on answering.</source>
        <translation>Ist der Kontext voll, lässt die Überlaufregel dieses Chats die ältesten Wechsel aus (und markiert sie an der Stelle); das Modell antwortet weiter.</translation>
    </message>
</context>
<context>
    <name>ConversationList</name>
    <message>
        <source>New chat</source>
        <translation>Neuer Chat</translation>
    </message>
    <message>
        <source>Start a new conversation (Ctrl+N)</source>
        <translation>Eine neue Unterhaltung beginnen (Strg+N)</translation>
    </message>
    <message>
        <source>Search chats</source>
        <translation>Chats durchsuchen</translation>
    </message>
    <message>
        <source>Conversations</source>
        <translation>Unterhaltungen</translation>
    </message>
    <message>
        <source>Rename</source>
        <translation>Umbenennen</translation>
    </message>
    <message>
        <source>Rename chat</source>
        <translation>Chat umbenennen</translation>
    </message>
    <message>
        <source>Delete</source>
        <translation>Löschen</translation>
    </message>
    <message>
        <source>Delete chat</source>
        <translation>Chat löschen</translation>
    </message>
    <message>
        <source>Export…</source>
        <translation>Exportieren …</translation>
    </message>
    <message>
        <source>Export chat</source>
        <translation>Chat exportieren</translation>
    </message>
    <message>
        <source>Save this chat as Markdown or JSON</source>
        <translation>Diesen Chat als Markdown oder JSON speichern</translation>
    </message>
    <message>
        <source>Options…</source>
        <translation>Optionen …</translation>
    </message>
    <message>
        <source>Chat settings</source>
        <translation>Chat-Einstellungen</translation>
    </message>
    <message>
        <source>System prompt, sampling and presets for this chat</source>
        <translation>Systemprompt, Sampling und Vorlagen für diesen Chat</translation>
    </message>
    <message>
        <source>{title}: a reply is being written</source>
        <translation>{title}: Eine Antwort wird geschrieben</translation>
    </message>
</context>
<context>
    <name>CrashDialog</name>
    <message>
        <source>QuantDesk: unexpected error</source>
        <translation>QuantDesk: unerwarteter Fehler</translation>
    </message>
    <message>
        <source>Something went wrong that QuantDesk did not expect ({summary}). Your chats and models are kept; the last action may not have finished.</source>
        <translation>Etwas ist schiefgegangen, womit QuantDesk nicht gerechnet hat ({summary}). Ihre Chats und Modelle bleiben erhalten; die letzte Aktion wurde möglicherweise nicht abgeschlossen.</translation>
    </message>
    <message>
        <source>The details are in {log_path}</source>
        <translation>Die Details stehen in {log_path}</translation>
    </message>
    <message>
        <source>The details could not be written to the log file; copy them from here.</source>
        <translation>Die Details konnten nicht in die Protokolldatei geschrieben werden; kopieren Sie sie von hier.</translation>
    </message>
    <message>
        <source>Copy details</source>
        <translation>Details kopieren</translation>
    </message>
    <message>
        <source>Open log folder</source>
        <translation>Protokollordner öffnen</translation>
    </message>
    <message>
        <source>Copied</source>
        <translation>Kopiert</translation>
    </message>
</context>
<context>
    <name>CrashReporter</name>
    <message>
        <source>the desktop app</source>
        <translation>die Desktop-App</translation>
    </message>
    <message>
        <source>a thread</source>
        <translation>ein Thread</translation>
    </message>
    <message>
        <source>thread {name}</source>
        <translation>Thread {name}</translation>
    </message>
</context>
<context>
    <name>CutMark</name>
    <message numerus="yes">
        <source>%n earlier message(s) compacted into a note by the model (context full)</source>
        <translation>
            <numerusform>%n frühere Nachricht vom Modell zu einer Notiz verdichtet (Kontext voll)</numerusform>
            <numerusform>%n frühere Nachrichten vom Modell zu einer Notiz verdichtet (Kontext voll)</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>%n earlier message(s) not sent to the model (context full)</source>
        <translation>
            <numerusform>%n frühere Nachricht nicht an das Modell gesendet (Kontext voll)</numerusform>
            <numerusform>%n frühere Nachrichten nicht an das Modell gesendet (Kontext voll)</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>, %n pinned message(s) kept</source>
        <translation>
            <numerusform>, %n angeheftete Nachricht behalten</numerusform>
            <numerusform>, %n angeheftete Nachrichten behalten</numerusform>
        </translation>
    </message>
    <message>
        <source>The context was full: the model did not read these messages for this reply and the ones after it. They stay here, and in the saved chat.</source>
        <translation>Der Kontext war voll: Das Modell hat diese Nachrichten für diese und die folgenden Antworten nicht gelesen. Sie bleiben hier und im gespeicherten Chat.</translation>
    </message>
    <message>
        <source>Shows or hides the note the model wrote on them</source>
        <translation>Zeigt oder verbirgt die Notiz, die das Modell dazu geschrieben hat</translation>
    </message>
    <message>
        <source>The model&apos;s note on the earlier messages</source>
        <translation>Die Notiz des Modells zu den früheren Nachrichten</translation>
    </message>
</context>
<context>
    <name>DiscoverPage</name>
    <message>
        <source>Any format</source>
        <translation>Jedes Format</translation>
    </message>
    <message>
        <source>Most downloaded</source>
        <translation>Meist heruntergeladen</translation>
    </message>
    <message>
        <source>Most liked</source>
        <translation>Beliebteste</translation>
    </message>
    <message>
        <source>Recently updated</source>
        <translation>Zuletzt aktualisiert</translation>
    </message>
    <message>
        <source>Quant</source>
        <translation>Quantisierung</translation>
    </message>
    <message>
        <source>Format</source>
        <translation>Format</translation>
    </message>
    <message>
        <source>Fit on this machine</source>
        <translation>Passt auf diesen Rechner</translation>
    </message>
    <message>
        <source>Memory needed</source>
        <translation>Benötigter Speicher</translation>
    </message>
    <message>
        <source>Speed</source>
        <translation>Tempo</translation>
    </message>
    <message>
        <source>Size</source>
        <translation>Größe</translation>
    </message>
    <message>
        <source>Discover</source>
        <translation>Entdecken</translation>
    </message>
    <message>
        <source>Search the Hugging Face Hub, e.g. llama 3.2 instruct</source>
        <translation>Den Hugging Face Hub durchsuchen, z. B. llama 3.2 instruct</translation>
    </message>
    <message>
        <source>Search the Hub</source>
        <translation>Den Hub durchsuchen</translation>
    </message>
    <message>
        <source>Sort by</source>
        <translation>Sortieren nach</translation>
    </message>
    <message>
        <source>Search</source>
        <translation>Suchen</translation>
    </message>
    <message>
        <source>Import a model file…</source>
        <translation>Eine Modelldatei importieren …</translation>
    </message>
    <message>
        <source>Import a model file you already have</source>
        <translation>Eine vorhandene Modelldatei importieren</translation>
    </message>
    <message>
        <source>Models</source>
        <translation>Modelle</translation>
    </message>
    <message>
        <source>More results</source>
        <translation>Weitere Ergebnisse</translation>
    </message>
    <message>
        <source>Starting list</source>
        <translation>Startliste</translation>
    </message>
    <message>
        <source>Show the curated starting list</source>
        <translation>Die kuratierte Startliste anzeigen</translation>
    </message>
    <message>
        <source>Pick a model</source>
        <translation>Wählen Sie ein Modell</translation>
    </message>
    <message>
        <source>Choose a model on the left to see every quant and whether it fits this machine.</source>
        <translation>Wählen Sie links ein Modell, um jede Quantisierung zu sehen und ob sie auf diesen Rechner passt.</translation>
    </message>
    <message>
        <source>Quants of this model</source>
        <translation>Quantisierungen dieses Modells</translation>
    </message>
    <message>
        <source>Select all quants</source>
        <translation>Alle Quantisierungen auswählen</translation>
    </message>
    <message>
        <source>&lt;b&gt;Good starting models&lt;/b&gt;&lt;br&gt;&lt;span style=&apos;font-size:small&apos;&gt;{about} (List from {updated}.)&lt;/span&gt;</source>
        <translation>&lt;b&gt;Gute Modelle für den Einstieg&lt;/b&gt;&lt;br&gt;&lt;span style=&apos;font-size:small&apos;&gt;{about} (Stand der Liste: {updated}.)&lt;/span&gt;</translation>
    </message>
    <message>
        <source> · likely fits</source>
        <translation> · passt wahrscheinlich</translation>
    </message>
    <message>
        <source> · likely too large here</source>
        <translation> · hier wahrscheinlich zu groß</translation>
    </message>
    <message>
        <source> · reads images</source>
        <translation> · versteht Bilder</translation>
    </message>
    <message>
        <source> · embeds text: search your documents by meaning</source>
        <translation> · bettet Text ein: Ihre Dokumente nach Bedeutung durchsuchen</translation>
    </message>
    <message>
        <source>{repo_id}
{why}
{format} · {params}B parameters{vision} · for {tier} machines · about {size} at 4 bits{fit}</source>
        <translation>{repo_id}
{why}
{format} · {params} Mrd. Parameter{vision} · für Rechner der Klasse {tier} · etwa {size} bei 4 Bit{fit}</translation>
    </message>
    <message>
        <source>search the Hub or download</source>
        <translation>den Hub durchsuchen oder herunterladen</translation>
    </message>
    <message>
        <source>{message} Import a model file you already have (a .gguf file or a model folder), or {split}.</source>
        <translation>{message} Importieren Sie eine vorhandene Modelldatei (eine .gguf-Datei oder einen Modellordner), oder {split}.</translation>
    </message>
    <message>
        <source>&lt;b&gt;Searching for “{text}”…&lt;/b&gt;</source>
        <translation>&lt;b&gt;Suche nach „{text}“ …&lt;/b&gt;</translation>
    </message>
    <message>
        <source>&lt;b&gt;Searching…&lt;/b&gt;</source>
        <translation>&lt;b&gt;Suche …&lt;/b&gt;</translation>
    </message>
    <message>
        <source>&lt;b&gt;Search needs the Hub, and this computer is offline.&lt;/b&gt;</source>
        <translation>&lt;b&gt;Die Suche braucht den Hub, und dieser Rechner ist offline.&lt;/b&gt;</translation>
    </message>
    <message>
        <source>{count} downloads</source>
        <translation>{count} Downloads</translation>
    </message>
    <message>
        <source>{count} likes</source>
        <translation>{count} Likes</translation>
    </message>
    <message>
        <source>gated: needs a token</source>
        <translation>zugangsbeschränkt: braucht ein Token</translation>
    </message>
    <message>
        <source>{repo_id}
{detail}</source>
        <translation>{repo_id}
{detail}</translation>
    </message>
    <message numerus="yes">
        <source>%n model(s)</source>
        <translation>
            <numerusform>%n Modell</numerusform>
            <numerusform>%n Modelle</numerusform>
        </translation>
    </message>
    <message>
        <source> for “{text}”</source>
        <translation> für „{text}“</translation>
    </message>
    <message>
        <source>&lt;br&gt;Nothing matched; try fewer words or another format.</source>
        <translation>&lt;br&gt;Nichts gefunden; versuchen Sie weniger Wörter oder ein anderes Format.</translation>
    </message>
    <message>
        <source>&lt;b&gt;The search failed.&lt;/b&gt;</source>
        <translation>&lt;b&gt;Die Suche ist fehlgeschlagen.&lt;/b&gt;</translation>
    </message>
    <message>
        <source> Without the Hub you can still import a model file you have.</source>
        <translation> Ohne den Hub können Sie weiterhin eine vorhandene Modelldatei importieren.</translation>
    </message>
    <message>
        <source>&lt;b&gt;The search failed.&lt;/b&gt;&lt;br&gt;{error}</source>
        <translation>&lt;b&gt;Die Suche ist fehlgeschlagen.&lt;/b&gt;&lt;br&gt;{error}</translation>
    </message>
    <message>
        <source>Offline: the quants of this model cannot be listed.</source>
        <translation>Offline: Die Quantisierungen dieses Modells können nicht aufgelistet werden.</translation>
    </message>
    <message>
        <source>Waiting for hardware detection to finish, then every quant is checked against this machine…</source>
        <translation>Warten auf die Hardware-Erkennung, danach wird jede Quantisierung mit diesem Rechner abgeglichen …</translation>
    </message>
    <message>
        <source>Reading every quant from the Hub and checking it against this machine…</source>
        <translation>Jede Quantisierung wird vom Hub gelesen und mit diesem Rechner abgeglichen …</translation>
    </message>
    <message>
        <source>The Hub cannot be reached. You can still import a model file you already have.</source>
        <translation>Der Hub ist nicht erreichbar. Sie können weiterhin eine vorhandene Modelldatei importieren.</translation>
    </message>
    <message>
        <source>best: {quant} · {size}</source>
        <translation>beste Wahl: {quant} · {size}</translation>
    </message>
    <message>
        <source>{repo_id} holds no GGUF, MLX or EXL model files QuantDesk can run.</source>
        <translation>{repo_id} enthält keine GGUF-, MLX- oder EXL-Modelldateien, die QuantDesk ausführen kann.</translation>
    </message>
    <message numerus="yes">
        <source>%n quant(s), checked against this machine at {n_ctx} tokens of context. {reason}.</source>
        <translation>
            <numerusform>%n Quantisierung, mit diesem Rechner abgeglichen bei {n_ctx} Tokens Kontext. {reason}.</numerusform>
            <numerusform>%n Quantisierungen, mit diesem Rechner abgeglichen bei {n_ctx} Tokens Kontext. {reason}.</numerusform>
        </translation>
    </message>
    <message>
        <source>&lt;b&gt;Best pick for this machine: {quant} ({format})&lt;/b&gt; — {best_reason}</source>
        <translation>&lt;b&gt;Beste Wahl für diesen Rechner: {quant} ({format})&lt;/b&gt; – {best_reason}</translation>
    </message>
    <message>
        <source>&lt;b&gt;No quant of this model fits this machine.&lt;/b&gt; Try a smaller model.</source>
        <translation>&lt;b&gt;Keine Quantisierung dieses Modells passt auf diesen Rechner.&lt;/b&gt; Versuchen Sie ein kleineres Modell.</translation>
    </message>
    <message>
        <source>{reason}; {measured}</source>
        <translation>{reason}; {measured}</translation>
    </message>
    <message>
        <source>{quant} · sees images</source>
        <translation>{quant} · versteht Bilder</translation>
    </message>
    <message>
        <source>{quant} · measured here</source>
        <translation>{quant} · hier gemessen</translation>
    </message>
    <message>
        <source> Sees images: downloads with the vision projector {projector}.</source>
        <translation> Versteht Bilder: wird mit dem Vision-Projektor {projector} heruntergeladen.</translation>
    </message>
    <message>
        <source>Download</source>
        <translation>Herunterladen</translation>
    </message>
    <message>
        <source>Download {quant}</source>
        <translation>{quant} herunterladen</translation>
    </message>
    <message>
        <source>Does not fit this machine: {reason}</source>
        <translation>Passt nicht auf diesen Rechner: {reason}</translation>
    </message>
</context>
<context>
    <name>DocumentStrip</name>
    <message>
        <source>Attached documents</source>
        <translation>Angehängte Dokumente</translation>
    </message>
    <message>
        <source>Documents:</source>
        <translation>Dokumente:</translation>
    </message>
    <message>
        <source>Each question searches “{name}” and the reply cites what it was given</source>
        <translation>Jede Frage durchsucht „{name}“, und die Antwort nennt, was sie erhalten hat</translation>
    </message>
    <message>
        <source>Detach {name} from this chat</source>
        <translation>{name} von diesem Chat lösen</translation>
    </message>
    <message>
        <source>Remove {name}</source>
        <translation>{name} entfernen</translation>
    </message>
</context>
<context>
    <name>DocumentsPage</name>
    <message>
        <source>Collection</source>
        <translation>Sammlung</translation>
    </message>
    <message>
        <source>Files</source>
        <translation>Dateien</translation>
    </message>
    <message>
        <source>Chunks</source>
        <translation>Abschnitte</translation>
    </message>
    <message>
        <source>Embedded</source>
        <translation>Eingebettet</translation>
    </message>
    <message>
        <source>Size on disk</source>
        <translation>Größe auf der Platte</translation>
    </message>
    <message>
        <source>State</source>
        <translation>Zustand</translation>
    </message>
    <message>
        <source>Documents</source>
        <translation>Dokumente</translation>
    </message>
    <message>
        <source>Add folder…</source>
        <translation>Ordner hinzufügen…</translation>
    </message>
    <message>
        <source>Add a folder as a collection</source>
        <translation>Einen Ordner als Sammlung hinzufügen</translation>
    </message>
    <message>
        <source>A folder is watched: new, changed and deleted files are picked up</source>
        <translation>Ein Ordner wird beobachtet: neue, geänderte und gelöschte Dateien werden übernommen</translation>
    </message>
    <message>
        <source>Add files…</source>
        <translation>Dateien hinzufügen…</translation>
    </message>
    <message>
        <source>Add files to a collection</source>
        <translation>Dateien zu einer Sammlung hinzufügen</translation>
    </message>
    <message>
        <source>Collections of your files for the Chat to search and cite: PDF, Word, HTML, Markdown, text and source code. They are indexed here, and nothing leaves this computer.</source>
        <translation>Sammlungen Ihrer Dateien, die der Chat durchsucht und zitiert: PDF, Word, HTML, Markdown, Text und Quellcode. Sie werden hier indexiert, und nichts verlässt diesen Computer.</translation>
    </message>
    <message>
        <source>No documents yet</source>
        <translation>Noch keine Dokumente</translation>
    </message>
    <message>
        <source>Add a folder (it stays watched) or some files: they are indexed in the background, and a chat can then search them.</source>
        <translation>Fügen Sie einen Ordner (er wird weiter beobachtet) oder einige Dateien hinzu: Sie werden im Hintergrund indexiert, und ein Chat kann sie dann durchsuchen.</translation>
    </message>
    <message>
        <source>Collections</source>
        <translation>Sammlungen</translation>
    </message>
    <message>
        <source>Select all collections</source>
        <translation>Alle Sammlungen auswählen</translation>
    </message>
    <message>
        <source>Embedding model:</source>
        <translation>Embedding-Modell:</translation>
    </message>
    <message>
        <source>Embedding model</source>
        <translation>Embedding-Modell</translation>
    </message>
    <message>
        <source>The model that turns passages into vectors, so that a question finds what it means and not only its words; changing it embeds the collection again</source>
        <translation>Das Modell, das Stellen in Vektoren umwandelt, damit eine Frage findet, was sie meint, und nicht nur ihre Wörter; ein Wechsel bettet die Sammlung neu ein</translation>
    </message>
    <message>
        <source>Indexing progress</source>
        <translation>Fortschritt der Indexierung</translation>
    </message>
    <message>
        <source>Indexing</source>
        <translation>Indexierung</translation>
    </message>
    <message>
        <source>Pause</source>
        <translation>Anhalten</translation>
    </message>
    <message>
        <source>Pause indexing</source>
        <translation>Indexierung anhalten</translation>
    </message>
    <message>
        <source>Remove</source>
        <translation>Entfernen</translation>
    </message>
    <message>
        <source>Remove the collection</source>
        <translation>Die Sammlung entfernen</translation>
    </message>
    <message>
        <source>Remove the collection and its index (your files stay where they are)</source>
        <translation>Die Sammlung und ihren Index entfernen (Ihre Dateien bleiben, wo sie sind)</translation>
    </message>
    <message>
        <source>Files that could not be read</source>
        <translation>Dateien, die nicht gelesen werden konnten</translation>
    </message>
    <message>
        <source>Report</source>
        <translation>Bericht</translation>
    </message>
    <message>
        <source>words only</source>
        <translation>nur Wörter</translation>
    </message>
    <message>
        <source>Folder {folder}, watched for changes</source>
        <translation>Ordner {folder}, auf Änderungen beobachtet</translation>
    </message>
    <message numerus="yes">
        <source>Files added by hand: %n file(s)</source>
        <translation>
            <numerusform>Von Hand hinzugefügt: %n Datei</numerusform>
            <numerusform>Von Hand hinzugefügt: %n Dateien</numerusform>
        </translation>
    </message>
    <message>
        <source>Resume</source>
        <translation>Fortsetzen</translation>
    </message>
    <message>
        <source>Resume indexing</source>
        <translation>Indexierung fortsetzen</translation>
    </message>
    <message numerus="yes">
        <source>Files that could not be read: %n</source>
        <translation>
            <numerusform>Dateien, die nicht gelesen werden konnten: %n</numerusform>
            <numerusform>Dateien, die nicht gelesen werden konnten: %n</numerusform>
        </translation>
    </message>
    <message>
        <source>Every file could be read</source>
        <translation>Jede Datei konnte gelesen werden</translation>
    </message>
    <message>
        <source>None: search the words only</source>
        <translation>Keines: nur die Wörter durchsuchen</translation>
    </message>
    <message>
        <source>{name} (not in the library)</source>
        <translation>{name} (nicht in der Bibliothek)</translation>
    </message>
    <message>
        <source>{done} of {total} files</source>
        <translation>{done} von {total} Dateien</translation>
    </message>
    <message>
        <source>{time} left</source>
        <translation>noch {time}</translation>
    </message>
    <message>
        <source>Add a folder</source>
        <translation>Ordner hinzufügen</translation>
    </message>
    <message>
        <source>Add files</source>
        <translation>Dateien hinzufügen</translation>
    </message>
    <message>
        <source>Documents ({patterns})</source>
        <translation>Dokumente ({patterns})</translation>
    </message>
    <message>
        <source>My files</source>
        <translation>Meine Dateien</translation>
    </message>
    <message>
        <source>Collection:</source>
        <translation>Sammlung:</translation>
    </message>
    <message>
        <source>Embed “{name}” again with {model}? Its {count} passages are embedded anew in the background; until then its search uses the words only.</source>
        <translation>„{name}“ mit {model} neu einbetten? Ihre {count} Abschnitte werden im Hintergrund neu eingebettet; bis dahin durchsucht die Suche nur die Wörter.</translation>
    </message>
    <message>
        <source>Search “{name}” by its words only? Its vectors are no longer used.</source>
        <translation>„{name}“ nur nach Wörtern durchsuchen? Ihre Vektoren werden nicht mehr verwendet.</translation>
    </message>
    <message>
        <source>Change the embedding model</source>
        <translation>Embedding-Modell wechseln</translation>
    </message>
    <message>
        <source>Remove “{name}” and its index? Your files stay where they are; a chat that used it no longer searches it.</source>
        <translation>„{name}“ und ihren Index entfernen? Ihre Dateien bleiben, wo sie sind; ein Chat, der sie verwendet hat, durchsucht sie nicht mehr.</translation>
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
        <source>Nothing is downloading</source>
        <translation>Es wird nichts heruntergeladen</translation>
    </message>
    <message>
        <source>Pick a model on the Discover page and choose Download: its progress, speed and time left show here.</source>
        <translation>Wählen Sie auf der Seite „Entdecken“ ein Modell und dann „Herunterladen“: Fortschritt, Tempo und Restzeit stehen hier.</translation>
    </message>
    <message>
        <source>Find a model</source>
        <translation>Modell finden</translation>
    </message>
</context>
<context>
    <name>ExpertsInRamBox</name>
    <message>
        <source>Experts in RAM: </source>
        <translation>Experten im RAM: </translation>
    </message>
</context>
<context>
    <name>FirstRunPage</name>
    <message>
        <source>Welcome</source>
        <translation>Willkommen</translation>
    </message>
    <message>
        <source>Welcome to QuantDesk</source>
        <translation>Willkommen bei QuantDesk</translation>
    </message>
    <message>
        <source>Detecting this machine…</source>
        <translation>Dieser Rechner wird erkannt …</translation>
    </message>
    <message>
        <source>This machine</source>
        <translation>Dieser Rechner</translation>
    </message>
    <message>
        <source>Recommended models</source>
        <translation>Empfohlene Modelle</translation>
    </message>
    <message>
        <source>Skip</source>
        <translation>Überspringen</translation>
    </message>
    <message>
        <source>Skip the welcome</source>
        <translation>Die Begrüßung überspringen</translation>
    </message>
    <message>
        <source>See its quants</source>
        <translation>Quantisierungen ansehen</translation>
    </message>
    <message>
        <source>Open the chosen model to download it</source>
        <translation>Das gewählte Modell öffnen, um es herunterzuladen</translation>
    </message>
    <message>
        <source>Import a file…</source>
        <translation>Eine Datei importieren …</translation>
    </message>
    <message>
        <source>Import a model file you already have</source>
        <translation>Eine vorhandene Modelldatei importieren</translation>
    </message>
    <message>
        <source>&lt;h2&gt;You are offline&lt;/h2&gt;HF_HUB_OFFLINE is set, so nothing can be downloaded. Import a model file you already have (a .gguf file, e.g. from a USB stick); it opens in the Chat page.</source>
        <translation>&lt;h2&gt;Sie sind offline&lt;/h2&gt;HF_HUB_OFFLINE ist gesetzt, daher kann nichts heruntergeladen werden. Importieren Sie eine vorhandene Modelldatei (eine .gguf-Datei, z. B. von einem USB-Stick); sie öffnet sich auf der Seite „Chat“.</translation>
    </message>
    <message>
        <source>&lt;h2&gt;Models for this machine&lt;/h2&gt;A hand-picked starting list (not a ranking), ordered for this machine. Pick one: the next screen shows every quant with whether it fits, and the best one.</source>
        <translation>&lt;h2&gt;Modelle für diesen Rechner&lt;/h2&gt;Eine handverlesene Startliste (keine Rangliste), für diesen Rechner sortiert. Wählen Sie eines: Der nächste Schritt zeigt jede Quantisierung, ob sie passt, und die beste.</translation>
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
        <source>Learned after engine crashes</source>
        <translation>Nach Abstürzen der Engine gelernt</translation>
    </message>
    <message>
        <source>Nothing: every model loads with llama.cpp&apos;s defaults. When the engine crashes in llama.cpp&apos;s own code, QuantDesk loads that model again in a safer configuration and remembers it here.</source>
        <translation>Nichts: Jedes Modell lädt mit den Voreinstellungen von llama.cpp. Stürzt die Engine in llama.cpps eigenem Code ab, lädt QuantDesk das Modell erneut in einer sichereren Konfiguration und merkt sie sich hier.</translation>
    </message>
    <message>
        <source>Forget</source>
        <translation>Vergessen</translation>
    </message>
    <message>
        <source>The next loads try llama.cpp&apos;s defaults again</source>
        <translation>Die nächsten Ladevorgänge versuchen wieder die Voreinstellungen von llama.cpp</translation>
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
        <source>available</source>
        <translation>verfügbar</translation>
    </message>
    <message>
        <source>unavailable</source>
        <translation>nicht verfügbar</translation>
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
    <name>ImportFlow</name>
    <message>
        <source>Import a model</source>
        <translation>Ein Modell importieren</translation>
    </message>
    <message>
        <source>GGUF models (*.gguf);;All files (*)</source>
        <translation>GGUF-Modelle (*.gguf);;Alle Dateien (*)</translation>
    </message>
</context>
<context>
    <name>KldChart</name>
    <message>
        <source>Chart: mean KL divergence per variant</source>
        <translation>Diagramm: mittlere KL-Divergenz je Variante</translation>
    </message>
    <message>
        <source>No variant has a KL divergence from the reference.</source>
        <translation>Keine Variante hat eine KL-Divergenz gegenüber der Referenz.</translation>
    </message>
    <message>
        <source>{estimate} (99%: {p99})</source>
        <translation>{estimate} (99 %: {p99})</translation>
    </message>
    <message>
        <source>nats/token; whisker: ± one standard error (overlapping whiskers: not told apart)</source>
        <translation>nats/Token; Fehlerbalken: ± ein Standardfehler (überlappende Balken: nicht unterscheidbar)</translation>
    </message>
</context>
<context>
    <name>LabHistory</name>
    <message>
        <source>Past results</source>
        <translation>Frühere Ergebnisse</translation>
    </message>
    <message>
        <source>Open</source>
        <translation>Öffnen</translation>
    </message>
    <message>
        <source>Open the selected past result</source>
        <translation>Das ausgewählte frühere Ergebnis öffnen</translation>
    </message>
    <message>
        <source>Delete…</source>
        <translation>Löschen …</translation>
    </message>
    <message>
        <source>Delete the selected past result</source>
        <translation>Das ausgewählte frühere Ergebnis löschen</translation>
    </message>
    <message>
        <source>No saved results yet.</source>
        <translation>Noch keine gespeicherten Ergebnisse.</translation>
    </message>
    <message>
        <source>Delete this result?</source>
        <translation>Dieses Ergebnis löschen?</translation>
    </message>
    <message>
        <source>Delete the saved bench result {result_id}? This cannot be undone.</source>
        <translation>Das gespeicherte Messergebnis {result_id} löschen? Das lässt sich nicht rückgängig machen.</translation>
    </message>
</context>
<context>
    <name>LabPage</name>
    <message>
        <source>Highest precision (automatic)</source>
        <translation>Höchste Genauigkeit (automatisch)</translation>
    </message>
    <message>
        <source>Load</source>
        <translation>Laden</translation>
    </message>
    <message>
        <source>Time to load the model in a fresh engine host</source>
        <translation>Zeit zum Laden des Modells in einem frischen Engine-Prozess</translation>
    </message>
    <message>
        <source>Prompt tok/s</source>
        <translation>Prompt Tok./s</translation>
    </message>
    <message>
        <source>Prompt processing speed</source>
        <translation>Tempo der Prompt-Verarbeitung</translation>
    </message>
    <message>
        <source>Gen tok/s</source>
        <translation>Gen. Tok./s</translation>
    </message>
    <message>
        <source>Generation speed, after the first token</source>
        <translation>Generierungstempo nach dem ersten Token</translation>
    </message>
    <message>
        <source>TTFT</source>
        <translation>TTFT</translation>
    </message>
    <message>
        <source>Time to the first generated token</source>
        <translation>Zeit bis zum ersten erzeugten Token</translation>
    </message>
    <message>
        <source>Peak memory</source>
        <translation>Spitzenspeicher</translation>
    </message>
    <message>
        <source>The engine process&apos;s peak RAM during the run</source>
        <translation>Der höchste RAM-Verbrauch des Engine-Prozesses während des Laufs</translation>
    </message>
    <message>
        <source>Perplexity</source>
        <translation>Perplexität</translation>
    </message>
    <message>
        <source>Prose (bundled)</source>
        <translation>Prosa (mitgeliefert)</translation>
    </message>
    <message>
        <source>Code (bundled: QuantDesk&apos;s source)</source>
        <translation>Code (mitgeliefert: QuantDesks Quelltext)</translation>
    </message>
    <message>
        <source>Conversations (bundled: tool calls, thinking)</source>
        <translation>Unterhaltungen (mitgeliefert: Tool-Aufrufe, Denken)</translation>
    </message>
    <message>
        <source>German (bundled)</source>
        <translation>Deutsch (mitgeliefert)</translation>
    </message>
    <message>
        <source>Your chats</source>
        <translation>Ihre Chats</translation>
    </message>
    <message>
        <source>Variant</source>
        <translation>Variante</translation>
    </message>
    <message>
        <source>Quant</source>
        <translation>Quantisierung</translation>
    </message>
    <message>
        <source>Backend</source>
        <translation>Backend</translation>
    </message>
    <message>
        <source>Size</source>
        <translation>Größe</translation>
    </message>
    <message>
        <source>Quant lab</source>
        <translation>Quantisierungslabor</translation>
    </message>
    <message>
        <source>Nothing to compare yet</source>
        <translation>Noch nichts zu vergleichen</translation>
    </message>
    <message>
        <source>The lab compares quants of one model: download two or more from Discover, or add model files and folders you have below.</source>
        <translation>Das Labor vergleicht Quantisierungen eines Modells: Laden Sie zwei oder mehr unter „Entdecken“ herunter, oder fügen Sie unten Modelldateien und -ordner hinzu, die Sie haben.</translation>
    </message>
    <message>
        <source>Find a model</source>
        <translation>Modell finden</translation>
    </message>
    <message>
        <source>Run bench</source>
        <translation>Messung starten</translation>
    </message>
    <message>
        <source>Run the bench</source>
        <translation>Die Messung starten</translation>
    </message>
    <message>
        <source>Cancel</source>
        <translation>Abbrechen</translation>
    </message>
    <message>
        <source>Cancel the bench</source>
        <translation>Die Messung abbrechen</translation>
    </message>
    <message>
        <source>Bench progress</source>
        <translation>Fortschritt der Messung</translation>
    </message>
    <message>
        <source>Tick two or more variants of one model, then run.</source>
        <translation>Haken Sie zwei oder mehr Varianten eines Modells an und starten Sie dann.</translation>
    </message>
    <message>
        <source>Bench status</source>
        <translation>Status der Messung</translation>
    </message>
    <message>
        <source>Results</source>
        <translation>Ergebnisse</translation>
    </message>
    <message>
        <source>Select all rows</source>
        <translation>Alle Zeilen auswählen</translation>
    </message>
    <message>
        <source>Table</source>
        <translation>Tabelle</translation>
    </message>
    <message>
        <source>Charts</source>
        <translation>Diagramme</translation>
    </message>
    <message>
        <source>Export CSV…</source>
        <translation>CSV exportieren …</translation>
    </message>
    <message>
        <source>Export the result as CSV</source>
        <translation>Das Ergebnis als CSV exportieren</translation>
    </message>
    <message>
        <source>Export JSON…</source>
        <translation>JSON exportieren …</translation>
    </message>
    <message>
        <source>Export the result as JSON</source>
        <translation>Das Ergebnis als JSON exportieren</translation>
    </message>
    <message>
        <source>Save charts as PNG…</source>
        <translation>Diagramme als PNG speichern …</translation>
    </message>
    <message>
        <source>Save the charts as a PNG image</source>
        <translation>Die Diagramme als PNG-Bild speichern</translation>
    </message>
    <message>
        <source>Quant card…</source>
        <translation>Quant-Karte…</translation>
    </message>
    <message>
        <source>Save a quant card: Markdown and JSON, for a model repo or a bug report</source>
        <translation>Eine Quant-Karte speichern: Markdown und JSON, für ein Modell-Repository oder einen Fehlerbericht</translation>
    </message>
    <message>
        <source>Settings</source>
        <translation>Einstellungen</translation>
    </message>
    <message>
        <source>Reference variant</source>
        <translation>Referenzvariante</translation>
    </message>
    <message>
        <source>Quality is measured against this variant</source>
        <translation>Die Qualität wird gegen diese Variante gemessen</translation>
    </message>
    <message>
        <source>Prompt tokens</source>
        <translation>Prompt-Tokens</translation>
    </message>
    <message>
        <source>Length of the measured prompt, in the variant&apos;s tokens</source>
        <translation>Länge des gemessenen Prompts, in Tokens der Variante</translation>
    </message>
    <message>
        <source>Generated tokens</source>
        <translation>Erzeugte Tokens</translation>
    </message>
    <message>
        <source>Tokens generated per run</source>
        <translation>Pro Lauf erzeugte Tokens</translation>
    </message>
    <message>
        <source>Repetitions</source>
        <translation>Wiederholungen</translation>
    </message>
    <message>
        <source>Measured runs per variant; the table shows their median</source>
        <translation>Gemessene Läufe pro Variante; die Tabelle zeigt ihren Median</translation>
    </message>
    <message>
        <source>Text to score</source>
        <translation>Zu bewertender Text</translation>
    </message>
    <message>
        <source>What the quality pass scores: a bundled set, your chats (rendered with the reference&apos;s chat template), or a text file or folder of yours</source>
        <translation>Was der Qualitätsdurchlauf bewertet: ein mitgelieferter Text, Ihre Chats (mit der Chat-Vorlage der Referenz dargestellt) oder eine eigene Textdatei bzw. ein Ordner</translation>
    </message>
    <message>
        <source>Text file…</source>
        <translation>Textdatei …</translation>
    </message>
    <message>
        <source>Folder of texts…</source>
        <translation>Ordner mit Texten …</translation>
    </message>
    <message>
        <source>Sweep the KV cache: {kv}</source>
        <translation>KV-Cache durchlaufen: {kv}</translation>
    </message>
    <message>
        <source>Measure every GGUF variant once per ticked KV-cache type (none ticked: no sweep)</source>
        <translation>Jede GGUF-Variante einmal je angehaktem KV-Cache-Typ messen (keiner angehakt: kein Durchlauf)</translation>
    </message>
    <message>
        <source>Sweep the context lengths</source>
        <translation>Kontextlängen durchlaufen</translation>
    </message>
    <message>
        <source>e.g. 512, 2048, 8192</source>
        <translation>z. B. 512, 2048, 8192</translation>
    </message>
    <message>
        <source>Measure every variant once per context length: its quality in windows of that length, its speed with a prompt that fills it (empty: no sweep)</source>
        <translation>Jede Variante einmal je Kontextlänge messen: ihre Qualität in Fenstern dieser Länge, ihre Geschwindigkeit mit einem Prompt, der sie füllt (leer: kein Durchlauf)</translation>
    </message>
    <message>
        <source>Measure quality</source>
        <translation>Qualität messen</translation>
    </message>
    <message>
        <source>Reference</source>
        <translation>Referenz</translation>
    </message>
    <message>
        <source>Text</source>
        <translation>Text</translation>
    </message>
    <message>
        <source>KV caches</source>
        <translation>KV-Caches</translation>
    </message>
    <message>
        <source>Contexts</source>
        <translation>Kontexte</translation>
    </message>
    <message>
        <source>No models in the library yet: add model files or folders by hand, or download some from Discover.</source>
        <translation>Noch keine Modelle in der Bibliothek: Fügen Sie Modelldateien oder -ordner von Hand hinzu oder laden Sie welche über „Entdecken“ herunter.</translation>
    </message>
    <message>
        <source>The library could not be read: {error}</source>
        <translation>Die Bibliothek konnte nicht gelesen werden: {error}</translation>
    </message>
    <message>
        <source>{path} is not a ticked variant</source>
        <translation>{path} ist keine angehakte Variante</translation>
    </message>
    <message>
        <source>context lengths are whole numbers separated by commas, such as “512, 2048, 8192”, not “{text}”</source>
        <translation>Kontextlängen sind ganze Zahlen, durch Kommas getrennt, etwa „512, 2048, 8192“, nicht „{text}“</translation>
    </message>
    <message>
        <source>Score a text file</source>
        <translation>Eine Textdatei bewerten</translation>
    </message>
    <message>
        <source>Text files (*.txt *.md);;All files (*)</source>
        <translation>Textdateien (*.txt *.md);;Alle Dateien (*)</translation>
    </message>
    <message>
        <source>Score every text file in a folder</source>
        <translation>Jede Textdatei eines Ordners bewerten</translation>
    </message>
    <message>
        <source>Tick at least one variant to measure (two or more to compare them).</source>
        <translation>Haken Sie mindestens eine Variante zum Messen an (zwei oder mehr, um sie zu vergleichen).</translation>
    </message>
    <message>
        <source>Cannot run: {problem}.</source>
        <translation>Kann nicht starten: {problem}.</translation>
    </message>
    <message numerus="yes">
        <source>Starting: %n variant(s), each in a fresh engine host…</source>
        <translation>
            <numerusform>Start: %n Variante, in einem frischen Engine-Prozess …</numerusform>
            <numerusform>Start: %n Varianten, jede in einem frischen Engine-Prozess …</numerusform>
        </translation>
    </message>
    <message>
        <source>Fetching — {message}</source>
        <translation>Laden — {message}</translation>
    </message>
    <message>
        <source>Variants of {model}…</source>
        <translation>Varianten von {model}…</translation>
    </message>
    <message numerus="yes">
        <source>Result {id}: medians of %n run(s) per variant (hover over a figure for its range); prompt ≈{prompt_tokens} tokens, {gen_tokens} generated; quality against {reference}</source>
        <translation>
            <numerusform>Ergebnis {id}: Mediane aus %n Lauf pro Variante (für die Spanne über einen Wert fahren); Prompt ≈{prompt_tokens} Tokens, {gen_tokens} erzeugt; Qualität gegenüber {reference}</numerusform>
            <numerusform>Ergebnis {id}: Mediane aus %n Läufen pro Variante (für die Spanne über einen Wert fahren); Prompt ≈{prompt_tokens} Tokens, {gen_tokens} erzeugt; Qualität gegenüber {reference}</numerusform>
        </translation>
    </message>
    <message>
        <source>Stopping after the current step…</source>
        <translation>Hält nach dem aktuellen Schritt an …</translation>
    </message>
    <message>
        <source>PPL(Q) on the bundled text, the second half of each window scored, ± one standard error; lower is better</source>
        <translation>PPL(Q) auf dem mitgelieferten Text, bewertet in der zweiten Hälfte jedes Fensters, ± ein Standardfehler; niedriger ist besser</translation>
    </message>
    <message>
        <source>PPL ratio</source>
        <translation>PPL-Verhältnis</translation>
    </message>
    <message>
        <source>PPL(Q)/PPL(base) ± one standard error: 1 is the reference&apos;s</source>
        <translation>PPL(Q)/PPL(base) ± ein Standardfehler: 1 ist der Wert der Referenz</translation>
    </message>
    <message>
        <source>Mean KLD</source>
        <translation>Mittlere KLD</translation>
    </message>
    <message>
        <source>Mean KL divergence of next-token distributions from the reference (nats/token) ± one standard error; 0 is identical</source>
        <translation>Mittlere KL-Divergenz der Verteilungen des nächsten Tokens gegenüber der Referenz (nats/Token) ± ein Standardfehler; 0 ist identisch</translation>
    </message>
    <message>
        <source>KLD 99%</source>
        <translation>KLD 99 %</translation>
    </message>
    <message>
        <source>The 99th percentile of the KL divergence: how bad the worst tokens get</source>
        <translation>Das 99. Perzentil der KL-Divergenz: wie schlecht die schlimmsten Tokens werden</translation>
    </message>
    <message>
        <source>Same top p</source>
        <translation>Gleiches Top-Token</translation>
    </message>
    <message>
        <source>How often the variant&apos;s most likely next token is the reference&apos;s, ± one standard error</source>
        <translation>Wie oft das wahrscheinlichste nächste Token der Variante das der Referenz ist, ± ein Standardfehler</translation>
    </message>
    <message>
        <source>Compare quants and formats of one model on this machine: load time, prompt and generation speed, time to first token and peak memory, and quality against the highest-precision variant as llama.cpp&apos;s llama-perplexity measures it (mean KL divergence, its percentiles, same top p, Δp and the perplexity ratio, each ± its standard error). Each run uses a fresh engine host.</source>
        <translation>Vergleichen Sie Quantisierungen und Formate eines Modells auf diesem Rechner: Ladezeit, Prompt- und Generierungstempo, Zeit bis zum ersten Token und Spitzenspeicher sowie die Qualität gegenüber der genauesten Variante, so gemessen wie mit llama-perplexity von llama.cpp (mittlere KL-Divergenz, ihre Perzentile, gleiches Top-Token, Δp und das Perplexitätsverhältnis, jeweils ± Standardfehler). Jeder Lauf nutzt einen frischen Engine-Prozess.</translation>
    </message>
    <message>
        <source>Statistics against the reference</source>
        <translation>Statistik gegenüber der Referenz</translation>
    </message>
    <message>
        <source>Statistics</source>
        <translation>Statistik</translation>
    </message>
    <message>
        <source>Quality window</source>
        <translation>Qualitätsfenster</translation>
    </message>
    <message>
        <source>Tokens per window of the quality pass; the second half of each is scored (llama-perplexity&apos;s -c)</source>
        <translation>Tokens je Fenster der Qualitätsmessung; bewertet wird jeweils die zweite Hälfte (-c von llama-perplexity)</translation>
    </message>
    <message>
        <source>Windows</source>
        <translation>Fenster</translation>
    </message>
    <message>
        <source>At most this many windows of the text (llama-perplexity&apos;s --chunks); 0: all</source>
        <translation>Höchstens so viele Fenster des Textes (--chunks von llama-perplexity); 0: alle</translation>
    </message>
    <message>
        <source>all</source>
        <translation>alle</translation>
    </message>
    <message>
        <source>Measure speed</source>
        <translation>Tempo messen</translation>
    </message>
    <message>
        <source>Measure quality (KL divergence, perplexity)</source>
        <translation>Qualität messen (KL-Divergenz, Perplexität)</translation>
    </message>
    <message>
        <source>Reference file…</source>
        <translation>Referenzdatei…</translation>
    </message>
    <message>
        <source>Compare against a KL reference file instead of a reference model</source>
        <translation>Mit einer KL-Referenzdatei statt einem Referenzmodell vergleichen</translation>
    </message>
    <message>
        <source>A reference this lab saved, or llama-perplexity&apos;s --kl-divergence-base file: no reference model needs to load</source>
        <translation>Eine von diesem Labor gespeicherte Referenz oder die --kl-divergence-base-Datei von llama-perplexity: kein Referenzmodell muss geladen werden</translation>
    </message>
    <message>
        <source>Reference file: {name}</source>
        <translation>Referenzdatei: {name}</translation>
    </message>
    <message>
        <source>Choose a KL reference file</source>
        <translation>KL-Referenzdatei wählen</translation>
    </message>
    <message>
        <source>KL references (*.qdref *.kld *.bin);;All files (*)</source>
        <translation>KL-Referenzen (*.qdref *.kld *.bin);;Alle Dateien (*)</translation>
    </message>
    <message>
        <source>Speed</source>
        <translation>Tempo</translation>
    </message>
    <message>
        <source>Quality</source>
        <translation>Qualität</translation>
    </message>
    <message>
        <source>{phase} — {message}</source>
        <translation>{phase} – {message}</translation>
    </message>
    <message>
        <source>Finished and saved ({id}).</source>
        <translation>Fertig und gespeichert ({id}).</translation>
    </message>
    <message>
        <source> Could not measure: {variants} — hover over its row for why.</source>
        <translation> Nicht messbar: {variants} – fahren Sie über die Zeile, um den Grund zu sehen.</translation>
    </message>
    <message>
        <source>The bench failed: {message}</source>
        <translation>Die Messung ist fehlgeschlagen: {message}</translation>
    </message>
    <message>
        <source>Cancelled: nothing was saved.</source>
        <translation>Abgebrochen: Nichts wurde gespeichert.</translation>
    </message>
    <message>
        <source> — quality pass skipped.</source>
        <translation> – Qualitätsmessung übersprungen.</translation>
    </message>
    <message>
        <source>Quality as llama-perplexity measures it: {chunks} windows of {ctx} tokens, {positions} positions scored, ± one standard error; the reference keeps {tokens} tokens per position on average ({left_out} of the probability left out).</source>
        <translation>Qualität wie von llama-perplexity gemessen: {chunks} Fenster zu {ctx} Tokens, {positions} Positionen bewertet, ± ein Standardfehler; die Referenz behält im Mittel {tokens} Tokens je Position ({left_out} der Wahrscheinlichkeit ausgelassen).</translation>
    </message>
    <message>
        <source>{label}: not measured — {error}</source>
        <translation>{label}: nicht gemessen – {error}</translation>
    </message>
    <message>
        <source>Ranked by mean KLD (± one standard error; KLD×GB: the loss times the file&apos;s size, lower is better):</source>
        <translation>Nach mittlerer KLD geordnet (± ein Standardfehler; KLD×GB: der Verlust mal die Dateigröße, kleiner ist besser):</translation>
    </message>
    <message>
        <source>{rank}. {label}: mean KLD {kld}, {size}, KLD×GB {kld_gb}</source>
        <translation>{rank}. {label}: mittlere KLD {kld}, {size}, KLD×GB {kld_gb}</translation>
    </message>
    <message>
        <source> — not significantly different from {label}</source>
        <translation> — nicht signifikant verschieden von {label}</translation>
    </message>
    <message>
        <source>there is no result to export</source>
        <translation>es gibt kein Ergebnis zum Exportieren</translation>
    </message>
    <message>
        <source>the image could not be written to {path}</source>
        <translation>das Bild konnte nicht nach {path} geschrieben werden</translation>
    </message>
    <message>
        <source>unknown export kind {kind!r}</source>
        <translation>unbekannte Exportart {kind!r}</translation>
    </message>
    <message>
        <source>Export as {kind}</source>
        <translation>Als {kind} exportieren</translation>
    </message>
    <message>
        <source>Saved {path}.</source>
        <translation>{path} gespeichert.</translation>
    </message>
    <message>
        <source>Could not save: {error}</source>
        <translation>Speichern nicht möglich: {error}</translation>
    </message>
    <message>
        <source>CSV (*.csv)</source>
        <translation>CSV (*.csv)</translation>
    </message>
    <message>
        <source>JSON (*.json)</source>
        <translation>JSON (*.json)</translation>
    </message>
    <message>
        <source>PNG image (*.png)</source>
        <translation>PNG-Bild (*.png)</translation>
    </message>
    <message>
        <source>Quant card (*.md)</source>
        <translation>Quant-Karte (*.md)</translation>
    </message>
    <message>
        <source>That result cannot be opened: {error}</source>
        <translation>Dieses Ergebnis kann nicht geöffnet werden: {error}</translation>
    </message>
    <message>
        <source>Showing the saved result {result_id}.</source>
        <translation>Das gespeicherte Ergebnis {result_id} wird angezeigt.</translation>
    </message>
    <message>
        <source>That result could not be deleted: {error}</source>
        <translation>Dieses Ergebnis konnte nicht gelöscht werden: {error}</translation>
    </message>
    <message>
        <source>Deleted the saved result {result_id}.</source>
        <translation>Das gespeicherte Ergebnis {result_id} wurde gelöscht.</translation>
    </message>
</context>
<context>
    <name>LibraryPage</name>
    <message>
        <source>Model</source>
        <translation>Modell</translation>
    </message>
    <message>
        <source>Format</source>
        <translation>Format</translation>
    </message>
    <message>
        <source>Quant</source>
        <translation>Quantisierung</translation>
    </message>
    <message>
        <source>Size</source>
        <translation>Größe</translation>
    </message>
    <message>
        <source>Architecture</source>
        <translation>Architektur</translation>
    </message>
    <message>
        <source>reranker</source>
        <translation>Reranker</translation>
    </message>
    <message>
        <source>embeddings</source>
        <translation>Embeddings</translation>
    </message>
    <message>
        <source>Source</source>
        <translation>Herkunft</translation>
    </message>
    <message>
        <source>Updates</source>
        <translation>Updates</translation>
    </message>
    <message>
        <source>Library</source>
        <translation>Bibliothek</translation>
    </message>
    <message>
        <source>Import file…</source>
        <translation>Datei importieren …</translation>
    </message>
    <message>
        <source>Import a GGUF model file</source>
        <translation>Eine GGUF-Modelldatei importieren</translation>
    </message>
    <message>
        <source>Import folder…</source>
        <translation>Ordner importieren …</translation>
    </message>
    <message>
        <source>Import a model folder</source>
        <translation>Einen Modellordner importieren</translation>
    </message>
    <message>
        <source>Watch folder…</source>
        <translation>Ordner beobachten …</translation>
    </message>
    <message>
        <source>Add a folder whose models are used in place</source>
        <translation>Einen Ordner hinzufügen, dessen Modelle an Ort und Stelle genutzt werden</translation>
    </message>
    <message>
        <source>Refresh</source>
        <translation>Aktualisieren</translation>
    </message>
    <message>
        <source>Scan the library again</source>
        <translation>Die Bibliothek neu einlesen</translation>
    </message>
    <message>
        <source>Check for updates</source>
        <translation>Nach Updates suchen</translation>
    </message>
    <message>
        <source>Ask the Hub now whether downloaded models changed</source>
        <translation>Jetzt beim Hub nachfragen, ob sich heruntergeladene Modelle geändert haben</translation>
    </message>
    <message>
        <source>Reading the library…</source>
        <translation>Die Bibliothek wird gelesen …</translation>
    </message>
    <message>
        <source>Disk usage</source>
        <translation>Speicherbelegung</translation>
    </message>
    <message>
        <source>Models</source>
        <translation>Modelle</translation>
    </message>
    <message>
        <source>Select all models</source>
        <translation>Alle Modelle auswählen</translation>
    </message>
    <message>
        <source>No models yet</source>
        <translation>Noch keine Modelle</translation>
    </message>
    <message>
        <source>Find one that fits this machine on the Discover page, or import a GGUF file or a model folder you already have.</source>
        <translation>Finden Sie auf der Seite „Entdecken“ eines, das auf diesen Rechner passt, oder importieren Sie eine GGUF-Datei oder einen Modellordner, den Sie schon haben.</translation>
    </message>
    <message>
        <source>Find a model</source>
        <translation>Modell finden</translation>
    </message>
    <message>
        <source>Model details</source>
        <translation>Modelldetails</translation>
    </message>
    <message>
        <source>Library status</source>
        <translation>Status der Bibliothek</translation>
    </message>
    <message>
        <source>Open folder</source>
        <translation>Ordner öffnen</translation>
    </message>
    <message>
        <source>Show the model&apos;s files</source>
        <translation>Die Dateien des Modells anzeigen</translation>
    </message>
    <message>
        <source>Delete…</source>
        <translation>Löschen …</translation>
    </message>
    <message>
        <source>Delete the model</source>
        <translation>Das Modell löschen</translation>
    </message>
    <message>
        <source>Update</source>
        <translation>Aktualisieren</translation>
    </message>
    <message>
        <source>Download the model&apos;s changed files</source>
        <translation>Die geänderten Dateien des Modells herunterladen</translation>
    </message>
    <message>
        <source>Load in chat</source>
        <translation>Im Chat laden</translation>
    </message>
    <message>
        <source>Load the model and chat with it</source>
        <translation>Das Modell laden und damit chatten</translation>
    </message>
    <message>
        <source>Scanning…</source>
        <translation>Wird eingelesen …</translation>
    </message>
    <message>
        <source>Copying {name}…</source>
        <translation>{name} wird kopiert …</translation>
    </message>
    <message>
        <source>Adding {name}…</source>
        <translation>{name} wird hinzugefügt …</translation>
    </message>
    <message>
        <source>Scanning {folder}…</source>
        <translation>{folder} wird eingelesen …</translation>
    </message>
    <message>
        <source>Deleting {name}…</source>
        <translation>{name} wird gelöscht …</translation>
    </message>
    <message>
        <source>Checking for updates…</source>
        <translation>Suche nach Updates …</translation>
    </message>
    <message numerus="yes">
        <source>%n model(s) · {owned} in the models folder {folder}</source>
        <translation>
            <numerusform>%n Modell · {owned} im Modellordner {folder}</numerusform>
            <numerusform>%n Modelle · {owned} im Modellordner {folder}</numerusform>
        </translation>
    </message>
    <message>
        <source>, {size} used in place</source>
        <translation>, {size} an Ort und Stelle genutzt</translation>
    </message>
    <message>
        <source> · {free} free of {total} on that disk</source>
        <translation> · {free} von {total} frei auf diesem Laufwerk</translation>
    </message>
    <message>
        <source>No models yet. Download one from Discover, or import a GGUF file or a model folder you already have.</source>
        <translation>Noch keine Modelle. Laden Sie eines über „Entdecken“ herunter oder importieren Sie eine vorhandene GGUF-Datei oder einen Modellordner.</translation>
    </message>
    <message>
        <source>from {repo_id}</source>
        <translation>aus {repo_id}</translation>
    </message>
    <message>
        <source> at commit {commit_hash}</source>
        <translation> bei Commit {commit_hash}</translation>
    </message>
    <message>
        <source>{headline} (checked {when})</source>
        <translation>{headline} (geprüft {when})</translation>
    </message>
    <message>
        <source>Select a model to load, open or delete it.</source>
        <translation>Wählen Sie ein Modell, um es zu laden, zu öffnen oder zu löschen.</translation>
    </message>
    <message>
        <source>Update of {name} · {reasons}</source>
        <translation>Update von {name} · {reasons}</translation>
    </message>
    <message>
        <source>Updating {name} in Downloads; it stays usable until the new files are in.</source>
        <translation>{name} wird unter „Downloads“ aktualisiert; es bleibt nutzbar, bis die neuen Dateien da sind.</translation>
    </message>
    <message>
        <source>Delete model</source>
        <translation>Modell löschen</translation>
    </message>
    <message>
        <source>Remove model</source>
        <translation>Modell entfernen</translation>
    </message>
    <message>
        <source>Delete</source>
        <translation>Löschen</translation>
    </message>
    <message>
        <source>Remove from library</source>
        <translation>Aus der Bibliothek entfernen</translation>
    </message>
    <message>
        <source>Import a model file</source>
        <translation>Eine Modelldatei importieren</translation>
    </message>
    <message>
        <source>GGUF models (*.gguf)</source>
        <translation>GGUF-Modelle (*.gguf)</translation>
    </message>
    <message>
        <source>Import</source>
        <translation>Importieren</translation>
    </message>
    <message>
        <source>Copy {name} into the models folder, or use it where it is? A copy keeps working when the original is moved or its drive is unplugged; using it in place takes no extra disk space.</source>
        <translation>{name} in den Modellordner kopieren oder dort nutzen, wo es liegt? Eine Kopie funktioniert weiter, wenn das Original verschoben oder sein Laufwerk getrennt wird; die Nutzung an Ort und Stelle braucht keinen zusätzlichen Speicherplatz.</translation>
    </message>
    <message>
        <source>Copy into the library</source>
        <translation>In die Bibliothek kopieren</translation>
    </message>
    <message>
        <source>Use in place</source>
        <translation>An Ort und Stelle nutzen</translation>
    </message>
    <message>
        <source>Watch a folder of models</source>
        <translation>Einen Ordner mit Modellen beobachten</translation>
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
        <source>Documents</source>
        <translation>Dokumente</translation>
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
    <name>MemoryBar</name>
    <message>
        <source>{used} in use of {total}</source>
        <translation>{used} von {total} belegt</translation>
    </message>
    <message>
        <source>size unknown</source>
        <translation>Größe unbekannt</translation>
    </message>
    <message>
        <source>{title} memory</source>
        <translation>Speicher: {title}</translation>
    </message>
</context>
<context>
    <name>MemoryChart</name>
    <message>
        <source>Chart: peak memory per variant</source>
        <translation>Diagramm: Spitzenspeicher pro Variante</translation>
    </message>
    <message>
        <source>No variant has a memory figure.</source>
        <translation>Keine Variante hat einen Speicherwert.</translation>
    </message>
    <message>
        <source> (ref)</source>
        <translation> (Ref.)</translation>
    </message>
    <message>
        <source>engine RAM peak: median of the runs, whisker min–max</source>
        <translation>RAM-Spitze der Engine: Median der Läufe, Antenne Min.–Max.</translation>
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
        <source>Pinned</source>
        <translation>Angeheftet</translation>
    </message>
    <message>
        <source>Pinned: always sent to the model</source>
        <translation>Angeheftet: wird immer an das Modell gesendet</translation>
    </message>
    <message>
        <source>Pinned: the model reads this message in every reply, even once the context is full and earlier messages are left out</source>
        <translation>Angeheftet: Das Modell liest diese Nachricht bei jeder Antwort, auch wenn der Kontext voll ist und frühere Nachrichten weggelassen werden</translation>
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
        <source>Pin</source>
        <translation>Anheften</translation>
    </message>
    <message>
        <source>Pin message</source>
        <translation>Nachricht anheften</translation>
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
        <source>Unpin</source>
        <translation>Lösen</translation>
    </message>
    <message>
        <source>Unpin: the message may be left out again once the context is full</source>
        <translation>Lösen: Die Nachricht kann wieder weggelassen werden, wenn der Kontext voll ist</translation>
    </message>
    <message>
        <source>Pin: always send this message to the model, even once the context is full</source>
        <translation>Anheften: Diese Nachricht immer an das Modell senden, auch wenn der Kontext voll ist</translation>
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
    <name>ModelBar</name>
    <message>
        <source>No model loaded</source>
        <translation>Kein Modell geladen</translation>
    </message>
    <message>
        <source>Loaded model</source>
        <translation>Geladenes Modell</translation>
    </message>
    <message>
        <source>Loading</source>
        <translation>Lädt</translation>
    </message>
    <message>
        <source>Load model…</source>
        <translation>Modell laden …</translation>
    </message>
    <message>
        <source>Load a model</source>
        <translation>Ein Modell laden</translation>
    </message>
    <message>
        <source>A GGUF file or model folder (its settings are filled in for this machine), or a model on a remote server</source>
        <translation>Eine GGUF-Datei oder ein Modellordner (die Einstellungen werden für diesen Rechner ausgefüllt) oder ein Modell auf einem entfernten Server</translation>
    </message>
    <message>
        <source>Model file…</source>
        <translation>Modelldatei …</translation>
    </message>
    <message>
        <source>Remote model…</source>
        <translation>Entferntes Modell …</translation>
    </message>
    <message>
        <source>Reload</source>
        <translation>Neu laden</translation>
    </message>
    <message>
        <source>Reload the model with these settings</source>
        <translation>Das Modell mit diesen Einstellungen neu laden</translation>
    </message>
    <message>
        <source>Load the same model again with the settings below</source>
        <translation>Dasselbe Modell mit den Einstellungen unten erneut laden</translation>
    </message>
    <message>
        <source>MoE experts in RAM</source>
        <translation>MoE-Experten im RAM</translation>
    </message>
    <message>
        <source>Mixture-of-experts models: keep the experts of the first N layers in system RAM and the rest of every layer on the GPU (llama.cpp --n-cpu-moe); only the experts a token uses are read from RAM</source>
        <translation>Mixture-of-Experts-Modelle: die Experten der ersten N Schichten im Arbeitsspeicher halten und den Rest jeder Schicht auf der GPU (llama.cpp --n-cpu-moe); nur die Experten, die ein Token nutzt, werden aus dem RAM gelesen</translation>
    </message>
    <message>
        <source>Loaded models</source>
        <translation>Geladene Modelle</translation>
    </message>
    <message>
        <source>The models in memory, each in its engine: eject one to free its memory</source>
        <translation>Die Modelle im Speicher, jedes in seiner Engine: Werfen Sie eines aus, um seinen Speicher freizugeben</translation>
    </message>
    <message>
        <source>Context </source>
        <translation>Kontext </translation>
    </message>
    <message>
        <source>Context length</source>
        <translation>Kontextlänge</translation>
    </message>
    <message>
        <source>GPU layers: all</source>
        <translation>GPU-Schichten: alle</translation>
    </message>
    <message>
        <source>GPU layers </source>
        <translation>GPU-Schichten </translation>
    </message>
    <message>
        <source>GPU layers</source>
        <translation>GPU-Schichten</translation>
    </message>
    <message>
        <source>Layers to offload to the GPU (llama.cpp -ngl); 0 runs on the CPU only</source>
        <translation>Schichten, die auf die GPU ausgelagert werden (llama.cpp -ngl); 0 läuft nur auf der CPU</translation>
    </message>
    <message>
        <source>KV {type}</source>
        <translation>KV {type}</translation>
    </message>
    <message>
        <source>KV cache type</source>
        <translation>Typ des KV-Caches</translation>
    </message>
    <message>
        <source>A quantized cache (q8_0, q4_0) takes less memory and needs flash attention</source>
        <translation>Ein quantisierter Cache (q8_0, q4_0) braucht weniger Speicher und setzt Flash Attention voraus</translation>
    </message>
    <message>
        <source>Flash attn {name}</source>
        <translation>Flash Attn. {name}</translation>
    </message>
    <message>
        <source>Flash attention: auto lets the engine decide</source>
        <translation>Flash Attention: „auto“ überlässt der Engine die Entscheidung</translation>
    </message>
    <message>
        <source>Flash attention</source>
        <translation>Flash Attention</translation>
    </message>
    <message>
        <source>Decode together </source>
        <translation>Gemeinsam dekodieren </translation>
    </message>
    <message>
        <source>Decode together</source>
        <translation>Gemeinsam dekodieren</translation>
    </message>
    <message>
        <source>Chats this model answers at once, each up to the whole context; more wait for one to finish. llama.cpp: one KV cache they share, which does not grow with the number; MLX: a cache each, counted by the fit check. One at a time with a draft model or a vision projector, and on ExLlama</source>
        <translation>Chats, die dieses Modell gleichzeitig beantwortet, jeder bis zum ganzen Kontext; weitere warten, bis einer fertig ist. llama.cpp: ein gemeinsamer KV-Cache, der mit der Anzahl nicht wächst; MLX: ein Cache für jeden, von der Passprüfung mitgezählt. Einer nach dem anderen mit einem Draft-Modell oder einem Vision-Projektor und bei ExLlama</translation>
    </message>
    <message>
        <source>Runtime</source>
        <translation>Laufzeit</translation>
    </message>
    <message>
        <source>The llama.cpp runtime for this model: auto picks the best for this machine; another choice is pinned for this model and reloads it</source>
        <translation>Die llama.cpp-Laufzeit für dieses Modell: „auto“ wählt die beste für diesen Rechner; eine andere Wahl wird für dieses Modell festgelegt und lädt es neu</translation>
    </message>
    <message>
        <source>Runtime auto</source>
        <translation>Laufzeit auto</translation>
    </message>
    <message>
        <source>Estimate</source>
        <translation>Schätzung</translation>
    </message>
    <message>
        <source>Engine memory</source>
        <translation>Speicher der Engine</translation>
    </message>
    <message>
        <source>Memory the engine process holds now (resident set), sampled every second</source>
        <translation>Speicher, den der Engine-Prozess gerade belegt (Resident Set), jede Sekunde gemessen</translation>
    </message>
    <message>
        <source>Runtime {name}</source>
        <translation>Laufzeit {name}</translation>
    </message>
    <message>
        <source>Runtime {pinned} (missing)</source>
        <translation>Laufzeit {pinned} (fehlt)</translation>
    </message>
    <message>
        <source>&lt;b&gt;{name}&lt;/b&gt;&lt;br&gt;&lt;span style=&apos;font-size:small&apos;&gt;remote · {kind} server at {endpoint} · context {n_ctx} · {latency} ms away&lt;/span&gt;</source>
        <translation>&lt;b&gt;{name}&lt;/b&gt;&lt;br&gt;&lt;span style=&apos;font-size:small&apos;&gt;entfernt · {kind}-Server unter {endpoint} · Kontext {n_ctx} · {latency} ms entfernt&lt;/span&gt;</translation>
    </message>
    <message>
        <source>{gpu_layers}/{n_layers} layers on GPU</source>
        <translation>{gpu_layers}/{n_layers} Schichten auf der GPU</translation>
    </message>
    <message>
        <source>CPU only</source>
        <translation>nur CPU</translation>
    </message>
    <message numerus="yes">
        <source> · %n chats at once</source>
        <translation>
            <numerusform> · %n Chat gleichzeitig</numerusform>
            <numerusform> · %n Chats gleichzeitig</numerusform>
        </translation>
    </message>
    <message>
        <source> · experts of {layers} in RAM</source>
        <translation> · Experten von {layers} im RAM</translation>
    </message>
    <message>
        <source> · sees images</source>
        <translation> · versteht Bilder</translation>
    </message>
    <message>
        <source>Vision projector {projector}: {image_tokens} context tokens an image</source>
        <translation>Vision-Projektor {projector}: {image_tokens} Kontext-Tokens pro Bild</translation>
    </message>
    <message>
        <source> · prompt lookup</source>
        <translation> · Prompt-Lookup</translation>
    </message>
    <message>
        <source> · draft {name}</source>
        <translation> · Entwurf {name}</translation>
    </message>
    <message>
        <source>Prompt lookup</source>
        <translation>Prompt-Lookup</translation>
    </message>
    <message>
        <source>Draft {model}: {size}</source>
        <translation>Entwurf {model}: {size}</translation>
    </message>
    <message>
        <source>{what}, {n} tokens a check</source>
        <translation>{what}, {n} Tokens je Prüfung</translation>
    </message>
    <message>
        <source>{memory} in buffers</source>
        <translation>{memory} in Puffern</translation>
    </message>
    <message>
        <source> (estimated {memory})</source>
        <translation> (geschätzt {memory})</translation>
    </message>
    <message>
        <source>&lt;b&gt;{name}&lt;/b&gt;&lt;br&gt;&lt;span style=&apos;font-size:small&apos;&gt;{where} · context {n_ctx} · {memory} · loaded in {load_ms}&lt;/span&gt;</source>
        <translation>&lt;b&gt;{name}&lt;/b&gt;&lt;br&gt;&lt;span style=&apos;font-size:small&apos;&gt;{where} · Kontext {n_ctx} · {memory} · geladen in {load_ms}&lt;/span&gt;</translation>
    </message>
    <message>
        <source>Runtime {runtime}: {runtime_reason}</source>
        <translation>Laufzeit {runtime}: {runtime_reason}</translation>
    </message>
    <message>
        <source>Decode together: {note}</source>
        <translation>Gemeinsam dekodieren: {note}</translation>
    </message>
    <message>
        <source>Chat template: {title} ({origin})</source>
        <translation>Chatvorlage: {title} ({origin})</translation>
    </message>
    <message>
        <source> · tools in the generic JSON format (the template shows none)</source>
        <translation> · Werkzeuge im generischen JSON-Format (die Vorlage zeigt keine)</translation>
    </message>
    <message>
        <source>{n} loaded</source>
        <translation>{n} geladen</translation>
    </message>
    <message>
        <source>{name} · {memory}</source>
        <translation>{name} · {memory}</translation>
    </message>
    <message>
        <source> · this chat</source>
        <translation> · dieser Chat</translation>
    </message>
    <message>
        <source>Eject {name}</source>
        <translation>{name} auswerfen</translation>
    </message>
    <message>
        <source>Engine process: {rss}</source>
        <translation>Engine-Prozess: {rss}</translation>
    </message>
</context>
<context>
    <name>ModelLoadController</name>
    <message>
        <source>Load a model</source>
        <translation>Ein Modell laden</translation>
    </message>
    <message>
        <source>GGUF models (*.gguf);;All files (*)</source>
        <translation>GGUF-Modelle (*.gguf);;Alle Dateien (*)</translation>
    </message>
    <message>
        <source>Sizing up {name}…</source>
        <translation>{name} wird eingeschätzt …</translation>
    </message>
    <message>
        <source>“Load anyway”</source>
        <translation>„Trotzdem laden“</translation>
    </message>
    <message>
        <source> Or pick a smaller quant, or a shorter context.</source>
        <translation> Oder wählen Sie eine kleinere Quantisierung oder einen kürzeren Kontext.</translation>
    </message>
    <message>
        <source>Loading {name}…</source>
        <translation>{name} wird geladen …</translation>
    </message>
    <message>
        <source>No model loaded — the engine stopped</source>
        <translation>Kein Modell geladen – die Engine wurde beendet</translation>
    </message>
    <message>
        <source>{why} Reload loads it again.</source>
        <translation>{why} „Neu laden“ lädt es wieder.</translation>
    </message>
</context>
<context>
    <name>OverflowChoice</name>
    <message>
        <source>Stop: refuse the message</source>
        <translation>Anhalten: die Nachricht ablehnen</translation>
    </message>
    <message>
        <source>Drop the oldest turns</source>
        <translation>Die ältesten Wechsel auslassen</translation>
    </message>
    <message>
        <source>Truncate the middle (keep the first exchange)</source>
        <translation>Die Mitte auslassen (den ersten Wechsel behalten)</translation>
    </message>
    <message>
        <source>Compact: the model summarises the oldest turns</source>
        <translation>Verdichten: Das Modell fasst die ältesten Wechsel zusammen</translation>
    </message>
</context>
<context>
    <name>RemoteModelDialog</name>
    <message>
        <source>Load a remote model</source>
        <translation>Ein entferntes Modell laden</translation>
    </message>
    <message>
        <source>Connection</source>
        <translation>Verbindung</translation>
    </message>
    <message>
        <source>Models on the server</source>
        <translation>Modelle auf dem Server</translation>
    </message>
    <message>
        <source>Status</source>
        <translation>Status</translation>
    </message>
    <message>
        <source>Load</source>
        <translation>Laden</translation>
    </message>
    <message>
        <source>No remote connections yet: add one in Settings → Remote engines.</source>
        <translation>Noch keine entfernten Verbindungen: Fügen Sie eine unter Einstellungen → Entfernte Engines hinzu.</translation>
    </message>
    <message>
        <source>Asking {name} for its models…</source>
        <translation>{name} wird nach seinen Modellen gefragt …</translation>
    </message>
    <message>
        <source> · context {n_ctx}</source>
        <translation> · Kontext {n_ctx}</translation>
    </message>
    <message>
        <source>A {kind} server, {latency_ms:.0f} ms away.</source>
        <translation>Ein {kind}-Server, {latency_ms:.0f} ms entfernt.</translation>
    </message>
</context>
<context>
    <name>ResultsTable</name>
    <message>
        <source>Results table</source>
        <translation>Ergebnistabelle</translation>
    </message>
    <message>
        <source>Select all rows</source>
        <translation>Alle Zeilen auswählen</translation>
    </message>
    <message>
        <source>  (reference)</source>
        <translation>  (Referenz)</translation>
    </message>
    <message>
        <source>not measured: {error}</source>
        <translation>nicht gemessen: {error}</translation>
    </message>
</context>
<context>
    <name>RuntimesPanel</name>
    <message>
        <source>llama.cpp runtimes</source>
        <translation>llama.cpp-Laufzeiten</translation>
    </message>
    <message>
        <source>The runtimes were not probed for this profile.</source>
        <translation>Die Laufzeiten wurden für dieses Profil nicht geprüft.</translation>
    </message>
    <message>
        <source>for every model</source>
        <translation>für jedes Modell</translation>
    </message>
    <message>
        <source>in use</source>
        <translation>in Verwendung</translation>
    </message>
    <message>
        <source>not in use</source>
        <translation>nicht in Verwendung</translation>
    </message>
    <message>
        <source>runtime {name}</source>
        <translation>Laufzeit {name}</translation>
    </message>
    <message>
        <source>Use</source>
        <translation>Verwenden</translation>
    </message>
    <message>
        <source>Pinned</source>
        <translation>Festgelegt</translation>
    </message>
    <message>
        <source>Always use</source>
        <translation>Immer verwenden</translation>
    </message>
    <message>
        <source>Load every model with the {name} runtime, whatever the automatic choice (quantdesk runtime use {name})</source>
        <translation>Jedes Modell mit der Laufzeit {name} laden, unabhängig von der automatischen Wahl (quantdesk runtime use {name})</translation>
    </message>
    <message>
        <source>Use {name}</source>
        <translation>{name} verwenden</translation>
    </message>
    <message>
        <source>Remove</source>
        <translation>Entfernen</translation>
    </message>
    <message>
        <source>Remove {name}</source>
        <translation>{name} entfernen</translation>
    </message>
    <message>
        <source>Delete this runtime&apos;s folder (quantdesk runtime rm {name})</source>
        <translation>Den Ordner dieser Laufzeit löschen (quantdesk runtime rm {name})</translation>
    </message>
    <message>
        <source>Loads use &lt;b&gt;{name}&lt;/b&gt;: {reason}.</source>
        <translation>Geladen wird mit &lt;b&gt;{name}&lt;/b&gt;: {reason}.</translation>
    </message>
    <message>
        <source>nothing</source>
        <translation>nichts</translation>
    </message>
    <message>
        <source>Runtime choice</source>
        <translation>Wahl der Laufzeit</translation>
    </message>
    <message>
        <source>Choose automatically</source>
        <translation>Automatisch wählen</translation>
    </message>
    <message>
        <source>Choose the runtime automatically</source>
        <translation>Die Laufzeit automatisch wählen</translation>
    </message>
    <message>
        <source>Build:</source>
        <translation>Bauen:</translation>
    </message>
    <message>
        <source>{backend_words} runtime</source>
        <translation>Laufzeit {backend_words}</translation>
    </message>
    <message>
        <source>Build the {backend} runtime</source>
        <translation>Die Laufzeit {backend} bauen</translation>
    </message>
    <message>
        <source>Compile llama.cpp for {backend_words} on this machine (quantdesk runtime build {backend}); the log is kept</source>
        <translation>llama.cpp für {backend_words} auf diesem Rechner kompilieren (quantdesk runtime build {backend}); das Protokoll wird aufbewahrt</translation>
    </message>
    <message>
        <source>Runtime build progress</source>
        <translation>Fortschritt beim Bau der Laufzeit</translation>
    </message>
    <message>
        <source>Runtime status</source>
        <translation>Status der Laufzeit</translation>
    </message>
    <message>
        <source>Checking what the {backend_words} build needs…</source>
        <translation>Es wird geprüft, was der Bau für {backend_words} braucht …</translation>
    </message>
    <message>
        <source>Building the {backend_words} runtime: {estimate_text}.</source>
        <translation>Die Laufzeit {backend_words} wird gebaut: {estimate_text}.</translation>
    </message>
    <message>
        <source>, about {minutes} min left</source>
        <translation>, noch etwa {minutes} min</translation>
    </message>
    <message>
        <source>Compiling: step {step} of {total}{left}.</source>
        <translation>Kompilieren: Schritt {step} von {total}{left}.</translation>
    </message>
    <message>
        <source>Built the {name} runtime; loads can use it now. Log: {log}</source>
        <translation>Die Laufzeit {name} ist gebaut; Ladevorgänge können sie jetzt nutzen. Protokoll: {log}</translation>
    </message>
</context>
<context>
    <name>ServerPage</name>
    <message>
        <source>It serves the model loaded in Chat, from the same engine: the model is in memory once, and chat and API requests take turns.</source>
        <translation>Er stellt das im Chat geladene Modell aus derselben Engine bereit: Das Modell liegt nur einmal im Speicher, und Chat- und API-Anfragen wechseln sich ab.</translation>
    </message>
    <message>
        <source>Load a model in Chat first: the server serves the model the Chat has loaded</source>
        <translation>Laden Sie zuerst im Chat ein Modell: Der Server stellt das Modell bereit, das der Chat geladen hat</translation>
    </message>
    <message>
        <source>With “Load library models on demand”, a request naming another model of your library loads it in an engine of its own, within the memory budget; models idle for a while unload (the Chat&apos;s current one never).</source>
        <translation>Mit „Bibliotheksmodelle bei Bedarf laden“ lädt eine Anfrage, die ein anderes Modell Ihrer Bibliothek nennt, dieses in einer eigenen Engine, innerhalb des Speicherbudgets; Modelle, die eine Weile ungenutzt sind, werden entladen (das aktuelle des Chats nie).</translation>
    </message>
    <message>
        <source>Local server</source>
        <translation>Lokaler Server</translation>
    </message>
    <message>
        <source>Serve a local model over an OpenAI-compatible API (/v1/models, /v1/chat/completions, /v1/completions), so other apps and scripts on this computer can use it.&lt;br&gt;{SHARED_ENGINE_NOTE} {ON_DEMAND_NOTE}</source>
        <translation>Ein lokales Modell über eine OpenAI-kompatible API bereitstellen (/v1/models, /v1/chat/completions, /v1/completions), damit andere Apps und Skripte auf diesem Rechner es nutzen können.&lt;br&gt;{SHARED_ENGINE_NOTE} {ON_DEMAND_NOTE}</translation>
    </message>
    <message>
        <source>No model to serve</source>
        <translation>Kein Modell zum Bereitstellen</translation>
    </message>
    <message>
        <source>The server serves the model the Chat has loaded: load one there first, then switch the server on.</source>
        <translation>Der Server stellt das Modell bereit, das der Chat geladen hat: Laden Sie dort zuerst eines, dann schalten Sie den Server ein.</translation>
    </message>
    <message>
        <source>Open Chat</source>
        <translation>Chat öffnen</translation>
    </message>
    <message>
        <source>Serve the model</source>
        <translation>Das Modell bereitstellen</translation>
    </message>
    <message>
        <source>Start or stop the server</source>
        <translation>Den Server starten oder beenden</translation>
    </message>
    <message>
        <source>&lt;b&gt;Off&lt;/b&gt;</source>
        <translation>&lt;b&gt;Aus&lt;/b&gt;</translation>
    </message>
    <message>
        <source>Server state</source>
        <translation>Serverzustand</translation>
    </message>
    <message>
        <source>Address</source>
        <translation>Adresse</translation>
    </message>
    <message>
        <source>shown here while the server is on</source>
        <translation>wird hier angezeigt, solange der Server läuft</translation>
    </message>
    <message>
        <source>Server address</source>
        <translation>Serveradresse</translation>
    </message>
    <message>
        <source>Copy</source>
        <translation>Kopieren</translation>
    </message>
    <message>
        <source>Copy the server address</source>
        <translation>Die Serveradresse kopieren</translation>
    </message>
    <message>
        <source>Base URL</source>
        <translation>Basis-URL</translation>
    </message>
    <message>
        <source>Address on the network</source>
        <translation>Adresse im Netzwerk</translation>
    </message>
    <message>
        <source>Model served</source>
        <translation>Bereitgestelltes Modell</translation>
    </message>
    <message>
        <source>Model</source>
        <translation>Modell</translation>
    </message>
    <message>
        <source>Also loaded</source>
        <translation>Außerdem geladen</translation>
    </message>
    <message>
        <source>Active requests</source>
        <translation>Aktive Anfragen</translation>
    </message>
    <message>
        <source>Requests decoded together</source>
        <translation>Gemeinsam dekodierte Anfragen</translation>
    </message>
    <message>
        <source>Decoded together</source>
        <translation>Gemeinsam dekodiert</translation>
    </message>
    <message>
        <source>Sequences busy, requests waiting and cache hits</source>
        <translation>Belegte Sequenzen, wartende Anfragen und Cache-Treffer</translation>
    </message>
    <message>
        <source>Sequences</source>
        <translation>Sequenzen</translation>
    </message>
    <message>
        <source>Settings (applied when the server starts)</source>
        <translation>Einstellungen (gelten ab dem Start des Servers)</translation>
    </message>
    <message>
        <source>any free port</source>
        <translation>beliebiger freier Port</translation>
    </message>
    <message>
        <source>Port</source>
        <translation>Port</translation>
    </message>
    <message>
        <source>API key</source>
        <translation>API-Schlüssel</translation>
    </message>
    <message>
        <source>none: any program on this computer may call it</source>
        <translation>keiner: jedes Programm auf diesem Rechner darf ihn aufrufen</translation>
    </message>
    <message>
        <source>Generate</source>
        <translation>Erzeugen</translation>
    </message>
    <message>
        <source>Generate an API key</source>
        <translation>Einen API-Schlüssel erzeugen</translation>
    </message>
    <message>
        <source>Allow other devices on my network (needs an API key of 16+ characters)</source>
        <translation>Andere Geräte im Netzwerk zulassen (API-Schlüssel ab 16 Zeichen nötig)</translation>
    </message>
    <message>
        <source>Allow other devices on my network</source>
        <translation>Andere Geräte in meinem Netzwerk zulassen</translation>
    </message>
    <message>
        <source>Also serve the models of my remote connections (their keys stay here)</source>
        <translation>Auch Modelle entfernter Verbindungen bereitstellen (Schlüssel bleiben hier)</translation>
    </message>
    <message>
        <source>Also serve the models of my remote connections</source>
        <translation>Auch die Modelle meiner entfernten Verbindungen bereitstellen</translation>
    </message>
    <message>
        <source>Requests naming remote:CONNECTION/MODEL go to that server; /v1/models lists them beside the model loaded in Chat. Connections are set in Settings.</source>
        <translation>Anfragen, die remote:VERBINDUNG/MODELL nennen, gehen an diesen Server; /v1/models listet sie neben dem im Chat geladenen Modell. Verbindungen richten Sie in den Einstellungen ein.</translation>
    </message>
    <message>
        <source>Load library models on demand (each in its own engine, within the memory budget)</source>
        <translation>Bibliotheksmodelle bei Bedarf laden (je eigene Engine, im Speicherbudget)</translation>
    </message>
    <message>
        <source>Load library models on demand</source>
        <translation>Bibliotheksmodelle bei Bedarf laden</translation>
    </message>
    <message>
        <source>A request naming a model of your library that is not loaded loads it; off, such a request is refused and only the Chat&apos;s model is served</source>
        <translation>Eine Anfrage, die ein nicht geladenes Modell Ihrer Bibliothek nennt, lädt es; ausgeschaltet wird eine solche Anfrage abgelehnt und nur das Modell des Chats bereitgestellt</translation>
    </message>
    <message>
        <source>Memory budget</source>
        <translation>Speicherbudget</translation>
    </message>
    <message>
        <source> GiB</source>
        <translation> GiB</translation>
    </message>
    <message>
        <source>as in Settings → Loaded models</source>
        <translation>wie unter Einstellungen → Geladene Modelle</translation>
    </message>
    <message>
        <source>Memory the loaded models may take together while the server runs, the Chat&apos;s included</source>
        <translation>Speicher, den die geladenen Modelle zusammen belegen dürfen, solange der Server läuft, die des Chats eingeschlossen</translation>
    </message>
    <message>
        <source>Unload idle models after</source>
        <translation>Ungenutzte Modelle entladen nach</translation>
    </message>
    <message>
        <source> min without a request</source>
        <translation> min ohne Anfrage</translation>
    </message>
    <message>
        <source> requests at once</source>
        <translation> Anfragen gleichzeitig</translation>
    </message>
    <message>
        <source>A llama.cpp or MLX model the server loads decodes this many requests together, each may use the whole context (llama.cpp&apos;s KV cache does not grow with the number; MLX gives each a cache of its own, and fewer load where they do not fit); more wait in order (quantdesk serve --parallel). The Chat&apos;s model keeps the sequences it was loaded with</source>
        <translation>Ein llama.cpp- oder MLX-Modell, das der Server lädt, dekodiert so viele Anfragen gemeinsam, jede darf den ganzen Kontext nutzen (der KV-Cache von llama.cpp wächst nicht mit der Zahl; MLX gibt jeder einen eigenen Cache, und wo sie nicht passen, werden weniger geladen); weitere warten der Reihe nach (quantdesk serve --parallel). Das Modell des Chats behält die Sequenzen, mit denen es geladen wurde</translation>
    </message>
    <message>
        <source>Decode together</source>
        <translation>Gemeinsam dekodieren</translation>
    </message>
    <message>
        <source>Load anyway, past the memory budget</source>
        <translation>Trotzdem laden, über das Speicherbudget hinaus</translation>
    </message>
    <message>
        <source>Idle models still unload first. Past the budget the system may swap and slow to a crawl, or run out of memory, which ends that model&apos;s engine (the same as quantdesk serve --force)</source>
        <translation>Ungenutzte Modelle werden trotzdem zuerst entladen. Über dem Budget kann das System auslagern und sehr langsam werden oder keinen Speicher mehr haben, was die Engine dieses Modells beendet (wie quantdesk serve --force)</translation>
    </message>
    <message>
        <source>Allowed web origins</source>
        <translation>Erlaubte Web-Origins</translation>
    </message>
    <message>
        <source>e.g. http://localhost:3000 — web pages allowed to call the API</source>
        <translation>z. B. http://localhost:3000 – Webseiten, die die API aufrufen dürfen</translation>
    </message>
    <message>
        <source>Allowed origins</source>
        <translation>Erlaubte Origins</translation>
    </message>
    <message>
        <source>Server message</source>
        <translation>Servermeldung</translation>
    </message>
    <message>
        <source>{model} with {backend} (context {n_ctx} tokens)</source>
        <translation>{model} mit {backend} (Kontext {n_ctx} Tokens)</translation>
    </message>
    <message>
        <source>{n} requests decode together; more wait in order</source>
        <translation>{n} Anfragen werden gemeinsam dekodiert; weitere warten der Reihe nach</translation>
    </message>
    <message>
        <source>one request at a time, the rest wait in order ({why})</source>
        <translation>eine Anfrage nach der anderen, der Rest wartet der Reihe nach ({why})</translation>
    </message>
    <message>
        <source>the model was loaded in Chat with one sequence</source>
        <translation>das Modell wurde im Chat mit einer Sequenz geladen</translation>
    </message>
    <message>
        <source>; models the server loads decode {n} together</source>
        <translation>; Modelle, die der Server lädt, dekodieren {n} gemeinsam</translation>
    </message>
    <message>
        <source>{busy} of {parallel} busy, {queued} waiting</source>
        <translation>{busy} von {parallel} belegt, {queued} wartend</translation>
    </message>
    <message>
        <source>; the cache served {hits} of the last {requests} requests ({cached} of {prompt} prompt tokens)</source>
        <translation>; der Cache bediente {hits} der letzten {requests} Anfragen ({cached} von {prompt} Prompt-Tokens)</translation>
    </message>
    <message>
        <source>{served}, loaded in Chat</source>
        <translation>{served}, im Chat geladen</translation>
    </message>
    <message>
        <source>On — serving {served}</source>
        <translation>An – stellt {served} bereit</translation>
    </message>
    <message>
        <source>On — no model is loaded in Chat: requests are answered 503 until one is</source>
        <translation>An – im Chat ist kein Modell geladen: Anfragen werden mit 503 beantwortet, bis eines geladen ist</translation>
    </message>
    <message>
        <source>Starting…</source>
        <translation>Startet …</translation>
    </message>
    <message>
        <source>Starting… it will stop as soon as it has started.</source>
        <translation>Startet … er wird beendet, sobald er gestartet ist.</translation>
    </message>
    <message>
        <source>{message}. Set an API key of at least 16 characters (Generate makes one), or untick “Allow other devices on my network”.</source>
        <translation>{message}. Legen Sie einen API-Schlüssel mit mindestens 16 Zeichen fest („Erzeugen“ erstellt einen) oder entfernen Sie den Haken bei „Andere Geräte in meinem Netzwerk zulassen“.</translation>
    </message>
    <message>
        <source>Stopping: finishing open requests…</source>
        <translation>Wird beendet: offene Anfragen werden abgeschlossen …</translation>
    </message>
    <message>
        <source>On</source>
        <translation>An</translation>
    </message>
    <message>
        <source>Other devices: http://{lan}:{port}/v1 (with the API key)</source>
        <translation>Andere Geräte: http://{lan}:{port}/v1 (mit dem API-Schlüssel)</translation>
    </message>
    <message>
        <source>Other devices: this computer&apos;s network address could not be found.</source>
        <translation>Andere Geräte: Die Netzwerkadresse dieses Rechners wurde nicht gefunden.</translation>
    </message>
    <message>
        <source>Off</source>
        <translation>Aus</translation>
    </message>
    <message>
        <source>The server could not start: {error}</source>
        <translation>Der Server konnte nicht starten: {error}</translation>
    </message>
    <message>
        <source>none yet</source>
        <translation>noch keine</translation>
    </message>
    <message>
        <source>Copied</source>
        <translation>Kopiert</translation>
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
        <source>When a chat&apos;s context is full</source>
        <translation>Wenn der Kontext eines Chats voll ist</translation>
    </message>
    <message>
        <source>When a server request does not fit the context</source>
        <translation>Wenn eine Serveranfrage nicht in den Kontext passt</translation>
    </message>
    <message>
        <source>Local server, unless the request says:</source>
        <translation>Lokaler Server, sofern die Anfrage nichts anderes sagt:</translation>
    </message>
    <message>
        <source>Context full</source>
        <translation>Kontext voll</translation>
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
        <source>Loaded models</source>
        <translation>Geladene Modelle</translation>
    </message>
    <message>
        <source>Saved chat states</source>
        <translation>Gespeicherte Chat-Zustände</translation>
    </message>
    <message>
        <source>Remote engines</source>
        <translation>Entfernte Engines</translation>
    </message>
    <message>
        <source>Tools (MCP)</source>
        <translation>Tools (MCP)</translation>
    </message>
    <message>
        <source>Model presets</source>
        <translation>Modell-Voreinstellungen</translation>
    </message>
    <message>
        <source>Settings status</source>
        <translation>Status der Einstellungen</translation>
    </message>
    <message>
        <source> GiB</source>
        <translation> GiB</translation>
    </message>
    <message>
        <source>Budget: what is free</source>
        <translation>Budget: was frei ist</translation>
    </message>
    <message>
        <source>Memory budget</source>
        <translation>Speicherbudget</translation>
    </message>
    <message>
        <source>Memory the loaded models may take together, by their estimates; lowest: what the fit check finds free when the first model loads</source>
        <translation>Speicher, den die geladenen Modelle zusammen belegen dürfen, nach ihren Schätzungen; kleinster Wert: was die Passprüfung frei findet, wenn das erste Modell lädt</translation>
    </message>
    <message>
        <source>At most </source>
        <translation>Höchstens </translation>
    </message>
    <message>
        <source> loaded</source>
        <translation> geladen</translation>
    </message>
    <message>
        <source>Max loaded models</source>
        <translation>Höchstzahl geladener Modelle</translation>
    </message>
    <message>
        <source>Idle unload: off</source>
        <translation>Entladen bei Leerlauf: aus</translation>
    </message>
    <message>
        <source>Idle unload after {n} min</source>
        <translation>Entladen nach {n} min Leerlauf</translation>
    </message>
    <message>
        <source>Idle unload</source>
        <translation>Entladen bei Leerlauf</translation>
    </message>
    <message>
        <source>A model with no message for this long unloads, freeing its memory</source>
        <translation>Ein Modell ohne Nachricht für diese Zeit wird entladen und gibt seinen Speicher frei</translation>
    </message>
    <message>
        <source>Import llama-server presets…</source>
        <translation>llama-server-Voreinstellungen importieren …</translation>
    </message>
    <message>
        <source>Read a llama-server preset file (--models-preset FILE.ini): each section that names a model of the library becomes its preset</source>
        <translation>Eine Voreinstellungsdatei von llama-server lesen (--models-preset DATEI.ini): Jeder Abschnitt, der ein Modell der Bibliothek nennt, wird dessen Voreinstellung</translation>
    </message>
    <message>
        <source>Export…</source>
        <translation>Exportieren …</translation>
    </message>
    <message>
        <source>Write every model&apos;s preset as a llama-server preset file</source>
        <translation>Die Voreinstellungen aller Modelle als Voreinstellungsdatei von llama-server schreiben</translation>
    </message>
    <message>
        <source>No model has a preset yet: “Save as this model&apos;s defaults” in a chat&apos;s options makes one.</source>
        <translation>Noch kein Modell hat eine Voreinstellung: „Als Standard dieses Modells speichern“ in den Optionen eines Chats legt eine an.</translation>
    </message>
    <message>
        <source>{n} model(s) have a preset: applied whenever they load.</source>
        <translation>{n} Modell(e) mit Voreinstellung: Sie gilt bei jedem Laden.</translation>
    </message>
    <message>
        <source>Nothing imported: {why}</source>
        <translation>Nichts importiert: {why}</translation>
    </message>
    <message>
        <source>Imported {n} preset(s) from {file}.</source>
        <translation>{n} Voreinstellung(en) aus {file} importiert.</translation>
    </message>
    <message>
        <source>Not exported: {why}</source>
        <translation>Nicht exportiert: {why}</translation>
    </message>
    <message>
        <source>Exported {n} preset(s) to {file}.</source>
        <translation>{n} Voreinstellung(en) nach {file} exportiert.</translation>
    </message>
    <message>
        <source>Left out: {what}</source>
        <translation>Ausgelassen: {what}</translation>
    </message>
    <message>
        <source>Import llama-server presets</source>
        <translation>llama-server-Voreinstellungen importieren</translation>
    </message>
    <message>
        <source>Preset files (*.ini);;All files (*)</source>
        <translation>Voreinstellungsdateien (*.ini);;Alle Dateien (*)</translation>
    </message>
    <message>
        <source>Export model presets</source>
        <translation>Modell-Voreinstellungen exportieren</translation>
    </message>
    <message>
        <source>Preset files (*.ini)</source>
        <translation>Voreinstellungsdateien (*.ini)</translation>
    </message>
    <message>
        <source> MiB</source>
        <translation> MiB</translation>
    </message>
    <message>
        <source>Off</source>
        <translation>Aus</translation>
    </message>
    <message>
        <source>Disk for saved chat states</source>
        <translation>Speicherplatz für gespeicherte Chat-Zustände</translation>
    </message>
    <message>
        <source>After each reply the model&apos;s state is saved, so a chat reopened later answers without reading its whole history again; the least recently used states go first when they take more than this</source>
        <translation>Nach jeder Antwort wird der Zustand des Modells gespeichert, sodass ein später wieder geöffneter Chat antwortet, ohne seinen ganzen Verlauf erneut zu lesen; belegen die Zustände mehr als diesen Platz, werden die am längsten unbenutzten zuerst gelöscht</translation>
    </message>
    <message>
        <source>Delete saved states</source>
        <translation>Gespeicherte Zustände löschen</translation>
    </message>
    <message>
        <source>Delete the saved chat states</source>
        <translation>Die gespeicherten Chat-Zustände löschen</translation>
    </message>
    <message>
        <source>Off: chats are read again from the start after a restart or a switch.</source>
        <translation>Aus: Chats werden nach einem Neustart oder Wechsel wieder von vorn gelesen.</translation>
    </message>
    <message>
        <source>Long chats resume without reading their history again.</source>
        <translation>Lange Chats werden fortgesetzt, ohne ihren Verlauf erneut zu lesen.</translation>
    </message>
    <message>
        <source>{taken} Now {count} saved, {size}, in {folder}.</source>
        <translation>{taken} Derzeit {count} gespeichert, {size}, in {folder}.</translation>
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
        <source>New chats follow this (each chat may choose its own in its settings). Whatever is left out is marked in the conversation; “compact” has the model write a note on it, which it keeps.</source>
        <translation>Neue Chats folgen dieser Wahl (jeder Chat kann in seinen Einstellungen eine eigene wählen). Was ausgelassen wird, ist im Gespräch markiert; bei „Verdichten“ schreibt das Modell eine Notiz dazu, die es behält.</translation>
    </message>
    <message>
        <source>Chats with different models keep each model loaded, one engine each, within this budget; when one more does not fit, the least recently used idle model unloads first, and the Chat says so.</source>
        <translation>Chats mit verschiedenen Modellen halten jedes Modell geladen, je eine Engine, innerhalb dieses Budgets; passt eines mehr nicht, wird zuerst das am längsten unbenutzte untätige Modell entladen, und der Chat sagt es.</translation>
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
    <name>SpeedQualityChart</name>
    <message>
        <source>Chart: quality loss against generation speed</source>
        <translation>Diagramm: Qualitätsverlust gegen Generierungstempo</translation>
    </message>
    <message>
        <source>{label}: {speed}, loss {loss}</source>
        <translation>{label}: {speed}, Verlust {loss}</translation>
    </message>
    <message>
        <source>No quality figures in this result (the quality pass was skipped or could not run), so there is nothing to plot.</source>
        <translation>Dieses Ergebnis hat keine Qualitätswerte (die Qualitätsmessung wurde übersprungen oder konnte nicht laufen), daher gibt es nichts darzustellen.</translation>
    </message>
    <message>
        <source>No variant has both a generation speed and a quality figure.</source>
        <translation>Keine Variante hat sowohl ein Generierungstempo als auch einen Qualitätswert.</translation>
    </message>
    <message>
        <source>generation tok/s (median; bars: fastest and slowest run; up and down: ± one standard error)</source>
        <translation>Generierung Tok./s (Median; Balken: schnellster und langsamster Lauf; auf und ab: ± ein Standardfehler)</translation>
    </message>
    <message>
        <source> (reference)</source>
        <translation> (Referenz)</translation>
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
    <message>
        <source>Thinking statistics</source>
        <translation>Statistik des Nachdenkens</translation>
    </message>
    <message>
        <source>First answer</source>
        <translation>Erste Antwort</translation>
    </message>
    <message>
        <source>Thinking</source>
        <translation>Nachdenken</translation>
    </message>
    <message>
        <source>Answer</source>
        <translation>Antwort</translation>
    </message>
    <message>
        <source>{count} tok</source>
        <translation>{count} Tok.</translation>
    </message>
    <message>
        <source>{count} tok · {time}</source>
        <translation>{count} Tok. · {time}</translation>
    </message>
    <message numerus="yes">
        <source>after %n server request(s)</source>
        <translation>
            <numerusform>nach %n Server-Anfrage</numerusform>
            <numerusform>nach %n Server-Anfragen</numerusform>
        </translation>
    </message>
    <message>
        <source>no answer</source>
        <translation>keine Antwort</translation>
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
    <name>SweepChart</name>
    <message>
        <source>Chart: the sweep&apos;s mean KL divergence</source>
        <translation>Diagramm: mittlere KL-Divergenz des Durchlaufs</translation>
    </message>
    <message>
        <source>This result is no sweep with KL divergences: tick two or more KV-cache types or context lengths and run it again.</source>
        <translation>Dieses Ergebnis ist kein Durchlauf mit KL-Divergenzen: Haken Sie zwei oder mehr KV-Cache-Typen an oder geben Sie Kontextlängen an und starten Sie erneut.</translation>
    </message>
    <message>
        <source>context length (tokens): quality windows of that length, speed with a prompt that fills it</source>
        <translation>Kontextlänge (Tokens): Qualitätsfenster dieser Länge, Geschwindigkeit mit einem Prompt, der sie füllt</translation>
    </message>
    <message>
        <source>KV-cache type</source>
        <translation>KV-Cache-Typ</translation>
    </message>
    <message>
        <source>mean KLD (nats/token), ± one standard error</source>
        <translation>mittlere KLD (Nats/Token), ± ein Standardfehler</translation>
    </message>
</context>
<context>
    <name>ThinkingBlock</name>
    <message>
        <source>Thinking</source>
        <translation>Nachgedacht</translation>
    </message>
    <message>
        <source>Shows or hides how the model thought before it answered</source>
        <translation>Zeigt oder verbirgt, wie das Modell vor der Antwort nachgedacht hat</translation>
    </message>
    <message>
        <source>Thinking text</source>
        <translation>Text des Nachdenkens</translation>
    </message>
    <message>
        <source>Thinking…</source>
        <translation>Denkt nach…</translation>
    </message>
    <message>
        <source>Hide the thinking</source>
        <translation>Nachdenken ausblenden</translation>
    </message>
    <message>
        <source>Show the thinking</source>
        <translation>Nachdenken zeigen</translation>
    </message>
    <message>
        <source>Thinking… {time}</source>
        <translation>Denkt nach… {time}</translation>
    </message>
    <message>
        <source>Thought for {time}</source>
        <translation>{time} nachgedacht</translation>
    </message>
    <message numerus="yes">
        <source>Thought for {time} · %n token(s)</source>
        <translation>
            <numerusform>{time} nachgedacht · %n Token</numerusform>
            <numerusform>{time} nachgedacht · %n Tokens</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>ToolCardView</name>
    <message>
        <source>Shows or hides what the tool returned</source>
        <translation>Zeigt oder verbirgt, was das Tool zurückgegeben hat</translation>
    </message>
    <message>
        <source>unknown server</source>
        <translation>unbekannter Server</translation>
    </message>
    <message>
        <source>Tool call {name} on {server}</source>
        <translation>Tool-Aufruf {name} ({server})</translation>
    </message>
    <message>
        <source>Arguments of {name}: {arguments}</source>
        <translation>Argumente von {name}: {arguments}</translation>
    </message>
    <message>
        <source>Result of {name}</source>
        <translation>Ergebnis von {name}</translation>
    </message>
    <message>
        <source>{name} · {server}</source>
        <translation>{name} · {server}</translation>
    </message>
    <message>
        <source>{tool} — denied</source>
        <translation>{tool} — abgelehnt</translation>
    </message>
    <message>
        <source>You denied this call; the model was told.</source>
        <translation>Sie haben diesen Aufruf abgelehnt; das Modell wurde informiert.</translation>
    </message>
    <message>
        <source>{tool} — running…</source>
        <translation>{tool} — läuft …</translation>
    </message>
    <message>
        <source>{tool} — waiting for your approval</source>
        <translation>{tool} — wartet auf Ihre Freigabe</translation>
    </message>
    <message>
        <source>{tool} — waiting its turn</source>
        <translation>{tool} — wartet, bis es an der Reihe ist</translation>
    </message>
    <message>
        <source>{tool} — not run</source>
        <translation>{tool} — nicht ausgeführt</translation>
    </message>
    <message>
        <source>The reply was stopped before it ran.</source>
        <translation>Die Antwort wurde angehalten, bevor der Aufruf ausgeführt wurde.</translation>
    </message>
    <message>
        <source>The tool answered with an error; the model was told.</source>
        <translation>Das Tool hat mit einem Fehler geantwortet; das Modell wurde informiert.</translation>
    </message>
    <message>
        <source>The result was cut to fit; the model got the first part.</source>
        <translation>Das Ergebnis wurde gekürzt, damit es passt; das Modell hat den ersten Teil erhalten.</translation>
    </message>
    <message>
        <source>{tool} — error after {time}</source>
        <translation>{tool} — Fehler nach {time}</translation>
    </message>
    <message>
        <source>{tool} — done in {time}</source>
        <translation>{tool} — fertig in {time}</translation>
    </message>
    <message>
        <source>Hide the result</source>
        <translation>Ergebnis ausblenden</translation>
    </message>
    <message>
        <source>Show the result</source>
        <translation>Ergebnis zeigen</translation>
    </message>
</context>
<context>
    <name>ToolsPanel</name>
    <message>
        <source>Tools (MCP)</source>
        <translation>Tools (MCP)</translation>
    </message>
    <message>
        <source>MCP servers</source>
        <translation>MCP-Server</translation>
    </message>
    <message>
        <source>The selected server&apos;s tools</source>
        <translation>Die Tools des ausgewählten Servers</translation>
    </message>
    <message>
        <source>Connect again</source>
        <translation>Neu verbinden</translation>
    </message>
    <message>
        <source>Connect the selected MCP server again</source>
        <translation>Den ausgewählten MCP-Server neu verbinden</translation>
    </message>
    <message>
        <source>Remove</source>
        <translation>Entfernen</translation>
    </message>
    <message>
        <source>Remove the selected MCP server</source>
        <translation>Den ausgewählten MCP-Server entfernen</translation>
    </message>
    <message>
        <source>Import mcp.json…</source>
        <translation>mcp.json importieren …</translation>
    </message>
    <message>
        <source>Import MCP servers from an mcp.json file</source>
        <translation>MCP-Server aus einer mcp.json-Datei importieren</translation>
    </message>
    <message>
        <source>The file LM Studio, Claude Desktop and Cursor keep their MCP servers in; each command is shown before it first starts</source>
        <translation>Die Datei, in der LM Studio, Claude Desktop und Cursor ihre MCP-Server ablegen; jeder Befehl wird vor seinem ersten Start angezeigt</translation>
    </message>
    <message>
        <source>files</source>
        <translation>dateien</translation>
    </message>
    <message>
        <source>MCP server name</source>
        <translation>Name des MCP-Servers</translation>
    </message>
    <message>
        <source>A command on this computer (stdio)</source>
        <translation>Ein Befehl auf diesem Rechner (stdio)</translation>
    </message>
    <message>
        <source>An address (HTTP)</source>
        <translation>Eine Adresse (HTTP)</translation>
    </message>
    <message>
        <source>How QuantDesk reaches the server</source>
        <translation>Wie QuantDesk den Server erreicht</translation>
    </message>
    <message>
        <source>npx -y @modelcontextprotocol/server-filesystem ~/Documents</source>
        <translation>npx -y @modelcontextprotocol/server-filesystem ~/Documents</translation>
    </message>
    <message>
        <source>Command</source>
        <translation>Befehl</translation>
    </message>
    <message>
        <source>https://example.com/mcp</source>
        <translation>https://example.com/mcp</translation>
    </message>
    <message>
        <source>Server address</source>
        <translation>Serveradresse</translation>
    </message>
    <message>
        <source>optional bearer token, kept in the keychain</source>
        <translation>optionales Bearer-Token, im Schlüsselbund abgelegt</translation>
    </message>
    <message>
        <source>Bearer token</source>
        <translation>Bearer-Token</translation>
    </message>
    <message>
        <source>Add server</source>
        <translation>Server hinzufügen</translation>
    </message>
    <message>
        <source>Add the MCP server</source>
        <translation>Den MCP-Server hinzufügen</translation>
    </message>
    <message>
        <source>Name</source>
        <translation>Name</translation>
    </message>
    <message>
        <source>Kind</source>
        <translation>Art</translation>
    </message>
    <message>
        <source>Where</source>
        <translation>Wo</translation>
    </message>
    <message>
        <source>Confirm the server&apos;s command</source>
        <translation>Den Befehl des Servers bestätigen</translation>
    </message>
    <message>
        <source>The command, in full</source>
        <translation>Der vollständige Befehl</translation>
    </message>
    <message>
        <source>Start it</source>
        <translation>Starten</translation>
    </message>
    <message>
        <source>Confirm the command and start the server</source>
        <translation>Den Befehl bestätigen und den Server starten</translation>
    </message>
    <message>
        <source>Not now</source>
        <translation>Nicht jetzt</translation>
    </message>
    <message>
        <source>Do not start the server</source>
        <translation>Den Server nicht starten</translation>
    </message>
    <message>
        <source>Always allowed</source>
        <translation>Immer erlaubt</translation>
    </message>
    <message>
        <source>Tools always allowed</source>
        <translation>Immer erlaubte Tools</translation>
    </message>
    <message>
        <source>Revoke</source>
        <translation>Widerrufen</translation>
    </message>
    <message>
        <source>Revoke: ask again before this tool runs</source>
        <translation>Widerrufen: vor dem Ausführen dieses Tools wieder fragen</translation>
    </message>
    <message>
        <source>Tools status</source>
        <translation>Status der Tools</translation>
    </message>
    <message>
        <source>{tool} of {server}</source>
        <translation>{tool} von {server}</translation>
    </message>
    <message>
        <source>off</source>
        <translation>aus</translation>
    </message>
    <message>
        <source>not started: its command waits for your confirmation</source>
        <translation>nicht gestartet: Sein Befehl wartet auf Ihre Bestätigung</translation>
    </message>
    <message>
        <source>connecting…</source>
        <translation>wird verbunden …</translation>
    </message>
    <message>
        <source>not connected</source>
        <translation>nicht verbunden</translation>
    </message>
    <message numerus="yes">
        <source>connected · %n tool(s)</source>
        <translation>
            <numerusform>verbunden · %n Tool</numerusform>
            <numerusform>verbunden · %n Tools</numerusform>
        </translation>
    </message>
    <message>
        <source>failed: {sentence}</source>
        <translation>fehlgeschlagen: {sentence}</translation>
    </message>
    <message>
        <source>No tools listed: the server is not connected.</source>
        <translation>Keine Tools aufgeführt: Der Server ist nicht verbunden.</translation>
    </message>
    <message>
        <source>Added {name}.</source>
        <translation>{name} hinzugefügt.</translation>
    </message>
    <message>
        <source>“{name}” runs this program on your computer, with your permissions. Start it only if you trust it:</source>
        <translation>„{name}“ führt dieses Programm auf Ihrem Rechner mit Ihren Berechtigungen aus. Starten Sie es nur, wenn Sie ihm vertrauen:</translation>
    </message>
    <message>
        <source>{name} is kept but not started; select it to confirm its command later.</source>
        <translation>{name} bleibt erhalten, wird aber nicht gestartet; wählen Sie den Server später aus, um seinen Befehl zu bestätigen.</translation>
    </message>
    <message>
        <source>Removed {name}.</source>
        <translation>{name} entfernt.</translation>
    </message>
    <message>
        <source>Import MCP servers</source>
        <translation>MCP-Server importieren</translation>
    </message>
    <message>
        <source>MCP configuration (*.json)</source>
        <translation>MCP-Konfiguration (*.json)</translation>
    </message>
    <message>
        <source>nothing to import</source>
        <translation>nichts zu importieren</translation>
    </message>
    <message>
        <source>Imported from {file}: {report}. Select a server to confirm its command before it first starts.</source>
        <translation>Aus {file} importiert: {report}. Wählen Sie einen Server aus, um seinen Befehl vor dem ersten Start zu bestätigen.</translation>
    </message>
    <message>
        <source>{tool} of {server} asks again before it runs.</source>
        <translation>{tool} von {server}: Vor dem Ausführen wird wieder gefragt.</translation>
    </message>
</context>
<context>
    <name>UndoBar</name>
    <message>
        <source>Undo notice</source>
        <translation>Hinweis zum Rückgängigmachen</translation>
    </message>
    <message>
        <source>Undo</source>
        <translation>Rückgängig</translation>
    </message>
    <message>
        <source>{text} — undo</source>
        <translation>{text} – rückgängig machen</translation>
    </message>
</context>
<context>
    <name>UploadersDialog</name>
    <message>
        <source>Compare uploaders</source>
        <translation>Uploader vergleichen</translation>
    </message>
    <message>
        <source>Compare one quant from several uploaders</source>
        <translation>Einen Quant von mehreren Uploadern vergleichen</translation>
    </message>
    <message>
        <source>Files of one quant name differ by uploader. Name the base model (as its page on the Hub names it) and the quant: every GGUF repo whose model card names it as its base is listed with its file, each checked by its header to be the same model.</source>
        <translation>Dateien desselben Quant-Namens unterscheiden sich je nach Uploader. Nennen Sie das Basismodell (wie seine Seite auf dem Hub es nennt) und den Quant: Jedes GGUF-Repo, dessen Modellkarte es als Basis nennt, wird mit seiner Datei aufgeführt, jede anhand ihres Headers als dasselbe Modell geprüft.</translation>
    </message>
    <message>
        <source>Base model</source>
        <translation>Basismodell</translation>
    </message>
    <message>
        <source>owner/name, e.g. Qwen/Qwen2.5-7B-Instruct</source>
        <translation>Besitzer/Name, z. B. Qwen/Qwen2.5-7B-Instruct</translation>
    </message>
    <message>
        <source>Quant</source>
        <translation>Quant</translation>
    </message>
    <message>
        <source>Find on the Hub</source>
        <translation>Auf dem Hub suchen</translation>
    </message>
    <message>
        <source>Find the quantizations on the Hub</source>
        <translation>Die Quantisierungen auf dem Hub suchen</translation>
    </message>
    <message>
        <source>Search status</source>
        <translation>Suchstatus</translation>
    </message>
    <message>
        <source>Files found</source>
        <translation>Gefundene Dateien</translation>
    </message>
    <message>
        <source>Repo and file</source>
        <translation>Repo und Datei</translation>
    </message>
    <message>
        <source>Size</source>
        <translation>Größe</translation>
    </message>
    <message>
        <source>Downloads</source>
        <translation>Downloads</translation>
    </message>
    <message>
        <source>Check</source>
        <translation>Prüfung</translation>
    </message>
    <message>
        <source>Fetch the highest-precision file as the reference</source>
        <translation>Die Datei mit der höchsten Genauigkeit als Referenz laden</translation>
    </message>
    <message>
        <source>Keep the fetched files in the lab&apos;s cache after the bench</source>
        <translation>Die geladenen Dateien nach dem Benchmark im Cache des Labors behalten</translation>
    </message>
    <message>
        <source>Keep the fetched files</source>
        <translation>Die geladenen Dateien behalten</translation>
    </message>
    <message>
        <source>Kept files are found again by the next bench; otherwise they are removed after it (a file the library already holds is used where it is)</source>
        <translation>Behaltene Dateien findet der nächste Benchmark wieder; sonst werden sie danach entfernt (eine Datei, die die Bibliothek schon hat, wird dort verwendet)</translation>
    </message>
    <message>
        <source>Add to the bench</source>
        <translation>Zum Benchmark hinzufügen</translation>
    </message>
    <message>
        <source>Add the ticked files to the bench</source>
        <translation>Die angehakten Dateien zum Benchmark hinzufügen</translation>
    </message>
    <message>
        <source>Name the base model as owner/name and a quant, such as Q4_K_M.</source>
        <translation>Nennen Sie das Basismodell als Besitzer/Name und einen Quant, etwa Q4_K_M.</translation>
    </message>
    <message>
        <source>Asking the Hub for the quantizations of {base}…</source>
        <translation>Der Hub wird nach den Quantisierungen von {base} gefragt …</translation>
    </message>
    <message>
        <source>left out: {why}</source>
        <translation>ausgelassen: {why}</translation>
    </message>
    <message>
        <source>same model: {architecture}, {tokens} tokens</source>
        <translation>dasselbe Modell: {architecture}, {tokens} Tokens</translation>
    </message>
    <message numerus="yes">
        <source>%n file(s) of {quant} can be compared</source>
        <translation>
            <numerusform>%n Datei von {quant} kann verglichen werden</numerusform>
            <numerusform>%n Dateien von {quant} können verglichen werden</numerusform>
        </translation>
    </message>
    <message>
        <source> (checked against {reference}).</source>
        <translation> (geprüft gegen {reference}).</translation>
    </message>
    <message>
        <source>Not listed: {why}</source>
        <translation>Nicht aufgeführt: {why}</translation>
    </message>
    <message>
        <source>Fetch {file} ({quant}, the highest precision found) as the reference</source>
        <translation>{file} ({quant}, die höchste gefundene Genauigkeit) als Referenz laden</translation>
    </message>
</context>
<context>
    <name>VariantPicker</name>
    <message>
        <source>Variants</source>
        <translation>Varianten</translation>
    </message>
    <message>
        <source>Variants to compare</source>
        <translation>Zu vergleichende Varianten</translation>
    </message>
    <message>
        <source>Add file…</source>
        <translation>Datei hinzufügen …</translation>
    </message>
    <message>
        <source>Add a model file</source>
        <translation>Eine Modelldatei hinzufügen</translation>
    </message>
    <message>
        <source>Add folder…</source>
        <translation>Ordner hinzufügen …</translation>
    </message>
    <message>
        <source>Add a model folder</source>
        <translation>Einen Modellordner hinzufügen</translation>
    </message>
    <message>
        <source>Add remote…</source>
        <translation>Entferntes hinzufügen …</translation>
    </message>
    <message>
        <source>Add a model on a remote server</source>
        <translation>Ein Modell auf einem entfernten Server hinzufügen</translation>
    </message>
    <message>
        <source>From uploaders…</source>
        <translation>Von Uploadern …</translation>
    </message>
    <message>
        <source>Compare one quant from several uploaders on the Hub</source>
        <translation>Einen Quant von mehreren Uploadern auf dem Hub vergleichen</translation>
    </message>
    <message>
        <source>Refresh</source>
        <translation>Aktualisieren</translation>
    </message>
    <message>
        <source>Refresh the list from the library</source>
        <translation>Die Liste aus der Bibliothek aktualisieren</translation>
    </message>
    <message>
        <source>{display_name} — remote</source>
        <translation>{display_name} – entfernt</translation>
    </message>
    <message>
        <source>{file} — Hub · {size} (fetched when run)</source>
        <translation>{file} — Hub · {size} (beim Start geladen)</translation>
    </message>
    <message>
        <source>{file} at {commit}; checked: {architecture}, {tokens} tokens</source>
        <translation>{file} bei {commit}; geprüft: {architecture}, {tokens} Tokens</translation>
    </message>
    <message>
        <source>Add model files</source>
        <translation>Modelldateien hinzufügen</translation>
    </message>
    <message>
        <source>GGUF models (*.gguf);;All files (*)</source>
        <translation>GGUF-Modelle (*.gguf);;Alle Dateien (*)</translation>
    </message>
    <message>
        <source>Add a model folder (MLX, safetensors, EXL)</source>
        <translation>Einen Modellordner hinzufügen (MLX, safetensors, EXL)</translation>
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
    <name>citations</name>
    <message>
        <source>page {page}</source>
        <translation>Seite {page}</translation>
    </message>
    <message>
        <source>line {line}</source>
        <translation>Zeile {line}</translation>
    </message>
</context>
<context>
    <name>documents_page</name>
    <message>
        <source>Scanning</source>
        <translation>Durchsuchen</translation>
    </message>
    <message>
        <source>Indexing</source>
        <translation>Indexierung</translation>
    </message>
    <message>
        <source>Embedding</source>
        <translation>Einbettung</translation>
    </message>
    <message>
        <source>Paused</source>
        <translation>Angehalten</translation>
    </message>
    <message>
        <source>Ready</source>
        <translation>Bereit</translation>
    </message>
    <message>
        <source>Failed</source>
        <translation>Fehlgeschlagen</translation>
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
    <name>first_run</name>
    <message>
        <source>Unknown CPU</source>
        <translation>Unbekannte CPU</translation>
    </message>
    <message>
        <source>&lt;b&gt;{cpu}&lt;/b&gt;, {threads} threads</source>
        <translation>&lt;b&gt;{cpu}&lt;/b&gt;, {threads} Threads</translation>
    </message>
    <message>
        <source>{ram} of RAM</source>
        <translation>{ram} Arbeitsspeicher</translation>
    </message>
    <message>
        <source> ({free} free now)</source>
        <translation> ({free} gerade frei)</translation>
    </message>
    <message>
        <source>unknown memory</source>
        <translation>unbekannter Speicher</translation>
    </message>
    <message>
        <source>unified memory</source>
        <translation>gemeinsamer Speicher</translation>
    </message>
    <message>
        <source>GPU: {name} ({memory})</source>
        <translation>GPU: {name} ({memory})</translation>
    </message>
    <message>
        <source>No GPU QuantDesk can use: models run on the CPU from RAM (small models do that well).</source>
        <translation>Keine GPU, die QuantDesk nutzen kann: Modelle laufen auf der CPU aus dem Arbeitsspeicher (kleine Modelle können das gut).</translation>
    </message>
    <message>
        <source>Engines ready: </source>
        <translation>Bereite Engines: </translation>
    </message>
    <message>
        <source>none yet (see the Hardware page)</source>
        <translation>noch keine (siehe Seite „Hardware“)</translation>
    </message>
    <message>
        <source>{free} free for models</source>
        <translation>{free} frei für Modelle</translation>
    </message>
    <message>
        <source>Apple Silicon: MLX models run natively; GGUF works too.</source>
        <translation>Apple Silicon: MLX-Modelle laufen nativ; GGUF funktioniert auch.</translation>
    </message>
    <message>
        <source>No model was found in {path}.</source>
        <translation>In {path} wurde kein Modell gefunden.</translation>
    </message>
    <message>
        <source>choose a .gguf file or a model folder</source>
        <translation>wählen Sie eine .gguf-Datei oder einen Modellordner</translation>
    </message>
</context>
<context>
    <name>formatting</name>
    <message>
        <source>{value}k</source>
        <translation>{value} Tsd.</translation>
    </message>
    <message>
        <source>{value}%</source>
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
        <source>{minutes} min {seconds} s</source>
        <translation>{minutes} min {seconds} s</translation>
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
        <source>draft {rate} accepted, {tokens} tokens a pass</source>
        <translation>Entwurf {rate} angenommen, {tokens} Tokens je Durchgang</translation>
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
<context>
    <name>lab_chart</name>
    <message>
        <source>mean KLD from the reference (nats/token)</source>
        <translation>mittlere KLD gegenüber der Referenz (nats/Token)</translation>
    </message>
    <message>
        <source>perplexity above the reference&apos;s</source>
        <translation>Perplexität über der der Referenz</translation>
    </message>
    <message>
        <source>{label}: failed — {error}</source>
        <translation>{label}: fehlgeschlagen – {error}</translation>
    </message>
    <message>
        <source>no quality figure</source>
        <translation>kein Qualitätswert</translation>
    </message>
    <message>
        <source>no KL divergence</source>
        <translation>keine KL-Divergenz</translation>
    </message>
    <message>
        <source>failed — {error}</source>
        <translation>fehlgeschlagen – {error}</translation>
    </message>
    <message>
        <source>no memory figure</source>
        <translation>kein Speicherwert</translation>
    </message>
    <message>
        <source>Run a bench, or open a past result, to see this chart.</source>
        <translation>Starten Sie eine Messung oder öffnen Sie ein früheres Ergebnis, um dieses Diagramm zu sehen.</translation>
    </message>
    <message>
        <source>Not shown: {reason}</source>
        <translation>Nicht dargestellt: {reason}</translation>
    </message>
    <message>
        <source>Quality loss against speed (best: low and right)</source>
        <translation>Qualitätsverlust gegen Tempo (am besten: unten rechts)</translation>
    </message>
    <message>
        <source>Peak memory per variant</source>
        <translation>Spitzenspeicher pro Variante</translation>
    </message>
    <message>
        <source>Mean KL divergence from the reference</source>
        <translation>Mittlere KL-Divergenz gegenüber der Referenz</translation>
    </message>
    <message>
        <source>The sweep: mean KL divergence from the reference</source>
        <translation>Der Durchlauf: mittlere KL-Divergenz zur Referenz</translation>
    </message>
</context>
<context>
    <name>lab_page</name>
    <message>
        <source>1 run</source>
        <translation>1 Lauf</translation>
    </message>
    <message>
        <source>{count} runs</source>
        <translation>{count} Läufen</translation>
    </message>
    <message>
        <source>median {median}, min–max {low} – {high} over {runs}</source>
        <translation>Median {median}, Min.–Max. {low} – {high} aus {runs}</translation>
    </message>
    <message>
        <source>by position in the window: {buckets}</source>
        <translation>nach Position im Fenster: {buckets}</translation>
    </message>
    <message>
        <source>{value} over {positions} positions of the scored text</source>
        <translation>{value} über {positions} Positionen des bewerteten Textes</translation>
    </message>
    <message>
        <source>over {positions} positions of the scored text</source>
        <translation>über {positions} Positionen des bewerteten Textes</translation>
    </message>
    <message>
        <source>{value} ± {error}</source>
        <translation>{value} ± {error}</translation>
    </message>
    <message>
        <source>over {positions} positions; median {median:.3g}, 99th percentile {p99:.3g}, 99.9th {p999:.3g}, max {max:.3g}</source>
        <translation>über {positions} Positionen; Median {median:.3g}, 99. Perzentil {p99:.3g}, 99,9. {p999:.3g}, Maximum {max:.3g}</translation>
    </message>
    <message>
        <source>1 variant</source>
        <translation>1 Variante</translation>
    </message>
    <message>
        <source>{count} variants</source>
        <translation>{count} Varianten</translation>
    </message>
    <message>
        <source>{when} · {count}
reference {reference}</source>
        <translation>{when} · {count}
Referenz {reference}</translation>
    </message>
</context>
<context>
    <name>library_page</name>
    <message>
        <source>Downloaded</source>
        <translation>Heruntergeladen</translation>
    </message>
    <message>
        <source>Imported (copy)</source>
        <translation>Importiert (Kopie)</translation>
    </message>
    <message>
        <source>Used in place</source>
        <translation>An Ort und Stelle genutzt</translation>
    </message>
    <message>
        <source>Hugging Face cache</source>
        <translation>Hugging-Face-Cache</translation>
    </message>
    <message>
        <source>Watched folder</source>
        <translation>Beobachteter Ordner</translation>
    </message>
    <message>
        <source>Could not check for updates: </source>
        <translation>Die Suche nach Updates ist fehlgeschlagen: </translation>
    </message>
    <message>
        <source>Every downloaded model is up to date.</source>
        <translation>Jedes heruntergeladene Modell ist aktuell.</translation>
    </message>
    <message>
        <source>1 update available: {names}.</source>
        <translation>1 Update verfügbar: {names}.</translation>
    </message>
    <message>
        <source>{count} updates available: {names}.</source>
        <translation>{count} Updates verfügbar: {names}.</translation>
    </message>
    <message>
        <source>Imported</source>
        <translation>Importiert</translation>
    </message>
    <message>
        <source>Added (used in place)</source>
        <translation>Hinzugefügt (an Ort und Stelle genutzt)</translation>
    </message>
    <message>
        <source>Watching {folder}: 1 model found.</source>
        <translation>{folder} wird beobachtet: 1 Modell gefunden.</translation>
    </message>
    <message>
        <source>Watching {folder}: {count} models found.</source>
        <translation>{folder} wird beobachtet: {count} Modelle gefunden.</translation>
    </message>
    <message>
        <source>Deleted {name}; {freed} freed.</source>
        <translation>{name} gelöscht; {freed} freigegeben.</translation>
    </message>
    <message>
        <source>Removed {name} from the library; its files were left where they are.</source>
        <translation>{name} wurde aus der Bibliothek entfernt; seine Dateien bleiben, wo sie sind.</translation>
    </message>
    <message>
        <source>1 file</source>
        <translation>1 Datei</translation>
    </message>
    <message>
        <source>{count} files</source>
        <translation>{count} Dateien</translation>
    </message>
    <message>
        <source>Delete {name}? Its {files} ({size}) in {folder} will be deleted, freeing {size}. This cannot be undone.</source>
        <translation>{name} löschen? Seine {files} ({size}) in {folder} werden gelöscht, das gibt {size} frei. Das lässt sich nicht rückgängig machen.</translation>
    </message>
    <message>
        <source>{name} is in the Hugging Face cache ({folder}), shared with other tools. QuantDesk will not delete those {files} ({size}); it only stops listing the model until the next scan finds it again. To free the space, delete it from the cache with `hf cache delete`.</source>
        <translation>{name} liegt im Hugging-Face-Cache ({folder}), den auch andere Werkzeuge nutzen. QuantDesk löscht diese {files} ({size}) nicht; es listet das Modell nur nicht mehr, bis der nächste Suchlauf es wiederfindet. Um den Platz freizugeben, löschen Sie es mit `hf cache delete` aus dem Cache.</translation>
    </message>
    <message>
        <source>a watched folder</source>
        <translation>einem beobachteten Ordner</translation>
    </message>
    <message>
        <source> It will be listed again while the folder is watched.</source>
        <translation> Es wird wieder gelistet, solange der Ordner beobachtet wird.</translation>
    </message>
    <message>
        <source>its own folder</source>
        <translation>seinem eigenen Ordner</translation>
    </message>
    <message>
        <source>{name} is used in place from {where} ({folder}). Removing it from the library deletes no files: its {files} ({size}) stay where they are.{again}</source>
        <translation>{name} wird an Ort und Stelle aus {where} ({folder}) genutzt. Das Entfernen aus der Bibliothek löscht keine Dateien: Seine {files} ({size}) bleiben, wo sie sind.{again}</translation>
    </message>
</context>
<context>
    <name>model_bar</name>
    <message>
        <source>No estimate: {reason}</source>
        <translation>Keine Schätzung: {reason}</translation>
    </message>
    <message>
        <source>No estimate</source>
        <translation>Keine Schätzung</translation>
    </message>
    <message>
        <source>Estimated {memory} · {verdict}</source>
        <translation>Geschätzt {memory} · {verdict}</translation>
    </message>
    <message>
        <source>this model&apos;s preset: {values}</source>
        <translation>Voreinstellung des Modells: {values}</translation>
    </message>
    <message>
        <source>it runs on its server</source>
        <translation>es läuft auf seinem Server</translation>
    </message>
    <message>
        <source>a q8_0 KV cache keeps the context at {n_ctx} tokens</source>
        <translation>ein q8_0-KV-Cache hält den Kontext bei {n_ctx} Tokens</translation>
    </message>
    <message>
        <source>context lowered from {n_ctx} to {max_ctx} tokens, the most that fits</source>
        <translation>Kontext von {n_ctx} auf {max_ctx} Tokens gesenkt, das Maximum, das passt</translation>
    </message>
    <message>
        <source>{parallel} chats at once instead of {wanted}: each has a KV cache of its own, and {wanted} do not fit</source>
        <translation>{parallel} Chats gleichzeitig statt {wanted}: Jeder hat einen eigenen KV-Cache, und {wanted} passen nicht</translation>
    </message>
    <message>
        <source>this model&apos;s preset ({values}) does not fit this machine ({reason}); it loads with the fit check&apos;s settings</source>
        <translation>Voreinstellung des Modells ({values}) passt nicht auf diesen Rechner ({reason}); es lädt mit den Einstellungen der Passprüfung</translation>
    </message>
    <message>
        <source>The estimate put {expected} of {n_layers} layers on the GPU, but the {engine} runtime has no GPU support, so every layer runs on the CPU, which is much slower. Build a GPU runtime on the Hardware page (or: quantdesk runtime build vulkan).</source>
        <translation>Die Schätzung sah {expected} von {n_layers} Schichten auf der GPU vor, aber die Laufzeit {engine} unterstützt keine GPU, daher läuft jede Schicht auf der CPU, was viel langsamer ist. Bauen Sie auf der Seite „Hardware“ eine GPU-Laufzeit (oder: quantdesk runtime build vulkan).</translation>
    </message>
    <message>
        <source>Only {gpu_layers} of {n_layers} layers fit on the GPU ({expected} were expected); the rest run on the CPU, which is slower. Free GPU memory, or pick a smaller quant or a shorter context.</source>
        <translation>Nur {gpu_layers} von {n_layers} Schichten passen auf die GPU ({expected} waren erwartet); der Rest läuft auf der CPU, was langsamer ist. Geben Sie GPU-Speicher frei oder wählen Sie eine kleinere Quantisierung oder einen kürzeren Kontext.</translation>
    </message>
</context>
<context>
    <name>runtimes_panel</name>
    <message>
        <source>the app&apos;s own</source>
        <translation>die der App</translation>
    </message>
    <message>
        <source>bundled</source>
        <translation>mitgeliefert</translation>
    </message>
    <message>
        <source>built here</source>
        <translation>hier gebaut</translation>
    </message>
    <message>
        <source>discrete GPU</source>
        <translation>dedizierte GPU</translation>
    </message>
    <message>
        <source>integrated GPU</source>
        <translation>integrierte GPU</translation>
    </message>
    <message>
        <source>accelerator</source>
        <translation>Beschleuniger</translation>
    </message>
    <message>
        <source>software Vulkan device, a CPU (tests only)</source>
        <translation>Software-Vulkan-Gerät, eine CPU (nur für Tests)</translation>
    </message>
    <message>
        <source>, {free} of {total} free</source>
        <translation>, {free} von {total} frei</translation>
    </message>
    <message>
        <source>Runtimes are chosen automatically again.</source>
        <translation>Laufzeiten werden wieder automatisch gewählt.</translation>
    </message>
    <message>
        <source>Every model now loads with {name}.</source>
        <translation>Jedes Modell lädt jetzt mit {name}.</translation>
    </message>
    <message>
        <source>Removed the {name} runtime.</source>
        <translation>Die Laufzeit {name} wurde entfernt.</translation>
    </message>
    <message>
        <source>&lt;b&gt;{name}&lt;/b&gt; · {backend} · llama-cpp-python {version} · {origin} · {size} on disk</source>
        <translation>&lt;b&gt;{name}&lt;/b&gt; · {backend} · llama-cpp-python {version} · {origin} · {size} auf dem Laufwerk</translation>
    </message>
    <message>
        <source> · &lt;b&gt;in use&lt;/b&gt;</source>
        <translation> · &lt;b&gt;in Verwendung&lt;/b&gt;</translation>
    </message>
    <message>
        <source>&lt;br&gt;cannot start: {problem}</source>
        <translation>&lt;br&gt;kann nicht starten: {problem}</translation>
    </message>
    <message>
        <source>no device</source>
        <translation>kein Gerät</translation>
    </message>
</context>
<context>
    <name>server_page</name>
    <message>
        <source>“{raw}” is not a web origin: write it as http://host:port (for example http://localhost:3000), without a path</source>
        <translation>„{raw}“ ist kein Web-Origin: Schreiben Sie es als http://host:port (zum Beispiel http://localhost:3000), ohne Pfad</translation>
    </message>
</context>
</TS>
