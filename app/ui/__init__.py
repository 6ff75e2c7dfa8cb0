"""The Qt desktop app. The only package that imports Qt (tests/test_import_boundaries.py keeps the rest honest)."""
