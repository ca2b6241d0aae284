"""A raw profile from the worker tied to the source (pure): stages -> source blocks, kernel calls ->
Relax bindings, FLOPs and GFLOP/s, achieved vs peak.

The worker reports what TVM sees (transformed block names, TVMScript line numbers from spans,
task and variable names); ``finish_profile`` ties them to source ids and ranges:

* each rdtsc stage of the untuned/tuned program -> the source blocks it runs (``block_origin``),
  and from there per-source-block latency; blocks inlined by the schedule go to their consumer;
* each Relax kernel call -> the source bindings it computes;
* GFLOP/s (FLOPs from the source map, cross-checked with TVM's estimate), achieved vs peak,
  modelled bytes and reuse and cachegrind misses (``memory_model``).

Every figure carries a ``source`` saying where it came from.
"""
from __future__ import annotations

import re

from ..tvmscript.model import Block, Function, Outline
from ..tvmscript.selection import Selection
from .block_origin import match_block
from .memory_model import cachegrind_by_block, memory_figures
from .peak import exceeded, peak_figures, peak_fraction

PROFILE_SCHEMA = "asight.profile/1"


SOURCE_MAP_FLOPS = "source map: per-block op count x iterations (tvmscript.model.Block.flops)"


def finish_profile(raw: dict, outline: Outline, selection: Selection, run: dict | None = None,
                   record: dict | None = None) -> dict:
    """The worker's raw measurements tied to source ids and ranges, with derived figures.

    ``run`` is the summary of the run whose best schedule was measured (None: untuned only);
    ``record`` the measurement record (docs/measurement.md) every latency figure is read from."""
    host = raw.get("host") or {}
    peak = peak_figures(host)
    profile = {"schema": PROFILE_SCHEMA, "function": selection.label, "kind": raw.get("kind"),
               "target": raw.get("target"), "host": host, "peak": peak, "measurement": record,
               "run": run, "options": raw.get("options"), "seconds": raw.get("seconds")}
    check = (record or {}).get("check") or (raw.get("headline") or {}).get("check")
    if raw.get("kind") == "relax":
        fn = _relax_function(outline, selection, raw["relax"].get("name"))
        profile["relax"] = finish_relax(raw["relax"], fn, record)
        parts = [profile["relax"]]
    else:
        kernels = raw.get("kernels", [])
        profile["kernels"] = [finish_kernel(k, _kernel_function(outline, selection, k["name"]), peak,
                                            _timing(record, k["name"], len(kernels) == 1)) for k in kernels]
        parts = profile["kernels"]
    profile["summary"] = summarize(parts, peak, record, check)
    profile["peak"] = exceeded(peak, _achieved(parts, profile["summary"]))
    return profile


def _achieved(parts: list[dict], summary: dict) -> list[tuple[str, float | None]]:
    """Every GFLOP/s the profile measured, by name (to check none is above the peak)."""
    rates = [(f"{p.get('name', 'kernel')} ({label})", g) for p in parts if isinstance(p.get("gflops"), dict)
             for label, g in p["gflops"].items() if label != "source" and isinstance(g, (int, float))]
    return rates + [(f"whole function ({label})", summary.get(f"gflops_{label}")) for label in ("baseline", "tuned")]


def _timing(record: dict | None, name: str, only: bool) -> dict:
    """A kernel's untuned and tuned figures in the record (the whole record when it is the only one)."""
    if not record:
        return {}
    if only:
        return {"baseline": record.get("untuned"), "tuned": record.get("tuned")}
    parts = record.get("parts") or {}
    return {"baseline": parts.get(f"untuned {name}"), "tuned": parts.get(f"tuned {name}")}


def _kernel_function(outline: Outline, selection: Selection, name: str) -> Function | None:
    if len(selection.functions) == 1:
        return selection.functions[0]
    return next((f for f in selection.functions if f.name == name), None)


def _relax_function(outline: Outline, selection: Selection, name: str | None) -> Function | None:
    relax_fns = [f for f in selection.functions if f.kind == "relax_function"]
    return next((f for f in relax_fns if f.name == (name or "main")), relax_fns[0] if relax_fns else None)


def summarize(parts: list[dict], peak: dict, record: dict | None, check: dict | None) -> dict:
    """Whole-function figures, all from the measurement record."""
    record = record or {}
    base = (record.get("untuned") or {}).get("median_us")
    tuned = (record.get("tuned") or {}).get("median_us")
    flops = [p.get("flops", {}).get("value") for p in parts]
    flops_total = sum(flops) if flops and all(f is not None for f in flops) else None
    speedup = record.get("speedup") or {}
    out = {"baseline_us": base, "tuned_us": tuned, "speedup": speedup.get("estimate"), "ci": speedup.get("ci"),
           "verdict": record.get("verdict"), "check_ok": check.get("ok") if check else None, "flops": flops_total,
           "busy": (record.get("load") or {}).get("busy"), "source": "the run's measurement record"}
    for label, us in (("baseline", base), ("tuned", tuned)):
        out[f"gflops_{label}"] = flops_total / us / 1e3 if flops_total and us else None
        out[f"peak_fraction_{label}"] = peak_fraction(out[f"gflops_{label}"], peak)
    return out


