"""Profiling on the host CPU (TVM side): untuned vs best schedule, output check, per-stage and
per-task latency, MetaSchedule features, cachegrind.

Handlers take and return plain data.  They report what TVM sees (transformed block names, TVMScript
line numbers from spans, task and variable names); the core (``asight_lsp.services.profiling``) ties those to
source ids and ranges, so the mapping is testable without TVM.

* ``profile``    — untuned vs best latency (median and spread), allclose of the outputs, FLOPs,
                   per-stage latency (rdtsc around the top-level stages of the root block,
                   tvm-notes §5) or per-task latency for Relax (VM instrument hook, §6),
                   PerStoreFeature rows, optional cachegrind per TVMScript line (§7).
* ``apply_best`` — per workload: the best record's scheduled TVMScript and its trace.

(PerStoreFeature rows of *every* record of a run: ``features`` in ``extract.py``.)
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from .compat import (Trace, host_target, ms, normalize_mod, relax, s_tir, stmt_children, stub_tensor_intrin, tirx, tvm, tvm_ffi)
from .parse import parse_request

FAILED_SECONDS = 1e9          # MetaSchedule stores failed builds/runs as run_secs [1e10]
DEFAULT_RTOL, DEFAULT_ATOL = 1e-3, 1e-4   # atol is scaled by max(1, max |reference|)
SOURCE_TIME = "tvm time_evaluator, {calls} single calls (number=1)"
SOURCE_STAGES = "rdtsc (llvm.readcyclecounter) around each top-level stage of the root block"
SOURCE_TASKS = "Relax VM instrument hook (perf_counter_ns before/after each kernel call)"
SOURCE_FLOPS = "tvm.s_tir.analysis.estimate_tir_flops of the untuned program"

_TSC_HZ: float | None = None
_SGEMM: dict | None = None


# --------------------------------------------------------------------------- inputs


def _target(spec):
    """The measuring target: the run's target (JSON dict/text or string) or the host CPU."""
    if spec in (None, "", "host"):
        return host_target()
    if isinstance(spec, str) and spec.strip().startswith("{"):
        spec = json.loads(spec)
    target = tvm.target.Target(spec)
    if target.kind.name != "llvm":
        raise ValueError(f"profiling measures on this machine's CPU; the target is {target.kind.name}")
    return target


def target_label(target) -> str:
    """``llvm -mcpu=znver3 -num-cores=2``: the target as a short command-line style label."""
    attrs = getattr(target, "attrs", {}) or {}
    parts = [target.kind.name] + [f"-{key}={attrs[key]}" for key in ("mcpu", "num-cores")
                                  if attrs.get(key) not in (None, "")]
    return " ".join(parts)


def _database(run_dir: str | None):
    if not run_dir or not (Path(run_dir) / "database_tuning_record.json").exists():
        return None
    return ms.database.JSONDatabase(work_dir=str(run_dir), allow_missing=False)


def _is_relax(parsed) -> bool:
    return isinstance(parsed, tvm.IRModule) and any(
        isinstance(parsed[gv], relax.Function) for gv in parsed.get_global_vars())


def _prim_funcs(parsed, function: str | None) -> list[tuple[str, object]]:
    """(name, PrimFunc) pairs to profile: the named function, or every PrimFunc of the unit."""
    if isinstance(parsed, tirx.PrimFunc):
        return [(function or "main", parsed)]
    names = [gv.name_hint for gv in parsed.get_global_vars() if isinstance(parsed[gv], tirx.PrimFunc)]
    if function:
        if function not in names:
            raise ValueError(f"no PrimFunc '{function}' in the module (has: {', '.join(sorted(names))})")
        names = [function]
    return [(name, parsed[name]) for name in sorted(names)]


def _entry(mod) -> str:
    func = mod["main"]
    return str(func.attrs["global_symbol"]) if func.attrs and "global_symbol" in func.attrs else "main"


def _latency(record) -> float | None:
    secs = [float(s) for s in (record.run_secs or [])]
    return sum(secs) / len(secs) if secs and min(secs) < FAILED_SECONDS else None


# --------------------------------------------------------------------------- best record


def _workload_records(db) -> dict[int, tuple[object, list]]:
    """All valid records grouped by workload (structural hash), best first."""
    groups: dict[int, tuple[object, list]] = {}
    for rec in db.get_all_tuning_records():
        if _latency(rec) is None:
            continue
        key = int(tvm_ffi.structural_hash(rec.workload.mod))
        groups.setdefault(key, (rec.workload, []))[1].append(rec)
    for _, recs in groups.values():
        recs.sort(key=_latency)
    return groups


