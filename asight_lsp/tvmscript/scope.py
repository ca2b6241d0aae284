"""The names TVM's parser can see at one point of a unit, frame by frame (docs/safety.md).

TVM's parser keeps a var table of frames: its globals at the bottom (``T``, ``R``, ``I``, ``tvm``,
the file's aliases and constants), then one frame per function, ``for``/``with``/``if``/``while``
body, and a name is added when its binding is evaluated.  A name that is not in the table resolves to
a Python builtin.  ``Scope`` mirrors that table for the gate; a name's *kind* says what it holds:

* ``value``: something a gated expression produced (IR objects, literals, proxies);
* ``module:<Class>``: the ``@I.ir_module`` class (or ``cls = Class``): its attributes are the
  class's function names;
* ``ns:T`` (``ns:R`` ...): a TVMScript namespace, usable only as the root of a listed path.

The parser globals that are not namespaces (``tvm``, ``relax``, ``TypeVar`` ...) are never in a
scope: an expression that would reach them is refused.
"""
from __future__ import annotations

import ast
from contextlib import contextmanager

VALUE = "value"


class Scope:
    """A stack of frames, name -> kind; the bottom frame is the module level."""

    def __init__(self, base: dict[str, str] | None = None, frames: list[dict[str, str]] | None = None):
        self.frames = frames if frames is not None else [dict(base or {})]

    def lookup(self, name: str) -> str | None:
        for frame in reversed(self.frames):
            if name in frame:
                return frame[name]
        return None

    def bind(self, name: str, kind: str = VALUE) -> None:
        self.frames[-1][name] = kind

    def bind_targets(self, target: ast.AST, kind: str = VALUE) -> None:
        """Bind every name an assignment target (tuple, list, starred) stores."""
        for name in target_names(target):
            self.bind(name, kind)

    @contextmanager
    def frame(self):
        self.frames.append({})
        try:
            yield self
        finally:
            self.frames.pop()

    def snapshot(self) -> "Scope":
        """A scope that sees what this one sees now (for lambdas and inline functions)."""
        merged: dict[str, str] = {}
        for frame in self.frames:
            merged.update(frame)
        return Scope(frames=[merged])


def target_names(target: ast.AST) -> list[str]:
    """Names an assignment target binds (``a``, ``a, (b, *c)``); subscripts and attributes bind none."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for element in target.elts for name in target_names(element)]
    if isinstance(target, ast.Starred):
        return target_names(target.value)
    return []


def names_bound_anywhere(unit: ast.AST) -> set[str]:
    """Every name the unit binds somewhere (for messages: "used before it is bound")."""
    found = set()
    for node in ast.walk(unit):
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            found.add(node.name)
        elif isinstance(node, ast.arg):
            found.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
    return found
