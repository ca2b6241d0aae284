"""Hotspots of a run (TVM-free orchestration): source blocks (TIR) or bindings (Relax) ranked by
tuned latency.

The latency is measured on the *tuned* program (``services/profiling.py``: rdtsc per stage, or the
Relax VM's per-call timing); the worker describes the source and the tuned program as graphs
(``block_graph`` / ``relax_graph``) and ``analysis.matching`` maps one onto the other, so each
measured stage or kernel call lands on the source lines the user edits.  The CLI, the language
server and the report share ``collect``.
"""
from __future__ import annotations

import copy
import hashlib
import json
import threading
from collections import OrderedDict

from ..analysis.attribution import before_after, block_verbs
from ..analysis.hotspot_ranking import relax_hotspots, scale_to_headline, tir_hotspots
from ..analysis.trace_replay import source_blocks
from ..analysis.trace_summary import summarize_trace
from ..analysis.matching import match_relax, match_tir
from ..engine import wire
from ..errors import AsightError
from ..store.caches import archived_profiles, load_graphs, store_graphs
from ..store.runs import Run, RunStore, read_records
from ..tvmscript.outline import build_outline
from ..tvmscript.selection import check_selection, select
from ..views.measured import others_text, shown_measurement
from .lookup import read_text, run_source, selection_view
from .profiling import ProfileOptions, profile_file, profile_run


SCHEMA = "asight.hotspots/1"


def collect(path: str, run_ref: str, function: str | None = None, store_root: str | None = None, worker=None,
            use_cache: bool = True, text: str | None = None, profile: dict | None = None) -> dict:
    """Hotspots of ``path`` for a run: profile (cached in the run), graphs, match, ranking."""
    text = read_text(path) if text is None else text
    outline = build_outline(text, path)
    run, selection = _run_of(path, text, outline, run_ref, function, store_root)
    meta = run.load()
    if profile is None:   # the run's shown profile when it is current (measured only when there is none)
        profile = profile_file(path, meta.function, str(run.path), store_root, worker, text=text, use_cache=use_cache,
                               options=ProfileOptions(by="hotspots"))
    unit = {**wire.source_params(text, outline, selection.unit), "weights": wire.weights_beside(path)}
    out = {"schema": SCHEMA, "file": path, "function": selection.label, "run": meta.id, "kind": profile.get("kind"),
           "parts": [], "measurement": shown_measurement(profile, [e["profile"] for e in archived_profiles(run)])}
    kept_aside = others_text(out["measurement"])   # a newer, noisier measurement the view does not show
    out["notes"] = [note for note in (profile.get("note"), kept_aside) if note]   # stale, still tuning, ...
    if profile.get("kind") == "relax":
        out["parts"].append(_relax_part(profile["relax"], {**unit, "run_dir": str(run.path)}, selection, outline,
                                        worker))
    else:
        for kernel in profile.get("kernels") or []:
            headline = (kernel.get("tuned") or {}).get("median_us")
            out["parts"].append(_tir_part(kernel, unit, str(run.path), outline, worker, headline))
    return out


def _run_of(path: str, text: str, outline, run_ref: str, function: str | None, store_root: str | None):
    """``(run, selection)``: ``latest`` is the run the catalogue shows for the file's function (as for every
    command on a file), not the store's newest; another ref names its run, whose function is the default."""
    if run_ref == "latest":
        selection = select(outline, function)
        check_selection(outline, selection, "read")
        return Run(selection_view(store_root, path, selection, text).run_dir), selection
    run = RunStore(store_root).get(run_ref)
    selection = select(outline, function or run.load().function)
    check_selection(outline, selection, "read")
    return run, selection


def prepare_model(run: Run, worker) -> dict:
    """Once a model is tuned (``asight tune``, the editor's tune): its per-call profile and the graphs its
    hotspots match, measured now and kept in the run, so its hotspots, inlay hints and stage graph open
    at once in the CLI and the editor.  Returns the profile."""
    profile = profile_run(run, worker)
    keep_graphs(run, worker, profile)
    return profile


def keep_graphs(run: Run, worker, profile: dict) -> None:
    """The hotspots of a run's kept ``profile``, computed once so their graphs are kept in the run."""
    meta = run.load()
    text, path = run_source(run, meta)
    collect(path, str(run.path), meta.function, str(run.path.parent.parent), worker, text=text, profile=profile)


def _tir_part(kernel: dict, unit: dict, run_dir: str, outline, worker, headline_us: float | None) -> dict:
    stages = (kernel.get("stages") or {}).get("tuned")
    if not stages or "stages" not in stages:
        why = (stages or {}).get("error") or "the profile has no per-stage latency of the tuned program"
        raise AsightError(f"{kernel['name']}: {why}")
    profiled = (kernel.get("best") or {}).get("latency_us")   # match the record the profile measured
    reply = worker.request(wire.BLOCK_GRAPH, {**unit, "function": kernel["name"], "run_dir": run_dir,
                                           "records": "best", "latency_us": profiled}, timeout=300)
    graphs = [g for g in reply["transformed"] if "error" not in g]
    if not graphs:
        errors = [g["error"] for g in reply["transformed"]]
        raise AsightError(f"{kernel['name']}: the run's best schedule does not apply"
                          + (f" ({errors[0]})" if errors else " (no successful record)"))
    transformed = graphs[0]
    match = match_tir(reply["source"], transformed, transformed.get("lineage"))
    part = scale_to_headline(tir_hotspots(reply["source"], match, stages["stages"]), headline_us)
    fn = outline.function(kernel.get("function") or "")
    ranges = {b.name: b.range for b in (fn.blocks if fn else [])}
    changes = {c["name"]: c for c in block_changes(kernel, run_dir, fn)}
    for entry in part["entries"]:
        entry["range"] = ranges.get(entry["name"])
        entry["source_id"] = f"{fn.id}/{entry['name']}" if fn else entry["name"]
        entry["change"] = changes.get(entry["name"])
    part["changes"] = list(changes.values())
    best = kernel.get("best") or {}
    record = transformed.get("record") or {}
    part.update(name=kernel["name"], function=fn.id if fn else kernel["name"], whole_us=stages.get("whole_us"),
                record=record, match=_match_summary(match), workload_match=reply.get("workload_match"))
    if best.get("latency_us") and record.get("latency_us") and abs(best["latency_us"] - record["latency_us"]) > 1e-6:
        part["warning"] = "the profiled record and the matched record differ (the run changed in between?)"
    return part


