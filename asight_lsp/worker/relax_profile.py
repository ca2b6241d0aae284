"""Relax programs (TVM side): untuned vs tuned end to end, and each kernel call tied to the source
variables it computes (VM instrument hook, docs/tvm.md)."""
from __future__ import annotations

import time

import numpy as np

from .compat import ms, relax, tirx, tvm
from .programs import estimate_flops
from .relax_pipeline import bindings, fuse, group, legalize
from .records import record_latency
from .timing import compare_outputs, random_arrays, time_function

SOURCE_TASKS = "Relax VM instrument hook (perf_counter_ns before/after each kernel call)"


def _callee(value) -> str | None:
    """Name of the PrimFunc a binding calls (``call_tir(gv, ...)``), else None."""
    if isinstance(value, relax.Call) and value.args and isinstance(value.args[0], tvm.ir.GlobalVar):
        return value.args[0].name_hint
    return None


def _uses(expr) -> set[str]:
    names: set[str] = set()
    relax.analysis.post_order_visit(expr, lambda e: names.add(e.name) if isinstance(e, relax.Var) else None)
    return names


def call_sites(mod, target, fused: bool, fn: str = "main") -> list[dict]:
    """Kernel calls of ``fn`` in execution order, each with the source variables it computes.

    LegalizeOps drops spans but keeps binding names 1:1.  FuseOps keeps the inner names of each
    group except its output (renamed ``gv``); the output is the legalized binding that calls the
    same PrimFunc on a member of the group (docs/tvm.md §6).
    """
    legal = bindings(legalize(mod, target)[fn])
    if not fused:
        return [{"callee": _callee(b.value), "vars": [b.var.name]} for b in legal if _callee(b.value)]
    grouped = group(mod, target)
    sites = []
    for b in bindings(grouped[fn]):
        value = b.value
        op = getattr(value, "op", None)
        if isinstance(value, relax.Call) and isinstance(op, tvm.ir.GlobalVar) and isinstance(grouped[op], relax.Function):
            inner = bindings(grouped[op])
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
    return {gv.name_hint: estimate_flops(tvm.IRModule({"main": mod[gv]}))
            for gv in mod.get_global_vars() if isinstance(mod[gv], tirx.PrimFunc)}


def _task_records(db, fused, target) -> dict[str, dict]:
    """Per extracted task: whether the run tuned it, and its best measured latency."""
    out = {}
    for task in ms.relax_integration.extract_tasks(fused, target):
        mod = task.dispatched[0]
        info = {"weight": int(task.weight), "tuned": False, "best_us": None}
        if db is not None and db.has_workload(mod):
            top = db.get_top_k(db.commit_workload(mod), 1)
            if top and record_latency(top[0]) is not None:
                info.update(tuned=True, best_us=record_latency(top[0]) * 1e6)
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
                         for b in bindings(mod[fn])}}
    fused = fuse(mod, target)
    records = _task_records(db, fused, target) if db is not None else {}
    legal_flops = _prim_flops(legalize(mod, target))
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
