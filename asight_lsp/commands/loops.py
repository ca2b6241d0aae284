"""``asight loops --run R``: loop view (strategy frequencies per stage) and stage graph of a run."""
from __future__ import annotations

import sys

from ..errors import AsightError
from .common import print_json
from .space import add_run_options, load


def add_parser(sub):
    p = sub.add_parser("loops", help="loop view (scheduling strategies per stage) and stage graph of a run")
    add_run_options(p)
    p.add_argument("--json", action="store_true",
                   help='print {"loopView": asight.loopView/1, "stageGraph": asight.stageGraph/1}')
    return p


def run(args) -> int:
    from ..views.loops import loop_view
    data = load(args)
    view, graph = loop_view(data), run_stage_graph(data)
    if view["status"] != "ok":
        raise AsightError(view["message"])
    if args.json:
        print_json({"loopView": view, "stageGraph": graph})
    else:
        sys.stdout.write(render(view, graph))
    return 0


def run_stage_graph(data) -> dict:
    """The run's stage graph as the editor draws it.  A Relax model's is the whole model's (its kernel
    calls and their data flow, whatever task ``--task`` shows in the loop view): the server's builder,
    ``build_view("stageGraph")``, on the run's source (its file, else its snapshot).  A PrimFunc's is
    ``stage_graph(data)``: the run's function, or the task shown."""
    from ..views.loops import stage_graph
    if data.meta.kind != "relax":
        return stage_graph(data)
    from ..services.run_data import build_view
    return build_view("stageGraph", data.run.path, text=data.text if data.text is not None else _snapshot(data))


def _snapshot(data) -> str | None:
    """The run's source snapshot when its file cannot be read (``lookup.run_source``), else None."""
    from ..services.lookup import run_source
    try:
        return run_source(data.run, data.meta)[0]
    except AsightError:
        return None


def _dist(items: list[dict], limit: int = 4) -> str:
    """``64 40% (median 0.47 ms), 16 18% (median 0.53 ms)``: share of candidates and their median latency."""
    from ..views.text import format_latency

    return ", ".join(f"{d['value']} {d['share'] * 100:.0f}%"
                     + (f" (median {format_latency(d['median_us'])})" if d.get("median_us") is not None else "")
                     for d in items[:limit]) or "-"


def _cost(node: dict) -> str:
    cost = node.get("cost")
    if not cost:
        return ""
    if cost.get("us") is None:
        return "no measurement"
    from ..views.text import format_latency

    share = f", {cost['share'] * 100:.1f}% of the program" if cost.get("share") is not None else ""
    return f"{format_latency(cost['us'])}{share}" + (f" (kernel {cost['kernel']})" if cost.get("kernel") else "")


def render(view: dict, graph: dict) -> str:
    from ..views.text import best_trial_text

    task = f" task {view['run']['task']}" if view["run"].get("task") else ""
    lines = [f"loop view of {view['function']}{task} (run {view['run']['id']}, {view['run']['measured']} candidates)"]
    for st in view["stages"]:
        kinds = f" [{st['iter_kinds']}]" if st.get("iter_kinds") else ""
        lines.append(f"stage {st['block']}{kinds}")
        for var, dist in st["strategies"]["tile"].items():
            lines.append(f"  tile {var}: {_dist(dist)}")
        for name in ("vectorize", "parallel", "unroll", "cache", "compute_at"):
            if name in st["strategies"]:     # a GPU stage has no CPU parallel loops
                lines.append(f"  {name}: {_dist(st['strategies'][name])}")
        if st["loop_share"]:
            lines.append("  share of loops: " + ", ".join(f"{k} {v * 100:.0f}%" for k, v in st["loop_share"].items()))
        if st.get("best"):
            which = best_trial_text(st["best"])
            lines.append(f"  best schedule{f' ({which})' if which else ''}: {st['best']['headline'] or '-'}")
    if view.get("gpu"):
        lines.append(f"GPU (best, trial {view['gpu']['trial']}):")
        lines += [f"  {line}" for line in view["gpu"]["lines"]]
    lines += [f"note: {note}" for note in graph.get("notes") or [] if note not in view.get("notes", [])]
    if graph["status"] == "ok" and graph.get("level") == "model":
        lines += _model_graph(graph)
    elif graph["status"] == "ok":
        lines.append(f"stage graph ({len(graph['nodes'])} nodes, {len(graph['edges'])} buffer edges):")
        for n in graph["nodes"]:
            if n.get("cost"):
                lines.append(f"  {n['id']}: {_cost(n)}")
        for e in graph["edges"]:
            lines.append(f"  {e['source']} --{e['buffer']}--> {e['target']}")
    else:
        lines.append(f"stage graph: {graph['message']}")
    return "\n".join(lines) + "\n"


def _model_graph(graph: dict) -> list[str]:
    """A model's stage graph: its kernel calls (task, which call, trials, bindings and lines, time and
    share) in the graph's order, then the tensors one call passes to another (the editor's boxes and
    arrows)."""
    kernels = [n for n in graph["nodes"] if n.get("kind") == "kernel"]
    lines = [f"stage graph of {graph['function']}: {graph.get('summary') or f'{len(kernels)} kernel calls'}",
             f"kernel calls ({len(kernels)}):"]
    for n in kernels:
        calls = n.get("calls") or 1
        which = f"call {(n.get('call') or 0) + 1} of {calls}" if calls > 1 else "one call"
        trials = "weights only" if n.get("weights_only") else \
            f"{n['trials']} trial{'s' if n['trials'] != 1 else ''}" if n.get("trials") is not None else ""
        where = ", ".join(n.get("bindings") or [])
        if n.get("lines"):
            first, last = n["lines"][0] + 1, n["lines"][-1] + 1
            where += f" (line{f's {first}-{last}' if last != first else f' {first}'})"
        cost = _cost(n)
        lines.append(f"  {n['id']}: " + " · ".join(p for p in (which, trials, where, cost) if p))
    lines.append(f"data flow ({len(graph['edges'])} edges):")
    lines += [f"  {e['source']} --{e['buffer']}--> {e['target']}" for e in graph["edges"]]
    return lines
