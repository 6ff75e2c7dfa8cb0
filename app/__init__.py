"""QuantDesk: a desktop local-model manager.

Everything under ``app`` except ``app.ui`` is Qt-free, and nothing under ``app`` imports an inference
library (llama_cpp, mlx, torch, exllama): those live in ``backends`` and run in the engine process.
"""

__version__ = "0.4.0"
