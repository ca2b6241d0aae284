"""Profiling on the host CPU (TVM side): untuned vs best schedule, output check, per-stage and
per-task latency, MetaSchedule features, cachegrind.

Handlers take and return plain data.  They report what TVM sees (transformed block names, TVMScript
line numbers from spans, task and variable names); the core (``asight_lsp.services.profiling``) ties those to
source ids and ranges, so the mapping is testable without TVM.

* ``profile``    — untuned vs best latency (median and spread), allclose of the outputs, FLOPs,
                   per-stage latency (rdtsc around the top-level stages of the root block,
                   docs/tvm.md §5) or per-task latency for Relax (VM instrument hook, §6),
                   PerStoreFeature rows, optional cachegrind per TVMScript line (§7).
* ``apply_best`` — per workload: the best record's scheduled TVMScript and its trace.

(PerStoreFeature rows of *every* record of a run: ``features`` in ``extract.py``.)
"""
from __future__ import annotations

import time

import numpy as np

from ..engine import wire
from .compat import ms, normalize_mod, s_tir, stmt_children, stub_tensor_intrin, tirx, tvm
from .parse import parse_request
from .cachegrind import cachegrind
from .host import host_info
from .programs import (SOURCE_FLOPS, buffer_specs, entry_name, estimate_flops, is_relax, first_line, prim_funcs, optional_step, measuring_target, target_label)
from .records import run_database, record_latency, record_info, apply_record, best_record, fresh_copy
from .relax_pipeline import fuse
from .relax_profile import profile_relax
from .stages import profile_stages
from .timing import compare_outputs, random_arrays, time_function

DEFAULT_RTOL, DEFAULT_ATOL = 1e-3, 1e-4   # atol is scaled by max(1, max |reference|)


# --------------------------------------------------------------------------- inputs


# --------------------------------------------------------------------------- best record


# --------------------------------------------------------------------------- measurement


# --------------------------------------------------------------------------- stages (rdtsc)


# --------------------------------------------------------------------------- features (§3)


def feature_rows(sch_or_mod, target) -> dict:
    """PerStoreFeature rows (164 each, one per written buffer) and the blocks that store them."""
    stub_tensor_intrin()  # TuneContext would import all tensor intrinsics (19 s, docs/tvm.md §0)
    sch = sch_or_mod if isinstance(sch_or_mod, s_tir.Schedule) else s_tir.Schedule(fresh_copy(sch_or_mod))
    mod = sch.mod
    ctx = ms.TuneContext(mod=mod, target=target, task_name="main")
    cand = ms.MeasureCandidate(sch, ms.arg_info.ArgInfo.from_entry_func(mod, remove_preproc=True))
    rows = ms.feature_extractor.PerStoreFeature().extract_from(ctx, [cand])[0].numpy()
    return {"rows": rows.tolist(), "stores": _store_blocks(mod["main"]),
            "source": "MetaSchedule PerStoreFeature (modelled, not measured)"}


def _store_blocks(func) -> list[str]:
    """Block names in first non-constant-store order per written buffer (PerStoreFeature's row order)."""
    seen, names = set(), []

    def walk(node, block):
        if isinstance(node, s_tir.SBlockRealize):
            block = node.block.name_hint
        if isinstance(node, tirx.BufferStore) and not isinstance(node.value, (tirx.IntImm, tirx.FloatImm)):
            key = node.buffer.name
            if key not in seen:
                seen.add(key)
                names.append(block or key)
        for child in stmt_children(node):
            walk(child, block)

    walk(func.body, None)
    return names


# --------------------------------------------------------------------------- TIR profile


def tuned_variant(func, db, candidate=None) -> tuple[object | None, object | None, dict | None, list[str]]:
    """The program to compare with the untuned one: (schedule, record, best info, notes)."""
    if candidate is not None:
        sch = s_tir.Schedule(fresh_copy(normalize_mod(candidate)))
        return sch, None, {"match": "candidate", "source": "candidate program given by the caller"}, []
    if db is None:
        return None, None, None, []
    record, match = best_record(db, func)
    if record is None:
        return None, None, None, [match]
    try:
        return apply_record(func, record), record, record_info(record, match), []
    except Exception as err:  # a trace that no longer applies to the edited function
        return None, None, None, [f"the best trace does not apply to this function: {first_line(err)}"]


def measure_variant(mod, sch, target, arrays: list[np.ndarray], opts: dict, serial=None) -> dict:
    """One program: outputs on ``arrays``, timing, and the optional stage/feature/cachegrind data.

    ``sch`` (the Schedule behind ``mod``, or None) feeds the feature extractor; ``serial`` is the
    variant without parallel loops that cachegrind needs for line attribution (default ``mod``).
    """
    dev = tvm.cpu(0)
    rt = tvm.tirx.build(mod, target=target)
    entry = entry_name(mod)
    args = [tvm.runtime.tensor(a.copy(), dev) for a in arrays]
    rt[entry](*args)
    out = {"outputs": [a.numpy() for a in args]}
    timer_for = lambda number, repeat: rt.time_evaluator(entry, dev, number=number, repeat=repeat)  # noqa: E731
    out["timing"] = time_function(timer_for, [tvm.runtime.tensor(a.copy(), dev) for a in arrays],
                                  opts["repeats"], opts["budget_ms"])
    if opts["stages"]:
        out["stages"] = optional_step(lambda: profile_stages(mod, target, arrays, rt, out["timing"]["median_us"],
                                                     opts["budget_ms"]))
    if opts["features"]:
        out["features"] = optional_step(lambda: feature_rows(sch if sch is not None else mod, target))
    if opts["cachegrind"]:
        out["cachegrind"] = optional_step(lambda: cachegrind(serial if serial is not None else mod, target, arrays))
    return out


