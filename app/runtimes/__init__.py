"""llama.cpp runtimes: builds of llama-cpp-python for one ggml backend each (CPU, Vulkan, CUDA, ROCm, Metal).

Qt-free, and never imports llama_cpp: a runtime is started only in child processes (its device probe,
``devices``; the engine host). ``catalog`` finds them, ``devices`` asks one what it sees, ``choose``
picks one per load with its reason, ``pins`` keeps the user's pins, ``select`` does all that for a
load, ``build`` compiles one, ``overview`` and ``commands`` show and manage them.
"""
