"""The Hugging Face Hub side of QuantDesk: one repo's listing (listing.py), search (search.py), verified resumable
downloads (download.py), the local model library (library.py); every call through config.py. Qt-free; the CLI
faces are app/commands/hub.py."""
