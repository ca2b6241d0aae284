"""What a Relax dataflow block or ``if`` binds after it (docs/safety.md, issue 22).

TVM binds there a variable's *name hint* (``var_table.add(var.name, var)``): each output variable of a
dataflow block, and the variable each branch of an ``if`` emitted last.  That is the script's name only
when the script's last binding of it emitted a variable (``emits``); ``I.meta_var(lv)`` binds the
name to ``lv`` and emits nothing, so after the block the name is not bound (and would be a builtin).
"""
from __future__ import annotations

import ast


def output_names(body: list[ast.stmt], aliases: dict | None = None) -> list[str]:
    """Names given to ``R.output(...)`` in a dataflow block that outlive it under the same name:
    TVM binds each output variable's name hint, which is the script's name only when the block's
    last binding of that name emitted a variable (``I.meta_var(lv)`` binds the name to ``lv``)."""
    names = []
    for stmt in body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr == "output":
            names += [a.id for a in call.args if isinstance(a, ast.Name)]
    if aliases is None:
        return names
    last = {}
    for stmt in body:
        target = _single_target(stmt)
        if isinstance(target, ast.Name):
            last[target.id] = emits(stmt.value, aliases)
        elif isinstance(stmt, ast.FunctionDef):   # a local function: a variable of its name
            last[stmt.name] = True
        elif isinstance(stmt, ast.If):   # the name both branches bind last
            joined = last_bound(stmt.body, aliases)
            if joined is not None and joined == last_bound(stmt.orelse, aliases):
                last[joined] = True
    return [n for n in names if last.get(n)]   # others keep their outer binding, if any


def last_bound(body: list[ast.stmt], aliases: dict | None = None) -> str | None:
    """The name a Relax branch's last binding defines (what an ``if`` yields: TVM binds the name hint
    of the branch's last *emitted* variable); a dataflow block's last binding when it is one of its
    outputs.  None when the last binding may emit nothing (``I.meta_var``, a type, a string ...)."""
    last = body[-1] if body else None
    if isinstance(last, ast.With):
        inner = last_bound(last.body[:-1] if last.body and isinstance(last.body[-1], ast.Expr) else last.body,
                           aliases)
        return inner if inner in output_names(last.body, aliases) else None
    target = _single_target(last)
    if not isinstance(target, ast.Name):
        return None
    if aliases is not None and not emits(last.value, aliases):
        return None
    return target.id


def _single_target(stmt: ast.stmt | None) -> ast.AST | None:
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
        return stmt.targets[0]
    if isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
        return stmt.target
    return None


# Relax calls whose value is not an expression Relax emits (types, struct info, meta variables).
NOT_EMITTED = {"I.meta_var", "T.meta_var", "R.Tensor", "R.Shape", "R.Tuple", "R.Object", "R.Prim", "R.Callable",
               "R.Any", "R.Func", "R.Void", "R.Array", "R.ExternFunc", "R.DTensor"}


def emits(value: ast.AST | None, aliases: dict) -> bool:
    """Whether binding ``value`` in Relax emits a variable named as the target (an operator's call, a
    variable, a number, a tuple ...); not ``I.meta_var(...)``, a type (``R.Tensor(...)``), a symbolic
    ``T.int64()`` declaration, a string or None.  (An approximation: a name it gets wrong is at worst
    unbound for TVM, never a builtin: those are never bound, ``bind_hinted``.)"""
    if isinstance(value, ast.Constant):
        return not isinstance(value.value, (str, bytes, type(None)))
    if not isinstance(value, ast.Call):
        return value is not None
    func, parts = value.func, []
    while isinstance(func, ast.Attribute):
        parts.insert(0, func.attr)
        func = func.value
    namespace = aliases.get(func.id) if isinstance(func, ast.Name) else None
    if namespace not in ("R", "I", "T") or not parts:
        return True
    path = ".".join([namespace, *parts])
    return path not in NOT_EMITTED and not (namespace == "T" and not value.args and not value.keywords)
