"""``asight.loopView/1`` and ``asight.stageGraph/1`` payloads of a run."""
from __future__ import annotations

import numpy as np

from ..analysis.loopview import SOURCES, loop_view as compute_loop_view
from ..analysis.stagegraph import (build_graph, layered_positions, model_graph, num_input_of, profile_calls,
                                   stage_costs)
from ..store.caches import load_profile
from ..analysis.trace_summary import block_headline, summarize_trace
from ..analysis.trace_replay import SourceBlock, source_blocks
from .context import RunData, best_candidate, best_words, clean, run_info

LOOP_VIEW_SCHEMA = "asight.loopView/1"
STAGE_GRAPH_SCHEMA = "asight.stageGraph/1"


def best_summary(data: RunData, function=None) -> dict:
    """Per block: what the best candidate's schedule did (``trace_summary``), or {}; ``function``:
    the blocks to name (default: the run's function).  The best candidate is the run's best
    (``best_candidate``: the record its measurement chose, else the fastest while tuning)."""
    best, _ = best_candidate(data)
    if best is None:
        return {}
    rec = data.table.records[best]
    function = function if function is not None else data.function
    sources = source_blocks(function) if function is not None else []
    if not sources and data.table.blocks:   # a Relax task: its kernel's blocks, loops named (workload_loops)
        sources = [SourceBlock(b.name, list(b.loop_vars), [None] * len(b.loop_vars), list(b.reads), list(b.writes))
                   for b in data.table.blocks.values()]
    return summarize_trace(rec["insts"], rec["decisions"], sources)["blocks"]


def gpu_summary(data: RunData, index: int | None = None) -> dict | None:
    """GPU words for the run's best candidate (``best_candidate``; or ``index``): binding, memory, measured launch figures and
    the limiting factor (``analysis/gpu_words.py``); None for a CPU run."""
    from ..analysis.counters import by_candidate
    from ..analysis.default_candidate import dlight_kept
    from ..analysis.gpu_words import gpu_words
    index = best_candidate(data)[0] if index is None else index
    if index is None:
        return None
    metrics = by_candidate(data.counters)[0].get(int(data.table.trials[index])) if data.counters else None
    words = gpu_words(data.table.rows[index], data.table.stores[index], metrics, data.counters_refused)
    if words is not None:
        words["trial"] = int(data.table.trials[index])
        measured = data.meta.measured
        kept = dlight_kept(measured.raw) if measured else None
        if kept:      # the run's result is DLight's program, not this candidate (docs/gpu.md)
            words["kept"] = f"{kept['text']}: the run keeps DLight's default schedule; this is the best tuned candidate"
            words["lines"] = words["lines"] + [words["kept"]]
    return words


def loop_view(data: RunData) -> dict:
    """Per stage: distribution of scheduling strategies among the measured candidates."""
    base = {"schema": LOOP_VIEW_SCHEMA, "run": run_info(data), "notes": list(data.notes)}
    if not data.table.valid.any():
        return {**base, "status": "unavailable", "message": "the run has no measured candidate yet"}
    stages = compute_loop_view(data.table, data.function)
    best, which = best_summary(data), best_words(data, *best_candidate(data))
    for stage in stages:
        summary = best.get(stage["block"])
        stage["best"] = {"headline": block_headline(summary), "steps": summary.get("steps", []), **which} \
            if summary else None
        if data.function is not None:
            blk = next((b for b in data.function.blocks if b.name == stage["block"]), None)
            stage["range"] = blk.range if blk else None
            stage["id"] = blk.id if blk else None
    return clean({**base, "status": "ok", "function": data.function.id if data.function else data.meta.function,
                  "stages": stages, "sources": SOURCES, "gpu": gpu_summary(data),
                  "scheduled_loops_available": bool(any(data.table.loops[i] for i in np.flatnonzero(data.table.valid)))})


def stage_graph(data: RunData) -> dict:
    """The ``asight.stageGraph/1`` payload of a run (the registry's builder): ``graph_of`` its function
    with the run's profile, summary and notes.  A Relax model's graph is the whole model's, so its
    ``data`` has every task's records (``services.run_data.build_view`` loads it so for
    ``asight/stageGraph``, and ``asight loops`` and ``asight report`` call that, not this, for a model)."""
    base = {"run": run_info(data), "notes": list(data.notes)}
    if data.function is None:
        return {"schema": STAGE_GRAPH_SCHEMA, **base, "status": "unavailable",
                "message": f"source of {data.meta.function} not found ({data.meta.file})"}
    best = best_summary(data) if data.function.kind == "prim_func" else None
    return graph_of(data.function, data.text, base, load_profile(data.run), best)


