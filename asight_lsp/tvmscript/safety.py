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
import hashlib
from dataclasses import dataclass, field

from .expr_rules import SHADOW, ExprRules, Findings, parse_code_string
from .namespaces import SHADOWING
from .printed import METADATA
from .pysource import unit_kind
from .ranges import line_range, node_range
from .scope import VALUE, Scope, names_bound_anywhere
from .stmt_rules import StatementRules, decorator_path_kind

SUFFIX = "; this function is outlined statically only"


@dataclass
class GateResult:
    problems: list[dict] = field(default_factory=list)  # errors: the unit is not sent to TVM
    notes: list[dict] = field(default_factory=list)     # shown, never blocking


def module_scope(aliases: dict, constants: dict) -> Scope:
    """What a unit sees before its own bindings: namespaces, printed symbols, metadata, and literal
    constants last (as ``worker/compat.script_globals`` gives them to the parser); a constant named
    like a builtin or parser global (``exec = 0``) is there only to be refused where it is used."""
    base = {}
    for name, what in aliases.items():
        if what in ("T", "R", "I", "Tx"):
            base[name] = f"ns:{what}"
        elif what == "TypeVar" or (name == METADATA and what.startswith("metadata:")):
            base[name] = SHADOW if name in SHADOWING else VALUE
        elif what.startswith(("macro:", "macro!")):
            base[name] = what.split(":", 1)[0] if what.startswith("macro:") else what
    base.update({name: SHADOW if name in SHADOWING else VALUE for name in constants})
    return Scope(base)


def gate_unit(unit: ast.AST, aliases: dict, constants: dict, lines: list[str], line_offset: int = 0) -> GateResult:
    """The gate's verdict on one top-level unit."""
    findings = Findings(aliases, bound_anywhere=names_bound_anywhere(unit), constants=constants)
    rules = StatementRules(findings, module_scope(aliases, constants))
    place = _Placer(lines, line_offset)
    try:
        rules.unit(unit, unit_kind(unit, aliases))
    except RecursionError:
        return GateResult([_diagnostic(node_range(unit, lines, line_offset),
                                       "not evaluated: expressions nested too deeply to check")])
    found = [_placed(place, node, anchor, what) for node, anchor, what in findings.problems]
    refs = [(place(node, anchor)[0], in_params) for node, anchor, in_params in findings.references]
    return _verdict(found, refs, aliases)


def _verdict(found: list["Finding"], refs: list[tuple[dict, bool]], aliases: dict) -> GateResult:
    """Placed findings (in TVM's order) as a verdict: one diagnostic per place and reason, then the
    unit's metadata diagnostic."""
    result = GateResult()
    seen = set()
    for finding in found:
        rng = finding.range
        key = (rng["start"]["line"], rng["start"]["character"], finding.what)
        if key not in seen:
            seen.add(key)
            result.problems.append(_diagnostic(rng, finding.message))
    _metadata(refs, aliases, result)
    return result


@dataclass
class Finding:
    """A refusal placed in the file; ``on_class_line``: reported at the ``class`` line of the unit
    (a method's decorator), not inside the member that holds it."""
    range: dict
    what: str
    message: str
    on_class_line: bool = False


def _placed(place, node: ast.AST, anchor: ast.AST, what: str) -> Finding:
    rng, moved = place(node, anchor)
    where = f" (in `{_short(node)}`)" if moved else ""
    return Finding(rng, what, f"not evaluated: {what}{where}{SUFFIX}", place.class_node is anchor)


@dataclass
class MemberVerdict:
    """The gate's findings in one member of an ``@I.ir_module`` class (a method and the class-level
    statements after it), by TVM's phases: class statements, method decorators, signatures and
    bodies.  ``frame``: the class frame after the member (a recursive Relax function binds its name
    there); ``asked``: the questions the verdict depends on besides the member's text and frame
    (is a name bound anywhere in the unit, is it a function of the class), with their answers."""
    phases: tuple[list[Finding], list[Finding], list[Finding]]
    references: tuple[list, list, list]   # (range, in a func_attr "params" entry, on_class_line)
    frame: dict
    asked: dict


