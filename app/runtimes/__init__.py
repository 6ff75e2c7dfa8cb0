"""llama.cpp runtimes: builds of llama-cpp-python for one ggml backend each (CPU, Vulkan, CUDA, ROCm, Metal).

Qt-free, and never imports llama_cpp: a runtime is started only in child processes (its device probe,
``devices``; the engine host). ``catalog`` finds them, ``devices`` asks one what it sees, ``choose``
picks one per load with its reason, ``pins`` keeps the user's pins, ``select`` does all that for a
load, ``build`` compiles one, ``overview`` and ``commands`` show and manage them.

In detail (each module's job, read with docs/architecture.md's module map):

llama.cpp runtimes, one build of llama-cpp-python per ggml backend (CPU, Vulkan, CUDA, ROCm, Metal): ``catalog``
finds them (the app environment's own, bundled ones, user-built ones under the data folder), ``devices`` starts one
in a child to list what its ggml sees, ``choose`` picks one per load with its reason, ``pins`` keeps the user's
pins, ``select`` does that for a load (the machine's GPUs and each runtime's probe handed in: it never imports
``app/hardware``), ``build`` compiles one from the sdist, portable (``cpu_variants``: the CMake flags of a build for
every CPU of its platform, as llama.cpp's releases are, and the loading of such a runtime's backend modules, the
best CPU variant for this CPU or the most basic one when ``QUANTDESK_CPU_VARIANT`` names it), ``report`` words what
loaded where; never imports llama_cpp; ``overview`` every runtime with what it sees (``quantdesk runtime ls``, the
Hardware page); ``trials`` a rebuilt runtime's previous build (``runtimes/.previous/NAME``), each model's trial load
on the new build (``trials.json`` in its folder; ``EngineClient.load`` loads a model whose trial failed on the
previous build), ``rollback``
"""
