"""Static gate in front of TVM's script parser: opening a file must never execute its code.

TVM's parser evaluates the expressions it meets, so any text that reaches it must contain only
TVMScript constructs.  A unit (top-level decorated def or class) passes when every expression in it
is built from:

* the TVMScript namespaces (``T.``, ``I.``, ``R.`` and the aliases the file imports them under),
* literals and arithmetic / comparison / boolean operators,
* names bound by the script itself (parameters, loop and ``with`` targets, assignments, the class
  and its functions, ``cls``) and module-level literal constants,
* a few harmless builtins (``range``, ``len``, ``min``, ``max``, ``int``, ``float``, ``bool``).

Everything else (calls of other names, attribute access outside the allowed namespaces or on a
dunder, imports, lambdas, yield/await, walrus, global/nonlocal, ``exec``-like builtins) yields a
"not evaluated: …" diagnostic at its location, and the unit is then outlined statically only.
"""
from __future__ import annotations

import ast

from .ranges import node_range

SAFE_BUILTINS = frozenset({"range", "len", "min", "max", "int", "float", "bool", "True", "False", "None",
                           "abs", "tuple", "list"})
FORBIDDEN_NODES = {
    ast.Lambda: "lambda expressions",
    ast.Import: "import statements",
    ast.ImportFrom: "import statements",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
    ast.Await: "await",
    ast.NamedExpr: "assignment expressions (:=)",
    ast.Global: "global statements",
    ast.Nonlocal: "nonlocal statements",
    ast.AsyncFunctionDef: "async functions",
    ast.AsyncWith: "async with",
    ast.AsyncFor: "async for",
    ast.Try: "try statements",
    ast.Raise: "raise statements",
    ast.Delete: "del statements",
    ast.ClassDef: "nested classes",
}


def _bound_names(unit: ast.AST) -> set[str]:
    """Every name the unit binds itself: its own name, functions, parameters and assignment targets."""
    names = {"cls"}
    for node in ast.walk(unit):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.comprehension):
            for target in ast.walk(node.target):
                if isinstance(target, ast.Name):
                    names.add(target.id)
    return names


def _attribute_root(node: ast.Attribute) -> ast.AST:
    while isinstance(node, ast.Attribute):
        node = node.value
    return node


class _Checker(ast.NodeVisitor):
    def __init__(self, unit: ast.AST, aliases: dict, constants: dict, lines: list[str], line_offset: int):
        self.namespaces = {alias for alias, ns in aliases.items() if ns in ("T", "R", "I")}
        self.bound = _bound_names(unit) | set(constants)
        self.lines, self.line_offset = lines, line_offset
        self.problems: list[dict] = []

    def report(self, node: ast.AST, what: str) -> None:
        self.problems.append({
            "range": node_range(node, self.lines, self.line_offset), "severity": "error", "source": "safety",
            "message": f"not evaluated: {what}; this function is outlined statically only"})

    def generic_visit(self, node: ast.AST) -> None:
        for kind, what in FORBIDDEN_NODES.items():
            if isinstance(node, kind):
                self.report(node, what)
                return
        super().generic_visit(node)

    def visit_unit(self, unit: ast.AST) -> None:
        """Visit the unit's own def/class node; any class nested inside it is refused."""
        if isinstance(unit, ast.ClassDef):
            for base in unit.bases + [k.value for k in unit.keywords]:
                self.report(base, "class bases and keywords")
            for stmt in unit.decorator_list + unit.body:
                self.visit(stmt)
        else:
            self.visit(unit)

    def visit_Name(self, node: ast.Name) -> None:
        if node.id.startswith("__"):
            self.report(node, f"dunder name '{node.id}'")
        elif isinstance(node.ctx, ast.Load) and node.id not in self.bound \
                and node.id not in self.namespaces and node.id not in SAFE_BUILTINS:
            self.report(node, f"name '{node.id}' is neither TVMScript, bound by the script, nor a literal constant")

    def visit_Attribute(self, node: ast.Attribute) -> None:
        chain, root = [], node
        while isinstance(root, ast.Attribute):
            if root.attr.startswith("_"):
                self.report(root, f"private or dunder attribute '.{root.attr}'")
                return
            chain.append(root.attr)
            root = root.value
        if isinstance(root, ast.Name):
            if root.id in self.namespaces or root.id in self.bound:
                if root.id.startswith("__"):
                    self.report(root, f"dunder name '{root.id}'")
                return
            self.report(node, f"attribute access on '{root.id}', which is not a TVMScript namespace")
            return
        self.visit(root)  # e.g. A.shape[0].value: check the inner expression

    def visit_Call(self, node: ast.Call) -> None:
        func = node.func
        if isinstance(func, ast.Name):
            if func.id not in SAFE_BUILTINS:
                self.report(func, f"call of '{func.id}', which is not a TVMScript function")
        elif isinstance(func, ast.Attribute):
            root = _attribute_root(func)
            if not (isinstance(root, ast.Name) and (root.id in self.namespaces or root.id in self.bound)):
                self.report(func, f"call of '{_short(func)}', which is not a TVMScript function")
            else:
                self.visit(func)
        else:
            self.report(func, f"call of the computed expression '{_short(func)}'")
        for arg in node.args:
            self.visit(arg)
        for keyword in node.keywords:
            if keyword.arg is None:
                self.report(keyword.value, "**kwargs expansion")
            else:
                self.visit(keyword.value)


def _short(node: ast.AST, limit: int = 40) -> str:
    text = ast.unparse(node)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def check_unit(unit: ast.AST, aliases: dict, constants: dict, lines: list[str], line_offset: int = 0) -> list[dict]:
    """"not evaluated" diagnostics for one top-level unit; empty when the unit is safe to parse."""
    checker = _Checker(unit, aliases, constants, lines, line_offset)
    try:
        checker.visit_unit(unit)
    except RecursionError:
        return [{"range": node_range(unit, lines, line_offset), "severity": "error", "source": "safety",
                 "message": "not evaluated: expressions nested too deeply to check"}]
    return checker.problems