class AskedSet:
    """A set whose membership questions are recorded with their answers (``MemberVerdict.asked``)."""

    def __init__(self, items, asked: dict, tag: str):
        self.items, self.asked, self.tag = items, asked, tag

    def __contains__(self, name) -> bool:
        answer = name in self.items
        self.asked[(self.tag, name)] = answer
        return answer


def still_holds(asked: dict, bound_anywhere: set, class_functions: set) -> bool:
    """Whether a member's recorded questions get the same answers from this version of the unit."""
    return all((name in (bound_anywhere if tag == "bound" else class_functions)) == answer
               for (tag, name), answer in asked.items())


@dataclass
class ClassContext:
    """What a member's verdict depends on besides its own text: the class (``node``, the header
    parsed apart: the decorators' anchor, at file line ``line``), its method names, the names bound
    anywhere in it, and the file's aliases and constants."""
    node: ast.ClassDef
    line: int
    functions: set
    bound_anywhere: set
    aliases: dict
    constants: dict


def gate_member(body: list[ast.stmt], cls: ClassContext, frame: dict, lines: list[str], line_offset: int,
                header: bool = False) -> MemberVerdict:
    """The gate on part of an ``@I.ir_module`` class's body parsed on its own (``members.py``):
    ``body``'s lines count from ``line_offset``; ``frame``: the class frame its methods' bodies
    start from (earlier members may have bound names there); ``header``: the part before the first
    method, after the class's own decorators.  With every part's phases joined in order
    (``class_verdict``), the verdict equals ``gate_unit``'s on the whole class."""
    asked: dict = {}
    findings = Findings(cls.aliases, {cls.node.name: AskedSet(cls.functions, asked, "function")},
                        AskedSet(cls.bound_anywhere, asked, "bound"), constants=cls.constants)
    rules = StatementRules(findings, module_scope(cls.aliases, cls.constants))
    place = _Placer(lines, line_offset, cls.node, cls.line)
    marks = [(0, 0)]
    try:
        if header:
            for decorator in cls.node.decorator_list:
                rules.check(decorator, cls.node, decorator=True)
        # statements and decorators are evaluated before any method's body, in the class frame as
        # the header leaves it; bodies in the frame the methods before this one leave
        rules.scope.frames.append({cls.node.name: f"module:{cls.node.name}"})
        for run in (rules.member_statements, lambda b: rules.member_decorators(b, cls.node)):
            run(body)
            marks.append((len(findings.problems), len(findings.references)))
        rules.scope.frames[-1] = dict(frame)
        rules.member_bodies(body)
        marks.append((len(findings.problems), len(findings.references)))
    except RecursionError:
        rng = node_range(body[0] if body else cls.node, lines, line_offset)
        return MemberVerdict(([Finding(rng, "nested", "not evaluated: expressions nested too deeply to check")], [], []),
                             ([], [], []), dict(frame), asked)
    phases, refs = ([], [], []), ([], [], [])
    for phase in range(3):
        (p0, r0), (p1, r1) = marks[phase], marks[phase + 1]
        phases[phase].extend(_placed(place, n, a, what) for n, a, what in findings.problems[p0:p1])
        refs[phase].extend((place(n, a)[0], in_params, a is cls.node) for n, a, in_params in findings.references[r0:r1])
    return MemberVerdict(phases, refs, rules.scope.frames[-1], asked)


def class_verdict(header: MemberVerdict, members: list[MemberVerdict], aliases: dict) -> GateResult:
    """A class's verdict from its header's (the class decorators and statements before the first
    method) and its members' findings, in TVM's order (``StatementRules.module_class``)."""
    parts = [header] + members
    found = [f for phase in range(3) for part in parts for f in part.phases[phase]]
    refs = [(rng, in_params) for phase in range(3) for part in parts for rng, in_params, _ in part.references[phase]]
    return _verdict(found, refs, aliases)


