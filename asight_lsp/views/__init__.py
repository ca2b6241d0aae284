"""Versioned JSON payloads of the analytics and the editor (``registry.py`` lists them)."""
