"""Parse and verify the units of a TVMScript file with TVM, reporting errors as plain data.

The core sends only units that passed the static safety gate.  Each unit is parsed alone, with the
other lines blanked so TVM's line numbers are the file's.
"""
from __future__ import annotations

import hashlib
import re
import time
from collections import OrderedDict

from ..engine import wire
from ..tvmscript.printed import METADATA, blank_metadata_params, metadata_section
from ..tvmscript.safety import MACRO_PREFIX
from ..tvmscript.pysource import decorator_keyword, parse_chunks, parse_tree, source_lines
from .compat import DiagnosticError, load_metadata, parse_script, relax, tirx
from . import sandbox

LOCATION = re.compile(r"--> (?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+)")
CARETS = re.compile(r"^\s*\|\s(?P<pad>\s*)(?P<carets>\^+)\s*$", re.M)
_CACHE: "OrderedDict[str, object]" = OrderedDict()
_CACHE_SIZE = 1024
_METADATA: dict = {}  # metadata code -> loaded objects (a few printed models at most)


def mask_text(lines: list[str], start: int, end: int) -> str:
    """Lines ``start..end`` (0-based, inclusive) preceded by blank lines, so TVM's line numbers are
    the file's; the lines after the unit are simply left out."""
    return "\n" * start + "\n".join(lines[start:end + 1])


def parse_request(params: dict):
    """The unit a worker request names (``text``, ``unit``, ``constants``, ``aliases``), parsed."""
    return parse_unit(source_lines(params["text"]), params["unit"], params.get("constants") or {},
                      params.get("aliases") or {})


def parse_unit(lines: list[str], unit: dict, constants: dict, aliases: dict):
    """The parsed PrimFunc/IRModule of one unit (cached by position, text, constants and aliases).

    As TVM's own decorators would: ``check_well_formed=False`` in the unit's decorator is honoured;
    a printed module's ``metadata`` is loaded from the file's metadata section, and without one the
    ``"params"`` entries of ``func_attr`` that hold only metadata references are blanked."""
    body = "\n".join(lines[unit["start_line"]:unit["end_line"] + 1])
    key = hashlib.sha1(repr((unit["start_line"], body, sorted(constants.items()),
                             sorted(aliases.items()))).encode()).hexdigest()
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    metadata = _metadata(lines, aliases.get(METADATA, ""))
    text = body if metadata is not None else blank_metadata_params(body)
    parsed = parse_script("\n" * unit["start_line"] + text, constants, aliases,
                          check_well_formed=_check_well_formed(body), metadata=metadata,
                          macros=module_macros(lines, aliases))
    _CACHE[key] = parsed
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return parsed


def module_macros(lines: list[str], aliases: dict) -> list[tuple[str, str, str]]:
    """The file's module-level macros the gate passed (``aliases``: ``macro:<first>:<last>:<digest>``),
    as ``(name, text, filename)``: their lines, after as many blank lines as precede them (TVM's
    line numbers are the file's), in file order."""
    found = []
    for name, what in aliases.items():
        if isinstance(what, str) and what.startswith(MACRO_PREFIX):
            first, last, digest = what[len(MACRO_PREFIX):].split(":")
            text = "\n" * int(first) + "\n".join(lines[int(first):int(last) + 1]) + "\n"
            found.append((int(first), name, text, f"<asight macro {name} {digest}>"))
    return [(name, text, filename) for _, name, text, filename in sorted(found)]


def _check_well_formed(body: str) -> bool:
    """``check_well_formed=`` of the unit's decorator (a literal), True without one."""
    try:
        tree = parse_tree(body)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return True
    return bool(decorator_keyword(tree.body[0], "check_well_formed", True)) if tree.body else True


def _metadata(lines: list[str], code: str):
    """The loaded metadata section the outline found (``aliases["metadata"]``), or None."""
    if not code.startswith("metadata:"):
        return None
    if code not in _METADATA:
        text = "\n".join(lines)
        trees, _ = parse_chunks(text, lines)
        section = next((s for s in (metadata_section(tree, offset) for tree, offset in trees) if s), None)
        if section is None or section.problem is not None or section.code != code:
            return None
        _METADATA[code] = load_metadata(section.text)
        while len(_METADATA) > 4:
            _METADATA.pop(next(iter(_METADATA)))
    return _METADATA[code]


def error_to_problem(err: BaseException) -> dict:
    """TVM's error text -> ``{line, col, end_col, message, kind}`` (1-based line/col as TVM prints)."""
    text = str(err)
    if isinstance(err, SyntaxError):
        return {"line": err.lineno or 1, "col": err.offset or 1, "end_col": None,
                "message": f"syntax error: {err.msg}", "kind": "parse"}
    first = text.strip().splitlines()[0] if text.strip() else type(err).__name__
    message = first[len("error: "):] if first.startswith("error: ") else first
    where = LOCATION.search(text)
    line, col = (int(where["line"]), int(where["col"])) if where else (1, 1)
    carets = CARETS.search(text)
    end_col = col + len(carets["carets"]) if carets else None
    kind = "parse"
    if "not well-formed" in message:
        kind = "well_formed"
        reason = re.search(r"Traceback:\s*(?P<reason>.+)", text)
        if reason:
            message = reason["reason"].strip()
        message = message.replace("Well-formedness check failed: ", "")
        message = f"not well-formed: {message}"
    return {"line": line, "col": col, "end_col": end_col, "message": message, "kind": kind}


def function_names(parsed) -> list[str]:
    if isinstance(parsed, (tirx.PrimFunc, relax.Function)):
        return []
    return sorted(gv.name_hint for gv in parsed.get_global_vars())


def check(params: dict, emit=None) -> dict:
    """Parse every unit; return the problems found and which units parsed."""
    lines = source_lines(params["text"])
    constants, aliases = params.get("constants") or {}, params.get("aliases") or {}
    problems, units = [], {}
    for unit in params["units"]:
        started = time.perf_counter()
        try:
            parsed = parse_unit(lines, unit, constants, aliases)
            units[unit["name"]] = {"ok": True, "functions": function_names(parsed)}
        except (DiagnosticError, SyntaxError, RuntimeError, ValueError, TypeError, AttributeError,
                KeyError, IndexError, RecursionError) as err:
            problem = error_to_problem(err)
            problem["message"] = sandbox.memory_message(err) or problem["message"]   # red team round 4, F4
            problem["unit"] = unit["name"]
            problems.append(problem)
            units[unit["name"]] = {"ok": False, "functions": []}
        units[unit["name"]]["seconds"] = time.perf_counter() - started
    return {"problems": problems, "units": units}


HANDLERS = {wire.CHECK: check}
