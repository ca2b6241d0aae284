"""Stage graph of a function: blocks (or Relax bindings) as nodes, buffers as edges (TVM-free).

Built from the source map: a block that writes buffer X feeds every block that reads X.  Function
parameters nobody writes are inputs, parameters nobody reads afterwards are outputs; both become
``io`` nodes so every buffer is an edge.  Nodes carry a layered position (longest path from the
inputs) so a client can draw the graph without a layout engine.

``stage_costs`` gives each block its measured cost (latency and share of the program) from a
profile of the run, or says there is no measurement; it never estimates one.
"""
from __future__ import annotations

import re

import networkx as nx

from ..tvmscript.model import Function
from ..tvmscript.pysource import source_lines


def build_graph(function: Function, num_input: int | None = None) -> nx.MultiDiGraph:
    """The stage graph as a networkx multigraph (node attrs: kind, label, ...; edge attr: buffer).
    ``num_input``: a Relax function's data inputs (the parameters after them are weights)."""
    if function.kind != "prim_func" and function.bindings:
        return _relax_graph(function, num_input)
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


def _relax_graph(function: Function, num_input: int | None = None) -> nx.MultiDiGraph:
    """One node per binding; weights, bindings computed from weights and constants alone, and names
    that are neither a parameter nor a binding (the ``R`` of ``R.shape(...)``) are folded away."""
    g = nx.MultiDiGraph()
    roles = relax_roles(function, num_input)
    for b in function.bindings:
        if b.name not in roles.folded:
            g.add_node(b.name, kind="binding", label=f"{b.name} = {b.op}", op=b.op, line=b.range["start"]["line"])
    for b in function.bindings:
        if b.name in roles.folded:
            continue
        for arg in dict.fromkeys(roles.deps(b)):
            if arg in roles.folded or arg in roles.weights:
                continue
            src = arg if arg in roles.bindings else _io(g, arg, "input")
            g.add_edge(src, b.name, buffer=arg, shape=None, dtype=None, scope=None)
    return g


# ---------------------------------------------------------------- a Relax model at the scale a deployer thinks


class RelaxRoles:
    """What each name of a Relax function is: data inputs, weights (parameters after ``num_input``),
    bindings, and *folded* bindings (computed from weights and constants alone: a bias reshape, a
    transposed weight, which a build folds into constants)."""

    def __init__(self, function: Function, num_input: int | None):
        params = [b.name for b in function.buffers if b.kind == "param"]
        self.inputs = params[:num_input] if num_input is not None else params
        self.weights = set(params) - set(self.inputs)
        self.params = set(params)
        self.bindings = {b.name: b for b in function.bindings}
        self.folded: set[str] = set()
        for b in function.bindings:
            if all(a in self.weights or a in self.folded for a in self.deps(b)):
                self.folded.add(b.name)

    def deps(self, binding) -> list[str]:
        """The binding's arguments that are values (parameters or earlier bindings): never a
        namespace (``R``), a keyword or an attribute name."""
        return [a for a in binding.args if a in self.params or (a in self.bindings and a != binding.name)]


def relax_roles(function: Function, num_input: int | None = None) -> RelaxRoles:
    return RelaxRoles(function, num_input)


NUM_INPUT = re.compile(r"""R\.func_attr\(\s*\{[^}]*["']num_input["']\s*:\s*(\d+)""")


def num_input_of(text: str, function: Function) -> int | None:
    """``num_input`` of a Relax function's ``R.func_attr`` (the importer's: the parameters after it
    are weights), read from the function's own lines; None when it has none."""
    lines = source_lines(text)[function.range["start"]["line"]:function.range["end"]["line"] + 1]
    found = NUM_INPUT.search("\n".join(lines))
    return int(found.group(1)) if found else None


