"""The local OpenAI-compatible server: ``create_app`` over a loaded EngineClient, ``ServerThread`` to run it
in-process, and ``quantdesk serve``. Qt-free; safe by default (see ``guard``)."""
