"""The outline of an open document, with the last good outline standing in for half-typed units.

``tvmscript.outline.build_outline`` is incremental (per-chunk cache), so it runs on every version.  While
a unit is half-typed its chunk does not parse and the unit vanishes from the outline; here the
last good outline of the unit with the same name stands in, moved to where the unit starts now,
so symbols, lenses, hovers and inlay hints keep their places.  ``DocumentOutline.fallback`` names
those units (their safety-gate findings are stale and TVM cannot check them).
"""
from __future__ import annotations

import copy
import re
from dataclasses import dataclass, field, fields, is_dataclass
from typing import Any

from .model import Function, Outline, Unit
from .outline import build_outline
from .pysource import split_chunks

_UNIT_NAME = re.compile(r"^(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", re.M)


@dataclass
class DocumentOutline:
    """The outline of a document plus which units come from an older good parse."""
    outline: Outline
    fallback: set[str] = field(default_factory=set)


@dataclass
class _Good:
    unit: Unit
    functions: list[Function]


def shift_lines(obj: Any, delta: int) -> None:
    """Move every LSP range (and ``start_line``/``end_line``) inside ``obj`` by ``delta`` lines, in place."""
    if not delta:
        return
    if isinstance(obj, dict):
        if isinstance(obj.get("start"), dict) and "line" in obj["start"] and isinstance(obj.get("end"), dict):
            obj["start"]["line"] += delta
            obj["end"]["line"] += delta
            return
        for value in obj.values():
            shift_lines(value, delta)
    elif isinstance(obj, list):
        for value in obj:
            shift_lines(value, delta)
    elif is_dataclass(obj):
        for f in fields(obj):
            value = getattr(obj, f.name)
            if f.name in ("start_line", "end_line") and isinstance(value, int):
                setattr(obj, f.name, value + delta)
            elif isinstance(value, (dict, list)) or is_dataclass(value):
                shift_lines(value, delta)


def chunk_name(lines: list[str], start: int, end: int) -> str | None:
    """Name of the def/class a top-level chunk defines (read off its text, parse or not)."""
    match = _UNIT_NAME.search("\n".join(lines[start:min(end + 1, start + 40)]))
    return match.group(1) if match else None


class OutlineCache:
    """Per-document outline builder that remembers the last good outline of every unit."""

    def __init__(self):
        self._good: dict[str, _Good] = {}

    def build(self, text: str, path: str = "<text>") -> DocumentOutline:
        outline = build_outline(text, path)
        present = {u.name for u in outline.units}
        for unit in outline.units:
            self._good[unit.name] = _Good(unit, [f for f in outline.functions if f.unit == unit.name])
        if not outline.syntax_errors:
            return DocumentOutline(outline)
        return self._with_fallbacks(outline, text.splitlines(), present)

    def _with_fallbacks(self, outline: Outline, lines: list[str], present: set[str]) -> DocumentOutline:
        broken = []
        for start, end in split_chunks(lines):
            if any(start <= e["range"]["start"]["line"] <= end for e in outline.syntax_errors):
                name = chunk_name(lines, start, end)
                if name and name not in present and name in self._good:
                    broken.append((name, start, end))
        if not broken:
            return DocumentOutline(outline)
        merged = Outline(outline.path, list(outline.units), list(outline.functions), outline.constants,
                         outline.aliases, outline.syntax_errors)
        for name, start, end in broken:
            good = copy.deepcopy(self._good[name])
            shift_lines(good, start - good.unit.start_line)
            good.unit.problems = []
            merged.units.append(good.unit)
            merged.functions.extend(good.functions)
        merged.units.sort(key=lambda u: u.start_line)
        order = {u.name: i for i, u in enumerate(merged.units)}
        merged.functions.sort(key=lambda f: (order.get(f.unit, 0), f.range["start"]["line"]))
        return DocumentOutline(merged, {name for name, _, _ in broken})