def profile_calls(profile: dict | None, function: Function) -> tuple[list[dict], str]:
    """The kernel calls of a Relax profile of ``function`` (the tuned build's, else the untuned
    build's) and which build they are from (``tuned`` / ``untuned`` / ``none``)."""
    relax = profile.get("relax") if isinstance(profile, dict) else None
    if not isinstance(relax, dict) or relax.get("function") not in (function.id, function.name):
        return [], "none"
    tasks = relax.get("tasks") or {}
    for key, label in (("tuned", "tuned"), ("baseline", "untuned")):
        calls = [c for c in (tasks.get(key) or {}).get("tasks") or [] if isinstance(c, dict) and c.get("task")]
        if calls:
            return calls, label
    return [], "none"


def call_id(call: dict) -> str:
    return f"{call['task']}#{int(call.get('call') or 0)}"


def model_graph(function: Function, profile: dict | None, num_input: int | None = None,
                task_info: dict[str, dict] | None = None) -> nx.MultiDiGraph:
    """The data flow of a Relax model between its kernel calls: one node per call of a fused kernel
    (task) with its per-call time and share, one edge per value a call reads from another call (or
    an input); weights and what is folded from them are not drawn, bindings that run no kernel (a
    reshape the VM does as a builtin) pass their producers through.  ``task_info``: per task,
    ``trials`` and ``calls`` of the run.  Empty graph when the profile has no calls."""
    calls, build = profile_calls(profile, function)
    roles = relax_roles(function, num_input)
    g = nx.MultiDiGraph()
    if not calls:
        return g
    node_of: dict[str, str] = {}
    per_task: dict[str, int] = {}
    for call in calls:
        per_task[call["task"]] = per_task.get(call["task"], 0) + 1
    for call in calls:
        nid = call_id(call)
        names = [v for v in call.get("vars") or [] if v in roles.bindings]
        first = roles.bindings[names[0]].range["start"]["line"] if names else None
        info = (task_info or {}).get(call["task"]) or {}
        g.add_node(nid, kind="kernel", label=call["task"], task=call["task"], call=int(call.get("call") or 0),
                   calls=per_task[call["task"]], bindings=names, line=first, lines=call.get("lines"),
                   trials=info.get("trials"), weights_only=bool(names) and all(v in roles.folded for v in names),
                   cost={"us": call.get("us"), "share": call.get("share"),
                         "source": f"{build} program, one kernel call (VM instrument hook)"})
        for v in names:
            node_of[v] = nid
    producers: dict[str, set[str]] = {}

    def made_by(name: str) -> set[str]:
        if name in roles.bindings:
            return producers.get(name, set())
        return {_io(g, name, "input")} if name in roles.inputs else set()

    for b in function.bindings:
        if b.name in node_of:
            producers[b.name] = {node_of[b.name]}
        elif b.name in roles.folded:
            producers[b.name] = set()
        else:   # runs no kernel of its own: its value comes from its arguments' producers
            producers[b.name] = set().union(*(made_by(a) for a in roles.deps(b))) if roles.deps(b) else set()
    seen: set[tuple[str, str]] = set()
    for b in function.bindings:
        target = node_of.get(b.name)
        if target is None:
            continue
        for arg in roles.deps(b):
            for src in made_by(arg):
                if src != target and (src, target) not in seen:
                    seen.add((src, target))
                    g.add_edge(src, target, buffer=arg, shape=None, dtype=None, scope=None)
    used = {a for b in function.bindings for a in roles.deps(b)}
    for b in function.bindings:
        if b.name not in used and b.name not in roles.folded:
            sink = _io(g, b.name, "output")
            for src in producers.get(b.name, set()):
                g.add_edge(src, sink, buffer=b.name, shape=None, dtype=None, scope=None)
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
    ``{us: None, share: None, source: NO_MEASUREMENT}``.  For a Relax function the nodes are bindings:
    each gets the cost of the kernel call that runs it (``kernel``; ``shared_with`` names the other
    bindings fused into that call, whose cost is the same call's)."""
    if function.kind != "prim_func" and function.bindings:
        return _binding_costs(profile, function)
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


def _binding_costs(profile: dict | None, function: Function) -> dict[str, dict]:
    relax = profile.get("relax") if isinstance(profile, dict) else None
    calls: list = []
    label = "tuned"
    if isinstance(relax, dict) and relax.get("function") in (function.id, function.name):
        tasks = relax.get("tasks") or {}
        label = "tuned" if tasks.get("tuned") else "baseline"
        calls = [c for c in (tasks.get(label) or {}).get("tasks") or [] if isinstance(c, dict)]
    by_var = {}
    for call in calls:
        for var in call.get("vars") or []:
            by_var.setdefault(var, call)
    out = {}
    for b in function.bindings:
        call = by_var.get(b.name)
        if call is None or call.get("us") is None:
            out[b.name] = {"us": None, "share": None, "source": NO_MEASUREMENT}
            continue
        others = [v for v in call.get("vars") or [] if v != b.name]
        out[b.name] = {"us": call["us"], "share": call.get("share"), "kernel": call.get("task"), "shared_with": others,
                       "source": f"{'tuned' if label == 'tuned' else 'untuned'} program, the time of the kernel call "
                                 "that runs the binding (bindings fused into one call share it)"}
    return out


# ---------------------------------------------------------------- edge routing (the report's SVG; the
# webview has the same rules in vscode-extension/src/webview/layout.ts)

Box = tuple  # (x, y, w, h)


def corridor_y(column: list[Box], ideal: float, margin: float = 6.0, gap: float = 30.0) -> float:
    """A y where a horizontal line crosses a column without touching its boxes: ``ideal`` when clear,
    else the centre of the nearest free corridor (above the first box, between rows, below the last)."""
    boxes = sorted(column, key=lambda b: b[1])
    if not any(b[1] - margin < ideal < b[1] + b[3] + margin for b in boxes):
        return ideal
    free = [boxes[0][1] - gap / 2]
    free += [(p[1] + p[3] + q[1]) / 2 for p, q in zip(boxes, boxes[1:]) if q[1] - (p[1] + p[3]) >= 2 * margin]
    free.append(boxes[-1][1] + boxes[-1][3] + gap / 2)
    return min(free, key=lambda y: abs(y - ideal))


def route_edge(a: Box, b: Box, layers: tuple[int, int], ends: tuple[float, float],
               columns: dict[int, list[Box]], gap: float = 30.0) -> dict:
    """Path of an edge from box ``a`` (right side, y = ``ends[0]``) to box ``b`` (left side, y =
    ``ends[1]``) that never crosses a box: between columns a curve that stays in the gap, across a
    column a straight line through a free corridor.  ``layers`` = (layer of a, layer of b);
    ``columns`` = the boxes of each layer.  Returns ``{"d", "label": (x, y), "points"}``."""
    (la, lb), (y0, y1) = layers, ends
    start = (a[0] + a[2], y0)
    if lb <= la:  # no rightward direction (a cycle drawn in one column): loop through the gap on the right
        out, end = start[0] + 40, (b[0] + b[2], y1)
        d = f"M{start[0]:.1f} {y0:.1f}C{out:.1f} {y0:.1f} {out:.1f} {y1:.1f} {end[0]:.1f} {y1:.1f}"
        return {"d": d, "label": (out - 4, (y0 + y1) / 2), "points": [start, end]}
    end = (b[0], y1)
    points, d, prev = [start], f"M{start[0]:.1f} {y0:.1f}", start
    for layer in range(la + 1, lb):
        col = columns.get(layer) or []
        if not col:
            continue
        left, width = col[0][0], col[0][2]
        t = (left - start[0]) / (end[0] - start[0])
        y = corridor_y(col, y0 + t * (y1 - y0), gap=gap)
        d += _curve(prev, (left, y)) + f"L{left + width:.1f} {y:.1f}"
        points += [(left, y), (left + width, y)]
        prev = (left + width, y)
    d += _curve(prev, end)
    points.append(end)
    first = points[1]
    return {"d": d, "label": ((start[0] + first[0]) / 2, (y0 + first[1]) / 2 - 5), "points": points}


def _curve(p: tuple, q: tuple) -> str:
    mx = (p[0] + q[0]) / 2
    return f"C{mx:.1f} {p[1]:.1f} {mx:.1f} {q[1]:.1f} {q[0]:.1f} {q[1]:.1f}"
