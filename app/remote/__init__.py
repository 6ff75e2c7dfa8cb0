"""Remote engines: OpenAI-compatible servers the user connects to (connections.py), used through the remote backend
(backends/remote.py) like any local model. Qt-free."""
