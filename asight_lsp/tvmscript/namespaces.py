"""Lookups in TVMScript's API by exact member (``tvmscript_api.py``, generated from TVM).

A dotted path such as ``T.axis.spatial`` is one of:

* ``member``: a function, type or constant TVMScript defines, usable as a value;
* ``prefix``: a sub-namespace (``R.nn``, ``T.cuda``): only the start of a longer path;
* ``chain``: an object whose every public attribute is another such object (``T.ptx.cp``, PTX
  instruction modifiers): any identifier may follow it;
* ``decorator``: an entry point (``T.prim_func``, ``R.function``, ``@tvm.script.ir_module``),
  allowed only as a decorator;
* ``None``: not TVMScript.
"""
from __future__ import annotations

import builtins

from .tvmscript_api import (CHAINS, DECORATORS, IMPORTS, MEMBERS, PARSER_GLOBALS, PREFIXES, SUBSCRIPTABLE,
                            VALUE_ATTRIBUTES)

NAMESPACES = ("T", "R", "I", "Tx")

# The builtins a TVMScript expression may use (TVM's parser resolves the others too: never them).
SAFE_BUILTINS = frozenset({"range", "len", "min", "max", "int", "float", "bool", "abs", "tuple", "list",
                           "zip", "enumerate", "sum", "reversed", "sorted", "all", "any", "round", "divmod",
                           "map", "filter", "slice", "dict", "set"})

# Names an unbound identifier may resolve to at parse time: TVM's parser globals and every builtin.
RESERVED = frozenset(PARSER_GLOBALS) | frozenset(dir(builtins))

# Names whose binding the gate never counts on (issue 22): where TVM does not bind a name as the
# script wrote it (a Relax variable's name hint after a dataflow block or an ``if``; an assignment
# target, run with empty globals; a shape string evaluated without the var table) it is the builtin
# or parser global of that name.  Binding one is refused; a module constant of that name is not used.
SHADOWING = RESERVED - SAFE_BUILTINS


def path_kind(path: str) -> str | None:
    """``member`` / ``prefix`` / ``decorator`` / None for a dotted path from a namespace's own name."""
    if path in MEMBERS:
        return "member"
    if path in PREFIXES:
        return "prefix"
    if path in CHAINS:
        return "chain"
    if path in DECORATORS:
        return "decorator"
    return None


def longest_listed(namespace: str, attrs: list[str]) -> tuple[int, str | None]:
    """How many of ``attrs`` after ``namespace`` form a listed path, and that path's kind (a chain
    takes every attribute after it)."""
    for count in range(1, len(attrs) + 1):
        if ".".join([namespace, *attrs[:count]]) in CHAINS:
            return len(attrs), "chain"
    for count in range(len(attrs), 0, -1):
        kind = path_kind(".".join([namespace, *attrs[:count]]))
        if kind is not None:
            return count, kind
    return 0, None


def is_subscriptable(path: str) -> bool:
    """A sub-namespace TVMScript indexes (``T.ptx["st.weak.shared::cta.b32"]``)."""
    return path in SUBSCRIPTABLE


def decorator_of(path: str) -> str | None:
    """The unit kind of an exact decorator spelling (``T.prim_func`` or ``tvm.script.ir_module``)."""
    return DECORATORS.get(path)


def is_value_attribute(name: str) -> bool:
    """An attribute TVMScript reads on values (``A.shape``, ``x.struct_info`` ...)."""
    return name in VALUE_ATTRIBUTES


def import_namespace(module: str, name: str) -> str | None:
    """The namespace ``from MODULE import NAME`` binds (``tvm.script``, ``tirx`` -> ``T``)."""
    return IMPORTS.get(f"{module}:{name}")
