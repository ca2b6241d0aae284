"""ASight LSP: auto-scheduling insight for Apache TVM in the editor."""
__version__ = "0.1.0"