def _relax_part(relax: dict, unit: dict, selection, outline, worker) -> dict:
    calls = ((relax.get("tasks") or {}).get("tuned") or {}).get("tasks")
    if not calls:
        raise AsightError("the profile has no per-call latency of the tuned program (no tuned task yet?)")
    fn_name = selection.member or "main"
    reply = relax_graphs(worker, {**unit, "function": fn_name})
    match = match_relax(reply["source"], reply["transformed"])
    part = relax_hotspots(reply["source"], reply["transformed"], match, calls)
    fn = next((f for f in outline.functions if f.kind == "relax_function" and f.name == fn_name
               and f.unit == selection.unit.name), None)
    ranges = {b.name: b.range for b in (fn.bindings if fn else [])}
    for entry in part["entries"]:
        entry["range"] = ranges.get(entry["name"])
        entry["source_id"] = f"{fn.id}/{entry['name']}" if fn else entry["name"]
    part.update(name=fn_name, function=fn.id if fn else fn_name,
                whole_us=((relax.get("tasks") or {}).get("tuned") or {}).get("whole_us"),
                match={"method": "anchored subgraph isomorphism per call site",
                       "sites": [{k: s[k] for k in ("site", "function", "bindings", "match")} for s in match["sites"]],
                       "unmatched": match["unmatched"], "unmatched_source": match["unmatched_source"]})
    return part


_GRAPHS: OrderedDict = OrderedDict()      # key -> the worker's RELAX_GRAPH reply (a few models' worth)
_GRAPHS_KEPT = 4
_GRAPHS_LOCK = threading.Lock()


def relax_graphs(worker, params: dict) -> dict:
    """The worker's graphs of a Relax function, source and transformed, kept by the unit's text, the
    function and the weights' digest, in this process and in the run (``params["run_dir"]``, the user's
    own: ``store.caches.load_graphs``): building them runs the model's pipeline (about 2 s for 21
    kernels, 3.8 s for a 28-kernel DenseNet block at full size), and every hotspots panel of the run,
    in this server or the next, needs the same."""
    key = hashlib.sha256(json.dumps(params, sort_keys=True, default=str).encode()
                         + (wire.weights_digest(params.get("weights")) or "").encode()).hexdigest()
    with _GRAPHS_LOCK:
        kept = _GRAPHS.get(key)
        if kept is not None:
            _GRAPHS.move_to_end(key)
            return copy.deepcopy(kept)
    run_dir = params.get("run_dir")
    reply = load_graphs(run_dir, key) if run_dir else None
    if reply is None:
        reply = worker.request(wire.RELAX_GRAPH, params, timeout=300)
        if run_dir:
            store_graphs(run_dir, key, reply)
    with _GRAPHS_LOCK:
        _GRAPHS[key] = copy.deepcopy(reply)
        while len(_GRAPHS) > _GRAPHS_KEPT:
            _GRAPHS.popitem(last=False)
    return reply


def _match_summary(match: dict) -> dict:
    return {k: match.get(k) for k in ("method", "isomorphisms", "ambiguous", "inlined", "notes", "unmatched",
                                      "unmatched_source", "trials")}


# --------------------------------------------------------------------------- before → after per block


def block_changes(kernel: dict, run_dir: str | None, fn) -> list[dict]:
    """``analysis.attribution.before_after`` of a profiled kernel, each block with ``schedule``: what
    the profiled record's trace did to it (``["split", "parallel", "vectorize"]``)."""
    changes = before_after(kernel)
    verbs = schedule_of(run_dir, fn, (kernel.get("best") or {}).get("latency_us")) if run_dir and fn else {}
    for change in changes:
        change["schedule"] = verbs.get(change["name"], [])
    return changes


def schedule_of(run_dir: str, fn, latency_us: float | None) -> dict[str, list[str]]:
    """``{source block: verbs}`` of the run's record the profile measured (same latency; else the
    fastest), read from the JSON database's trace without TVM (``trace_summary``)."""
    from .codeview import best_trial
    records = read_records(run_dir)
    record = best_trial(records, latency_us)
    if record is None:
        valid = [r for r in records if r["latency_us"] is not None]
        record = min(valid, key=lambda r: r["latency_us"]) if valid else None
    if record is None:
        return {}
    summary = summarize_trace(record["insts"], record["decisions"], source_blocks(fn))
    return {name: block_verbs(s) for name, s in summary["blocks"].items()}


def add_changes(profile: dict, path: str, text: str | None = None) -> dict:
    """``profile`` with ``changes`` (``block_changes``) on each TIR kernel; for ``asight profile``."""
    run_dir = (profile.get("run") or {}).get("dir")
    outline = build_outline(read_text(path) if text is None else text, path)
    for kernel in profile.get("kernels") or []:
        if (kernel.get("blocks") or {}).get("tuned"):
            kernel["changes"] = block_changes(kernel, run_dir, outline.function(kernel.get("function") or ""))
    return profile
