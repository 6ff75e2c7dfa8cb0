"""Conversations and presets, kept in SQLite under the user data folder (Qt-free)."""