def best_record(db, func) -> tuple[object | None, str]:
    """The best valid record for ``func`` and how it was matched.

    MetaSchedule keys workloads by structural hash of the normalised module (``tune_tir`` of a
    PrimFunc adds ``tirx.noalias``; of an IRModule it does not), so both forms are tried.  A run of
    one workload whose hash no longer matches (the source was edited) still answers, flagged.
    """
    for label, mod in (("structural", normalize_mod(func)), ("structural", tvm.IRModule({"main": func}))):
        if db.has_workload(mod):
            top = db.get_top_k(db.commit_workload(mod), 1)
            if top and _latency(top[0]) is not None:
                return top[0], label
            return None, "the run has no successful record for this function"
    groups = _workload_records(db)
    if len(groups) == 1:
        recs = next(iter(groups.values()))[1]
        return recs[0], "single-workload fallback (the function changed since the run)"
    if not groups:
        return None, "the run has no successful record yet"
    return None, "the run's workloads do not match this function (was it edited since?)"


def apply_record(func, record, serial: bool = False):
    """A Schedule of ``func`` with the record's trace replayed (postprocessors included).

    ``serial`` drops the ``Parallel`` instructions: parallel loop bodies become lambdas without
    symbols or line info, so cachegrind/perf attribution needs the serial variant (tvm-notes §5).
    """
    sch = s_tir.Schedule(fresh_copy(normalize_mod(func)))
    trace = record.trace
    if serial:
        insts = [i for i in trace.insts if i.kind.name != "Parallel"]
        trace = Trace(insts, {i: d for i, d in trace.decisions.items() if i in insts})
    trace.apply_to_schedule(sch, remove_postproc=False)
    return sch


def fresh_copy(mod):
    """A deep copy (spans kept) of ``mod``.

    Replaying a trace on ``Schedule(mod)`` rewrites parts of ``mod``'s statements *in place*
    (observed in 0.27: the untuned function came out split and reordered), which would corrupt the
    baseline and the worker's parse cache.  A JSON round trip costs ~10 ms.
    """
    return tvm.ir.load_json(tvm.ir.save_json(mod))


def _record_info(record, match: str) -> dict:
    return {"latency_us": _latency(record) * 1e6, "match": match,
            "instructions": len(record.trace.insts), "source": "best record of the run's JSON database"}


# --------------------------------------------------------------------------- measurement


def random_arrays(specs: list[tuple[tuple, str]], seed: int) -> list[np.ndarray]:
    """Random inputs: floats in [-1, 1), small non-negative ints (safe as indices), random bools."""
    rng = np.random.default_rng(seed)
    out = []
    for shape, dtype in specs:
        dtype = str(dtype)
        if dtype.startswith("float") or dtype.startswith("bfloat"):
            out.append((rng.random(shape) * 2 - 1).astype(dtype))
        elif dtype == "bool":
            out.append(rng.random(shape) < 0.5)
        else:
            out.append(rng.integers(0, 2, size=shape).astype(dtype))
    return out


def _buffer_specs(func) -> list[tuple[str, tuple, str]]:
    specs = []
    for param in func.params:
        try:
            shape = tuple(int(x) for x in param.shape)
        except (TypeError, AttributeError, ValueError):
            raise ValueError(f"parameter '{param.name}' has no static shape; profiling needs one") from None
        specs.append((param.name, shape, str(param.dtype)))
    return specs


def stats(seconds: list[float], source: str, number: int | None = None) -> dict:
    """Median and spread (µs) of per-repeat times."""
    us = np.asarray(seconds, dtype=float) * 1e6
    p25, p75 = np.percentile(us, [25, 75])
    median = float(np.median(us))
    return {"median_us": median, "mean_us": float(us.mean()), "std_us": float(us.std()),
            "min_us": float(us.min()), "max_us": float(us.max()), "p25_us": float(p25), "p75_us": float(p75),
            "cv": float(us.std() / us.mean()) if us.mean() else 0.0, "repeats": int(len(us)),
            "number": number, "source": source}


def time_function(timer_for, args, repeats: int, budget_ms: float) -> dict:
    """Median and spread of single-call times (µs).

    Each repeat is one call (``number=1``): on this shared 2-vCPU VM a call that gets preempted
    is an outlier the median ignores, while a mean over many calls would absorb it.  The number
    of calls is ``repeats`` at least, more when they fit in ``budget_ms`` (at most 2000).
    """
    probe = timer_for(1, 3)(*args).results
    estimate = max(float(np.median(probe)), 1e-7)
    calls = int(np.clip(budget_ms / 1e3 / estimate, repeats, 2000))
    result = timer_for(1, calls)(*args)
    return stats(list(result.results), SOURCE_TIME.format(calls=calls), number=1)