def finish_kernel(raw: dict, fn: Function | None, peak: dict, timing: dict | None = None) -> dict:
    """One PrimFunc: latencies (from the record), FLOPs and GFLOP/s, stages and blocks tied to the source."""
    timing = timing or {}
    blocks = [b for b in (fn.blocks if fn else []) if b.name != "root"]
    flops = kernel_flops(blocks, raw.get("flops"))
    out = {"name": raw["name"], "function": fn.id if fn else raw["name"], "range": fn.range if fn else None,
           "baseline": timing.get("baseline"), "tuned": timing.get("tuned"), "best": raw.get("best"),
           "notes": list(raw.get("notes") or []), "flops": flops}
    base, tuned = (out["baseline"] or {}).get("median_us"), (out["tuned"] or {}).get("median_us")
    out["speedup"] = base / tuned if base and tuned else None
    out["gflops"] = {label: (flops["value"] / us / 1e3 if flops["value"] and us else None)
                     for label, us in (("baseline", base), ("tuned", tuned))}
    out["gflops"]["source"] = "FLOPs / median latency of the measurement record"
    out["peak_fraction"] = {label: peak_fraction(g, peak) for label, g in out["gflops"].items() if label != "source"}
    out["stages"], out["blocks"] = {}, {}
    for label, stage_data in (raw.get("stages") or {}).items():
        if "error" in stage_data:
            out["stages"][label] = stage_data
            continue
        out["stages"][label] = map_stages(stage_data, blocks)
        whole = base if label == "baseline" else tuned
        out["blocks"][label] = attribute_blocks(out["stages"][label]["stages"], blocks, fn.id if fn else "", whole)
    out["memory"] = {label: (memory_figures(f, blocks) if "rows" in f else f)
                     for label, f in (raw.get("features") or {}).items()}
    if raw.get("cachegrind"):
        out["cachegrind"] = {label: (cachegrind_by_block(c, blocks) if "lines" in c else c)
                             for label, c in raw["cachegrind"].items()}
    return out


def kernel_flops(blocks: list[Block], tvm_estimate: float | None) -> dict:
    """FLOPs of a function: the source map's per-block counts, else TVM's estimate."""
    counted = [b.flops for b in blocks]
    if counted and all(f is not None for f in counted):
        return {"value": float(sum(counted)), "source": SOURCE_MAP_FLOPS, "tvm_estimate": tvm_estimate}
    return {"value": tvm_estimate, "source": "tvm.s_tir.analysis.estimate_tir_flops", "tvm_estimate": tvm_estimate}


def map_stages(data: dict, blocks: list[Block]) -> dict:
    """Stage list with each transformed block tied to a source block id and 0-based lines."""
    total = data.get("sum_us") or 0.0
    stages = []
    for stage in data["stages"]:
        mapped, ids = [], []
        for blk in stage["blocks"]:
            src, evidence = match_block(blk["name"], blk.get("store_lines") or [], blk.get("realize_lines"), blocks)
            mapped.append({"name": blk["name"], "source": src.id if src else None, "evidence": evidence})
            if src is not None and src.id not in ids:
                ids.append(src.id)
        srcs = [b for b in blocks if b.id in ids]
        lines = [min(b.range["start"]["line"] for b in srcs), max(b.range["end"]["line"] for b in srcs)] if srcs else None
        stages.append({"index": stage["index"], "us": stage["us"], "p25_us": stage.get("p25_us"),
                       "p75_us": stage.get("p75_us"), "share": stage["us"] / total if total else None,
                       "blocks": mapped, "source_blocks": ids, "lines": lines, "loop_kinds": stage.get("loop_kinds")})
    whole = data.get("whole_us")
    return {"stages": stages, "sum_us": data.get("sum_us"), "whole_us": whole, "ratio": data.get("ratio"),
            "plain_us": data.get("plain_us"), "intrusion": data.get("intrusion"),
            "intrusion_source": data.get("intrusion_source"),
            "outside_us": (whole - total) if whole is not None else None, "calls": data.get("calls"),
            "source": data.get("source"), "whole_source": data.get("whole_source")}


