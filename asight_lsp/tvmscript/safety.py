"""Static gate in front of TVM's script parser: opening a file must never execute its code.

TVM's parser *evaluates* the expressions it meets, with its globals (``T``, ``R``, ``I``, ``Tx``,
``tvm`` ...) and Python's builtins.  A unit (top-level ``@I.ir_module`` class, ``@T.prim_func`` or
``@R.function`` def) reaches the worker only when every expression TVM (or Python, for an
``@T.inline`` def) could evaluate in it passes the gate's rules (``expr_rules.py``), in the scope
TVM's var table has at that point (``stmt_rules.py``, ``scope.py``):

* literals, operators, lambdas and comprehensions whose bodies pass the same rules;
* names bound *at that point* (parameters, loop and ``with`` targets, assignments ...), the file's
  literal constants and printed ``TypeVar`` symbols, a few harmless builtins;
* TVMScript members by exact dotted path (``tvmscript_api.py``, generated from TVM), and the
  attributes TVMScript reads on values;
* ``metadata["type"][i]`` references (``printed.py``).

Everything else is refused with a "not evaluated: …" diagnostic placed where TVM would report it;
the unit is then outlined statically only.  The rules and their reasons: docs/safety.md.
"""
from __future__ import annotations

import ast
from dataclasses import dataclass, field

from .expr_rules import ExprRules, Findings, parse_code_string
from .printed import METADATA
from .pysource import unit_kind
from .ranges import line_range, node_range
from .scope import VALUE, Scope, names_bound_anywhere
from .stmt_rules import StatementRules

SUFFIX = "; this function is outlined statically only"


@dataclass
class GateResult:
    problems: list[dict] = field(default_factory=list)  # errors: the unit is not sent to TVM
    notes: list[dict] = field(default_factory=list)     # shown, never blocking


def module_scope(aliases: dict, constants: dict) -> Scope:
    """What a unit sees before its own bindings: namespaces, printed symbols, metadata, and literal
    constants last (as ``worker/compat.script_globals`` gives them to the parser)."""
    base = {}
    for name, what in aliases.items():
        if what in ("T", "R", "I", "Tx"):
            base[name] = f"ns:{what}"
        elif what == "TypeVar" or (name == METADATA and what.startswith("metadata:")):
            base[name] = VALUE
    base.update({name: VALUE for name in constants})
    return Scope(base)


def gate_unit(unit: ast.AST, aliases: dict, constants: dict, lines: list[str], line_offset: int = 0) -> GateResult:
    """The gate's verdict on one top-level unit."""
    findings = Findings(aliases, bound_anywhere=names_bound_anywhere(unit))
    rules = StatementRules(findings, module_scope(aliases, constants))
    place = _Placer(lines, line_offset)
    try:
        rules.unit(unit, unit_kind(unit, aliases))
    except RecursionError:
        return GateResult([_diagnostic(node_range(unit, lines, line_offset),
                                       "not evaluated: expressions nested too deeply to check")])
    result = GateResult()
    seen = set()
    for node, anchor, what in findings.problems:
        rng, moved = place(node, anchor)
        key = (rng["start"]["line"], rng["start"]["character"], what)
        if key not in seen:
            seen.add(key)
            where = f" (in `{_short(node)}`)" if moved else ""
            result.problems.append(_diagnostic(rng, f"not evaluated: {what}{where}{SUFFIX}"))
    _metadata(findings, aliases, place, result)
    return result


def check_unit(unit: ast.AST, aliases: dict, constants: dict, lines: list[str], line_offset: int = 0) -> list[dict]:
    """"not evaluated" diagnostics for one top-level unit; empty when the unit is safe to parse."""
    return gate_unit(unit, aliases, constants, lines, line_offset).problems


def code_string_problem(text: str, aliases: dict) -> str | None:
    """Why a string must not be evaluated as a shape expression (the worker asks this at parse time
    for every string Relax evaluates, computed ones included), or None."""
    if parse_code_string(text) is None:
        return "it is not an expression"
    findings = Findings(aliases)
    const = ast.Constant(text, lineno=1, col_offset=0, end_lineno=1, end_col_offset=len(text))
    ExprRules(findings).check_code_string(const, module_scope(aliases, {}), const)
    return findings.problems[0][2] if findings.problems else None


def _metadata(findings: Findings, aliases: dict, place, result: GateResult) -> None:
    """One diagnostic per unit for ``metadata[...]`` the file cannot resolve: a note when only the
    ``"params"`` entry of ``R.func_attr`` uses them (the worker drops it), else an error."""
    refs = findings.references
    if not refs:
        return
    code = aliases.get(METADATA, "")
    why = (f"the file's metadata section cannot be used ({code[len('metadata!'):]})" if code.startswith("metadata!")
           else "the file has no metadata section (printed without show_meta=True)")
    node, anchor, _ = refs[0]
    rng, _ = place(node, anchor)
    needed = [r for r in refs if not r[2]]
    if not needed:
        result.notes.append({**_diagnostic(rng, f"metadata omitted: {len(refs)} reference(s) in the \"params\" "
                                                f"attribute are ignored ({why}); the program does not need "
                                                "them"), "severity": "warning", "source": "metadata"})
        return
    node, anchor, _ = needed[0]
    rng, _ = place(node, anchor)
    result.problems.append({**_diagnostic(rng, f"metadata omitted: this unit uses {len(needed)} object(s) "
                                               f"from metadata[...] but {why}; print the module with "
                                               "show_meta=True to check and tune it"), "source": "metadata"})


class _Placer:
    """Range of a finding: the node itself when it starts on the line TVM reports (the anchor's
    first line), else that line, with the node's own line named in the message."""

    def __init__(self, lines: list[str], line_offset: int):
        self.lines, self.line_offset = lines, line_offset

    def __call__(self, node: ast.AST, anchor: ast.AST) -> tuple[dict, bool]:
        rng = node_range(node, self.lines, self.line_offset)
        anchor_line = anchor.lineno - 1 + self.line_offset
        if rng["start"]["line"] == anchor_line:
            return rng, False
        return line_range(self.lines, anchor_line, _column(self.lines, anchor_line)), True


def _short(node: ast.AST, limit: int = 40) -> str:
    try:
        text = " ".join(ast.unparse(node).split())
    except Exception:  # noqa: BLE001 - unparse of an odd tree: name its kind instead
        text = type(node).__name__
    return text if len(text) <= limit else text[:limit - 1] + "…"


def _column(lines: list[str], line: int) -> int:
    text = lines[line] if 0 <= line < len(lines) else ""
    return len(text) - len(text.lstrip())


def _diagnostic(rng: dict, message: str) -> dict:
    return {"range": rng, "severity": "error", "source": "safety", "message": message}
