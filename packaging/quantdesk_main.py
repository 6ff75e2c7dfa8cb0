"""Entry point of the frozen app: one binary for the GUI, the CLI and the engine host.

``quantdesk`` alone starts the GUI, ``quantdesk COMMAND`` runs the CLI, and the app starts itself as
``quantdesk --engine-host`` for each loaded model (app/engine/client.py host_command), so llama.cpp
runs in its own process in the frozen build too.
"""

import multiprocessing
import sys

from app.cli import main

if __name__ == "__main__":
    # The app starts its engine host with subprocess, but a library that uses multiprocessing's
    # spawn would re-run this binary: freeze_support() turns such a child into the worker it should be
    # instead of a second GUI (https://docs.python.org/3/library/multiprocessing.html#multiprocessing.freeze_support).
    multiprocessing.freeze_support()
    sys.exit(main())
