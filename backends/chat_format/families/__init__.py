"""Model families whose reply syntax the differential analysis cannot find, one module each, ported from llama.cpp's
``common/parsers/*.cpp`` (backends/chat_format/formats.py lists them and how each is recognised). Each module has
``prepare(template, request) -> Prepared``."""
