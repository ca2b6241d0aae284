"""Stage graph of a function: blocks (or Relax bindings) as nodes, buffers as edges (TVM-free).

Built from the source map: a block that writes buffer X feeds every block that reads X.  Function
parameters nobody writes are inputs, parameters nobody reads afterwards are outputs; both become
``io`` nodes so every buffer is an edge.  Nodes carry a layered position (longest path from the
inputs) so a client can draw the graph without a layout engine.

``stage_costs`` gives each block its measured cost (latency and share of the program) from a
profile of the run, or says there is no measurement; it never estimates one.
"""
from __future__ import annotations

import networkx as nx

from ..tvmscript.model import Function


def build_graph(function: Function) -> nx.MultiDiGraph:
    """The stage graph as a networkx multigraph (node attrs: kind, label, ...; edge attr: buffer)."""
    if function.kind != "prim_func" and function.bindings:
        return _relax_graph(function)
    g = nx.MultiDiGraph()
    buffers = {b.name: b for b in function.buffers}
    blocks = [b for b in function.blocks if b.name != "root"]
    writers: dict[str, list[str]] = {}
    for blk in blocks:
        g.add_node(blk.name, kind="block", label=blk.name, iter_kinds=blk.iter_kinds, flops=blk.flops,
                   bytes=blk.bytes, line=blk.range["start"]["line"], block_id=blk.id)
        for buf in blk.writes:
            writers.setdefault(buf, []).append(blk.name)
    for blk in blocks:
        for buf in dict.fromkeys(blk.reads):
            sources = [w for w in writers.get(buf, []) if w != blk.name]
            if not sources and buf in blk.writes:
                continue  # a reduction reading its own output
            if not sources:
                sources = [_io(g, buf, "input")]
            for src in sources:
                g.add_edge(src, blk.name, **_edge(buf, buffers))
    read_later = {buf for blk in blocks for buf in blk.reads}
    for buf, names in writers.items():
        param = buffers.get(buf)
        if (param is not None and param.kind == "param") or buf not in read_later:
            sink = _io(g, buf, "output")
            for name in names:
                g.add_edge(name, sink, **_edge(buf, buffers))
    return g


def _io(g: nx.MultiDiGraph, buf: str, role: str) -> str:
    node = f"{role}:{buf}"
    if node not in g:
        g.add_node(node, kind="io", role=role, label=buf)
    return node


def _edge(buf: str, buffers: dict) -> dict:
    info = buffers.get(buf)
    return {"buffer": buf, "shape": list(info.shape) if info else None, "dtype": info.dtype if info else None,
            "scope": info.kind if info else None}


def _relax_graph(function: Function) -> nx.MultiDiGraph:
    g = nx.MultiDiGraph()
    defined = {b.name for b in function.bindings}
    for b in function.bindings:
        g.add_node(b.name, kind="binding", label=f"{b.name} = {b.op}", op=b.op, line=b.range["start"]["line"])
    for b in function.bindings:
        for arg in b.args:
            src = arg if arg in defined else _io(g, arg, "input")
            g.add_edge(src, b.name, buffer=arg, shape=None, dtype=None, scope=None)
    return g


def layered_positions(g: nx.MultiDiGraph) -> dict[str, tuple[int, int]]:
    """(layer, row) per node: layer = longest path from a source; rows in insertion order."""
    simple = nx.DiGraph(g)
    if not nx.is_directed_acyclic_graph(simple):
        return {node: (0, i) for i, node in enumerate(g.nodes)}
    layer: dict[str, int] = {}
    for node in nx.topological_sort(simple):
        preds = list(simple.predecessors(node))
        layer[node] = max((layer[p] + 1 for p in preds), default=0)
    rows: dict[int, int] = {}
    out = {}
    for node in g.nodes:
        lay = layer[node]
        out[node] = (lay, rows.get(lay, 0))
        rows[lay] = rows.get(lay, 0) + 1
    return out


NO_MEASUREMENT = "no measurement: profile the run (ASight: Profile, or `asight profile FILE --run R`)"


def stage_costs(profile: dict | None, function: Function) -> dict[str, dict]:
    """``{node id: {us, share, source}}`` per block of ``function`` from a profile (``asight.profile/1``,
    the tuned program's per-block figures, else the untuned one's); a block the profile lacks gets
    ``{us: None, share: None, source: NO_MEASUREMENT}``."""
    kernel = None
    if isinstance(profile, dict):
        kernel = next((k for k in profile.get("kernels") or []
                       if isinstance(k, dict) and k.get("function") in (function.id, function.name)), None)
    blocks = (kernel or {}).get("blocks") or {}
    label = "tuned" if blocks.get("tuned") else "baseline"
    how = (((kernel or {}).get("stages") or {}).get(label) or {}).get("source") or "profile"
    measured = {e["name"]: e for e in blocks.get(label) or [] if isinstance(e, dict) and e.get("name")}
    out = {}
    for blk in function.blocks:
        entry = measured.get(blk.name)
        if blk.name == "root":
            continue
        out[blk.name] = ({"us": entry.get("us"), "share": entry.get("share"),
                          "source": f"{'tuned' if label == 'tuned' else 'untuned'} program, {how}"}
                         if entry and entry.get("us") is not None else {"us": None, "share": None, "source": NO_MEASUREMENT})
    return out
