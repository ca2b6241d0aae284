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
from .compat import DiagnosticError, parse_script, relax, tirx

LOCATION = re.compile(r"--> (?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+)")
CARETS = re.compile(r"^\s*\|\s(?P<pad>\s*)(?P<carets>\^+)\s*$", re.M)
_CACHE: "OrderedDict[str, object]" = OrderedDict()
_CACHE_SIZE = 1024


def mask_text(lines: list[str], start: int, end: int) -> str:
    """Lines ``start..end`` (0-based, inclusive) preceded by blank lines, so TVM's line numbers are
    the file's; the lines after the unit are simply left out."""
    return "\n" * start + "\n".join(lines[start:end + 1])


def parse_request(params: dict):
    """The unit a worker request names (``text``, ``unit``, ``constants``, ``aliases``), parsed."""
    return parse_unit(params["text"].splitlines(), params["unit"], params.get("constants") or {},
                      params.get("aliases") or {})


def parse_unit(lines: list[str], unit: dict, constants: dict, aliases: dict):
    """The parsed PrimFunc/IRModule of one unit (cached by position, text, constants and aliases)."""
    body = "\n".join(lines[unit["start_line"]:unit["end_line"] + 1])
    key = hashlib.sha1(repr((unit["start_line"], body, sorted(constants.items()),
                             sorted(aliases.items()))).encode()).hexdigest()
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    parsed = parse_script("\n" * unit["start_line"] + body, constants, aliases)
    _CACHE[key] = parsed
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return parsed


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
    lines = params["text"].splitlines()
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
            problem["unit"] = unit["name"]
            problems.append(problem)
            units[unit["name"]] = {"ok": False, "functions": []}
        units[unit["name"]]["seconds"] = time.perf_counter() - started
    return {"problems": problems, "units": units}


HANDLERS = {wire.CHECK: check}
