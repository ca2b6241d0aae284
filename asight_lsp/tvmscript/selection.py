"""Which unit or function of a file a request names (``--func``), checked statically.

Tuning, profiling, the code view and hotspots all start here: ``select(outline, name)`` resolves a
function id, a function name or a unit name; ``check_selection`` refuses a unit with syntax errors
or one the safety gate would not evaluate (``InputError``: the CLI exits 1).
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import AsightError, InputError
from .model import Outline, Unit


@dataclass
class Selection:
    """What a request tunes: a whole unit, or one ``member`` function of an IRModule unit."""
    unit: Unit
    member: str | None             # function name inside the unit's IRModule, or None = whole unit
    label: str                     # RunMeta.function: function id, or unit name for a whole module
    functions: list               # tvmscript Functions whose text the run depends on


def select(outline: Outline, name: str | None) -> Selection:
    """Resolve ``--func`` against the outline; AsightError (with the choices) when it does not match."""
    if name is None:
        if len(outline.units) == 1:
            return _whole_unit(outline, outline.units[0])
        if not outline.units:
            raise _no_units(outline)
        names = ", ".join(u.name for u in outline.units)
        raise AsightError(f"{outline.path} has {len(outline.units)} units ({names}); pick one with --func")
    unit = next((u for u in outline.units if u.name == name), None)
    if unit is not None:
        return _whole_unit(outline, unit)
    matches = [f for f in outline.functions if f.id == name] or [f for f in outline.functions if f.name == name]
    if len(matches) > 1:
        raise AsightError(f"function '{name}' is ambiguous: {', '.join(f.id for f in matches)}; use the full id")
    if not matches:
        if outline.syntax_errors:
            raise _syntax_problem(outline, outline.syntax_errors[0])
        raise AsightError(f"no function '{name}' in {outline.path}; available: {available(outline)}")
    fn = matches[0]
    unit = next(u for u in outline.units if u.name == fn.unit)
    if fn.module is None:
        return _whole_unit(outline, unit)
    members = [f for f in outline.functions if f.unit == unit.name]
    if fn.kind == "relax_function":   # a Relax function is tuned with the PrimFuncs it may call
        return Selection(unit, fn.name, fn.id, members)
    return Selection(unit, fn.name, fn.id, [fn])


def _whole_unit(outline: Outline, unit: Unit) -> Selection:
    functions = [f for f in outline.functions if f.unit == unit.name]
    if not functions:
        raise AsightError(f"unit '{unit.name}' has no function to tune")
    label = functions[0].id if unit.kind in ("prim_func", "relax_function") else unit.name
    return Selection(unit, None, label, functions)


def available(outline: Outline) -> str:
    names = [f.id for f in outline.functions]
    names += [u.name for u in outline.units if u.kind == "ir_module"]
    return ", ".join(dict.fromkeys(names)) or "(none)"


def _no_units(outline: Outline) -> AsightError:
    if outline.syntax_errors:
        return _syntax_problem(outline, outline.syntax_errors[0])
    return AsightError(f"{outline.path} has no @T.prim_func, @R.function or @I.ir_module to tune")


def _syntax_problem(outline: Outline, diag: dict) -> InputError:
    start = diag["range"]["start"]
    return InputError(f"{outline.path}:{start['line'] + 1}:{start['character'] + 1}: {diag['message']}")


def check_selection(outline: Outline, selection: Selection, action: str = "tune") -> None:
    """Refuse a unit with syntax errors inside it or that the safety gate would not evaluate; ``action``
    says what was refused ("refusing to adopt 'M'", not "tune", when adopt asks)."""
    unit = selection.unit
    for diag in outline.syntax_errors:
        if unit.start_line <= diag["range"]["start"]["line"] <= unit.end_line:
            raise _syntax_problem(outline, diag)
    if unit.problems:
        first = unit.problems[0]
        start = first["range"]["start"]
        more = f" (and {len(unit.problems) - 1} more)" if len(unit.problems) > 1 else ""
        raise InputError(f"{outline.path}:{start['line'] + 1}:{start['character'] + 1}: refusing to {action} "
                         f"'{unit.name}': {first['message'].split(';')[0]}{more}")
