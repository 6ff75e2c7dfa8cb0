"""The Hugging Face Hub side of QuantDesk: search (search.py), verified resumable downloads (download.py),
the local model library (library.py) and their CLI commands (commands.py). Qt-free."""