def attribute_blocks(stages: list[dict], blocks: list[Block], fn_id: str = "", whole_us: float | None = None) -> list[dict]:
    """Per source block: latency, share, stage and how it was attributed.

    A stage that runs one source block gives it its time.  A stage that fused several (compute_at,
    reverse_compute_at) splits its time by the blocks' FLOPs (an estimate, flagged).  A block found
    in no stage was inlined: it points at the consumer block whose stage computes it.  With
    ``whole_us`` (the measurement record's latency of the program) a block's ``us`` is its share of
    it, so the blocks add up to the headline; the instrumented time stays in ``stage_us``.
    """
    total = sum(s["us"] for s in stages) or None
    out: dict[str, dict] = {}
    for stage in stages:
        ids = stage["source_blocks"]
        members = [b for b in blocks if b.id in ids]
        weights = [max(b.flops or 0, 0) for b in members]
        split = len(members) > 1
        if not sum(weights):
            weights = [1] * len(members)
        for blk, weight in zip(members, weights):
            us = stage["us"] * weight / sum(weights)
            entry = out.setdefault(blk.id, {"id": blk.id, "name": blk.name, "range": blk.range, "stages": [],
                                            "us": 0.0, "attribution": "stage"})
            entry["stages"].append(stage["index"])
            entry["us"] += us
            if split:
                entry["attribution"] = "stage shared with " + ", ".join(
                    b.name for b in members if b.id != blk.id) + " (split by FLOPs)"
    for blk in blocks:
        if blk.id not in out:
            consumer = _consumer(blk, blocks, out)
            out[blk.id] = {"id": blk.id, "name": blk.name, "range": blk.range, "stages": [], "us": 0.0,
                           "attribution": f"inlined into {consumer.name}" if consumer else "not found",
                           "inlined_into": consumer.id if consumer else None}
    ordered = [out[b.id] for b in blocks]
    for entry in ordered:
        entry["share"] = entry["us"] / total if total else None
        entry["stage_us"] = entry["us"]
        if whole_us is not None and entry["share"] is not None:
            entry["us"] = entry["share"] * whole_us
    return ordered


def _consumer(blk: Block, blocks: list[Block], placed: dict, depth: int = 0) -> Block | None:
    """The first block reading what ``blk`` writes that has a stage (following inlined chains)."""
    if depth > len(blocks):
        return None
    for other in blocks:
        if other.id != blk.id and set(other.reads) & set(blk.writes):
            if other.id in placed:
                return other
            deeper = _consumer(other, blocks, placed, depth + 1)
            if deeper is not None:
                return deeper
    return None


def finish_relax(raw: dict, fn: Function | None, record: dict | None = None) -> dict:
    """Relax: the end-to-end figures of the record and each kernel call tied to the source bindings
    it computes (per call, with its share of the calls of that build)."""
    record = record or {}
    bindings = {b.name: b for b in (fn.bindings if fn else [])}
    fn_id = fn.id if fn else raw.get("name", "main")
    out = {"function": fn_id, "range": fn.range if fn else None, "baseline": record.get("untuned"),
           "tuned": record.get("tuned"), "applied": record.get("applied"), "notes": list(raw.get("notes") or []),
           "flops": {"value": raw.get("flops"), "source": raw.get("flops_source")},
           "task_records": raw.get("task_records"), "tasks": {},
           "task_stages": {name: task_stage_blocks(st) for name, st in (raw.get("task_stages") or {}).items()}}
    out["speedup"] = (record.get("speedup") or {}).get("estimate")
    for label, data in (raw.get("tasks") or {}).items():
        total = data.get("sum_us") or None
        tasks = []
        for task in data["tasks"]:
            found = [bindings[v] for v in task.get("vars", []) if v in bindings]
            lines = [b.range["start"]["line"] for b in found]
            tasks.append({**task, "bindings": [f"{fn_id}/{b.name}" for b in found],
                          "lines": [min(lines), max(b.range["end"]["line"] for b in found)] if found else None,
                          "share": task["us"] / total if total else None,
                          "gflops": task["flops"] / task["us"] / 1e3 if task.get("flops") and task["us"] else None})
        out["tasks"][label] = {"tasks": tasks, "sum_us": data.get("sum_us"),
                               "instrumented_run_us": data.get("instrumented_run_us"), "source": data.get("source")}
        out.setdefault("bindings", {})[label] = _binding_latency(tasks, bindings, fn_id)
    return out