def graph_of(function, text: str | None = None, base: dict | None = None, profile: dict | None = None,
             best: dict | None = None) -> dict:
    """The stage graph of a function: the one rule of every surface (the editor's panel before and after
    a run, ``asight loops``, ``asight report``).  A Relax model whose run has a per-call profile is drawn
    at its own scale: its kernel calls and their data flow (``model_stage_graph``); otherwise one node
    per block (a PrimFunc, each with what the best schedule ``best`` did to it) or per binding (a Relax
    function, weights folded), each with its measured cost when there is a run (``stage_costs``).
    ``text``: the function's source (a Relax function's ``num_input``); ``base``: ``run`` and ``notes``
    of the run (None: before any run)."""
    num_input = num_input_of(text, function) if text else None
    of_run = (base or {}).get("run") is not None
    if of_run and function.kind != "prim_func" and function.bindings:
        graph = model_stage_graph(function, profile, num_input, base)
        if graph is not None:
            return graph
        base = {**base, "notes": [*base.get("notes", []), "no per-call profile of this run yet: one box per binding "
                                  "(weights folded); profile the run to see its kernels"]}
    return stage_graph_of(function, best, base, stage_costs(profile, function) if of_run else None, num_input)


def _task_info(profile: dict | None) -> dict[str, dict]:
    return ((profile or {}).get("relax") or {}).get("task_records") or {}


def model_stage_graph(function, profile: dict | None, num_input: int | None, base: dict) -> dict | None:
    """The model's kernel calls (tasks) as nodes with per-call cost and share, their data flow as
    edges (``analysis.stagegraph.model_graph``); None when the run's profile has no calls."""
    graph = model_graph(function, profile, num_input, _task_info(profile))
    if not graph.nodes:
        return None
    _, build = profile_calls(profile, function)
    pos = layered_positions(graph)
    nodes = [{"id": name, **attrs, "layer": pos[name][0], "row": pos[name][1]} for name, attrs in graph.nodes(data=True)]
    edges = [{"source": u, "target": v, **attrs} for u, v, attrs in graph.edges(data=True)]
    tasks = {n["task"] for n in nodes if n.get("kind") == "kernel"}
    return clean({"schema": STAGE_GRAPH_SCHEMA, "notes": [], **base, "status": "ok", "level": "model",
                  "function": function.id, "kind": function.kind, "nodes": nodes, "edges": edges,
                  "summary": f"{len(nodes) - sum(1 for n in nodes if n.get('kind') == 'io')} kernel calls of "
                             f"{len(tasks)} tasks ({build} build); weights and what is folded from them not drawn",
                  "layout": "layer = longest path from the inputs; row = order within the layer",
                  "source": "the run's profile (one node per kernel call, VM instrument hook) over the source's "
                            "data flow (bindings' arguments)"})


def kernel_stage_graph(data: RunData, code: dict, profile: dict | None) -> dict:
    """One task's tuned kernel as a block-level stage graph (its scheduled TVMScript ``code``)."""
    from ..tvmscript.outline import build_outline
    outline = build_outline(code.get("text") or "", f"<task {data.task}>")
    fn = next((f for f in outline.functions if f.kind == "prim_func"), None)
    base = {"run": run_info(data), "notes": list(data.notes)}
    if fn is None:
        return {"schema": STAGE_GRAPH_SCHEMA, **base, "status": "unavailable",
                "message": f"the tuned kernel of {data.task} could not be read as TVMScript"}
    calls = [c for c in profile_calls(profile, data.function)[0] if c.get("task") == data.task]
    cost = (f"{len(calls)} call(s), {sum(c.get('us') or 0 for c in calls):.1f} µs in all per run of the model; "
            "blocks inside one fused kernel are not timed apart") if calls else "no per-call profile of this task"
    out = stage_graph_of(fn, best_summary(data, fn), base)
    out.update(level="kernel", task=data.task, function=data.function.id, kernelCost=cost,
               summary=f"blocks of {data.task}'s tuned kernel (its scheduled code)")
    return out


def stage_graph_of(function, best: dict | None = None, base: dict | None = None, costs: dict | None = None,
                   num_input: int | None = None) -> dict:
    """The stage graph payload of a source function alone (no run needed; ``run`` is then None);
    ``costs``: ``analysis.stagegraph.stage_costs`` of the run's profile (a block's ``cost``)."""
    graph = build_graph(function, num_input)
    pos = layered_positions(graph)
    nodes = []
    for name, attrs in graph.nodes(data=True):
        node = {"id": name, **attrs, "layer": pos[name][0], "row": pos[name][1]}
        if attrs.get("kind") == "block" and best and name in best:
            node["schedule"] = block_headline(best[name])
        if attrs.get("kind") in ("block", "binding") and costs is not None and name in costs:
            node["cost"] = costs[name]
        nodes.append(node)
    edges = [{"source": u, "target": v, **attrs} for u, v, attrs in graph.edges(data=True)]
    return clean({"schema": STAGE_GRAPH_SCHEMA, "run": None, "notes": [], **(base or {}), "status": "ok",
                  "function": function.id, "kind": function.kind, "nodes": nodes, "edges": edges,
                  "layout": "layer = longest path from the inputs; row = order within the layer",
                  "source": "source map (TVMScript blocks' reads/writes; Relax bindings' arguments)"})