def profile_prim_func(name: str, func, target, db, opts: dict, candidate=None) -> dict:
    """Untuned vs best (or ``candidate``) for one PrimFunc, measured on the same random inputs."""
    base_mod = normalize_mod(func)
    sch, record, best, notes = tuned_variant(func, db, candidate)
    out = {"name": name, "flops": estimate_flops(base_mod), "flops_source": SOURCE_FLOPS, "best": best,
           "tuned": None, "check": None, "stages": {}, "features": {}, "notes": notes}
    specs = buffer_specs(base_mod["main"])
    arrays = random_arrays([(shape, dtype) for _, shape, dtype in specs], opts["seed"])
    variants = {"baseline": measure_variant(base_mod, None, target, arrays, opts)}
    if sch is not None:
        serial = apply_record(func, record, serial=True).mod if record is not None and opts["cachegrind"] else None
        variants["tuned"] = measure_variant(sch.mod, sch, target, arrays, opts, serial)
    for label, data in variants.items():
        out[label] = data["timing"]
        for key in ("stages", "features", "cachegrind"):
            if key in data:
                out.setdefault(key, {})[label] = data[key]
    if "tuned" in variants and opts["check"]:
        out["check"] = compare_outputs([n for n, _, _ in specs], variants["baseline"]["outputs"],
                                       variants["tuned"]["outputs"], opts["rtol"], opts["atol"])
    return out


# --------------------------------------------------------------------------- Relax profile (§6)


# --------------------------------------------------------------------------- cachegrind (§7)


# --------------------------------------------------------------------------- handlers


def _options(params: dict) -> dict:
    return {"repeats": max(int(params.get("repeats") or 10), 1),
            "budget_ms": float(params.get("budget_ms") or 300),
            "seed": int(params.get("seed") or 0),
            "check": params.get("check", True) is not False,
            "stages": params.get("stages", True) is not False,
            "features": params.get("features", True) is not False,
            "cachegrind": bool(params.get("cachegrind")),
            "rtol": float(params.get("rtol") or DEFAULT_RTOL),
            "atol": float(params.get("atol") or DEFAULT_ATOL)}


def profile(params: dict, emit=None) -> dict:
    """Profile one function or unit; see the module docstring for what is measured."""
    started = time.perf_counter()
    parsed = parse_request(params)
    target = measuring_target(params.get("target"))
    db = run_database(params.get("run_dir"))
    opts = _options(params)
    result = {"kind": "relax" if is_relax(parsed) else "tir", "target": target_label(target), "host": host_info(),
              "has_run": db is not None, "options": opts}
    candidate = None
    if params.get("candidate"):
        candidate = _candidate(params["candidate"], params.get("function"))
    if result["kind"] == "relax":
        stub_tensor_intrin()
        result["relax"] = profile_relax(parsed, target, db, opts, params.get("function") or "main")
    else:
        result["kernels"] = []
        for name, func in prim_funcs(parsed, params.get("function")):
            if emit:
                emit({"type": "profile", "kernel": name})
            result["kernels"].append(profile_prim_func(name, func, target, db, opts, candidate))
    result["seconds"] = time.perf_counter() - started
    return result


def _candidate(spec: dict, function: str | None):
    parsed = parse_request(spec)
    funcs = prim_funcs(parsed, spec.get("function"))
    if len(funcs) != 1:
        raise ValueError("the candidate must hold exactly one PrimFunc (name it with its function)")
    return funcs[0][1]


def apply_best(params: dict, emit=None) -> dict:
    """Per function (TIR) or tuned task (Relax): the best record's scheduled TVMScript and trace."""
    parsed = parse_request(params)
    db = run_database(params.get("run_dir"))
    if db is None:
        raise ValueError("the run has no tuning records")
    entries = []
    if is_relax(parsed):
        target = measuring_target(params.get("target"))
        fused = fuse(parsed, target)
        for task in ms.relax_integration.extract_tasks(fused, target):
            mod = task.dispatched[0]
            if not db.has_workload(mod):
                continue
            top = db.get_top_k(db.commit_workload(mod), 1)
            if top and record_latency(top[0]) is not None:
                sch = s_tir.Schedule(fresh_copy(mod))
                top[0].trace.apply_to_schedule(sch, remove_postproc=False)
                entries.append(_schedule_entry(task.task_name, top[0], sch, "structural"))
    else:
        for name, func in prim_funcs(parsed, params.get("function")):
            record, match = best_record(db, func)
            if record is None:
                entries.append({"function": name, "error": match})
                continue
            entries.append(_schedule_entry(name, record, apply_record(func, record), match))
    return {"entries": entries}


def _schedule_entry(name: str, record, sch, match: str) -> dict:
    return {"function": name, "latency_us": record_latency(record) * 1e6, "match": match,
            "script": sch.mod.script(), "trace": str(record.trace),
            "trace_lines": list(record.trace.as_python(remove_postproc=True))}


HANDLERS = {wire.PROFILE: profile, wire.APPLY_BEST: apply_best}
