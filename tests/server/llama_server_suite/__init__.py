"""llama-server's own pytest suite (llama.cpp tools/server/tests/unit at 0c1e57098bba43ac29e6e3b677cdceebdd22334f, vendored
by llama-cpp-python 0.3.36), ported to run against ``quantdesk serve`` on the tiny test models. README.md beside this
file tables which upstream tests were ported, which differ on purpose and which do not apply, with the reasons."""
