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
import threading
from collections import OrderedDict
from dataclasses import dataclass

from .model import DEFAULT_ALIASES, Function, Outline, Unit
from .pysource import (MAX_FILE_BYTES, decode_source, fold_refusals, module_constants, namespace_aliases, parse_chunks, parse_tree,
                       source_lines, split_chunks, syntax_error_dict)
from .ranges import line_range
from .safety import module_macros
from .members import ClassChunk, outline_class, split_class
from .moves import moved_errors, shifted as _shifted
from .scanner import _Context, _unit


class ChunkCache:
    """Outlines of top-level chunks by their text (and the constants and aliases they see).

    ``max_chars`` bounds the chunk text held (least recently used goes first): an outline takes
    some 30-50 bytes per character of TVMScript.  ``build_outline(..., chunks=cache)`` with a
    cache of its own (one per open document, ``outline_cache.OutlineCache``) keeps the chunks of
    the last two texts it outlined: an edit re-parses only the chunk it changed, however big the
    file; the keystroke that completes a half-typed line (or an undo) finds the chunk as it was
    before; and the cache never holds much more than the file.  Threads may share one (services
    outline files in worker threads): its operations hold a lock.
    """

    def __init__(self, max_chars: int | None = None):
        self.entries: OrderedDict[tuple[str, str], _ChunkResult] = OrderedDict()   # (text, context) ->
        self.max_chars, self.chars = max_chars, 0
        self._last_keys: set = set()
        self._lock = threading.Lock()

    def get(self, key: tuple[str, str]) -> "_ChunkResult | None":
        with self._lock:
            found = self.entries.get(key)
            if found is not None:
                self.entries.move_to_end(key)
            return found

    def put(self, key: tuple[str, str], result: "_ChunkResult") -> None:
        with self._lock:
            if key not in self.entries:
                self.chars += len(key[0])
            self.entries[key] = result
            while self.max_chars is not None and self.chars > self.max_chars and len(self.entries) > 1:
                self.chars -= len(self.entries.popitem(last=False)[0][0])

    def keep_last(self, keys: set[tuple[str, str]]) -> None:
        """Keep the chunks of this text (``keys``) and of the text outlined before it."""
        with self._lock:
            keep = keys | self._last_keys
            for key in [k for k in self.entries if k not in keep]:
                self.chars -= len(key[0])
                del self.entries[key]
            self._last_keys = keys

    def clear(self) -> None:
        with self._lock:
            self.entries.clear()
            self.chars = 0

    def __len__(self) -> int:
        return len(self.entries)


# Shared by callers without a cache of their own (CLI, services: the server's custom requests
# outline the open document again): 256 Ki characters of chunk text, ~5 MB of outlines (~19 bytes a
# character of TVMScript), a 6,000-line file.  (It was 8 Mi: 160 MB kept after a few big files.)
_CHUNK_CACHE = ChunkCache(max_chars=256 * 1024)


@dataclass
class _ChunkResult:
    """Outline of one top-level chunk at its last placement (shared, read-only): ``placed`` is
    ``(start line, units, functions, errors)``, one tuple so that threads sharing the cache never
    see a start line with another placement's objects."""
    placed: tuple[int, list[Unit], list[Function], list[dict]]
    constants: dict
    aliases: dict
    parts: tuple = ()    # the cache keys of its members (an ``@I.ir_module`` class read member by member)

    @property
    def errors(self) -> list[dict]:
        return self.placed[3]

    def at(self, start: int) -> tuple[list[Unit], list[Function], list[dict]]:
        """The chunk's outline moved to ``start`` (copies; the objects handed out before stay as they are)."""
        placed = self.placed
        if start != placed[0]:
            delta = start - placed[0]
            placed = self.placed = (start, _shifted(placed[1], delta), _shifted(placed[2], delta),
                                    moved_errors(placed[3], delta))
        return placed[1], placed[2], placed[3]


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


def _context_key(constants: dict, aliases: dict) -> str:
    """What a chunk's outline depends on besides its text: the constants and aliases it sees."""
    return repr((sorted(constants.items()), sorted(aliases.items())))


def _chunk_result(key: tuple[str, str], chunk: str, lines: list[str], span: tuple[int, int], constants: dict,
                  aliases: dict, cache: ChunkCache) -> _ChunkResult:
    """Outline one chunk (file lines ``span``) of the file ``lines`` (cached by ``key``)."""
    cached = cache.get(key)
    if cached is not None:
        return cached
    start = span[0]
    split = split_class(lines, *span, chunk)
    by_member = split and outline_class(ClassChunk(lines, split, constants, aliases, key[1]), cache)
    if by_member:
        units, functions, errors, parts = by_member
        result = _ChunkResult((start, units, functions, errors), {}, {}, tuple(parts))
        cache.put(key, result)
        return result
    try:
        tree, errors = parse_tree(chunk), []
    except (SyntaxError, ValueError, RecursionError, MemoryError) as err:
        tree, errors = None, [syntax_error_dict(err, lines, start)]
    refused: list = []
    own_constants = module_constants(tree, constants, refused) if tree else {}
    errors += fold_refusals(refused, lines, start)
    own_aliases = namespace_aliases(tree) if tree else {}
    if tree:
        own_aliases.update(module_macros(tree, {**aliases, **own_aliases}, {**constants, **own_constants}, lines, start))
    units, functions = _outline_trees([(tree, start)] if tree else [], lines, {**constants, **own_constants},
                                      {**aliases, **own_aliases})
    result = _ChunkResult((start, units, functions, errors), own_constants, own_aliases)
    cache.put(key, result)
    return result


