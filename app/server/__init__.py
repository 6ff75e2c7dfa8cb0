"""The local OpenAI-compatible server: ``create_app`` over a loaded EngineClient, ``ServerThread`` to run it
in-process (``quantdesk serve`` is app/commands/server.py). Qt-free; safe by default (see ``guard``)."""
