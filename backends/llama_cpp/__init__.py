"""llama.cpp through llama-cpp-python: GGUF models on CPU, CUDA, Metal, ROCm or Vulkan builds.

backend.py the backend (load, embeddings, the lab's logits), loop.py the token loop and the KV cache's record,
sampling.py the samplers and each token's bytes, load.py what a load needs besides ``Llama`` (progress, KV cache types,
expert tensors in RAM), vision.py images through libmtmd, draft.py speculative decoding's guesses, log.py llama.cpp's
load log read into devices and buffers. llama_cpp itself is imported only when a model loads: importing this package
(and ``LlamaCppBackend.probe``) works without it.
"""

from backends.llama_cpp.backend import LlamaCppBackend

__all__ = ["LlamaCppBackend"]