def _outline_whole(text: str, lines: list[str], outline: Outline) -> None:
    """Fallback when chunking went wrong: parse the whole file (or per chunk, uncached)."""
    trees, outline.syntax_errors = parse_chunks(text, lines)
    outline.constants, outline.aliases = {}, dict(DEFAULT_ALIASES)
    for tree, offset in trees:
        refused: list = []
        outline.constants.update(module_constants(tree, outline.constants, refused))
        outline.syntax_errors += fold_refusals(refused, lines, offset)
        outline.aliases.update(namespace_aliases(tree))
        outline.aliases.update(module_macros(tree, outline.aliases, outline.constants, lines, offset))
    outline.units, outline.functions = _outline_trees(trees, lines, outline.constants, outline.aliases)


def split_may_be_wrong(lines: list[str], chunks: list[tuple[int, int]], broken: list[bool]) -> bool:
    """Whether a chunk's syntax error may come from splitting inside a multi-line construct rather
    than from the code (then the whole file is parsed to find out): a broken chunk that holds a
    triple quote or a line continued by a backslash, or two broken chunks in a row (a bracket left
    open across a line that starts with ``@``).  A half-typed statement inside one unit is none of
    these, so typing does not pay for a parse of the whole file."""
    for i, (start, end) in enumerate(chunks):
        if not broken[i]:
            continue
        if i and broken[i - 1]:
            return True
        for line in lines[start:end + 1]:
            if '"""' in line or "'''" in line or line.endswith("\\"):
                return True
    return False


def build_outline(text: str | bytes, path: str = "<text>", chunks: ChunkCache | None = None) -> Outline:
    """Outline of a TVMScript file; never raises on bad input (problems go to ``syntax_errors``).

    The file is split into top-level chunks (one per decorated def/class); each chunk's outline is
    cached by its text (in ``chunks``, else in a cache shared by all callers), so re-outlining after
    an edit only re-parses the chunk that changed.  The returned units and functions may be shared
    with later calls: treat them as read-only.
    """
    return outline_chunks(text, path, chunks)[0]


def outline_chunks(text: str | bytes, path: str = "<text>",
                   chunks: ChunkCache | None = None) -> tuple[Outline, list[str], list[tuple[int, int]]]:
    """``build_outline``, with the file's lines and the line spans of its chunks."""
    text = decode_source(text)
    lines = source_lines(text)
    outline = Outline(path)
    refusal = _refusal(text, lines)
    if refusal is not None:
        outline.syntax_errors.append(refusal)
        return outline, lines, []
    spans = split_chunks(lines)
    results = _chunk_results(lines, spans, outline, _CHUNK_CACHE if chunks is None else chunks, chunks is not None)
    if any(r.errors for r in results) and split_may_be_wrong(lines, spans, [bool(r.errors) for r in results]):
        try:
            parse_tree(text)
            _outline_whole(text, lines, outline)  # the file is fine: the chunk split was wrong
            return outline, lines, spans
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            pass
    for (start, _), result in zip(spans, results):
        units, functions, errors = result.at(start)
        outline.units.extend(units)
        outline.functions.extend(functions)
        outline.syntax_errors.extend(errors)
    return outline, lines, spans


def _refusal(text: str, lines: list[str]) -> dict | None:
    """The one diagnostic of a file not outlined at all (too large, binary)."""
    if len(text) > MAX_FILE_BYTES or len(text.encode("utf-8", errors="replace")) > MAX_FILE_BYTES:
        return {"range": line_range(lines, 0), "severity": "error", "source": "asight",
                "message": f"file too large to analyse (over {MAX_FILE_BYTES / 1e6:.1f} MB)"}
    if "\x00" in text:
        line = len(source_lines(text[:text.index("\x00")] + ".")) - 1
        return {"range": line_range(lines, line), "severity": "error", "source": "python",
                "message": "syntax error: the file contains NUL bytes (is it a binary file?)"}
    return None


def _chunk_results(lines: list[str], spans: list[tuple[int, int]], outline: Outline, cache: ChunkCache,
                   own_cache: bool) -> list[_ChunkResult]:
    """Each chunk's outline, from ``cache`` where its text (and what it sees) is unchanged; the
    file's constants and aliases gathered into ``outline``.  An own cache keeps only these chunks."""
    results, keys = [], set()
    context = _context_key(outline.constants, outline.aliases)
    for start, end in spans:
        chunk = "\n".join(lines[start:end + 1])
        key = (chunk, context)
        keys.add(key)
        result = _chunk_result(key, chunk, lines, (start, end), outline.constants, outline.aliases, cache)
        keys.update(result.parts)
        constants, aliases = {**outline.constants, **result.constants}, {**outline.aliases, **result.aliases}
        if constants != outline.constants or aliases != outline.aliases:
            outline.constants, outline.aliases = constants, aliases
            context = _context_key(constants, aliases)
        results.append(result)
    if own_cache:
        cache.keep_last(keys)
    return results