def compare_outputs(names: list[str], reference: list[np.ndarray], candidate: list[np.ndarray],
                    rtol: float, atol: float) -> dict:
    """allclose per buffer (the tuned program against the untuned one on the same inputs)."""
    buffers, ok = [], True
    for name, ref, got in zip(names, reference, candidate):
        ref64, got64 = ref.astype(np.float64), got.astype(np.float64)
        scale = max(1.0, float(np.max(np.abs(ref64)))) if ref64.size else 1.0
        diff = np.abs(ref64 - got64)
        close = np.isclose(got64, ref64, rtol=rtol, atol=atol * scale, equal_nan=True)
        entry = {"name": name, "ok": bool(close.all()), "max_abs_err": float(diff.max()) if diff.size else 0.0,
                 "max_rel_err": float((diff / np.maximum(np.abs(ref64), 1e-30)).max()) if diff.size else 0.0,
                 "mismatched": int((~close).sum()), "elements": int(close.size)}
        ok &= entry["ok"]
        buffers.append(entry)
    return {"ok": ok, "rtol": rtol, "atol": atol, "atol_scaled_by": "max(1, max|reference|)",
            "buffers": buffers, "source": "numpy.isclose on random inputs (same inputs for both programs)"}


def host_info() -> dict:
    """TSC frequency, TVM threads, and a measured fp32 reference peak (numpy/OpenBLAS sgemm)."""
    return {"tsc_hz": tsc_hz(), "threads": int(os.environ.get("TVM_NUM_THREADS") or os.cpu_count() or 1),
            "cpu": str(tvm.get_global_func("tvm.codegen.llvm.GetHostCPUName")()), "sgemm": sgemm_peak()}


def sgemm_peak(n: int = 512, repeats: int = 7) -> dict:
    """Best fp32 GFLOP/s of numpy's matmul (OpenBLAS, all its threads): a tuned reference."""
    global _SGEMM
    if _SGEMM is None:
        rng = np.random.default_rng(0)
        a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
        a @ b
        best = min(_timed(lambda: a @ b) for _ in range(repeats))
        _SGEMM = {"gflops": 2 * n ** 3 / best / 1e9, "n": n,
                  "source": f"numpy.matmul {n}x{n} fp32 (OpenBLAS), best of {repeats}"}
    return _SGEMM


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def tsc_hz() -> float:
    """rdtsc ticks per second, calibrated once per process against perf_counter."""
    global _TSC_HZ
    if _TSC_HZ is None:
        out = tirx.decl_buffer((1,), "int64", name="out")
        func = tirx.PrimFunc([out], tirx.BufferStore(
            out, tirx.call_llvm_intrin("int64", "llvm.readcyclecounter"), [0])).with_attr("global_symbol", "rdtsc")
        rt = tvm.tirx.build(tvm.IRModule({"rdtsc": func}), target=host_target())
        buf = tvm.runtime.tensor(np.zeros(1, "int64"))
        rt["rdtsc"](buf)
        c0, t0 = int(buf.numpy()[0]), time.perf_counter()
        time.sleep(0.1)
        rt["rdtsc"](buf)
        c1, t1 = int(buf.numpy()[0]), time.perf_counter()
        _TSC_HZ = (c1 - c0) / (t1 - t0)
    return _TSC_HZ


# --------------------------------------------------------------------------- stages (rdtsc)


def _span_lines(span) -> list[int] | None:
    return None if span is None else [int(span.line), int(span.end_line)]


_FOR_KINDS = {0: "serial", 1: "parallel", 2: "vectorized", 3: "unrolled", 4: "thread_binding"}


def stage_blocks(stmt) -> dict:
    """Blocks (name, realize/store lines) and loop kinds inside one top-level stage."""
    blocks, kinds = [], set()

    def walk(node, current):
        if isinstance(node, s_tir.SBlockRealize):
            current = {"name": node.block.name_hint, "realize_lines": _span_lines(node.span), "store_lines": []}
            blocks.append(current)
        elif isinstance(node, tirx.For):
            kinds.add(_FOR_KINDS.get(int(node.kind), str(node.kind)))
        elif isinstance(node, tirx.BufferStore) and current is not None and node.span is not None:
            if int(node.span.line) not in current["store_lines"]:
                current["store_lines"].append(int(node.span.line))
        for child in stmt_children(node):
            walk(child, current)

    walk(stmt, None)
    return {"blocks": blocks, "loop_kinds": sorted(kinds)}


