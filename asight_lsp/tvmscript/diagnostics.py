"""Diagnostics of a TVMScript file: Python syntax, the safety gate, TVM parse and well-formedness.

``check_text`` is the one entry point (CLI and language server).  The static part never needs TVM;
units that pass the safety gate go to the worker, whose problems are placed at the line the user
must fix (TVM reports well-formedness errors at 1:1; ``locate_well_formed`` finds the statement).
"""
from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from ..engine import wire
from ..errors import InputError, WorkerError
from .ranges import line_range, make_range, node_range
from .model import Outline, Unit
from .outline import build_outline
from .pysource import parse_tree, source_lines


@dataclass
class CheckResult:
    outline: Outline
    diagnostics: list[dict] = field(default_factory=list)
    parsed_units: list[str] = field(default_factory=list)

    @property
    def has_errors(self) -> bool:
        return any(d["severity"] == "error" for d in self.diagnostics)

    def to_dict(self) -> dict:
        return {"path": self.outline.path, "diagnostics": self.diagnostics, "parsed_units": self.parsed_units,
                "errors": sum(d["severity"] == "error" for d in self.diagnostics)}


def static_diagnostics(outline: Outline) -> list[dict]:
    """What is known without TVM: syntax errors and the safety gate's refusals."""
    found = list(outline.syntax_errors)
    for unit in outline.units:
        found.extend(unit.problems)
        found.extend(getattr(unit, "notes", []))
    return found


def worker_units(outline: Outline) -> list[Unit]:
    """Units that may be handed to TVM's parser."""
    return [u for u in outline.units if u.safe]


def check_text(text: str | bytes, path: str = "<text>", worker=None) -> CheckResult:
    """All diagnostics of a file.  ``worker`` is a ``WorkerClient``; without one, static only."""
    outline = build_outline(text, path)
    result = CheckResult(outline, static_diagnostics(outline))
    units = worker_units(outline)
    if worker is None or not units:
        return _sorted(result)
    source = text if isinstance(text, str) else text.decode("utf-8", errors="replace")
    try:
        found, result.parsed_units = tvm_diagnostics(worker, source, outline, units)
    except WorkerError as err:
        result.diagnostics.append(worker_failure(err, units[0].range))
        return _sorted(result)
    for diags in found.values():
        result.diagnostics.extend(diags)
    return _sorted(result)


def worker_failure(err: WorkerError, rng: dict) -> dict:
    """The diagnostic for a request the worker did not answer.  A worker whose OS sandbox is not
    active evaluates nothing (docs/sandbox.md): a warning says why, the file stays checked statically."""
    if err.error_type == "SandboxUnavailable":
        return {"range": rng, "severity": "warning", "source": "asight", "message": str(err)}
    return {"range": rng, "severity": "error", "source": "asight", "message": f"could not check with TVM: {err}"}


def tvm_diagnostics(worker, text: str, outline: Outline, units: list[Unit]) -> tuple[dict[str, list[dict]], list[str]]:
    """TVM's parse and well-formedness problems of ``units`` as diagnostics, per unit name, and the
    names of the units that parsed.  Blocking; ``WorkerError`` when the worker cannot answer."""
    reply = worker.request(wire.CHECK, wire.check_params(text, outline, units))
    lines = source_lines(text)
    by_name = {u.name: u for u in units}
    found: dict[str, list[dict]] = {u.name: [] for u in units}
    for problem in reply.get("problems", []):
        unit = by_name.get(problem.get("unit"))
        if unit is not None:
            found[unit.name].append(problem_to_diagnostic(problem, unit, lines))
    parsed = [name for name, info in reply.get("units", {}).items() if info.get("ok")]
    return found, parsed


def require_parsed(text: str, path: str, unit: Unit, worker) -> None:
    """Refuse a unit TVM cannot parse or verify: ``InputError`` (CLI exit 1) at its first error."""
    for diag in check_text(text, path, worker).diagnostics:
        start = diag["range"]["start"]
        if diag["severity"] == "error" and unit.start_line <= start["line"] <= unit.end_line:
            raise InputError(f"{path}:{start['line'] + 1}:{start['character'] + 1}: {diag['message']}")