def task_stage_blocks(timed: dict) -> dict:
    """A task's stage timing (``worker/measure.task_stages``) per block of its scheduled kernel:
    ``{"blocks": {block: {us, share, stage, shared_with}}, "source", "error"}``.  Blocks of one
    top-level stage share its time (no finer measurement exists), and say so."""
    stages = [s for s in timed.get("stages") or [] if isinstance(s, dict) and s.get("us") is not None]
    total = sum(s["us"] for s in stages) or None
    blocks = {}
    for stage in stages:
        names = [b.get("name") for b in stage.get("blocks") or [] if b.get("name")]
        for name in names:
            blocks[name] = {"us": stage["us"], "share": stage["us"] / total if total else None, "stage": stage.get("index"),
                            "shared_with": [n for n in names if n != name]}
    return {"blocks": blocks, "error": timed.get("error"),
            "source": "rdtsc per top-level stage of the task's chosen schedule, timed with the profile "
                      "(blocks of one stage share its time)"}


def _binding_latency(tasks: list[dict], bindings: dict, fn_id: str) -> list[dict]:
    """Per source binding: the kernel call(s) that compute it and their latency."""
    out = []
    for name, b in bindings.items():
        covering = [t for t in tasks if name in t.get("vars", [])]
        out.append({"id": f"{fn_id}/{name}", "name": name, "range": b.range,
                    "tasks": [f"{t['task']}#{t['call']}" for t in covering],
                    "us": sum(t["us"] for t in covering),
                    "fused_with": sorted({v for t in covering for v in t.get("vars", []) if v != name})})
    return out




# --------------------------------------------------------------------------- before → after per block

#: A block is flagged as slower after tuning when its tuned figure is at least this many times its
#: untuned one.  Per-block figures carry no spread of their own (one instrumented run per program,
#: scaled to the measured headline), so smaller changes are not called out.
SLOWER_RATIO = 1.2


def before_after(kernel: dict) -> list[dict]:
    """Per source block of a profiled kernel: untuned and tuned µs, their ratio, and a flag.

    ``kernel`` is one ``kernels[]`` entry of a profile (``finish_kernel``): ``blocks.baseline`` and
    ``blocks.tuned`` hold each block's share of that program's measured headline.  ``ratio`` is
    tuned / untuned (> 1 = slower); None where either side has no time of its own (a block
    inlined into its consumer, or not found).  ``estimate`` says a side's figure was split from a
    stage shared with other blocks (by FLOPs), not timed alone.
    """
    blocks = kernel.get("blocks") or {}
    before = {b.get("name"): b for b in blocks.get("baseline") or [] if isinstance(b, dict)}
    out = []
    for after in blocks.get("tuned") or []:
        if not isinstance(after, dict) or not after.get("name"):
            continue
        base = before.get(after["name"]) or {}
        own = [e for e in (base, after) if e and not str(e.get("attribution", "stage")).startswith(("inlined", "not found"))]
        b_us, a_us = base.get("us"), after.get("us")
        ratio = a_us / b_us if len(own) == 2 and b_us and a_us else None
        out.append({"name": after["name"], "before_us": b_us, "after_us": a_us, "ratio": ratio,
                    "slower": ratio is not None and ratio >= SLOWER_RATIO,
                    "estimate": any(str(e.get("attribution", "stage")).startswith("stage shared") for e in (base, after)),
                    "attribution": {"untuned": base.get("attribution"), "tuned": after.get("attribution")}})
    return out


#: The first words of ``trace_replay`` steps, as the verbs a user reads ("split + parallel").
_VERBS = (("decompose reduction", "decompose reduction"), ("multi-level tiling", "multi-level tiling"),
          ("cache read", "cache read"), ("cache write", "cache write"), ("reverse compute at", "reverse compute-at"),
          ("compute at", "compute-at"), ("unroll", "unroll"), ("inlined", "inline"), ("rfactor", "rfactor"),
          ("tensorize", "tensorize"), ("bind", "bind"), ("split", "split"), ("fuse", "fuse"),
          ("reorder", "reorder"), ("parallel", "parallel"), ("vectorize", "vectorize"))


def schedule_verbs(steps: list[str] | None) -> list[str]:
    """``["split", "parallel", "vectorize"]``: what the schedule did to a block, in order, once each
    (from its ``trace_summary`` steps, e.g. ``"split j → 96×8"``)."""
    out: list[str] = []
    for step in steps or []:
        text = re.sub(r"^\w+: ", "", step)            # a derived block's step: "matmul_init: split …"
        verb = next((name for prefix, name in _VERBS if text.startswith(prefix)), None)
        if verb and verb not in out:
            out.append(verb)
    return out


def block_verbs(summary: dict | None) -> list[str]:
    """What the schedule did to a block and the blocks derived from it (a ``trace_summary`` block
    summary): post-processor loop rewrites included, so a parallel + vectorized block reads
    ``fuse + split + parallel + vectorize``."""
    if not summary:
        return []
    return schedule_verbs(summary.get("all_steps", summary.get("steps", [])) + summary.get("derived_steps", []))