def instrument(func, capacity: int):
    """``func`` with rdtsc stores around every top-level stage of its root block.

    Returns the new PrimFunc, which takes an extra trailing int64 buffer ``asight_prof`` of
    ``1 + capacity * 2K`` slots, and the K stage descriptions.  Slot 0 counts the calls; call ``c``
    writes its ticks to row ``min(c, capacity - 1)``, so a whole ``time_evaluator`` round is
    recorded call by call (the same back-to-back calling pattern as the plain program's timing).
    """
    realize = func.body
    if not isinstance(realize, s_tir.SBlockRealize):
        raise ValueError("no root block: the function is not an s_tir PrimFunc")
    root = realize.block
    stmts = list(root.body.seq) if isinstance(root.body, tirx.SeqStmt) else [root.body]
    timed = [i for i, s in enumerate(stmts) if not isinstance(s, (tirx.AllocBuffer, tirx.DeclBuffer))]
    width = 2 * len(timed)
    prof = tirx.decl_buffer((1 + capacity * width,), "int64", name="asight_prof")
    i64 = lambda v: tirx.IntImm("int64", v)  # noqa: E731
    count = tirx.BufferLoad(prof, [i64(0)])

    def tick(slot):
        index = tirx.Min(count, i64(capacity - 1)) * i64(width) + i64(1 + slot)
        return tirx.BufferStore(prof, tirx.call_llvm_intrin("int64", "llvm.readcyclecounter"), [index])

    body, stages = [], []
    for i, stmt in enumerate(stmts):
        if i not in timed:
            body.append(stmt)
            continue
        k = len(stages)
        stages.append({"index": k, **stage_blocks(stmt)})
        body += [tick(2 * k), stmt, tick(2 * k + 1)]
    body.append(tirx.BufferStore(prof, count + i64(1), [i64(0)]))
    new_root = s_tir.SBlock(root.iter_vars, root.reads, root.writes, root.name_hint, tirx.SeqStmt(body),
                            root.init, root.alloc_buffers, root.match_buffers, root.annotations)
    new_realize = s_tir.SBlockRealize(realize.iter_values, realize.predicate, new_root)
    return tirx.PrimFunc(list(func.params) + [prof], new_realize, func.ret_type, func.attrs), stages


def profile_stages(mod, target, arrays: list[np.ndarray], plain_rt, whole_hint_us: float | None,
                   budget_ms: float = 300.0) -> dict:
    """Per-stage latency (median over calls) of the PrimFunc ``mod["main"]``.

    The instrumented program runs under ``time_evaluator`` (single back-to-back calls), so each
    call yields both its stage ticks and its end-to-end time: ``ratio`` = Σ stage medians / median
    end-to-end time of the same calls says whether the stages account for the whole call.  The
    plain program (``plain_rt``) is timed in interleaved rounds (~1 ms apart, so both see the same
    load on this shared VM); ``intrusion`` = instrumented / plain, as the median of per-round ratios.
    Different binaries of one kernel can differ by ±15 % here (observed 88 vs 105 µs, either way
    round), so ``intrusion`` is reported, not folded into the stage times.
    """
    hint = max(whole_hint_us or 1000.0, 1.0)
    per_round = int(np.clip(2e3 / hint, 3, 50))                        # ~2 ms per round and program
    rounds = int(np.clip(budget_ms * 1e3 / (2 * per_round * hint), 20, 200))
    capacity = per_round + 4  # time_evaluator adds a warm-up call
    new_func, stages = instrument(mod["main"], capacity)
    entry = _entry(mod)
    rt = tvm.tirx.build(tvm.IRModule({"main": new_func}), target=target)
    dev = tvm.cpu(0)
    args = [tvm.runtime.tensor(a.copy(), dev) for a in arrays]
    width = 2 * len(stages)
    zeros = np.zeros(1 + capacity * width, "int64")
    prof = tvm.runtime.tensor(zeros, dev)
    hz = tsc_hz()
    plain = plain_rt.time_evaluator(entry, dev, number=1, repeat=per_round)
    timed = rt.time_evaluator(entry, dev, number=1, repeat=per_round)
    ticks, plains, ends, paired = [], [], [], []
    for _ in range(rounds):
        round_plain = [x * 1e6 for x in plain(*args).results]
        prof.copyfrom(zeros)
        round_ends = [x * 1e6 for x in timed(*args, prof).results]
        data = prof.numpy()
        calls = min(int(data[0]), capacity)
        ticks.extend(data[1:1 + calls * width].reshape(calls, width)[1:])  # drop the warm-up call
        paired.append(float(np.median(round_ends)) / float(np.median(round_plain)))
        plains.extend(round_plain)
        ends.extend(round_ends)
    result = stage_stats(np.asarray(ticks, dtype=np.int64), stages, hz)
    whole_us = float(np.median(ends))
    result.update(whole_us=whole_us, ratio=result["sum_us"] / whole_us, plain_us=float(np.median(plains)),
                  intrusion=float(np.median(paired)), rounds=rounds,
                  whole_source="end-to-end time (time_evaluator) of the same instrumented calls",
                  intrusion_source="instrumented / plain program, median of per-round ratios (interleaved rounds)")
    return result


def stage_stats(ticks: np.ndarray, stages: list[dict], hz: float) -> dict:
    """Per-stage medians (µs) from rows of [start0, end0, start1, end1, ...] rdtsc ticks."""
    per_stage = (ticks[:, 1::2] - ticks[:, 0::2]) / hz * 1e6
    whole = (ticks[:, -1] - ticks[:, 0]) / hz * 1e6 if stages else np.zeros(len(ticks))
    for stage, column in zip(stages, per_stage.T):
        p25, p75 = np.percentile(column, [25, 75])
        stage.update({"us": float(np.median(column)), "p25_us": float(p25), "p75_us": float(p75)})
    return {"stages": stages, "sum_us": sum(s["us"] for s in stages), "calls": int(len(ticks)),
            "instrumented_whole_us": float(np.median(whole)), "tsc_hz": hz, "source": SOURCE_STAGES}


