<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<TS version="2.1" language="en_US">
<context>
    <name>ChatDocuments</name>
    <message numerus="yes">
        <source>This chat&apos;s files (%n)</source>
        <translation>
            <numerusform>This chat&apos;s file (%n)</numerusform>
            <numerusform>This chat&apos;s files (%n)</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>%n file(s)</source>
        <translation>
            <numerusform>%n file</numerusform>
            <numerusform>%n files</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>ChatPage</name>
    <message numerus="yes">
        <source>%n replies are being written, as many as this model writes at once: wait for one to finish, or stop one, to send here.</source>
        <translation>
            <numerusform>%n reply is being written, as many as this model writes at once: wait for it to finish, or stop it, to send here.</numerusform>
            <numerusform>%n replies are being written, as many as this model writes at once: wait for one to finish, or stop one, to send here.</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>ChatToolCards</name>
    <message numerus="yes">
        <source>connected · %n tool(s)</source>
        <translation>
            <numerusform>connected · %n tool</numerusform>
            <numerusform>connected · %n tools</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>The reply made %n tool step(s), the most one reply may: it ends here.</source>
        <translation>
            <numerusform>The reply made %n tool step, the most one reply may: it ends here.</numerusform>
            <numerusform>The reply made %n tool steps, the most one reply may: it ends here.</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>CutMark</name>
    <message numerus="yes">
        <source>%n earlier message(s) compacted into a note by the model (context full)</source>
        <translation>
            <numerusform>%n earlier message compacted into a note by the model (context full)</numerusform>
            <numerusform>%n earlier messages compacted into a note by the model (context full)</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>%n earlier message(s) not sent to the model (context full)</source>
        <translation>
            <numerusform>%n earlier message not sent to the model (context full)</numerusform>
            <numerusform>%n earlier messages not sent to the model (context full)</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>, %n pinned message(s) kept</source>
        <translation>
            <numerusform>, %n pinned message kept</numerusform>
            <numerusform>, %n pinned messages kept</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>DiscoverPage</name>
    <message numerus="yes">
        <source>%n model(s)</source>
        <translation>
            <numerusform>%n model</numerusform>
            <numerusform>%n models</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>%n quant(s), checked against this machine at {n_ctx} tokens of context. {reason}.</source>
        <translation>
            <numerusform>%n quant, checked against this machine at {n_ctx} tokens of context. {reason}.</numerusform>
            <numerusform>%n quants, checked against this machine at {n_ctx} tokens of context. {reason}.</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>DocumentsPage</name>
    <message numerus="yes">
        <source>Files added by hand: %n file(s)</source>
        <translation>
            <numerusform>Files added by hand: %n file</numerusform>
            <numerusform>Files added by hand: %n files</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>Files that could not be read: %n</source>
        <translation>
            <numerusform>Files that could not be read: %n</numerusform>
            <numerusform>Files that could not be read: %n</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>LabPage</name>
    <message numerus="yes">
        <source>Starting: %n variant(s), each in a fresh engine host…</source>
        <translation>
            <numerusform>Starting: %n variant, each in a fresh engine host…</numerusform>
            <numerusform>Starting: %n variants, each in a fresh engine host…</numerusform>
        </translation>
    </message>
    <message numerus="yes">
        <source>Result {id}: medians of %n run(s) per variant (hover over a figure for its range); prompt ≈{prompt_tokens} tokens, {gen_tokens} generated; quality against {reference}</source>
        <translation>
            <numerusform>Result {id}: medians of %n run per variant (hover over a figure for its range); prompt ≈{prompt_tokens} tokens, {gen_tokens} generated; quality against {reference}</numerusform>
            <numerusform>Result {id}: medians of %n runs per variant (hover over a figure for its range); prompt ≈{prompt_tokens} tokens, {gen_tokens} generated; quality against {reference}</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>LibraryPage</name>
    <message numerus="yes">
        <source>%n model(s) · {owned} in the models folder {folder}</source>
        <translation>
            <numerusform>%n model · {owned} in the models folder {folder}</numerusform>
            <numerusform>%n models · {owned} in the models folder {folder}</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>ModelBar</name>
    <message numerus="yes">
        <source> · %n chats at once</source>
        <translation>
            <numerusform> · %n chat at once</numerusform>
            <numerusform> · %n chats at once</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>StatsStrip</name>
    <message numerus="yes">
        <source>after %n server request(s)</source>
        <translation>
            <numerusform>after %n server request</numerusform>
            <numerusform>after %n server requests</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>ThinkingBlock</name>
    <message numerus="yes">
        <source>Thought for {time} · %n token(s)</source>
        <translation>
            <numerusform>Thought for {time} · %n token</numerusform>
            <numerusform>Thought for {time} · %n tokens</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>ToolsPanel</name>
    <message numerus="yes">
        <source>connected · %n tool(s)</source>
        <translation>
            <numerusform>connected · %n tool</numerusform>
            <numerusform>connected · %n tools</numerusform>
        </translation>
    </message>
</context>
<context>
    <name>UploadersDialog</name>
    <message numerus="yes">
        <source>%n file(s) of {quant} can be compared</source>
        <translation>
            <numerusform>%n file of {quant} can be compared</numerusform>
            <numerusform>%n files of {quant} can be compared</numerusform>
        </translation>
    </message>
</context>
</TS>
