"""Profiling on the host CPU (TVM side): the untuned vs tuned headline through the harness, and
the detail behind it: per-stage latency, MetaSchedule features, cachegrind, per-call Relax times.

Handlers take and return plain data.  They report what TVM sees (transformed block names, TVMScript
line numbers from spans, task and variable names); the core (``services/profiling.py``,
``analysis/attribution.py``) ties those to source ids and ranges, so the mapping is testable
without TVM.

* ``profile``    — ``headline`` (``remeasure.compare_tir`` / ``compare_relax``: raw interleaved
                   samples, applied-kernel check, output check) when ``timing`` is asked for, else
                   only the output check; per-stage latency (rdtsc, docs/tvm.md §5) or per-call
                   latency for Relax (VM instrument hook, §6), PerStoreFeature rows, cachegrind (§7).
                   The tuned program is the record the run's measurement chose (``chosen``), else
                   the fastest while tuning.
* ``apply_best`` — per workload: that record's scheduled TVMScript and its trace.

(PerStoreFeature rows of *every* record of a run: ``features`` in ``extract.py``.)
"""
from __future__ import annotations

import time

import numpy as np

from ..engine import wire
from .cachegrind import cachegrind
from .compat import ms, normalize_mod, s_tir, stmt_children, stub_tensor_intrin, tirx
from .harness import LoadWatch
from .host import host_info
from .inputs import DEFAULT_ATOL, DEFAULT_RTOL
from .parse import parse_request, parse_to_run
from .programs import (SOURCE_FLOPS, estimate_flops, first_line, is_relax, measuring_target, optional_step,
                       prim_funcs, target_label)
from .records import (apply_record, best_record, chosen_database, fresh_copy, read_trials, record_info,
                      record_latency, run_database)
from .relax_pipeline import deployable, fuse
from .relax_profile import profile_relax
from .remeasure import as_deployed, build_prim, choose_all, compare_relax, compare_tir, prim_inputs
from .stages import profile_stages
from .tune_plan import params_levers


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


def tuned_variant(func, db, run_dir, chosen, candidate=None) -> tuple[object | None, object | None, dict | None, list]:
    """The program to compare with the untuned one: (schedule, record, best info, notes)."""
    if candidate is not None:
        sch = s_tir.Schedule(fresh_copy(normalize_mod(candidate)))
        return sch, None, {"match": "candidate", "source": "candidate program given by the caller"}, []
    if db is None:
        return None, None, None, []
    record, match = best_record(db, func, run_dir, chosen)
    if record is None:
        return None, None, None, [match]
    try:
        return apply_record(func, record), record, record_info(record, match), []
    except Exception as err:  # a trace that no longer applies to the edited function
        return None, None, None, [f"the best trace does not apply to this function: {first_line(err)}"]


def detail(mod, sch, target, arrays: list[np.ndarray], opts: dict, serial=None) -> dict:
    """Per-stage latency, features and cachegrind of one program (each optional step fails alone).

    ``sch`` (the Schedule behind ``mod``, or None) feeds the feature extractor; ``serial`` is the
    variant without parallel loops that cachegrind needs for line attribution (default ``mod``).
    """
    out = {}
    if opts["stages"]:
        rt = build_prim(mod, target)
        out["stages"] = optional_step(lambda: profile_stages(mod, target, arrays, rt, None, opts["budget_ms"]))
    if opts["features"]:
        out["features"] = optional_step(lambda: feature_rows(sch if sch is not None else mod, target))
    if opts["cachegrind"]:
        out["cachegrind"] = optional_step(lambda: cachegrind(serial if serial is not None else mod, target, arrays))
    return out


def profile_prim_func(name: str, func, target, db, opts: dict, run_dir=None, chosen=None, candidate=None) -> dict:
    """The detail of one PrimFunc, untuned and tuned, and the pair the headline compares."""
    base_mod = normalize_mod(func)
    sch, record, best, notes = tuned_variant(func, db, run_dir, chosen, candidate)
    out = {"name": name, "flops": estimate_flops(base_mod), "flops_source": SOURCE_FLOPS, "best": best,
           "stages": {}, "features": {}, "notes": notes}
    _, arrays = prim_inputs(base_mod, opts["seed"])
    variants = {"baseline": detail(base_mod, None, target, arrays, opts)}
    if sch is not None:
        serial = apply_record(func, record, serial=True).mod if record is not None and opts["cachegrind"] else None
        variants["tuned"] = detail(sch.mod, sch, target, arrays, opts, serial)
    for label, data in variants.items():
        for key, value in data.items():
            out.setdefault(key, {})[label] = value
    return out, (name, base_mod, sch.mod if sch is not None else None)


