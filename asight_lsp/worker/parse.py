"""Parse and verify the units of a TVMScript file with TVM, reporting errors as plain data.

The core sends only units that passed the static safety gate.  Each unit is parsed alone, with the
other lines blanked so TVM's line numbers are the file's.
"""
from __future__ import annotations

import atexit
import hashlib
import re
import time
from collections import OrderedDict

from ..analysis.native_calls import SYMBOL, calls_in_ir_json, describe, refusal_message, refused
from ..engine import wire
from ..engine.targets import DEVICE_KINDS, runs_on_device
from ..tvmscript.printed import METADATA, blank_metadata_params, metadata_section
from ..tvmscript.safety import MACRO_PREFIX
from ..tvmscript.pysource import decorator_keyword, parse_chunks, parse_tree, source_lines
from .compat import DiagnosticError, load_ir, load_metadata, parse_script, relax, save_ir, tirx, tvm
from . import sandbox

LOCATION = re.compile(r"--> (?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+)")
CARETS = re.compile(r"^\s*\|\s(?P<pad>\s*)(?P<carets>\^+)\s*$", re.M)
_CACHE: "OrderedDict[str, object]" = OrderedDict()
_CACHE_SIZE = 1024
_METADATA: dict = {}  # metadata code -> loaded objects (a few printed models at most)
_PARSER = None        # the sandboxed worker that parses for a process without the sandbox
PARSE_TIMEOUT_S = 600.0


def mask_text(lines: list[str], start: int, end: int) -> str:
    """Lines ``start..end`` (0-based, inclusive) preceded by blank lines, so TVM's line numbers are
    the file's; the lines after the unit are simply left out."""
    return "\n" * start + "\n".join(lines[start:end + 1])


def parse_request(params: dict):
    """The unit a worker request names (``text``, ``unit``, ``constants``, ``aliases``), parsed."""
    return parse_unit(source_lines(params["text"]), params["unit"], params.get("constants") or {},
                      params.get("aliases") or {})


def parse_to_run(params: dict):
    """``parse_request`` for a request that builds and runs the unit (profile, export, compare): a
    program that calls native code by name is refused first (``require_no_native_calls``)."""
    parsed = parse_request(params)
    require_no_native_calls(parsed, device=runs_on_device(params.get("target")))
    return parsed


def parse_unit(lines: list[str], unit: dict, constants: dict, aliases: dict):
    """The parsed PrimFunc/IRModule of one unit (cached by position, text, constants and aliases).

    Only a sandboxed worker evaluates the text (docs/sandbox.md): anywhere else (the tuning job, a
    trusted worker that links or profiles) the unit is parsed by a sandboxed worker and comes back
    as TVM's JSON (``parse_in_sandbox``).  What builds and runs a unit refuses native calls by name
    (``parse_to_run``, the tuning job)."""
    body = "\n".join(lines[unit["start_line"]:unit["end_line"] + 1])
    key = hashlib.sha1(repr((unit["start_line"], body, sorted(constants.items()),
                             sorted(aliases.items()))).encode()).hexdigest()
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    parsed = parse_here(lines, unit, body, constants, aliases) if sandbox.STATUS.active \
        else parse_in_sandbox(lines, unit, constants, aliases)
    _CACHE[key] = parsed
    if len(_CACHE) > _CACHE_SIZE:
        _CACHE.popitem(last=False)
    return parsed


def parse_here(lines: list[str], unit: dict, body: str, constants: dict, aliases: dict):
    """Parse in this process, as TVM's own decorators would: ``check_well_formed=False`` in the
    unit's decorator is honoured; a printed module's ``metadata`` is loaded from the file's metadata
    section, and without one the ``"params"`` entries of ``func_attr`` that hold only metadata
    references are blanked."""
    metadata = _metadata(lines, aliases.get(METADATA, ""))
    text = body if metadata is not None else blank_metadata_params(body)
    return parse_script("\n" * unit["start_line"] + text, constants, aliases,
                        check_well_formed=_check_well_formed(body), metadata=metadata,
                        macros=module_macros(lines, aliases))


class SandboxedParseError(Exception):
    """The sandboxed worker could not parse the unit; ``str`` is TVM's text (``error_to_problem`` reads it)."""


class NativeCallRefused(ValueError):
    """The unit calls native code by name (``analysis/native_calls.py``); one line."""


def sandboxed_worker():
    """This process's sandboxed worker (started on first use; closed when this process exits)."""
    global _PARSER
    from ..engine.client import WorkerClient
    if _PARSER is None:
        _PARSER = WorkerClient(default_timeout=PARSE_TIMEOUT_S)
        atexit.register(_PARSER.close)      # it exits, and its private folder goes (it cannot remove it)
    return _PARSER


def parse_in_sandbox(lines: list[str], unit: dict, constants: dict, aliases: dict):
    """The unit parsed by a sandboxed worker (started once per process), loaded from TVM's JSON."""
    reply = sandboxed_worker().request(wire.PARSE_IR, {"text": "\n".join(lines), "unit": unit, "constants": constants,
                                            "aliases": aliases})
    if "problem" in reply:
        raise SandboxedParseError(reply["problem"].get("text") or reply["problem"]["message"])
    return load_ir(reply["json"])