# --------------------------------------------------------------------------- features (§3)


def feature_rows(sch_or_mod, target) -> dict:
    """PerStoreFeature rows (164 each, one per written buffer) and the blocks that store them."""
    stub_tensor_intrin()  # TuneContext would import all tensor intrinsics (19 s, tvm-notes §0)
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


def _estimate_flops(mod) -> float | None:
    try:
        return float(s_tir.analysis.estimate_tir_flops(mod))
    except Exception:  # TVM refuses some programs (e.g. data-dependent loops)
        return None


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
        return apply_record(func, record), record, _record_info(record, match), []
    except Exception as err:  # a trace that no longer applies to the edited function
        return None, None, None, [f"the best trace does not apply to this function: {_one_line(err)}"]


def measure_variant(mod, sch, target, arrays: list[np.ndarray], opts: dict, serial=None) -> dict:
    """One program: outputs on ``arrays``, timing, and the optional stage/feature/cachegrind data.

    ``sch`` (the Schedule behind ``mod``, or None) feeds the feature extractor; ``serial`` is the
    variant without parallel loops that cachegrind needs for line attribution (default ``mod``).
    """
    dev = tvm.cpu(0)
    rt = tvm.tirx.build(mod, target=target)
    entry = _entry(mod)
    args = [tvm.runtime.tensor(a.copy(), dev) for a in arrays]
    rt[entry](*args)
    out = {"outputs": [a.numpy() for a in args]}
    timer_for = lambda number, repeat: rt.time_evaluator(entry, dev, number=number, repeat=repeat)  # noqa: E731
    out["timing"] = time_function(timer_for, [tvm.runtime.tensor(a.copy(), dev) for a in arrays],
                                  opts["repeats"], opts["budget_ms"])
    if opts["stages"]:
        out["stages"] = _safe(lambda: profile_stages(mod, target, arrays, rt, out["timing"]["median_us"],
                                                     opts["budget_ms"]))
    if opts["features"]:
        out["features"] = _safe(lambda: feature_rows(sch if sch is not None else mod, target))
    if opts["cachegrind"]:
        out["cachegrind"] = _safe(lambda: cachegrind(serial if serial is not None else mod, target, arrays))
    return out


def profile_prim_func(name: str, func, target, db, opts: dict, candidate=None) -> dict:
    """Untuned vs best (or ``candidate``) for one PrimFunc, measured on the same random inputs."""
    base_mod = normalize_mod(func)
    sch, record, best, notes = tuned_variant(func, db, candidate)
    out = {"name": name, "flops": _estimate_flops(base_mod), "flops_source": SOURCE_FLOPS, "best": best,
           "tuned": None, "check": None, "stages": {}, "features": {}, "notes": notes}
    specs = _buffer_specs(base_mod["main"])
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


def _safe(fn) -> dict:
    """Optional measurements fail alone: their error becomes data, the profile goes on."""
    try:
        return fn()
    except Exception as err:
        return {"error": _one_line(err)}


def _one_line(err: BaseException) -> str:
    text = str(err).strip()
    return text.splitlines()[0] if text else type(err).__name__


# --------------------------------------------------------------------------- Relax profile (§6)


def _bindings(func) -> list:
    return [b for block in func.body.blocks for b in block.bindings]


def _callee(value) -> str | None:
    """Name of the PrimFunc a binding calls (``call_tir(gv, ...)``), else None."""
    if isinstance(value, relax.Call) and value.args and isinstance(value.args[0], tvm.ir.GlobalVar):
        return value.args[0].name_hint
    return None


def _uses(expr) -> set[str]:
    names: set[str] = set()
    relax.analysis.post_order_visit(expr, lambda e: names.add(e.name) if isinstance(e, relax.Var) else None)
    return names


def _legalize(mod, target):
    return tvm.transform.Sequential([*relax.pipeline.library_dispatch_passes(target),
                                     relax.transform.LegalizeOps()])(mod)


def _fuse(mod, target, tir: bool):
    passes = [*relax.pipeline.library_dispatch_passes(target), relax.transform.LegalizeOps(),
              relax.transform.AnnotateTIROpPattern(), relax.transform.FoldConstant(), relax.transform.FuseOps()]
    return tvm.transform.Sequential(passes + ([relax.transform.FuseTIR()] if tir else []))(mod)