MACRO_PREFIX = "macro:"


def module_macros(tree: ast.Module, aliases: dict, constants: dict, lines: list[str], line_offset: int = 0) -> dict:
    """The module-level ``@T.macro`` defs of a tree, as aliases (in order; a macro sees the earlier
    ones): ``macro:<first line>:<last line>:<digest of its text>`` when the gate passes it (the worker
    builds it from those lines), else ``macro!<the first reason>``, refused where it is called."""
    found: dict = {}
    for stmt in tree.body:
        if not isinstance(stmt, ast.FunctionDef) or not stmt.decorator_list \
                or decorator_path_kind(_decorator_target(stmt.decorator_list[-1]), aliases) != "macro" \
                or aliases.get(_root(stmt.decorator_list[-1])) != "T":
            continue
        findings = Findings({**aliases, **found}, bound_anywhere=names_bound_anywhere(stmt), constants=constants)
        rules = StatementRules(findings, module_scope({**aliases, **found}, constants))
        try:
            rules.macro(stmt)
        except RecursionError:
            findings.refuse(stmt, stmt, "expressions nested too deeply to check")
        if findings.problems:
            found[stmt.name] = f"macro!{findings.problems[0][2]}"
            continue
        first = min(d.lineno for d in stmt.decorator_list) - 1 + line_offset
        last = stmt.end_lineno - 1 + line_offset
        digest = hashlib.sha1("\n".join(lines[first:last + 1]).encode("utf-8", "surrogatepass")).hexdigest()[:12]
        found[stmt.name] = f"{MACRO_PREFIX}{first}:{last}:{digest}"
    return found


def _decorator_target(decorator: ast.AST) -> ast.AST:
    return decorator.func if isinstance(decorator, ast.Call) else decorator


def _root(decorator: ast.AST) -> str | None:
    node = _decorator_target(decorator)
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


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


def _metadata(refs: list[tuple[dict, bool]], aliases: dict, result: GateResult) -> None:
    """One diagnostic per unit for ``metadata[...]`` the file cannot resolve (``refs``: where each
    reference is, and whether it is in the ``"params"`` entry of ``R.func_attr``): a note when only
    that entry uses them (the worker drops it), else an error."""
    if not refs:
        return
    code = aliases.get(METADATA, "")
    why = (f"the file's metadata section cannot be used ({code[len('metadata!'):]})" if code.startswith("metadata!")
           else "the file has no metadata section (printed without show_meta=True)")
    needed = [r for r in refs if not r[1]]
    if not needed:
        result.notes.append({**_diagnostic(refs[0][0], f"metadata omitted: {len(refs)} reference(s) in the \"params\" "
                                                       f"attribute are ignored ({why}); the program does not need "
                                                       "them"), "severity": "warning", "source": "metadata"})
        return
    result.problems.append({**_diagnostic(needed[0][0], f"metadata omitted: this unit uses {len(needed)} object(s) "
                                                        f"from metadata[...] but {why}; print the module with "
                                                        "show_meta=True to check and tune it"), "source": "metadata"})


class _Placer:
    """Range of a finding: the node itself when it starts on the line TVM reports (the anchor's
    first line), else that line, with the node's own line named in the message.  Nodes count lines
    from ``line_offset``; ``class_node``, parsed apart (``gate_member``), is at file line ``class_line``."""

    def __init__(self, lines: list[str], line_offset: int, class_node: ast.AST | None = None,
                 class_line: int | None = None):
        self.lines, self.line_offset = lines, line_offset
        self.class_node, self.class_line = class_node, class_line

    def __call__(self, node: ast.AST, anchor: ast.AST) -> tuple[dict, bool]:
        rng = node_range(node, self.lines, self.line_offset)
        if anchor is self.class_node and self.class_line is not None:
            anchor_line = self.class_line
        else:
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
