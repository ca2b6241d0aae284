"""The gate's walk over a unit's statements in the order TVM's parser evaluates them (docs/safety.md).

Frames follow TVM 0.27's var table (``tvm/script/parser/core/parser.py`` and the TIR / Relax / IR
parsers):

* a function: a frame for its parameters and body; each parameter's annotation sees only the
  parameters before it (a Relax annotation, evaluated a first time before any parameter exists,
  only the ``R.Prim`` ones); the return annotation sees them all;
* TIR ``for`` / ``while`` / ``with`` / ``if`` bodies: a frame each; their names end with the body;
* Relax ``if``: each branch a frame, then the name both branches bind last; ``with R.dataflow()``:
  a frame, then the names given to ``R.output``;
* an ``@I.ir_module`` class: its name; its functions are its attributes, not names; the statements
  of its body bind nothing.
* the unit's own name is never bound inside it (a recursive Relax function's is).

Where TVM reports a failure is the ``anchor``: the statement being visited, the ``def`` line for a
signature, the ``class`` line for a method's decorator.
"""
from __future__ import annotations

import ast
from copy import deepcopy

from .expr_rules import (HINTED, ExprRules, Findings, all_arguments, free_names, parse_code_string,
                         shape_strings, stored_parts)
from .name_hints import last_bound, output_names
from .namespaces import SHADOWING, decorator_of
from .tvmscript_api import PARSER_GLOBALS
from .scope import Scope, target_names

REFUSED_STATEMENTS = {ast.Import: "import statements", ast.ImportFrom: "import statements",
                      ast.Global: "global statements", ast.Nonlocal: "nonlocal statements",
                      ast.AsyncFunctionDef: "async functions", ast.AsyncWith: "async with",
                      ast.AsyncFor: "async for", ast.Try: "try statements", ast.Raise: "raise statements",
                      ast.Delete: "del statements", ast.ClassDef: "nested classes"}
if hasattr(ast, "TryStar"):
    REFUSED_STATEMENTS[ast.TryStar] = "try statements"
if hasattr(ast, "Match"):
    REFUSED_STATEMENTS[ast.Match] = "match statements"