def call_sites(mod, target, fused: bool, fn: str = "main") -> list[dict]:
    """Kernel calls of ``fn`` in execution order, each with the source variables it computes.

    LegalizeOps drops spans but keeps binding names 1:1.  FuseOps keeps the inner names of each
    group except its output (renamed ``gv``); the output is the legalized binding that calls the
    same PrimFunc on a member of the group (tvm-notes §6, relaxmap.py).
    """
    legal = _bindings(_legalize(mod, target)[fn])
    if not fused:
        return [{"callee": _callee(b.value), "vars": [b.var.name]} for b in legal if _callee(b.value)]
    grouped = _fuse(mod, target, tir=False)
    sites = []
    for b in _bindings(grouped[fn]):
        value = b.value
        op = getattr(value, "op", None)
        if isinstance(value, relax.Call) and isinstance(op, tvm.ir.GlobalVar) and isinstance(grouped[op], relax.Function):
            inner = _bindings(grouped[op])
            members = [x.var.name for x in inner[:-1]]
            last = _callee(inner[-1].value)
            outs = [lb.var.name for lb in legal if lb.var.name not in members and _uses(lb.value) & set(members)]
            exact = [lb.var.name for lb in legal if lb.var.name in outs and _callee(lb.value) == last]
            sites.append({"callee": op.name_hint, "vars": members + (exact or outs)[:1]})
        elif _callee(value):
            sites.append({"callee": _callee(value), "vars": [b.var.name]})
    return sites


def _relax_inputs(func, seed: int) -> tuple[list[str], list[np.ndarray]]:
    specs, names = [], []
    for param in func.params:
        ty = param.ty
        if not hasattr(ty, "shape") or ty.shape is None or not hasattr(ty.shape, "values"):
            raise ValueError(f"parameter '{param.name}' is not a tensor of static shape")
        specs.append((tuple(int(x) for x in ty.shape.values), str(ty.dtype)))
        names.append(param.name)
    return names, random_arrays(specs, seed)


def _flatten(value) -> list[np.ndarray]:
    if hasattr(value, "numpy"):
        return [value.numpy()]
    return [a for item in value for a in _flatten(item)]


def _time_calls(vm, args, runs: int) -> tuple[list[list[tuple[str, float]]], list[float]]:
    """Per run: [(kernel name, µs)] in call order (VM builtins dropped), and the run's wall time."""
    per_run, walls, current, starts = [], [], [], []

    def hook(func, name, before, ret, *rest):
        if before:
            starts.append(time.perf_counter_ns())
        else:
            current.append((str(name), (time.perf_counter_ns() - starts.pop()) / 1e3))
        return 0  # VMInstrumentReturnKind.kNoOp

    vm.set_instrument(hook)
    for _ in range(runs + 1):
        current.clear()
        t0 = time.perf_counter()
        vm["main"](*args)
        walls.append((time.perf_counter() - t0) * 1e6)
        per_run.append([(n, us) for n, us in current if not n.startswith("vm.")])
    return per_run[1:], walls[1:]


def task_latencies(per_run: list, sites: list[dict], flops: dict) -> list[dict]:
    """Median µs per call site, in execution order; the k-th call of a kernel in a run is its
    k-th call site (``order_exact``: the observed call order is the replayed lowering's)."""
    by_callee: dict[str, list[dict]] = {}
    for site in sites:
        by_callee.setdefault(site["callee"], []).append(site)
    samples: dict[tuple[str, int], list[float]] = {}  # insertion order = first run's call order
    for run in per_run:
        seen: dict[str, int] = {}
        for name, us in run:
            seen[name] = seen.get(name, -1) + 1
            samples.setdefault((name, seen[name]), []).append(us)
    exact = bool(per_run) and [n for n, _ in per_run[0]] == [s["callee"] for s in sites]
    tasks = []
    for (name, k), values in samples.items():
        candidates = by_callee.get(name, [])
        site = candidates[k] if k < len(candidates) else None
        p25, p75 = np.percentile(values, [25, 75])
        tasks.append({"task": name, "call": k, "vars": site["vars"] if site else [], "mapped": site is not None,
                      "us": float(np.median(values)), "p25_us": float(p25), "p75_us": float(p75),
                      "flops": flops.get(name), "order_exact": exact})
    return tasks


def _prim_flops(mod) -> dict[str, float | None]:
    return {gv.name_hint: _estimate_flops(tvm.IRModule({"main": mod[gv]}))
            for gv in mod.get_global_vars() if isinstance(mod[gv], tirx.PrimFunc)}


def _task_records(db, fused, target) -> dict[str, dict]:
    """Per extracted task: whether the run tuned it, and its best measured latency."""
    out = {}
    for task in ms.relax_integration.extract_tasks(fused, target):
        mod = task.dispatched[0]
        info = {"weight": int(task.weight), "tuned": False, "best_us": None}
        if db is not None and db.has_workload(mod):
            top = db.get_top_k(db.commit_workload(mod), 1)
            if top and _latency(top[0]) is not None:
                info.update(tuned=True, best_us=_latency(top[0]) * 1e6)
        out[task.task_name] = info
    return out


