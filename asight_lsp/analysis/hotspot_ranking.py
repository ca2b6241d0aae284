"""Rank source blocks (TIR) or bindings (Relax) by the latency measured on the tuned program.

Pure functions over plain data: the graphs of ``asight_lsp.worker.tir_graphs`` / ``relax_graphs``, a match from
``asight_lsp.analysis.matching`` and the per-stage / per-call latencies of a profile
(``asight_lsp.services.profiling``: a stage names the transformed blocks it runs; a Relax call names its kernel
and which call of that kernel it is).

Attribution rule (stated in every result): a stage (or kernel call) that runs one source block gets
all its time; one that runs several — blocks fused by compute_at / reverse_compute_at, blocks
inlined into another, bindings fused into one kernel — splits its time by the source blocks'
FLOPs share ("flops"), or equally when none has FLOPs ("equal").  Cache copies, init blocks and
rfactor blocks count for the block they serve.
"""
from __future__ import annotations

SPLIT_RULE = ("a stage or kernel call running several source blocks/bindings splits its time by their "
              "FLOPs share (equal shares when no FLOPs are known); cache copies, init and rfactor blocks "
              "count for the block they serve")


def _stage_block_names(stage: dict) -> list[str]:
    return [b["name"] if isinstance(b, dict) else str(b) for b in stage.get("blocks") or []]


def _weights(ids: list[str], flops: dict) -> tuple[list[float], str]:
    values = [float(flops.get(i) or 0.0) for i in ids]
    if len(ids) == 1:
        return [1.0], "whole"
    if sum(values) > 0:
        return values, "flops"
    return [1.0] * len(ids), "equal"


def _entry(node: dict, match: dict) -> dict:
    return {"id": node["id"], "name": node.get("name", node["id"]), "us": 0.0, "share": None,
            "lines": node.get("realize_lines") or node.get("lines"), "stages": [], "split": None,
            "shared_with": [], "transformed": match.get("transformed", []), "match": match.get("match"),
            "evidence": match.get("evidence", []), "inlined_into": match.get("inlined_into"),
            "flops": node.get("flops")}


def tir_hotspots(source: dict, match: dict, stages: list[dict], total_us: float | None = None) -> dict:
    """Per source block latency from the tuned program's stages.

    Parameters
    ----------
    source : the source graph (``block_graph``'s ``source``).
    match : ``matching.match_tir(source, transformed)``.
    stages : ``[{"index", "us", "blocks": [name | {"name": ...}]}]`` of the same transformed program.
    total_us : the whole program's latency; defaults to the sum of the stages.
    """
    blocks = [n for n in source["nodes"] if n.get("kind") == "block"]
    flops = {n["id"]: n.get("flops") for n in blocks}
    entries = {n["id"]: _entry(n, match["source"].get(n["id"], {})) for n in blocks}
    unattributed = []
    for stage in stages:
        names = _stage_block_names(stage)
        ids = []
        for name in names:
            for sid in (match["transformed"].get(name) or {}).get("source", []):
                if sid not in ids and sid in entries:
                    ids.append(sid)
        index = stage.get("index", stages.index(stage))
        if not ids:
            unattributed.append({"stage": index, "us": float(stage["us"]), "blocks": names})
            continue
        weights, how = _weights(ids, flops)
        for sid, weight in zip(ids, weights):
            entry = entries[sid]
            entry["us"] += float(stage["us"]) * weight / sum(weights)
            entry["stages"].append(index)
            entry["split"] = how if entry["split"] in (None, "whole") else entry["split"]
            entry["shared_with"] += [o for o in ids if o != sid and o not in entry["shared_with"]]
    return _ranked("tir", list(entries.values()), unattributed, stages, total_us)


def _ranked(kind: str, entries: list[dict], unattributed: list[dict], parts: list[dict],
            total_us: float | None) -> dict:
    measured = sum(float(p["us"]) for p in parts)
    total = total_us if total_us else measured
    for entry in entries:
        entry["share"] = entry["us"] / total if total else None
    entries.sort(key=lambda e: -e["us"])
    for rank, entry in enumerate(entries, 1):
        entry["rank"] = rank
    return {"kind": kind, "total_us": total, "measured_us": measured, "entries": entries,
            "unattributed": unattributed, "unattributed_us": sum(u["us"] for u in unattributed),
            "split_rule": SPLIT_RULE}


def relax_hotspots(source: dict, transformed: dict, match: dict, calls: list[dict],
                   total_us: float | None = None) -> dict:
    """Per source binding latency from per-call kernel latencies.

    ``calls`` are ``[{"task": kernel name, "call": k, "us"}]``: the k-th call of a kernel in a run is
    the k-th call site of that kernel in ``transformed["sites"]`` (execution order).
    """
    bindings = [n for n in source["nodes"] if n.get("kind") == "binding"]
    nodes = {n["id"]: n for n in transformed["nodes"]}
    entries = {}
    for n in bindings:
        m = match["source"].get(n["id"], {})
        entry = _entry(n, {"match": m.get("match", "unmatched"), "evidence": m.get("evidence", []),
                           "transformed": [m["transformed"]] if m.get("transformed") else []})
        entry.update(op=n.get("op"), task=m.get("function"), site=m.get("site"), calls=[])
        entries[n["id"]] = entry
    sites_by_fn: dict[str, list[dict]] = {}
    for site in match["sites"]:
        sites_by_fn.setdefault(site["function"], []).append(site)
    unattributed = []
    for call in calls:
        sites = sites_by_fn.get(call["task"], [])
        k = int(call.get("call") or 0)
        site = sites[k] if k < len(sites) else None
        ids = [b for b in (site or {}).get("bindings", []) if b in entries]
        if not ids:
            unattributed.append({"task": call["task"], "call": k, "us": float(call["us"])})
            continue
        inner = {s: t for t, s in site["nodes"].items() if s is not None}
        weights, how = _weights(ids, {s: (nodes.get(inner.get(s)) or {}).get("flops") for s in ids})
        for sid, weight in zip(ids, weights):
            entry = entries[sid]
            entry["us"] += float(call["us"]) * weight / sum(weights)
            entry["calls"].append(f"{call['task']}#{k}")
            entry["split"] = how
            entry["shared_with"] = [o for o in ids if o != sid]
    return _ranked("relax", list(entries.values()), unattributed, calls, total_us)


def scale_to_headline(part: dict, headline_us: float | None) -> dict:
    """A TIR part's latencies as shares of the measurement record's tuned latency (the stages were
    timed instrumented): entries and unattributed stages then add up to the headline; the
    instrumented times stay in ``stage_us``."""
    measured = part.get("measured_us")
    if not headline_us or not measured:
        return part
    factor = headline_us / measured
    for item in part["entries"] + part["unattributed"]:
        item["stage_us"] = item["us"]
        item["us"] *= factor
    part["unattributed_us"] *= factor
    part.update(total_us=headline_us, headline_us=headline_us)
    for entry in part["entries"]:
        entry["share"] = entry["us"] / headline_us
    return part