def task_stages(fused, target, db, run_dir, chosen, opts: dict, tuned: set[str]) -> dict:
    """Per tuned task of a Relax model: the top-level stages of its chosen schedule, timed with rdtsc
    like a TIR kernel's (``profile_stages``), each with the blocks it runs; a task that fails alone
    says why."""
    out = {}
    for task in ms.relax_integration.extract_tasks(fused, target):
        if task.task_name not in tuned:
            continue
        func = task.dispatched[0]["main"]
        sch, _, best, notes = tuned_variant(func, db, run_dir, chosen)
        if sch is None:
            out[task.task_name] = {"error": notes[0] if notes else "no record applies"}
            continue
        deployed = as_deployed(sch.mod)
        _, arrays = prim_inputs(deployed, opts["seed"])
        rt = build_prim(deployed, target)
        out[task.task_name] = optional_step(lambda: profile_stages(deployed, target, arrays, rt, None,
                                                                   min(opts["budget_ms"], 150.0)))
        out[task.task_name]["best"] = best
    return out


# --------------------------------------------------------------------------- handlers


def _options(params: dict) -> dict:
    return {"seed": int(params.get("seed") or 0),
            "timing": params.get("timing", True) is not False,
            "budget_s": float(params["budget_s"]) if params.get("budget_s") else None,
            "budget_ms": float(params.get("budget_ms") or 300),
            "check": params.get("check", True) is not False,
            "stages": params.get("stages", True) is not False,
            "features": params.get("features", True) is not False,
            "cachegrind": bool(params.get("cachegrind")),
            "rtol": float(params.get("rtol") or DEFAULT_RTOL),
            "atol": float(params.get("atol") or DEFAULT_ATOL),
            "weights": params.get("weights") or None}


def profile(params: dict, emit=None, off: frozenset[str] | None = None) -> dict:
    """Profile one function or unit; see the module docstring for what is measured.  ``off``: the
    request's levers (its run's, ``tune_plan.params_levers``)."""
    off = params_levers(params) if off is None else off
    started = time.perf_counter()
    watch = LoadWatch()   # the load of the whole profile: its per-stage / per-call times are measured too
    parsed = parse_to_run(params)
    target = measuring_target(params.get("target"))
    run_dir, chosen = params.get("run_dir"), params.get("chosen")
    db = run_database(run_dir)
    opts = _options(params)
    result = {"kind": "relax" if is_relax(parsed) else "tir", "target": target_label(target), "host": host_info(),
              "has_run": db is not None, "options": opts}
    if result["kind"] == "relax":   # the deployable build: weights bound, as tuned and exported
        parsed, bound = deployable(parsed, params.get("function"), opts.get("weights"))
        result["build"] = {"deployable": True, "bound": len(bound)}
    candidate = _candidate(params["candidate"]) if params.get("candidate") else None
    if params.get("choose") and db is not None and candidate is None:
        chosen = result["chosen"] = _choose(parsed, result["kind"], run_dir, target, params.get("function"), off)
    if result["kind"] == "relax":
        result["relax"], result["headline"] = _profile_relax(parsed, target, run_dir, chosen, opts,
                                                             params.get("function") or "main", off)
    else:
        result["kernels"], pairs = [], []
        for name, func in prim_funcs(parsed, params.get("function")):
            if emit:
                emit({"type": "profile", "kernel": name})
            kernel, pair = profile_prim_func(name, func, target, db, opts, run_dir, chosen, candidate)
            result["kernels"].append(kernel)
            pairs.append(pair)
        result["headline"] = _headline_tir(pairs, target, opts)
    result["seconds"] = time.perf_counter() - started
    result["load"] = watch.stop()
    return result