def measure_vm(executable, arrays: list[np.ndarray], opts: dict, sites: list[dict], flops: dict,
               records: dict) -> dict:
    """One Relax build: outputs, end-to-end timing, and per-kernel-call latency tied to call sites."""
    dev = tvm.cpu(0)
    vm = relax.VirtualMachine(executable, dev)
    args = [tvm.runtime.tensor(a.copy(), dev) for a in arrays]
    out = {"outputs": _flatten(vm["main"](*args))}
    timer_for = lambda number, repeat: vm.time_evaluator("main", dev, number=number, repeat=repeat)  # noqa: E731
    out["timing"] = time_function(timer_for, args, opts["repeats"], opts["budget_ms"])
    whole = out["timing"]["median_us"]
    runs = int(np.clip(opts["budget_ms"] * 1e3 / max(whole, 1.0), max(opts["repeats"], 10), 200))
    per_run, walls = _time_calls(vm, args, runs=runs)
    tasks = task_latencies(per_run, sites, flops)
    for task in tasks:
        task.update(records.get(task["task"], {}))
    out["tasks"] = {"tasks": tasks, "sum_us": sum(t["us"] for t in tasks), "whole_us": whole,
                    "instrumented_run_us": float(np.median(walls)), "runs": runs, "source": SOURCE_TASKS}
    return out


def profile_relax(mod, target, db, opts: dict, fn: str = "main") -> dict:
    """Untuned (``tvm.compile``) vs tuned (``compile_relax`` on the *unfused* module, §6) Relax program."""
    _, arrays = _relax_inputs(mod[fn], opts["seed"])
    out = {"name": fn, "tuned": None, "check": None, "tasks": {}, "notes": [],
           "var_lines": {b.var.name: (int(b.value.span.line) if b.value.span is not None else None)
                         for b in _bindings(mod[fn])}}
    fused = _fuse(mod, target, tir=True)
    records = _task_records(db, fused, target) if db is not None else {}
    legal_flops = _prim_flops(_legalize(mod, target))
    variants = {"baseline": measure_vm(tvm.compile(mod, target=target), arrays, opts,
                                       call_sites(mod, target, False, fn), legal_flops, {})}
    if any(r["tuned"] for r in records.values()):
        executable = ms.relax_integration.compile_relax(db, mod, target, params=None)
        variants["tuned"] = measure_vm(executable, arrays, opts, call_sites(mod, target, True, fn),
                                       _prim_flops(fused), records)
    elif db is not None:
        out["notes"].append("the run has no successful record for any task of this module")
    for label, data in variants.items():
        out[label], out["tasks"][label] = data["timing"], data["tasks"]
    call_flops = [t.get("flops") for t in out["tasks"]["baseline"]["tasks"]]
    out["flops"] = float(sum(call_flops)) if call_flops and None not in call_flops else None
    out["flops_source"] = "sum over kernel calls of estimate_tir_flops (legalized PrimFuncs)"
    out["task_records"] = records
    if "tuned" in variants and opts["check"]:
        base, tuned = variants["baseline"]["outputs"], variants["tuned"]["outputs"]
        out["check"] = compare_outputs([f"output{i}" for i in range(len(base))], base, tuned,
                                       opts["rtol"], opts["atol"])
    return out


# --------------------------------------------------------------------------- cachegrind (§7)

_DRIVER = r"""
import sys, numpy as np, tvm
lib, entry, spec = sys.argv[1], sys.argv[2], sys.argv[3]
rt = tvm.runtime.load_module(lib)
args = [tvm.runtime.tensor(np.load(p)) for p in spec.split(",")]
rt[entry](*args)
"""


