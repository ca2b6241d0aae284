"""Source hashes that key runs to functions: a run is fresh for a function while its hash holds."""
from __future__ import annotations

import hashlib
import json
import re

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


def constants_used(constants: dict | None, fn_text: str) -> dict:
    """The module constants a function's text names (``N`` in ``T.Buffer((N, N))``): a run tuned the
    function with their values, so another value is another workload although the text is the same."""
    return {name: value for name, value in (constants or {}).items()
            if re.search(rf"(?<![\w.]){re.escape(name)}(?!\w)", fn_text)}


def constants_hold(recorded: dict | None, used: dict) -> bool:
    """Every constant the function uses now has the value the run recorded (when it recorded one)."""
    recorded = recorded or {}
    return all(_plain(recorded[name]) == _plain(value) for name, value in used.items() if name in recorded)


def _plain(value):
    """A constant as run.json keeps it (a tuple comes back a list)."""
    try:
        return json.loads(json.dumps(value, default=str))
    except (TypeError, ValueError, RecursionError):
        return repr(value)
