"""Source hashes that key runs to functions: a run is fresh for a function while its hash holds."""
from __future__ import annotations

import hashlib

from .model import Function


def function_text(text: str, fn: Function) -> str:
    """The source lines of one function (for per-function source hashes)."""
    lines = text.splitlines()
    return "\n".join(lines[fn.range["start"]["line"]:fn.range["end"]["line"] + 1])


def source_hash(text: str) -> str:
    """Hash of one function's source text, ignoring trailing spaces and blank lines."""
    normal = "\n".join(line.rstrip() for line in text.splitlines() if line.strip())
    return hashlib.sha256(normal.encode("utf-8")).hexdigest()[:16]


def function_hash(text: str, fn: Function) -> str:
    """The per-function source hash runs are keyed by (``RunMeta.source_hashes``)."""
    return source_hash(function_text(text, fn))