class StatementRules:
    """Walks one unit; findings go to ``Findings``."""

    def __init__(self, findings: Findings, scope: Scope):
        self.found, self.scope = findings, scope
        self.expr = ExprRules(findings)

    def check(self, node, anchor, decorator: bool = False) -> None:
        self.expr.check(node, self.scope, anchor, decorator)

    # -- units
    def unit(self, node: ast.AST, kind: str) -> None:
        if isinstance(node, ast.ClassDef):
            self.module_class(node)
        else:
            self.function(node, kind, node)

    def module_class(self, node: ast.ClassDef) -> None:
        """``@I.ir_module class M``: decorators and bases are never evaluated by TVM; keywords neither.
        TVM's order: the class's decorators, its statements, every method's decorators, then each
        method's signature and body (``member_*`` run these phases for part of the body)."""
        for decorator in node.decorator_list:
            self.check(decorator, node, decorator=True)
        functions = [s for s in node.body if isinstance(s, ast.FunctionDef)]
        self.found.class_functions[node.name] = frozenset(f.name for f in functions)
        with self.scope.frame():
            self.scope.bind(node.name, f"module:{node.name}")
            self.member_statements(node.body)
            self.member_decorators(node.body, node)
            self.member_bodies(node.body)

    def member_statements(self, body: list[ast.stmt]) -> None:
        """The class-level statements among ``body`` (they bind nothing)."""
        for stmt in body:
            if not isinstance(stmt, ast.FunctionDef):
                self.class_statement(stmt)

    def member_decorators(self, body: list[ast.stmt], class_node: ast.ClassDef) -> None:
        """The methods' decorators, evaluated while TVM declares the functions (reported at the class)."""
        for function in body:
            if isinstance(function, ast.FunctionDef):
                for decorator in function.decorator_list:
                    self.check(decorator, class_node, decorator=True)

    def member_bodies(self, body: list[ast.stmt]) -> None:
        """The methods' signatures and bodies (an ``@I.pyfunc``'s are never parsed)."""
        for function in body:
            if isinstance(function, ast.FunctionDef):
                kind = self.method_kind(function)
                if kind != "pyfunc":
                    self.function(function, kind, None)

    def class_statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, (ast.Assign, ast.Expr)):
            self.check(stmt.value, stmt)
        elif isinstance(stmt, ast.Pass):
            pass
        elif type(stmt) in REFUSED_STATEMENTS:
            self.found.refuse(stmt, stmt, REFUSED_STATEMENTS[type(stmt)])
        else:
            for child in ast.iter_child_nodes(stmt):
                if isinstance(child, ast.expr):
                    self.check(child, stmt)

    def method_kind(self, node: ast.FunctionDef) -> str | None:
        """The kind of the decorator TVM dispatches on (the last one)."""
        if not node.decorator_list:
            return None
        last = node.decorator_list[-1]
        target = last.func if isinstance(last, ast.Call) else last
        return decorator_path_kind(target, self.found.aliases)

    # -- functions
    def function(self, node: ast.FunctionDef, kind: str | None, decorator_anchor: ast.AST | None) -> None:
        if decorator_anchor is not None:
            for decorator in node.decorator_list:
                self.check(decorator, decorator_anchor, decorator=True)
        for default in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            self.check(default, node)  # never evaluated by TVM; Python would, in the enclosing scope
        if kind == "relax_function":
            self.relax_function(node)
        else:
            self.tir_function(node)

    def tir_function(self, node: ast.FunctionDef) -> None:
        with self.scope.frame():
            for arg in node.args.args:
                self.check(arg.annotation, node)
                self.bind_shape_names(arg.annotation)  # T.Buffer(("n",)): a match variable from here on
                self.bind(arg.arg, arg, node)
            self.unbound_annotations(node)
            self.check(node.returns, node)
            TirBody(self).body(node.body)

    def relax_function(self, node: ast.FunctionDef) -> None:
        if is_recursive(node) and self.scope.lookup(node.name) is None and node.name not in PARSER_GLOBALS:
            self.bind(node.name, node, node)  # TVM binds it only when its var table has no such name
        with self.scope.frame():
            first_pass = self.scope.snapshot()  # TVM evaluates every annotation once before any parameter
            with first_pass.frame():
                for arg in node.args.args:
                    self.expr.check(arg.annotation, first_pass, node)
                    if is_prim_annotation(arg.annotation, self.found.aliases):
                        first_pass.bind(arg.arg)
            for arg in node.args.args:
                self.bind_shape_names(arg.annotation)  # R.Tensor(("n", "m")): symbolic variables
            for arg in node.args.args:
                self.check_strings(arg.annotation, node)
                self.bind(arg.arg, arg, node)
            self.unbound_annotations(node)
            self.check(node.returns, node)
            for stmt in node.body:  # TVM evaluates nested functions' (last) decorators before the body
                if isinstance(stmt, ast.FunctionDef):
                    for decorator in stmt.decorator_list:
                        self.check(decorator, node, decorator=True)
            RelaxBody(self).body(node.body)

    def bind(self, name: str, node: ast.AST, anchor: ast.AST, kind: str = "value") -> None:
        """Bind a name TVM (or Python) binds as written, in the current frame."""
        self.scope.bind(name, kind)

    def macro(self, node: ast.FunctionDef) -> None:
        """A module-level ``@T.macro``: Python runs the def (decorators, defaults, annotations, in the
        module's names); TVM parses its body as TIR where it is called, in a table of the module's
        names and the arguments (a hygienic macro; ``hygienic=False`` reads the caller's names)."""
        if len(node.decorator_list) > 1:
            self.found.refuse(node.decorator_list[0], node, "a macro with other decorators than T.macro")
        for decorator in node.decorator_list:
            self.check(decorator, node, decorator=True)
            if isinstance(decorator, ast.Call) and any(k.arg == "hygienic" and not (
                    isinstance(k.value, ast.Constant) and k.value.value is True) for k in decorator.keywords):
                self.found.refuse(decorator, node, "a macro that is not hygienic reads the names of each place "
                                                   "it is used; only hygienic macros (the default) are checked")
        for default in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
            self.check(default, node)
        for arg in all_arguments(node.args):
            self.check(arg.annotation, node)
        self.check(node.returns, node)
        with self.scope.frame():
            for arg in all_arguments(node.args):
                self.bind(arg.arg, arg, node)
            TirBody(self).body(node.body)

    def unbound_annotations(self, node: ast.FunctionDef) -> None:
        """Annotations of parameters TVM ignores (``*args``, keyword-only ...): checked, never bound."""
        args = node.args
        for arg in args.posonlyargs + args.kwonlyargs + [a for a in (args.vararg, args.kwarg) if a]:
            self.check(arg.annotation, node)

    def bind_shape_names(self, annotation: ast.AST | None) -> None:
        for call in ast.walk(annotation) if annotation is not None else ():
            if isinstance(call, ast.Call) and self.expr._member_name(call.func, self.scope) in SHAPE_NAMES:
                for const in shape_strings(call):
                    tree = parse_code_string(const.value)
                    if tree is not None:
                        for name in free_names(tree, self.scope):
                            self.scope.bind(name)

    def check_strings(self, annotation: ast.AST | None, anchor: ast.AST) -> None:
        """Shape strings of a Relax parameter annotation, evaluated with the parameters before it."""
        for call in ast.walk(annotation) if annotation is not None else ():
            if isinstance(call, ast.Call) and self.expr._member_name(call.func, self.scope) in SHAPE_NAMES:
                self.expr.check_shape_strings(call, self.scope, anchor)

    def nested_function(self, node: ast.FunctionDef, body_kind: str) -> None:
        """A def inside a function: ``@R.function`` (Relax) or ``@T.inline`` (TIR) bind its name after it."""
        kind = self.method_kind(node)
        if kind == "inline":  # Python runs the def: decorators, defaults, annotations in this scope
            for decorator in node.decorator_list:
                self.check(decorator, node, decorator=True)
            for default in node.args.defaults + [d for d in node.args.kw_defaults if d is not None]:
                self.check(default, node)
            for arg in all_arguments(node.args):
                self.check(arg.annotation, node)
            self.check(node.returns, node)
            inner = StatementRules(self.found, self.scope.snapshot())
            with inner.scope.frame():
                for arg in all_arguments(node.args):
                    inner.bind(arg.arg, arg, node)
                TirBody(inner).body(node.body)
        else:
            self.function(node, kind, node if body_kind == "tir" else None)
        if (kind == "inline" and body_kind == "tir") or (kind == "relax_function" and body_kind == "relax"):
            self.bind(node.name, node, node)


