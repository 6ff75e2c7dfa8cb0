"""The Hardware page: what was detected, and the llama.cpp runtimes panel."""
