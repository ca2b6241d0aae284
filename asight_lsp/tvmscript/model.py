"""The outline's data model: units, functions, blocks, loops, buffers and Relax bindings, each with
a 0-based LSP range and a stable id (``tvmscript/outline.py`` builds it; everything else reads it).

* function id: ``Module.func`` inside an IRModule class, else ``func``
* block id:    ``<function id>/<block name>``
* loop id:     ``<function id>/<first block inside the loop>/<loop vars from the outermost loop>``
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


# What a module-level name stands for in TVMScript (``Outline.aliases``): a namespace ("T", "R",
# "I", "Tx"), a printed symbolic variable ("TypeVar"), or the printed metadata section
# ("metadata:<digest>", or "metadata!<why it cannot be used>").  TVM's parser has T, R, I and Tx.
DEFAULT_ALIASES = {"T": "T", "R": "R", "I": "I", "Tx": "Tx"}


@dataclass
class Loop:
    id: str
    vars: list[str]
    extents: list[Any]
    kind: str
    range: dict
    block: str | None = None
    thread: str | None = None


@dataclass
class Block:
    id: str
    name: str
    range: dict
    name_range: dict
    iter_kinds: str = ""
    iter_vars: list[str] = field(default_factory=list)
    reads: list[str] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)
    loops: list[str] = field(default_factory=list)
    ops: dict = field(default_factory=dict)
    iterations: int | None = None
    flops: int | None = None
    bytes: int | None = None


@dataclass
class Buffer:
    name: str
    shape: list[Any]
    dtype: str
    kind: str  # param | alloc | match
    range: dict


@dataclass
class Binding:
    name: str
    op: str
    args: list[str]
    range: dict


FUNCTION_LISTS = ("blocks", "loops", "buffers", "bindings")   # what ``moves.py`` moves lazily
MOVED_FROM = "_moved_from"   # a lazily moved function's attribute: (the function with its lists, distance)


@dataclass
class Function:
    id: str
    name: str
    kind: str  # prim_func | relax_function
    range: dict
    name_range: dict
    module: str | None = None
    unit: str = ""
    blocks: list[Block] = field(default_factory=list)
    loops: list[Loop] = field(default_factory=list)
    buffers: list[Buffer] = field(default_factory=list)
    bindings: list[Binding] = field(default_factory=list)

    def __getattr__(self, name: str):
        """The lists of a function moved lazily (``moves.py``), made on first use."""
        if name in FUNCTION_LISTS and MOVED_FROM in self.__dict__:
            from .moves import function_lists
            function_lists(self)
            return self.__dict__[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")


@dataclass
class Unit:
    """A top-level decorated def or class: what the worker parses on its own."""
    name: str
    kind: str  # ir_module | prim_func | relax_function | unknown
    start_line: int  # 0-based, decorators included
    end_line: int    # 0-based, inclusive
    range: dict
    functions: list[str] = field(default_factory=list)
    problems: list[dict] = field(default_factory=list)  # the safety gate's refusals (errors)
    notes: list[dict] = field(default_factory=list)     # the gate's non-blocking remarks (warnings)

    @property
    def safe(self) -> bool:
        return not self.problems


@dataclass
class Outline:
    path: str
    units: list[Unit] = field(default_factory=list)
    functions: list[Function] = field(default_factory=list)
    constants: dict = field(default_factory=dict)
    aliases: dict = field(default_factory=lambda: dict(DEFAULT_ALIASES))
    syntax_errors: list[dict] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)

    def function(self, name_or_id: str) -> Function | None:
        for fn in self.functions:
            if name_or_id in (fn.id, fn.name):
                return fn
        return None
