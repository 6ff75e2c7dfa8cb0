<?xml version="1.0" encoding="utf-8"?>
<!DOCTYPE TS>
<TS version="2.1" language="en_US">
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
</TS>
