"""Outline data moved down or up when lines above it come and go.

An edit that adds a line moves every chunk (and every method of a class) below it: their cached
outlines are handed out again as copies placed where they are now (objects handed out before never
change: outline data is read-only and shared).  ``shifted`` copies what holds lines: LSP range
dicts, ``start_line``/``end_line``, and the objects holding them.

A function's blocks, loops, buffers and bindings (most of its objects) are moved lazily: the copy
keeps a reference to the function it was moved from and the distance, and makes its lists on first
use (``Function.__getattr__``).  After an Enter, the codeLens answer reads only each function's own
range; documentSymbol, hovers and inlay hints of the functions they show make the lists they read.
Moving a lazy copy again composes the distances, never a chain.
"""
from __future__ import annotations

from typing import Any

from .model import FUNCTION_LISTS, MOVED_FROM, Binding, Block, Buffer, Function, Loop
from .pysource import lines_moved

_ATOMS = (str, int, float, bool, type(None))


def moved_range(rng: dict, delta: int) -> dict:
    start, end = rng["start"], rng["end"]
    return {"start": {"line": start["line"] + delta, "character": start.get("character", 0)},
            "end": {"line": end["line"] + delta, "character": end.get("character", 0)}}


def _is_range(value: dict) -> bool:
    start, end = value.get("start"), value.get("end")
    return type(start) is dict and type(end) is dict and "line" in start and "line" in end


# Where the outline's objects hold lines (model.py): their range fields and their lists of objects.
_LINES_IN = {Block: (("range", "name_range"), ()), Loop: (("range",), ()), Buffer: (("range",), ()),
             Binding: (("range",), ())}


def _moved_function(fn: Function, delta: int) -> Function:
    state = fn.__dict__.copy()
    state["range"], state["name_range"] = moved_range(state["range"], delta), moved_range(state["name_range"], delta)
    base, moved_by = state.pop(MOVED_FROM, (fn, 0))
    for name in FUNCTION_LISTS:
        state.pop(name, None)
    state[MOVED_FROM] = (base, moved_by + delta)
    copy = object.__new__(Function)
    copy.__dict__ = state
    return copy


def function_lists(fn: Function) -> None:
    """Make a lazily moved function's lists (``Function.__getattr__``)."""
    base, delta = fn.__dict__[MOVED_FROM]
    for name in FUNCTION_LISTS:
        fn.__dict__[name] = [moved(v, delta) for v in getattr(base, name)]
    fn.__dict__.pop(MOVED_FROM, None)


def moved_errors(errors: list[dict], delta: int) -> list[dict]:
    """Syntax-error diagnostics moved down ``delta`` lines (copies), the lines their messages name too."""
    return [{**e, "range": moved_range(e["range"], delta), "message": lines_moved(e["message"], delta)}
            for e in errors]


def moved(obj: Any, delta: int) -> Any:
    """A copy of an outline dataclass moved down by ``delta`` lines (the hot path of ``shifted``)."""
    if type(obj) is Function:
        return _moved_function(obj, delta)
    state = obj.__dict__.copy()
    layout = _LINES_IN.get(type(obj))
    if layout is not None:
        for name in layout[0]:
            state[name] = moved_range(state[name], delta)
    else:
        for name, value in state.items():
            if name in ("start_line", "end_line"):
                state[name] = value + delta
            elif type(value) in (dict, list) or hasattr(type(value), "__dataclass_fields__"):
                state[name] = shifted(value, delta)
    copy = object.__new__(type(obj))
    copy.__dict__ = state
    return copy


def shifted(value: Any, delta: int) -> Any:
    """A copy of outline data with every range moved down by ``delta`` lines (lists of names,
    ids and extents are shared, not copied: outline data is read-only)."""
    kind = type(value)
    if kind is list:
        if not value or isinstance(value[0], _ATOMS):
            return value
        return [shifted(v, delta) for v in value]
    if kind is dict:
        if _is_range(value):
            return moved_range(value, delta)
        return {k: shifted(v, delta) for k, v in value.items()}
    if hasattr(kind, "__dataclass_fields__"):
        return moved(value, delta)
    return value
