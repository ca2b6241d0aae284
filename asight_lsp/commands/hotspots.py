"""``asight hotspots FILE --run R``: source blocks (TIR) or bindings (Relax) ranked by tuned latency.

The latency is measured on the *tuned* program (``asight_lsp.services.profiling``: rdtsc per stage, or the
Relax VM's per-call timing); the worker describes the source and the tuned program as graphs
(``block_graph`` / ``relax_graph``) and ``analysis.matching`` maps one onto the other, so each
measured stage or kernel call lands on the source lines the user edits.  ``collect`` is the entry
point the language server shares.
"""
from __future__ import annotations

import sys

from ..analysis.hotspot_ranking import relax_hotspots, tir_hotspots
from ..analysis.matching import match_relax, match_tir
from ..errors import AsightError
from ..tvmscript.selection import check_selection, select
from ..store.runs import RunStore
from ..tvmscript.outline import build_outline
from .common import print_json, read_source

SCHEMA = "asight.hotspots/1"


def add_parser(sub):
    p = sub.add_parser("hotspots", help="source blocks/bindings ranked by tuned latency, with ranges and evidence")
    p.add_argument("file")
    p.add_argument("--run", dest="run_ref", required=True, help="run id, id prefix, run directory or 'latest'")
    p.add_argument("--func", help="function id/name (default: the function the run tuned)")
    p.add_argument("--work-dir", help="where runs are stored (default ./.asight)")
    p.add_argument("--no-cache", action="store_true", help="measure again even if the run has a cached profile")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--python", help="interpreter for the TVM worker (default: this one)")
    return p


def run(args) -> int:
    from ..engine.client import WorkerClient
    with WorkerClient(args.python) as worker:
        result = collect(args.file, args.run_ref, args.func, args.work_dir, worker, use_cache=not args.no_cache)
    if args.json:
        print_json(result)
    else:
        sys.stdout.write(render(result))
    return 0


# --------------------------------------------------------------------------- orchestration


def collect(path: str, run_ref: str, function: str | None = None, store_root: str | None = None, worker=None,
            use_cache: bool = True, text: str | None = None, profile: dict | None = None) -> dict:
    """Hotspots of ``path`` for a run: profile (cached in the run), graphs, match, ranking."""
    from ..services.profiling import profile_file
    text = read_source(path).decode("utf-8", errors="replace") if text is None else text
    run = RunStore(store_root).get(run_ref)
    meta = run.load()
    function = function or meta.function
    outline = build_outline(text, path)
    selection = select(outline, function)
    check_selection(outline, selection)
    if profile is None:
        profile = profile_file(path, function, str(run.path), store_root, worker, text=text, use_cache=use_cache)
    unit = {"text": text, "constants": outline.constants, "aliases": outline.aliases,
            "unit": {"name": selection.unit.name, "start_line": selection.unit.start_line,
                     "end_line": selection.unit.end_line, "kind": selection.unit.kind}}
    out = {"schema": SCHEMA, "file": path, "function": selection.label, "run": meta.id, "kind": profile.get("kind"),
           "parts": []}
    if profile.get("kind") == "relax":
        out["parts"].append(_relax_part(profile["relax"], unit, selection, outline, worker))
    else:
        for kernel in profile.get("kernels") or []:
            out["parts"].append(_tir_part(kernel, unit, str(run.path), outline, worker))
    return out


def _tir_part(kernel: dict, unit: dict, run_dir: str, outline, worker) -> dict:
    stages = (kernel.get("stages") or {}).get("tuned")
    if not stages or "stages" not in stages:
        why = (stages or {}).get("error") or "the profile has no per-stage latency of the tuned program"
        raise AsightError(f"{kernel['name']}: {why}")
    reply = worker.request("block_graph", {**unit, "function": kernel["name"], "run_dir": run_dir,
                                           "records": "best"}, timeout=300)
    graphs = [g for g in reply["transformed"] if "error" not in g]
    if not graphs:
        errors = [g["error"] for g in reply["transformed"]]
        raise AsightError(f"{kernel['name']}: the run's best schedule does not apply"
                          + (f" ({errors[0]})" if errors else " (no successful record)"))
    transformed = graphs[0]
    match = match_tir(reply["source"], transformed)
    part = tir_hotspots(reply["source"], match, stages["stages"])
    fn = outline.function(kernel.get("function") or "")
    ranges = {b.name: b.range for b in (fn.blocks if fn else [])}
    for entry in part["entries"]:
        entry["range"] = ranges.get(entry["name"])
        entry["source_id"] = f"{fn.id}/{entry['name']}" if fn else entry["name"]
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
    reply = worker.request("relax_graph", {**unit, "function": fn_name}, timeout=300)
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


def _match_summary(match: dict) -> dict:
    return {k: match.get(k) for k in ("method", "isomorphisms", "ambiguous", "inlined", "notes", "unmatched",
                                      "unmatched_source", "trials")}


# --------------------------------------------------------------------------- human output


def _us(value) -> str:
    if value is None:
        return "-"
    return f"{value / 1e3:.3f} ms" if value >= 1000 else f"{value:.1f} us"


def _lines(entry: dict) -> str:
    rng = entry.get("range")
    if rng:
        return f"{rng['start']['line'] + 1}-{rng['end']['line'] + 1}"
    lines = entry.get("lines")
    return f"{lines[0]}-{lines[1]}" if lines else "-"


def _behind(entry: dict) -> str:
    items = entry.get("transformed") or []
    if entry.get("calls") is not None:
        return ", ".join(entry["calls"]) or "-"
    return ", ".join(t["block"] if t["role"] == "compute" else f"{t['block']} ({t['role']})" for t in items) or "-"


def render(result: dict) -> str:
    lines = [f"hotspots of {result['function']} ({result['kind']}), run {result['run']}"]
    for part in result["parts"]:
        lines.append(f"{part['name']}: {_us(part['measured_us'])} measured"
                     + (f" (whole program {_us(part['whole_us'])})" if part.get("whole_us") else ""))
        lines.append(f"  {'#':>2}  {'source':<16} {'latency':>10} {'share':>6}  {'lines':<8} {'match':<14} behind it")
        for e in part["entries"]:
            share = f"{e['share'] * 100:5.1f}%" if e.get("share") is not None else "     -"
            split = f" [split by {e['split']}]" if e.get("split") in ("flops", "equal") else ""
            inl = f" [inlined into {e['inlined_into']}]" if e.get("inlined_into") else ""
            lines.append(f"  {e['rank']:>2}  {e['name']:<16} {_us(e['us']):>10} {share}  {_lines(e):<8} "
                         f"{e.get('match') or '-':<14} {_behind(e)}{split}{inl}")
        for u in part["unattributed"]:
            where = f"stage {u['stage']} {u['blocks']}" if "stage" in u else f"{u['task']}#{u['call']}"
            lines.append(f"  unattributed: {where}: {_us(u['us'])}")
        if part.get("warning"):
            lines.append(f"  warning: {part['warning']}")
    lines.append(f"note: {result['parts'][0]['split_rule']}" if result["parts"] else "no kernels profiled")
    return "\n".join(lines) + "\n"
