"""Loop names of a tuned workload, read from MetaSchedule's serialized module without TVM (pure).

A Relax model's task is a PrimFunc the source file does not contain, so a view of its candidates
cannot name loops from the source's blocks; the workload's JSON graph (``database_workload.json``,
decoded by ``store.database.workload_graph``) holds the kernel with its loop variables.  Where the
source names the axes (a binding's ``data_layout="NCHW"``), the outer loops take those names
(``n, c, h, w``); the rest keep the kernel's own (``rc, ry, rx``)."""
from __future__ import annotations

import re

from ..tvmscript.pysource import source_lines

_STMT_KEYS = ("body", "seq", "block", "then_case", "else_case", "init")
LAYOUT = re.compile(r"""data_layout\s*=\s*["']([A-Za-z]+)["']""")


def block_loop_vars(graph: dict) -> dict[str, list[str]]:
    """``{block name: [enclosing loop variables, outermost first]}`` of every PrimFunc in the graph."""
    nodes = graph.get("nodes") or []

    def node(i):
        return nodes[i] if isinstance(i, int) and 0 < i < len(nodes) and isinstance(nodes[i], dict) else None

    def text(i) -> str | None:
        n = node(i)
        if n is None:
            return None
        data = n.get("data")
        if isinstance(data, str):
            return data
        return text(data.get("name_hint", data.get("name"))) if isinstance(data, dict) else None

    out: dict[str, list[str]] = {}

    def walk(i, loops: list[str], depth: int = 0) -> None:
        n = node(i)
        if n is None or depth > 400:
            return
        kind, data = n.get("type"), n.get("data")
        if isinstance(data, list):        # an array of statements (SeqStmt's seq)
            for child in data:
                walk(child, loops, depth + 1)
            return
        if not isinstance(data, dict):
            return
        if kind == "tirx.For":
            loops = loops + [text(data.get("loop_var")) or "?"]
        elif kind == "s_tir.SBlock":
            name = text(data.get("name_hint"))
            if name and name != "root":
                out.setdefault(name, list(loops))
        for key in _STMT_KEYS:
            if key in data:
                walk(data[key], loops, depth + 1)

    for n in nodes:
        if isinstance(n, dict) and n.get("type") == "tirx.PrimFunc" and isinstance(n.get("data"), dict):
            walk(n["data"].get("body"), [])
    return out


def layout_of(text: str, line: int) -> str | None:
    """The ``data_layout`` a source line names (``NCHW``), or None."""
    lines = source_lines(text)   # the outline's lines (issue 22)
    found = LAYOUT.search(lines[line]) if 0 <= line < len(lines) else None
    return found.group(1) if found else None


def named_axes(loop_vars: list[str], layout: str | None) -> list[str]:
    """The kernel's loop variables with the outer ones named by the source's layout (``n, c, h, w``)
    when there are at least as many loops as layout letters; otherwise unchanged."""
    if not layout or len(loop_vars) < len(layout):
        return list(loop_vars)
    return [c.lower() for c in layout] + list(loop_vars[len(layout):])
