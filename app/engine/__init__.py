"""The engine: one child process per loaded model (host.py) and its parent-side client (client.py)."""
