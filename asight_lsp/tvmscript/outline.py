"""TVM-free source map of a TVMScript file, from the standard library's ``ast`` only.

It finds every unit (a top-level ``@I.ir_module`` class, ``@T.prim_func`` or ``@R.function`` def),
and inside each function its blocks (``T.sblock`` names), loops, buffers and Relax bindings, each
with a 0-based LSP range and a stable id:

* function id: ``Module.func`` inside an IRModule class, else ``func``
* block id:    ``<function id>/<block name>``
* loop id:     ``<function id>/<first block inside the loop>/<loop vars from the outermost loop>``

The data model is ``model.py``, the per-function walk ``scanner.py``.  Nothing here executes the file.  A file that does not parse as a whole is split at top-level
decorators and each chunk is parsed alone, so one half-typed function does not hide the others.
"""
from __future__ import annotations

import ast
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from .model import DEFAULT_ALIASES, Function, Outline, Unit
from .pysource import (MAX_FILE_BYTES, decode_source, module_constants, namespace_aliases, parse_chunks, parse_tree, split_chunks, syntax_error_dict)
from .ranges import line_range, make_range
from .scanner import _Context, _unit


# --------------------------------------------------------------------------- parsing


# --------------------------------------------------------------------------- helpers


# --------------------------------------------------------------------------- functions


# --------------------------------------------------------------------------- file level


_CHUNK_CACHE: "OrderedDict[str, _ChunkResult]" = OrderedDict()
_CHUNK_CACHE_SIZE = 4096


@dataclass
class _ChunkResult:
    """Outline of one top-level chunk, with ranges as if the chunk started at line 0."""
    units: list[Unit]
    functions: list[Function]
    constants: dict
    aliases: dict
    errors: list[dict]
    placed: tuple | None = None  # (start line, units, functions, errors) of the last placement

    def at(self, start: int) -> tuple[list[Unit], list[Function], list[dict]]:
        """The chunk's outline moved to ``start``; the last placement is reused (shared, read-only)."""
        if self.placed is None or self.placed[0] != start:
            self.placed = (start, _shifted(self.units, start), _shifted(self.functions, start),
                           _shifted(self.errors, start))
        return self.placed[1:]


def _outline_trees(trees: list[tuple[ast.Module, int]], lines: list[str], constants: dict,
                   aliases: dict) -> tuple[list[Unit], list[Function]]:
    units, functions = [], []
    for tree, offset in trees:
        ctx = _Context(lines, offset, constants, aliases)
        for stmt in tree.body:
            found = _unit(stmt, ctx)
            if found:
                units.append(found[0])
                functions.extend(found[1])
    return units, functions


def _chunk_result(chunk: str, constants: dict, aliases: dict) -> _ChunkResult:
    """Outline one chunk (cached by its text and the constants/aliases it can see)."""
    key = repr((chunk, sorted(constants.items()), sorted(aliases.items())))
    cached = _CHUNK_CACHE.get(key)
    if cached is not None:
        _CHUNK_CACHE.move_to_end(key)
        return cached
    lines = chunk.splitlines()
    try:
        tree, errors = parse_tree(chunk), []
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        tree, errors = None, [syntax_error_dict(err, lines)]
    own_constants = module_constants(tree) if tree else {}
    own_aliases = namespace_aliases(tree) if tree else {}
    units, functions = _outline_trees([(tree, 0)] if tree else [], lines, {**constants, **own_constants},
                                      {**aliases, **own_aliases})
    result = _ChunkResult(units, functions, own_constants, own_aliases, errors)
    _CHUNK_CACHE[key] = result
    if len(_CHUNK_CACHE) > _CHUNK_CACHE_SIZE:
        _CHUNK_CACHE.popitem(last=False)
    return result


def _shifted(value: Any, delta: int) -> Any:
    """A copy of outline data with every range moved down by ``delta`` lines."""
    if isinstance(value, dict):
        if "start" in value and "end" in value and "line" in value["start"]:
            return make_range(value["start"]["line"] + delta, value["start"]["character"],
                              value["end"]["line"] + delta, value["end"]["character"])
        return {k: _shifted(v, delta) for k, v in value.items()}
    if isinstance(value, list):
        return [_shifted(v, delta) for v in value]
    if hasattr(value, "__dataclass_fields__"):
        copy = object.__new__(type(value))
        for name in value.__dataclass_fields__:
            field_value = getattr(value, name)
            if name in ("start_line", "end_line"):
                field_value += delta
            elif isinstance(field_value, (dict, list)) or hasattr(field_value, "__dataclass_fields__"):
                field_value = _shifted(field_value, delta)
            setattr(copy, name, field_value)
        return copy
    return value


def _outline_whole(text: str, lines: list[str], outline: Outline) -> None:
    """Fallback when chunking went wrong: parse the whole file (or per chunk, uncached)."""
    trees, outline.syntax_errors = parse_chunks(text, lines)
    outline.constants, outline.aliases = {}, dict(DEFAULT_ALIASES)
    for tree, _ in trees:
        outline.constants.update(module_constants(tree))
        outline.aliases.update(namespace_aliases(tree))
    outline.units, outline.functions = _outline_trees(trees, lines, outline.constants, outline.aliases)


def build_outline(text: str | bytes, path: str = "<text>") -> Outline:
    """Outline of a TVMScript file; never raises on bad input (problems go to ``syntax_errors``).

    The file is split into top-level chunks (one per decorated def/class); each chunk's outline is
    cached by its text, so re-outlining after an edit only re-parses the chunk that changed.  The
    returned units and functions may be shared with later calls: treat them as read-only.
    """
    text = decode_source(text)
    lines = text.splitlines()
    outline = Outline(path)
    if len(text) > MAX_FILE_BYTES or len(text.encode("utf-8", errors="replace")) > MAX_FILE_BYTES:
        outline.syntax_errors.append({
            "range": line_range(lines, 0), "severity": "error", "source": "asight",
            "message": f"file too large to analyse ({len(text) / 1e6:.1f} MB > {MAX_FILE_BYTES / 1e6:.1f} MB)"})
        return outline
    if "\x00" in text:
        line = text[:text.index("\x00")].count("\n")
        outline.syntax_errors.append({"range": line_range(lines, line), "severity": "error", "source": "python",
                                      "message": "syntax error: the file contains NUL bytes (is it a binary file?)"})
        return outline
    results = []
    for start, end in split_chunks(lines):
        result = _chunk_result("\n".join(lines[start:end + 1]), outline.constants, outline.aliases)
        outline.constants = {**outline.constants, **result.constants}
        outline.aliases = {**outline.aliases, **result.aliases}
        results.append((start, result))
    if any(r.errors for _, r in results):
        try:
            parse_tree(text)
            _outline_whole(text, lines, outline)  # the file is fine: the chunk split was wrong
            return outline
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass
    for start, result in results:
        units, functions, errors = result.at(start)
        outline.units.extend(units)
        outline.functions.extend(functions)
        outline.syntax_errors.extend(errors)
    return outline


