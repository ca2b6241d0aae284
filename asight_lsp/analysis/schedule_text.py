"""Is a schedule's text what it claims to be, before it goes into the user's file?  (pure, no TVM)

"Apply best schedule" inserts text that TVM printed from a run's record: a trace as ``def
apply_trace(sch): ...`` (trace mode) or the scheduled TVMScript function (script mode).  A record is
data a repository can ship, and TVM does not escape the strings it prints into a trace: an
annotation key holding a quote and a newline can become a top-level ``os.system(...)`` in the
user's file.  So the text is parsed and checked for its shape first.

* A trace: one function; each statement an assignment, a call or ``pass``; every call a schedule
  primitive (``sch.<name>``), a TIR constructor (``T.Cast``, ``T.int64`` ...) or
  ``tvm.tirx.IndexMap.from_func``; arguments are literals, names, lists, tuples, arithmetic and
  lambdas of the same; no name or attribute that begins with ``_``.  (Checked on 3,474 recorded
  traces of this project's runs and the H100 run: all pass.)
* A TVMScript function (or a module class of functions): no import; every call TVMScript's own
  (``T.*``, ``R.*``, ``I.*``, ``cls.*``, ``range``); no name or attribute that begins with ``__``.
"""
from __future__ import annotations

import ast
import re

from .native_calls import INJECTED_SOURCE

TIR_CONSTRUCTOR = re.compile(r"(Cast|bool|u?int(8|16|32|64)|float(8|16|32|64)|bfloat16)")
EXPRESSIONS = (ast.Constant, ast.Name, ast.Load, ast.Store, ast.Tuple, ast.List, ast.UnaryOp, ast.USub, ast.UAdd,
               ast.BinOp, ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod, ast.Div, ast.Lambda, ast.arguments,
               ast.arg, ast.keyword, ast.Call, ast.Attribute)
STATEMENTS = (ast.Assign, ast.Expr, ast.Pass)
SCRIPT_ROOTS = {"T", "R", "I", "cls", "range"}
PROTECTED = {"sch", "T", "tvm"}
SCRIPT_EXITS = {"builder", "external_kernel", "ir_builder", "parser", "script", "os", "sys", "subprocess",
                "system", "popen", "importlib", "ffi", "get_global_func", "load_module", "eval", "exec", "open"}


class NotASchedule(ValueError):
    """The text is not the schedule it claims to be (one line: what was found, and on which line)."""


def require_trace_function(text: str) -> None:
    """A trace printed by TVM (``def apply_trace(sch): ...``), or NotASchedule."""
    tree = _parse(text)
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef):
        raise NotASchedule("the record's trace is not one schedule function")
    func = tree.body[0]
    _require_plain_signature(func)
    for stmt in func.body:
        _require_trace_statement(stmt)
    callees = {id(n) for node in ast.walk(func) if isinstance(node, ast.Call) for n in ast.walk(node.func)}
    for node in ast.walk(ast.Module(body=func.body, type_ignores=[])):
        if not isinstance(node, EXPRESSIONS + STATEMENTS + (ast.Module,)):
            raise NotASchedule(_where(node, f"a {type(node).__name__}"))
        _require_no_injected_source(node)
        _require_plain_name(node, "_")
        if isinstance(node, ast.Call) and not _schedule_call(node.func):
            raise NotASchedule(_where(node, f"a call of {ast.unparse(node.func)[:60]}"))
        if isinstance(node, ast.Attribute) and id(node) not in callees:     # only as a callee: sch.split(...)
            raise NotASchedule(_where(node, f"the attribute {ast.unparse(node)[:60]}"))
        if isinstance(node, ast.arg) and node.arg in PROTECTED:
            raise NotASchedule(_where(node, f"a lambda that rebinds {node.arg!r}"))


def _require_plain_signature(func: ast.FunctionDef) -> None:
    """``def name(sch)`` or ``def name(sch: "s_tir.Schedule")``: Python evaluates a decorator, a default
    and an annotation when the ``def`` runs (a run folder's name that ends the header comment can put a
    decorator above the function)."""
    args = func.args
    plain = (not func.decorator_list and _text_of(func.returns) in (None, "None") and not args.posonlyargs
             and not args.kwonlyargs and args.vararg is None and args.kwarg is None and not args.defaults
             and len(args.args) == 1 and args.args[0].arg == "sch"
             and _text_of(args.args[0].annotation) in (None, "s_tir.Schedule", "'s_tir.Schedule'"))
    if not plain:
        raise NotASchedule(_where(func, "a function other than def f(sch) (decorators, defaults or annotations)"))


