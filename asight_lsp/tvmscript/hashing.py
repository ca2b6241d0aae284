"""Source hashes that key runs to functions: a run is fresh for a function while its hash holds."""
from __future__ import annotations

import hashlib

from .model import Function
from .pysource import source_lines


def function_text(text: str, fn: Function, lines: list[str] | None = None) -> str:
    """The source lines of one function (for per-function source hashes); ``lines``, when given,
    are ``source_lines(text)`` already split (hashing every function of a big file splits it once)."""
    lines = source_lines(text) if lines is None else lines
    return "\n".join(lines[fn.range["start"]["line"]:fn.range["end"]["line"] + 1])


def source_hash(text: str) -> str:
    """Hash of one function's source text, ignoring trailing spaces and blank lines.

    Total over ``str``: a lone surrogate (half of a pair, as an editor may send while typing) is
    hashed as its code point (``surrogatepass``) instead of failing.
    """
    normal = "\n".join(line.rstrip() for line in source_lines(text) if line.strip())
    return hashlib.sha256(normal.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def function_hash(text: str, fn: Function, lines: list[str] | None = None) -> str:
    """The per-function source hash runs are keyed by (``RunMeta.source_hashes``)."""
    return source_hash(function_text(text, fn, lines))
