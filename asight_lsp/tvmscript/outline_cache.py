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


def _line_holders(obj: Any, seen: set[int] | None = None):
    """Every LSP range dict and every dataclass with ``start_line``/``end_line`` inside ``obj``, once
    each (a dict shared by two fields must not move twice)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, dict):
        if isinstance(obj.get("start"), dict) and "line" in obj["start"] and isinstance(obj.get("end"), dict):
            yield obj
            return
        for value in obj.values():
            yield from _line_holders(value, seen)
    elif isinstance(obj, list):
        for value in obj:
            yield from _line_holders(value, seen)
    elif is_dataclass(obj):
        if isinstance(getattr(obj, "start_line", None), int):
            yield obj
        for f in fields(obj):
            value = getattr(obj, f.name)
            if isinstance(value, (dict, list)) or is_dataclass(value):
                yield from _line_holders(value, seen)


def shift_lines(obj: Any, delta: int) -> None:
    """Move every LSP range (and ``start_line``/``end_line``) inside ``obj`` by ``delta`` lines, in place."""
    if not delta:
        return
    for holder in _line_holders(obj):
        if isinstance(holder, dict):
            holder["start"]["line"] += delta
            holder["end"]["line"] += delta
        else:
            holder.start_line += delta
            holder.end_line += delta


def clamp_lines(obj: Any, lines: list[str], first: int, last: int) -> None:
    """Keep every range inside ``obj`` within lines ``first..last`` (an older outline of a unit that
    is shorter now must not reach past it, nor past the end of the file)."""
    def clamp(line: int, character: int) -> tuple[int, int]:
        if line < first:
            return first, 0
        if line > last:
            return last, len(lines[last]) if 0 <= last < len(lines) else 0
        return line, character
    for holder in _line_holders(obj):
        if isinstance(holder, dict):
            start, end = holder["start"], holder["end"]
            start["line"], start["character"] = clamp(start["line"], start["character"])
            end["line"], end["character"] = clamp(end["line"], end["character"])
            if (start["line"], start["character"]) > (end["line"], end["character"]):
                start["line"], start["character"] = end["line"], end["character"]
        else:
            holder.start_line = min(max(holder.start_line, first), last)
            holder.end_line = min(max(holder.end_line, holder.start_line), last)


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
        for unit in outline.units:   # a name may be defined twice: only the functions inside this one
            self._good[unit.name] = _Good(unit, [f for f in outline.functions if f.unit == unit.name
                                                 and unit.start_line <= f.range["start"]["line"] <= unit.end_line])
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
            clamp_lines(good, lines, start, max(end, start))
            good.unit.problems = []
            merged.units.append(good.unit)
            merged.functions.extend(good.functions)
        merged.units.sort(key=lambda u: u.start_line)
        order = {u.name: i for i, u in enumerate(merged.units)}
        merged.functions.sort(key=lambda f: (order.get(f.unit, 0), f.range["start"]["line"]))
        return DocumentOutline(merged, {name for name, _, _ in broken})