def cachegrind(mod, target, arrays: list[np.ndarray], timeout: float = 300.0) -> dict:
    """Simulated cache misses per TVMScript line (valgrind cachegrind on a serial build)."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        return {"skipped": "valgrind is not installed", "source": "valgrind cachegrind"}
    workdir = Path(tempfile.mkdtemp(prefix="asight-cg-"))
    try:
        tvm.compile(mod, target=target).export_library(str(workdir / "k.so"))
        paths = []
        for i, array in enumerate(arrays):
            np.save(workdir / f"a{i}.npy", array)
            paths.append(str(workdir / f"a{i}.npy"))
        (workdir / "driver.py").write_text(_DRIVER)
        out_file = workdir / "cg.out"
        cmd = [valgrind, "--tool=cachegrind", "--cache-sim=yes", "--D1=32768,8,64", "--LL=33554432,16,64",
               f"--cachegrind-out-file={out_file}", sys.executable, str(workdir / "driver.py"),
               str(workdir / "k.so"), _entry(mod), ",".join(paths)]
        env = dict(os.environ, OPENBLAS_NUM_THREADS="1", TVM_NUM_THREADS="1")
        started = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)
        if proc.returncode != 0 or not out_file.exists():
            tail = (proc.stderr or "").strip().splitlines()[-1:] or ["no output"]
            return {"error": f"cachegrind failed: {tail[0]}", "source": "valgrind cachegrind"}
        lines = parse_cachegrind(out_file.read_text(errors="replace"))
        return {"lines": lines, "seconds": time.perf_counter() - started,
                "cache": {"D1": "32 KiB 8-way 64 B", "LL": "32 MiB 16-way 64 B"},
                "source": "valgrind cachegrind (simulated caches, one call, serial build)"}
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def parse_cachegrind(text: str) -> list[dict]:
    """Counters per TVMScript line of the generated kernel (files named by TVM's codegen)."""
    events, file_name, names, agg = [], None, {}, {}
    for raw in text.splitlines():
        if raw.startswith("events:"):
            events = raw.split()[1:]
        elif raw.startswith("fl="):
            file_name = _cg_name(names, "fl", raw[3:])
        elif raw.startswith(("fn=", "fi=", "fe=")):
            if raw.startswith(("fi=", "fe=")):
                file_name = _cg_name(names, "fl", raw[3:])
            else:
                _cg_name(names, "fn", raw[3:])
        elif raw[:1].isdigit() and file_name and _is_tvm_file(file_name):
            parts = raw.split()
            line, values = int(parts[0]), [int(x) for x in parts[1:]]
            values += [0] * (len(events) - len(values))
            agg[line] = [a + b for a, b in zip(agg.get(line, [0] * len(events)), values)]
    return [dict(line=line, **dict(zip(events, values))) for line, values in sorted(agg.items())]


def _cg_name(names: dict, kind: str, value: str) -> str:
    """Resolve cachegrind's name compression: ``(id) name`` defines, ``(id)`` refers."""
    if value.startswith("("):
        close = value.index(")")
        key, rest = (kind, value[1:close]), value[close + 1:].strip()
        if rest:
            names[key] = rest
        return names.get(key, value)
    return value


def _is_tvm_file(name: str) -> bool:
    """TVM's LLVM codegen names the kernel's debug file ``./IRModule.CodeGenLLVM``; its lines are
    TVMScript lines (from the statement spans)."""
    return "CodeGenLLVM" in name


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
    target = _target(params.get("target"))
    db = _database(params.get("run_dir"))
    opts = _options(params)
    result = {"kind": "relax" if _is_relax(parsed) else "tir", "target": target_label(target), "host": host_info(),
              "has_run": db is not None, "options": opts}
    candidate = None
    if params.get("candidate"):
        candidate = _candidate(params["candidate"], params.get("function"))
    if result["kind"] == "relax":
        stub_tensor_intrin()
        result["relax"] = profile_relax(parsed, target, db, opts, params.get("function") or "main")
    else:
        result["kernels"] = []
        for name, func in _prim_funcs(parsed, params.get("function")):
            if emit:
                emit({"type": "profile", "kernel": name})
            result["kernels"].append(profile_prim_func(name, func, target, db, opts, candidate))
    result["seconds"] = time.perf_counter() - started
    return result


def _candidate(spec: dict, function: str | None):
    parsed = parse_request(spec)
    funcs = _prim_funcs(parsed, spec.get("function"))
    if len(funcs) != 1:
        raise ValueError("the candidate must hold exactly one PrimFunc (name it with its function)")
    return funcs[0][1]


def apply_best(params: dict, emit=None) -> dict:
    """Per function (TIR) or tuned task (Relax): the best record's scheduled TVMScript and trace."""
    parsed = parse_request(params)
    db = _database(params.get("run_dir"))
    if db is None:
        raise ValueError("the run has no tuning records")
    entries = []
    if _is_relax(parsed):
        target = _target(params.get("target"))
        fused = _fuse(parsed, target, tir=True)
        for task in ms.relax_integration.extract_tasks(fused, target):
            mod = task.dispatched[0]
            if not db.has_workload(mod):
                continue
            top = db.get_top_k(db.commit_workload(mod), 1)
            if top and _latency(top[0]) is not None:
                sch = s_tir.Schedule(fresh_copy(mod))
                top[0].trace.apply_to_schedule(sch, remove_postproc=False)
                entries.append(_schedule_entry(task.task_name, top[0], sch, "structural"))
    else:
        for name, func in _prim_funcs(parsed, params.get("function")):
            record, match = best_record(db, func)
            if record is None:
                entries.append({"function": name, "error": match})
                continue
            entries.append(_schedule_entry(name, record, apply_record(func, record), match))
    return {"entries": entries}


def _schedule_entry(name: str, record, sch, match: str) -> dict:
    return {"function": name, "latency_us": _latency(record) * 1e6, "match": match,
            "script": sch.mod.script(), "trace": str(record.trace),
            "trace_lines": list(record.trace.as_python(remove_postproc=True))}


HANDLERS = {"profile": profile, "apply_best": apply_best}