def _require_no_injected_source(node: ast.AST) -> None:
    """No ``pragma_import_llvm`` / ``pragma_import_c`` annotation: its value is source code the code
    generator pastes into the kernel, which ASight refuses to build (``native_calls``) and so must not
    hand the user to build (LLVM IR can define a TVM error function as system())."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and INJECTED_SOURCE in node.value:
        raise NotASchedule(_where(node, f"a {INJECTED_SOURCE}_* annotation (source code pasted into the kernel)"))


def _text_of(node: ast.expr | None) -> str | None:
    return None if node is None else ast.unparse(node)


def _require_trace_statement(stmt: ast.stmt) -> None:
    """``names = <call>``, ``<call>`` or ``pass``; never a rebinding of ``sch``, ``T`` or ``tvm`` (a
    rebound ``sch`` makes ``sch.system(...)`` look like a schedule primitive)."""
    if isinstance(stmt, ast.Pass):
        return
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return
    if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call):
        names = [n for t in stmt.targets for n in (t.elts if isinstance(t, ast.Tuple) else [t])]
        if not all(isinstance(n, ast.Name) for n in names):
            raise NotASchedule(_where(stmt, "an assignment to something other than names"))
        rebound = [n.id for n in names if n.id in PROTECTED]
        if rebound:
            raise NotASchedule(_where(stmt, f"an assignment to {rebound[0]!r}"))
        return
    raise NotASchedule(_where(stmt, f"a {type(stmt).__name__} statement that is not a schedule step"))


def require_script_function(text: str) -> None:
    """A scheduled TVMScript function (or ``@I.ir_module`` class of functions) printed by TVM, or NotASchedule."""
    tree = _parse(text)
    body = [stmt for stmt in tree.body if not _type_var(stmt)]      # TVM prints symbolic vars first
    top = body[0] if len(body) == 1 else None
    functions = top.body if isinstance(top, ast.ClassDef) else [top]
    if not all(isinstance(f, ast.FunctionDef) for f in functions):
        raise NotASchedule("the scheduled program is not a function (or a module of functions)")
    for node in ast.walk(top):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            raise NotASchedule(_where(node, "an import"))
        _require_no_injected_source(node)
        _require_plain_name(node, "__")
        if isinstance(node, ast.Call) and not _script_call(node.func):
            raise NotASchedule(_where(node, f"a call of {ast.unparse(node.func)[:60]}"))


def _parse(text: str) -> ast.Module:
    try:
        return ast.parse(text)
    except SyntaxError as err:
        raise NotASchedule(f"it does not read as Python (line {err.lineno}: {err.msg})") from None


def _schedule_call(func: ast.expr) -> bool:
    dotted = ast.unparse(func)
    if dotted == "tvm.tirx.IndexMap.from_func":
        return True
    if not isinstance(func, ast.Attribute) or not isinstance(func.value, ast.Name):
        return False
    return func.value.id == "sch" or (func.value.id == "T" and TIR_CONSTRUCTOR.fullmatch(func.attr) is not None)


def _type_var(stmt: ast.stmt) -> bool:
    """``elem_offset = TypeVar("elem_offset")``: how TVM prints a symbolic variable before a module."""
    return (isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Name)
            and stmt.value.func.id == "TypeVar" and not stmt.value.keywords and len(stmt.value.args) == 1
            and isinstance(stmt.value.args[0], ast.Constant) and isinstance(stmt.value.args[0].value, str))


def _script_call(func: ast.expr) -> bool:
    """TVMScript's own calls: ``T.*``, ``R.*``, ``I.*``, ``cls.*`` (a module's functions), ``range``; at
    most two names deep (``T.axis.remap``, ``R.nn.relu``) and none of them a way out of TVMScript
    (``T.builder.external_kernel.os.system`` passes a root-only check)."""
    parts = []
    while isinstance(func, ast.Attribute):
        parts.append(func.attr)
        func = func.value
    return (isinstance(func, ast.Name) and func.id in SCRIPT_ROOTS and len(parts) <= 2
            and not any(part in SCRIPT_EXITS for part in parts))


def _require_plain_name(node: ast.AST, prefix: str) -> None:
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    if name is not None and name.startswith(prefix):
        raise NotASchedule(_where(node, f"the name {name[:40]!r}"))


def _where(node: ast.AST, what: str) -> str:
    line = getattr(node, "lineno", None)
    return f"it holds {what}" + (f" (line {line})" if line else "") + ", which no schedule has"
