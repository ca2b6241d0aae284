"""The outline of an open document, with the last good outline standing in for half-typed units.

``tvmscript.outline.build_outline`` is incremental (per-chunk cache), so it runs on every version.  While
a unit is half-typed its chunk does not parse and the unit vanishes from the outline; here the
last good outline of the unit with the same name stands in, moved to where the unit starts now,
so symbols, lenses, hovers and inlay hints keep their places.  ``DocumentOutline.fallback`` names
those units (their safety-gate findings are stale and TVM cannot check them).
"""
from __future__ import annotations

import bisect
import re
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any

from .model import Function, Outline, Unit
from .moves import shifted as _shifted
from .outline import ChunkCache, outline_chunks

_UNIT_NAME = re.compile(r"^(?:async\s+)?(?:def|class)\s+([A-Za-z_]\w*)", re.M)


@dataclass
class DocumentOutline:
    """The outline of a document plus which units come from an older good parse, and the text's
    lines (``source_lines(text)``, read-only)."""
    outline: Outline
    fallback: set[str] = field(default_factory=set)
    lines: list[str] = field(default_factory=list)


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
    """Per-document outline builder: the chunks of the last text (``outline.ChunkCache``) and the
    last good outline of every unit whose name is still in the text."""

    def __init__(self):
        self._good: dict[str, _Good] = {}
        self.chunks = ChunkCache()

    def build(self, text: str, path: str = "<text>") -> DocumentOutline:
        outline, lines, spans = outline_chunks(text, path, self.chunks)
        by_unit: dict[str, list[Function]] = {}
        for fn in outline.functions:
            by_unit.setdefault(fn.unit, []).append(fn)
        present = set()
        for unit in outline.units:   # a name may be defined twice: only the functions inside this one
            present.add(unit.name)
            self._good[unit.name] = _Good(unit, [f for f in by_unit.get(unit.name, ())
                                                 if unit.start_line <= f.range["start"]["line"] <= unit.end_line])
        if not outline.syntax_errors:
            self._keep(present)
            return DocumentOutline(outline, lines=lines)
        broken = broken_chunks(outline, lines, spans)
        self._keep(present | {name for name, _, _ in broken})
        return self._with_fallbacks(outline, lines, [b for b in broken if b[0] not in present and b[0] in self._good])

    def _keep(self, names: set[str]) -> None:
        """Forget the last good outline of units no longer in the text (memory stays bounded)."""
        if len(self._good) > len(names):
            self._good = {name: good for name, good in self._good.items() if name in names}

    def _with_fallbacks(self, outline: Outline, lines: list[str], broken: list[tuple[str, int, int]]) -> DocumentOutline:
        if not broken:
            return DocumentOutline(outline, lines=lines)
        merged = Outline(outline.path, list(outline.units), list(outline.functions), outline.constants,
                         outline.aliases, outline.syntax_errors)
        for name, start, end in broken:
            unit, functions = _stand_in(self._good[name], lines, start, max(end, start))
            merged.units.append(unit)
            merged.functions.extend(functions)
        merged.units.sort(key=lambda u: u.start_line)
        order = {u.name: i for i, u in enumerate(merged.units)}
        merged.functions.sort(key=lambda f: (order.get(f.unit, 0), f.range["start"]["line"]))
        return DocumentOutline(merged, {name for name, _, _ in broken}, lines)


def _stand_in(good: _Good, lines: list[str], first: int, last: int) -> tuple[Unit, list[Function]]:
    """The last good outline of a unit moved to lines ``first..last`` and kept within them.  Objects
    are copied only where they move or are clamped (outline data is read-only): a stand-in for a
    half-typed method of a 3,000-line module costs a few milliseconds, not a deep copy (200 ms)."""
    delta = first - good.unit.start_line
    functions = _shifted(good.functions, delta) if delta else list(good.functions)
    for i, fn in enumerate(functions):
        if fn.range["start"]["line"] < first or fn.range["end"]["line"] > last:
            functions[i] = fn = _shifted(fn, 0) if fn is good.functions[i] else fn
            clamp_lines(fn, lines, first, last)
    unit = replace(good.unit, problems=[], notes=[], start_line=good.unit.start_line + delta,
                   end_line=good.unit.end_line + delta, range=_shifted(good.unit.range, delta))
    clamp_lines(unit, lines, first, last)
    return unit, functions


def broken_chunks(outline: Outline, lines: list[str], spans: list[tuple[int, int]]) -> list[tuple[str, int, int]]:
    """``(name, start, end)`` of the named chunks (``spans``) that hold a syntax error."""
    error_lines = sorted(e["range"]["start"]["line"] for e in outline.syntax_errors)
    out = []
    for start, end in spans:
        k = bisect.bisect_left(error_lines, start)
        if k < len(error_lines) and error_lines[k] <= end:
            name = chunk_name(lines, start, end)
            if name:
                out.append((name, start, end))
    return out