def require_no_native_calls(parsed, target=None, what: str = "", device: bool | None = None) -> None:
    """Refuse a program that calls a native function by a name not allowed, or pastes in source code
    (``NativeCallRefused``).  The JSON read is TVM's own, of the object (not text received).  With a
    ``target``: the program about to be built for it (a schedule from a trace, a record, a design
    space), where a CPU build may not call device-library names; ``what`` names that program."""
    calls = native_calls_of(parsed, kernels_only=target is not None)
    if device is None:
        device = target is None or target.kind.name in DEVICE_KINDS
    message = refusal_message(calls, device=device)
    if message:
        line = next((line for op, symbol, line in refused(calls, device) if line), None)
        where = f"\n --> <unit>:{line}:1" if line and not what else ""    # where error_to_problem places it
        raise NativeCallRefused((f"{what}: " if what else "") + message + where)


def native_calls_of(obj, kernels_only: bool = False) -> list:
    """``calls_in_ir_json`` of a parsed unit, or with ``kernels_only`` of its PrimFuncs alone (a program
    about to be built: scheduling changes only its kernels, and a bound model's weights, which are in
    its Relax function, are never serialised)."""
    if kernels_only and isinstance(obj, tvm.IRModule):
        return [call for _, func in obj.functions_items() if isinstance(func, tirx.PrimFunc)
                for call in calls_in_ir_json(save_ir(func))] + global_symbols(obj)
    return calls_in_ir_json(save_ir(obj)) + global_symbols(obj)


def global_symbols(obj) -> list:
    """``("global_symbol", name, None)`` of every function of ``obj`` (a code generator prints it)."""
    funcs = [f for _, f in obj.functions_items()] if isinstance(obj, tvm.IRModule) else [obj]
    names = [(f.attrs or {}).get("global_symbol") for f in funcs if hasattr(f, "attrs")]
    return [(SYMBOL, str(name), None) for name in names if name is not None]


def checked_for_build(mod, target, what: str):
    """``mod`` (scheduled, about to be built for ``target``) after ``require_no_native_calls``."""
    require_no_native_calls(mod, target, what)
    return mod


def parse_ir(params: dict, emit=None, off=None) -> dict:
    """The sandboxed worker's half of ``parse_in_sandbox``: the unit as TVM's JSON, or the problem."""
    if not sandbox.STATUS.active:
        raise RuntimeError("parse_ir is answered only by a sandboxed worker")
    try:
        parsed = parse_request(params)
    except (DiagnosticError, SyntaxError, RuntimeError, ValueError, TypeError, AttributeError,
            KeyError, IndexError, RecursionError) as err:
        problem = error_to_problem(err)
        problem["message"] = sandbox.memory_message(err) or problem["message"]
        return {"problem": {**problem, "text": (sandbox.memory_message(err) or str(err))[:20000]}}
    return {"json": save_ir(parsed)}


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


_REFUSED: "OrderedDict[int, tuple]" = OrderedDict()   # id(parsed unit) -> (unit, its refused calls)


def _refused_calls(parsed) -> list:
    """``refused(calls_in_ir_json(...))`` of a parsed unit, kept while the parse cache keeps the unit
    (a check after every edit re-reads only units whose text changed)."""
    entry = _REFUSED.get(id(parsed))
    if entry is None or entry[0] is not parsed:
        entry = (parsed, refused(native_calls_of(parsed)))
        _REFUSED[id(parsed)] = entry
        while len(_REFUSED) > 64:
            _REFUSED.popitem(last=False)
    return entry[1]


def native_call_warnings(parsed, unit: dict, lines: list[str]) -> list[dict]:
    """A warning at each call by a name that tuning, profiling and export refuse (at the name's column
    when the line shows it; ``analysis/native_calls.py``)."""
    warnings = []
    for op, symbol, line in _refused_calls(parsed):
        text = lines[line - 1] if line and 0 < line <= len(lines) else ""
        col = text.find(f'"{symbol}"') if symbol else -1
        col = col if col >= 0 else text.find(f"'{symbol}'") if symbol else -1
        warnings.append({"unit": unit["name"], "line": line or unit["start_line"] + 1, "col": max(col, 0) + 1,
                         "end_col": col + len(symbol) + 3 if col >= 0 and symbol else None, "kind": "native_call",
                         "severity": "warning",
                         "message": f"{describe(op, symbol)}: tuning, profiling and export refuse a program "
                                    "that calls native code by name or pastes in source code (docs/sandbox.md)"})
    return warnings


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


def check(params: dict, emit=None, off=None) -> dict:
    """Parse every unit; return the problems found and which units parsed."""
    lines = source_lines(params["text"])
    constants, aliases = params.get("constants") or {}, params.get("aliases") or {}
    problems, units = [], {}
    for unit in params["units"]:
        started = time.perf_counter()
        try:
            parsed = parse_unit(lines, unit, constants, aliases)
            units[unit["name"]] = {"ok": True, "functions": function_names(parsed)}
            problems.extend(native_call_warnings(parsed, unit, lines))
        except (DiagnosticError, SyntaxError, RuntimeError, ValueError, TypeError, AttributeError,
                KeyError, IndexError, RecursionError) as err:
            problem = error_to_problem(err)
            problem["message"] = sandbox.memory_message(err) or problem["message"]   # the memory limit, said as such
            problem["unit"] = unit["name"]
            problems.append(problem)
            units[unit["name"]] = {"ok": False, "functions": []}
        units[unit["name"]]["seconds"] = time.perf_counter() - started
    return {"problems": problems, "units": units}


HANDLERS = {wire.CHECK: check, wire.PARSE_IR: parse_ir}