def problem_to_diagnostic(problem: dict, unit: Unit | None, lines: list[str]) -> dict:
    """A worker problem (1-based TVM location) -> an LSP diagnostic at the right place."""
    source = "tvmscript"
    rng = None
    if problem.get("kind") == "well_formed" and unit is not None:
        source = "well-formed"
        rng = locate_well_formed(problem["message"], unit, lines)
    if rng is None:
        line = max(problem.get("line", 1) - 1, 0)
        col = max(problem.get("col", 1) - 1, 0)
        if unit is not None and not unit.start_line <= line <= unit.end_line:
            line, col = unit.start_line, 0  # TVM placed it outside the unit (1:1 for the whole module)
        end_col = problem.get("end_col")
        rng = make_range(line, col, line, end_col - 1) if end_col and end_col - 1 > col else line_range(lines, line, col)
    severity = "warning" if problem.get("severity") == "warning" else "error"
    return {"range": rng, "severity": severity, "source": source, "message": problem["message"]}


_QUOTED_BLOCK = re.compile(r'block "([^"]+)"')
_VAR_NAME = re.compile(r"\b(?:iterator\s+)?(?:var|variable|Var|buffer|Buffer)\s+['\"]?([A-Za-z_][A-Za-z0-9_]*)")


def locate_well_formed(message: str, unit: Unit, lines: list[str]) -> dict | None:
    """Range of the statement behind a well-formedness error that TVM placed at 1:1.

    The message names the offending variable/buffer and often the block; the first use of that
    name (not a definition) inside that block, or else inside the unit, is what needs fixing.
    """
    names = [n for n in _VAR_NAME.findall(message) if n not in ("is", "the", "var", "iterator")]
    block_match = _QUOTED_BLOCK.search(message)
    chunk = "\n".join(lines[unit.start_line:unit.end_line + 1])
    try:
        tree = parse_tree(chunk)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None
    scope: ast.AST = tree
    if block_match:
        scope = _find_block(tree, block_match.group(1)) or tree
    for name in names:
        use = _first_use(scope, name)
        if use is not None:
            stmt = _enclosing_statement(scope, use)
            return node_range(stmt or use, lines, unit.start_line)
    if scope is not tree:
        return node_range(scope, lines, unit.start_line)
    return None


def _find_block(tree: ast.AST, name: str) -> ast.With | None:
    for node in ast.walk(tree):
        if isinstance(node, ast.With):
            for item in node.items:
                call = item.context_expr
                if isinstance(call, ast.Call) and call.args and isinstance(call.args[0], ast.Constant) \
                        and call.args[0].value == name and isinstance(call.func, ast.Attribute) \
                        and call.func.attr in ("sblock", "block"):
                    return node
    return None


def _first_use(scope: ast.AST, name: str) -> ast.Name | None:
    """First load of ``name``, skipping block-axis bindings (``T.axis.remap(.., [i])`` is legal)."""
    bindings = set()
    for node in ast.walk(scope):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Attribute) and node.func.value.attr == "axis":
            bindings.update(id(n) for n in ast.walk(node))
    uses = [n for n in ast.walk(scope) if isinstance(n, ast.Name) and n.id == name
            and isinstance(n.ctx, ast.Load) and id(n) not in bindings]
    return min(uses, key=lambda n: (n.lineno, n.col_offset), default=None)


def _enclosing_statement(scope: ast.AST, target: ast.AST) -> ast.stmt | None:
    """The innermost simple statement (not a with/for) that contains ``target``."""
    best = None
    for node in ast.walk(scope):
        if isinstance(node, ast.stmt) and not isinstance(node, (ast.With, ast.For, ast.If, ast.While,
                                                                    ast.FunctionDef, ast.ClassDef)):
            if node.lineno <= target.lineno <= (node.end_lineno or node.lineno):
                if best is None or node.lineno >= best.lineno:
                    best = node
    return best


def _sorted(result: CheckResult) -> CheckResult:
    result.diagnostics.sort(key=lambda d: (d["range"]["start"]["line"], d["range"]["start"]["character"]))
    return result
