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
    from ..views.loops import loop_view, stage_graph
    data = load(args)
    view, graph = loop_view(data), stage_graph(data)
    if view["status"] != "ok":
        raise AsightError(view["message"])
    if args.json:
        print_json({"loopView": view, "stageGraph": graph})
    else:
        sys.stdout.write(render(view, graph))
    return 0


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
    if graph["status"] == "ok":
        lines.append(f"stage graph ({len(graph['nodes'])} nodes, {len(graph['edges'])} buffer edges):")
        for n in graph["nodes"]:
            if n.get("cost"):
                lines.append(f"  {n['id']}: {_cost(n)}")
        for e in graph["edges"]:
            lines.append(f"  {e['source']} --{e['buffer']}--> {e['target']}")
    else:
        lines.append(f"stage graph: {graph['message']}")
    return "\n".join(lines) + "\n"