def _headline_tir(pairs: list, target, opts: dict) -> dict:
    """Untuned vs tuned through the harness (``timing``), or only the output check."""
    if not opts["timing"]:
        pairs = [(n, b, t) for n, b, t in pairs if t is not None]
        if not pairs:
            return {"check": None}
        return {"check": compare_tir(pairs, target, opts["seed"], opts["check"], timed=False)["check"]}
    return compare_tir(pairs, target, opts["seed"], opts["check"], opts["budget_s"])


def _profile_relax(mod, target, run_dir, chosen, opts: dict, fn: str, off: frozenset[str]) -> tuple[dict, dict | None]:
    stub_tensor_intrin()
    trials = read_trials(run_dir) if run_dir else None
    database = None
    if trials is not None:
        # an empty choice is a choice (every task kept its default schedule), not "no choice"
        database = chosen_database(trials, chosen) if chosen is not None else run_database(run_dir)
    detail_out = profile_relax(mod, target, trials, database, chosen, opts, fn, off=off)
    tuned = [name for name, r in detail_out["task_records"].items() if r["tuned"]]
    # every task with a valid trial: a task that kept its default schedule still shows its best trial's
    # code (asight code --task), with that schedule's per-block times
    tried = {name for name, r in detail_out["task_records"].items() if r["trials"] > r["failed"]}
    if tried and opts["stages"] and run_dir:
        detail_out["task_stages"] = task_stages(fuse(mod, target, off=off), target, run_database(run_dir), run_dir,
                                                chosen, opts, tried)
    # the headline measures the tuned build the profile made (with a choice that kept every default
    # schedule: the fused defaults, measured rather than "—")
    measured = database if "tuned" in detail_out["tasks"] else None
    headline = compare_relax(mod, fn, measured, target, tuned, opts["seed"], opts["check"],
                             opts["budget_s"], timed=opts["timing"], weights=opts.get("weights"), off=off)
    return detail_out, headline


def _choose(parsed, kind: str, run_dir, target, function: str | None, off: frozenset[str]) -> list[dict]:
    """The best per task by re-measurement (``remeasure.choose_all``) for a run without a record."""
    if kind == "relax":
        stub_tensor_intrin()
        tasks = [(t.task_name, t.dispatched[0])
                 for t in ms.relax_integration.extract_tasks(fuse(parsed, target, off=off), target)]
    else:
        tasks = [(name, normalize_mod(func)) for name, func in prim_funcs(parsed, function)]
    return choose_all(read_trials(run_dir), tasks, target, with_default=kind == "relax", off=off)


def _candidate(spec: dict):
    parsed = parse_to_run(spec)      # checked, built and run like the file (native calls refused)
    funcs = prim_funcs(parsed, spec.get("function"))
    if len(funcs) != 1:
        raise ValueError("the candidate must hold exactly one PrimFunc (name it with its function)")
    return funcs[0][1]


def apply_best(params: dict, emit=None, off: frozenset[str] | None = None) -> dict:
    """Per function (TIR) or tuned task (Relax): the best record's scheduled TVMScript and trace
    (a Relax model's tasks: its pipeline without the request's levers ``off``)."""
    off = params_levers(params) if off is None else off
    parsed = parse_request(params)
    run_dir, chosen = params.get("run_dir"), params.get("chosen")
    db = run_database(run_dir)
    if db is None:
        raise ValueError("the run has no tuning records")
    entries = []
    if is_relax(parsed):
        target = measuring_target(params.get("target"))
        parsed, _ = deployable(parsed, params.get("function"), params.get("weights"))
        database = chosen_database(read_trials(run_dir), chosen) if chosen is not None else db
        for task in ms.relax_integration.extract_tasks(fuse(parsed, target, off=off), target):
            mod = task.dispatched[0]
            if not database.has_workload(mod):
                continue
            top = database.get_top_k(database.commit_workload(mod), 1)
            if top and record_latency(top[0]) is not None:
                sch = s_tir.Schedule(fresh_copy(mod))
                top[0].trace.apply_to_schedule(sch, remove_postproc=False)
                entries.append(_schedule_entry(task.task_name, top[0], sch,
                                               "chosen by re-measurement" if chosen else "structural"))
    else:
        for name, func in prim_funcs(parsed, params.get("function")):
            record, match = best_record(db, func, run_dir, chosen)
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
