"""Inference backends, one module per engine, behind ``backends.base.Backend``. Qt-free.

Importing this package (or ``backends.registry``) never imports an engine library.
"""