SHAPE_NAMES = {"R.Tensor", "R.Shape", "T.Buffer"}


class _Body:
    """Statements common to both dialects."""

    def __init__(self, rules: StatementRules):
        self.rules, self.scope = rules, rules.scope

    def check(self, node, anchor) -> None:
        self.rules.check(node, anchor)

    def body(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        method = getattr(self, f"_{type(stmt).__name__}", None)
        if type(stmt) in REFUSED_STATEMENTS:
            self.rules.found.refuse(stmt, stmt, REFUSED_STATEMENTS[type(stmt)])
        elif method is not None:
            method(stmt)
        elif isinstance(stmt, (ast.Pass, ast.Break, ast.Continue)):
            pass
        else:
            for child in ast.iter_child_nodes(stmt):
                self.check(child, stmt)

    def _Expr(self, stmt):
        self.check(stmt.value, stmt)

    def _Return(self, stmt):
        self.check(stmt.value, stmt)

    def _Assert(self, stmt):
        self.check(stmt.test, stmt)
        self.check(stmt.msg, stmt)

    def _Assign(self, stmt):
        self.check(stmt.value, stmt)
        for target in stmt.targets:
            self.store(target, stmt)
        kind = self.scope.lookup(stmt.value.id) if isinstance(stmt.value, ast.Name) else None
        for target in stmt.targets:  # cls = Module: the module's functions are its attributes
            self.bind_targets(target, stmt, kind if kind and kind.startswith("module:")
                              and isinstance(target, ast.Name) else "value")

    def _AnnAssign(self, stmt):
        self.check(stmt.value, stmt)
        self.check(stmt.annotation, stmt)
        self.rules.expr.check_target(stmt.target, stmt)
        self.bind_targets(stmt.target, stmt)

    def _AugAssign(self, stmt):
        self.check(_as_load(stmt.target), stmt)
        self.check(stmt.value, stmt)
        if not isinstance(stmt.target, ast.Subscript):
            self.rules.expr.check_target(stmt.target, stmt)

    def store(self, target: ast.AST, stmt: ast.stmt) -> None:
        """An assignment target as TVM's ``eval_assign`` runs it: with empty globals
        (``expr_rules.check_target``).  TIR reads it with the var table first (``TirBody.store``)."""
        self.rules.expr.check_target(target, stmt)

    def bind_targets(self, target: ast.AST, anchor: ast.AST, kind: str = "value") -> None:
        """Bind the names a target stores: TVM's ``eval_assign`` binds them as written."""
        self.scope.bind_targets(target, kind)

    def _FunctionDef(self, stmt):
        self.rules.nested_function(stmt, self.kind)

    def _For(self, stmt):
        self.check(stmt.iter, stmt)
        with self.scope.frame():
            self.rules.expr.check_target(stmt.target, stmt)
            self.bind_targets(stmt.target, stmt)
            self.body(stmt.body)
        self.body(stmt.orelse)  # never evaluated by TVM; checked where Python would run it

    def _While(self, stmt):
        with self.scope.frame():
            self.check(stmt.test, stmt)
            self.body(stmt.body)
        self.body(stmt.orelse)


class TirBody(_Body):
    kind = "tir"

    def store(self, target: ast.AST, stmt: ast.stmt) -> None:
        """TIR's ``Assign``: a subscript is a buffer store (value and indices read with the var
        table); any other target is first read as a value with the var table (a scalar buffer?),
        then run by ``eval_assign`` with empty globals."""
        for part in stored_parts(target):
            if isinstance(part, ast.Subscript):
                self.check(part.value, stmt)
                self.check(part.slice, stmt)
            elif isinstance(part, ast.Attribute):
                self.check(_as_load(part), stmt)
        if not isinstance(target, ast.Subscript):
            self.rules.expr.check_target(target, stmt)

    def _With(self, stmt):
        with self.scope.frame():
            for item in stmt.items:
                self.check(item.context_expr, stmt)
                if item.optional_vars is not None:
                    self.rules.expr.check_target(item.optional_vars, stmt)
                    self.bind_targets(item.optional_vars, stmt)
            self.body(stmt.body)

    def _If(self, stmt):
        """A TIR ``if``: a frame per branch (a compile-time ``if`` keeps its names; the gate does not
        count on it)."""
        self.check(stmt.test, stmt)
        with self.scope.frame():
            self.body(stmt.body)
        with self.scope.frame():
            self.body(stmt.orelse)


class RelaxBody(_Body):
    kind = "relax"

    def _With(self, stmt):
        for item in stmt.items:
            self.check(item.context_expr, stmt)
            if item.optional_vars is not None:
                self.store(item.optional_vars, stmt)
        with self.scope.frame():
            self.body(stmt.body)
        for name in output_names(stmt.body, self.rules.found.aliases):
            self.bind_hinted(name)

    def _If(self, stmt):
        self.check(stmt.test, stmt)
        with self.scope.frame():
            self.body(stmt.body)
        with self.scope.frame():
            self.body(stmt.orelse)
        aliases = self.rules.found.aliases
        then_name, else_name = last_bound(stmt.body, aliases), last_bound(stmt.orelse, aliases)
        if then_name is not None and then_name == else_name:
            self.bind_hinted(then_name)

    def bind_hinted(self, name: str) -> None:
        """A name TVM binds by a Relax variable's *name hint* (after a dataflow block, an ``if``):
        only when the script's last binding of it emitted a variable of that name (``emits``).  A
        builtin's, parser global's or namespace's name is never counted on there (``HINTED``: its
        uses are refused): were ``emits`` wrong, it would be that builtin for TVM."""
        if name in SHADOWING or (self.scope.lookup(name) or "").startswith("ns:"):
            self.scope.bind(name, HINTED)
        else:
            self.scope.bind(name)


def is_recursive(node: ast.FunctionDef) -> bool:
    """TVM's test: a call of the function's own name among its statements (``is_called``)."""
    def called(item) -> bool:
        if isinstance(item, ast.Call):
            return isinstance(item.func, ast.Name) and item.func.id == node.name
        if isinstance(item, list):
            return any(called(s) for s in item)
        if isinstance(item, (ast.AnnAssign, ast.Assign, ast.Return, ast.Expr)):
            return called(item.value)
        if isinstance(item, ast.With):
            return called(item.body)
        if isinstance(item, ast.If):
            return called(list(item.body) + list(item.orelse))
        return False
    return called(node.body)


def is_prim_annotation(annotation: ast.AST | None, aliases: dict) -> bool:
    """``R.Prim(...)``: the Relax parameters TVM binds while it first reads the signature."""
    func = annotation.func if isinstance(annotation, ast.Call) else None
    return isinstance(func, ast.Attribute) and func.attr == "Prim" and isinstance(func.value, ast.Name) \
        and aliases.get(func.value.id) == "R"


def decorator_path_kind(target: ast.AST, aliases: dict) -> str | None:
    """``prim_func`` / ``relax_function`` / ``ir_module`` / ``inline`` ... for a decorator expression."""
    parts = []
    while isinstance(target, ast.Attribute):
        parts.insert(0, target.attr)
        target = target.value
    if not isinstance(target, ast.Name) or not parts:
        return None
    namespace = aliases.get(target.id)
    if namespace in ("T", "R", "I", "Tx"):
        return decorator_of(".".join([namespace, *parts]))
    return decorator_of(".".join([target.id, *parts]))


def _as_load(node: ast.AST) -> ast.AST:
    """A copy of a store target read as a value (``A[i] += 1`` reads ``A[i]``)."""
    copy = deepcopy(node)
    for child in ast.walk(copy):
        if hasattr(child, "ctx"):
            child.ctx = ast.Load()
    return copy


__all__ = ["StatementRules", "decorator_path_kind", "target_names"]
