"""Relax programs (TVM side): each kernel call of the untuned and the tuned program tied to the
source variables it computes (VM instrument hook, docs/tvm.md §6).  The end-to-end comparison is
``remeasure.compare_relax``."""
from __future__ import annotations

import time

import numpy as np

from .compat import ms, relax, s_tir, stmt_children, tirx, tvm
from .programs import estimate_flops
from .relax_pipeline import bindings, build_tuned, channels_last, folded, fuse, group, kernel_of, legalize
from .remeasure import relax_inputs

SOURCE_TASKS = "Relax VM instrument hook (perf_counter_ns before/after each kernel call)"


def _callee(value) -> str | None:
    """Name of the PrimFunc a binding calls (``call_tir(gv, ...)``), else None."""
    if isinstance(value, relax.Call) and value.args and isinstance(value.args[0], tvm.ir.GlobalVar):
        return value.args[0].name_hint
    return None


def _var_args(value) -> tuple:
    """The Relax vars a ``call_tir`` reads (its argument tuple), constants left out."""
    args = value.args[1] if len(value.args) > 1 else None
    fields = getattr(args, "fields", [args] if args is not None else [])
    return tuple(f for f in fields if isinstance(f, relax.Var))


def _legal_index(legal_fn) -> dict[tuple, list[str]]:
    """(callee, argument names) -> names of the legalized bindings making that call, in order."""
    index: dict[tuple, list[str]] = {}
    for b in bindings(legal_fn):
        callee = _callee(b.value)
        if callee:
            key = (callee, tuple(a.name for a in _var_args(b.value)))
            index.setdefault(key, []).append(b.var.name)
    return index


def _match_call(value, env: dict, index: dict) -> str | None:
    """The legalized binding this ``call_tir`` (arguments renamed through ``env``) is, if any.
    A grouped function's parameter that receives a constant (a bound weight) maps to None and is
    left out, as the index leaves constants out."""
    names = (env.get(a, a.name) for a in _var_args(value))
    key = (_callee(value), tuple(n for n in names if n is not None))
    names = index.get(key)
    return names.pop(0) if names else None


def call_sites(mod, target, fused: bool, fn: str = "main", *, off: frozenset[str]) -> list[dict]:
    """Kernel calls of ``fn`` in execution order, each with the source variables it computes (the
    fused build's: the pipeline without the levers ``off``).

    LegalizeOps drops spans but keeps binding names 1:1.  FuseOps shares one grouped function
    between identical groups (its inner names are the first group's), so each call site is followed
    through the dataflow: the grouped function's params take the call's arguments, and each inner
    ``call_tir`` is the legalized binding making the same call on the same variables
    (docs/tvm.md §6).  Every call of a repeated kernel gets its own bindings.  The index is built
    after FoldConstant, as FuseOps sees the calls: with bound weights a folded bias reshape is a
    constant argument there, not a variable.
    """
    if not fused:
        legal_fn = legalize(mod, target, convert=False, off=off)[fn]
        return [{"callee": _callee(b.value), "vars": [b.var.name]} for b in bindings(legal_fn) if _callee(b.value)]
    grouped = group(mod, target, off=off)
    index = _legal_index(folded(mod, target, off=off)[fn])
    env: dict = {}
    sites = []
    for b in bindings(grouped[fn]):
        value = b.value
        op = getattr(value, "op", None)
        if isinstance(value, relax.Call) and isinstance(op, tvm.ir.GlobalVar) and isinstance(grouped[op], relax.Function):
            inner_fn = grouped[op]
            inner = dict(zip(inner_fn.params, (env.get(a, getattr(a, "name", None)) for a in value.args)))
            members, member_blocks = [], []
            for ib in bindings(inner_fn):
                name = _match_call(ib.value, inner, index) if _callee(ib.value) else None
                if name is not None:
                    inner[ib.var] = name
                    members.append(name)
                    member_blocks.append(block_names(grouped[ib.value.args[0]]))
            env[b.var] = members[-1] if members else b.var.name
            sites.append({"callee": op.name_hint, "vars": members, "member_blocks": member_blocks})
        elif _callee(value):
            env[b.var] = _match_call(value, env, index) or b.var.name
            sites.append({"callee": _callee(value), "vars": [env[b.var]]})
    return sites


def block_names(func) -> list[str]:
    """Names of a PrimFunc's blocks (root left out), in the order they appear."""
    names: list[str] = []

    def walk(node):
        if isinstance(node, s_tir.SBlock) and node.name_hint != "root":
            names.append(str(node.name_hint))
        for child in stmt_children(node):
            walk(child)

    if isinstance(func, tirx.PrimFunc):
        walk(func.body)
    return names


def _time_calls(vm, args, runs: int, packed: set | None = None) -> tuple[list[list[tuple[str, float]]], list[float]]:
    """Per run: [(kernel name, µs)] in call order (VM builtins dropped), and the run's wall time;
    ``packed`` collects the kernels that ran with weights packed at build time (``kernel_of``)."""
    per_run, walls, current, starts = [], [], [], []

    def hook(func, name, before, ret, *rest):
        if before:
            starts.append(time.perf_counter_ns())
        else:
            kernel = kernel_of(str(name))
            if packed is not None and kernel != str(name):
                packed.add(kernel)
            current.append((kernel, (time.perf_counter_ns() - starts.pop()) / 1e3))
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


def task_records(trials, chosen: list[dict] | None, fused, target) -> dict[str, dict]:
    """Per extracted task: whether the run has a record for it, and the latency of the record a
    tuned build applies: the one chosen by re-measurement; without a choice (``chosen`` None) the
    fastest while tuning.  A task the choice left out (its default schedule won, or no valid trial)
    is not tuned: the build runs its default schedule."""
    by_hash = {c["workload_hash"]: c for c in chosen or []}
    out = {}
    for task in ms.relax_integration.extract_tasks(fused, target):
        info = {"weight": int(task.weight), "tuned": False, "best_us": None, "trials": 0, "failed": 0}
        workload = trials.workload_of(task.dispatched[0]) if trials is not None else None
        if workload is not None:
            valid = trials.valid(workload)
            info["trials"] = sum(1 for w, _ in trials.rows if w == workload)
            info["failed"] = info["trials"] - len(valid)
            pick = by_hash.get(trials.hashes[workload])
            if pick is not None:
                info.update(tuned=True, best_us=pick["measured_us"], trial=pick["trial"], source="re-measured")
            elif valid and chosen is None:
                info.update(tuned=True, best_us=valid[0][1] * 1e6, trial=valid[0][0], source="while tuning")
        out[task.task_name] = info
    return out


def per_call(executable, arrays: list[np.ndarray], sites: list[dict], flops: dict, records: dict,
             budget_s: float = 0.5) -> dict:
    """Each kernel call of one Relax build tied to its call site (VM instrument hook), in µs per call."""
    dev = tvm.cpu(0)
    vm = relax.VirtualMachine(executable, dev)
    args = [tvm.runtime.tensor(a.copy(), dev) for a in arrays]
    t0 = time.perf_counter()
    vm["main"](*args)
    once = time.perf_counter() - t0
    runs = int(np.clip(budget_s / max(once, 1e-6), 5, 200))
    packed: set[str] = set()
    per_run, walls = _time_calls(vm, args, runs=runs, packed=packed)
    tasks = task_latencies(per_run, sites, flops)
    for task in tasks:
        task.update(records.get(task["task"], {}))
        if task["task"] in packed:
            task["weights_packed"] = True
    total = sum(t["us"] for t in tasks)
    for task in tasks:
        task["share"] = task["us"] / total if total else None
    return {"tasks": tasks, "sum_us": total, "instrumented_run_us": float(np.median(walls)), "runs": runs,
            "source": SOURCE_TASKS}


def profile_relax(mod, target, trials, database, chosen: list[dict] | None, opts: dict, fn: str = "main", *,
                  off: frozenset[str]) -> dict:
    """Per-call latency of the untuned and the tuned Relax program (the tuned one without the levers
    ``off``; detail: the headline is ``remeasure.compare_relax``)."""
    arrays = relax_inputs(mod[fn], opts["seed"], opts.get("weights"))
    out = {"name": fn, "tasks": {}, "notes": [],
           "var_lines": {b.var.name: (int(b.value.span.line) if b.value.span is not None else None)
                         for b in bindings(mod[fn])}}
    fused = fuse(mod, target, off=off)
    out["channels_last"] = channels_last(target, off=off)
    records = task_records(trials, chosen, fused, target) if trials is not None else {}
    legal_flops = _prim_flops(legalize(mod, target, convert=False, off=off))
    out["tasks"]["baseline"] = per_call(tvm.compile(mod, target=target), arrays,
                                        call_sites(mod, target, False, fn, off=off), legal_flops, {})
    if any(r["tuned"] for r in records.values()) or (database is not None and chosen is not None):
        # with a choice that kept every default schedule the build is the fused default one: its calls
        # are still the model's kernels, each with its default time
        executable = build_tuned(database, mod, target, off=off)
        out["tasks"]["tuned"] = per_call(executable, arrays, call_sites(mod, target, True, fn, off=off),
                                         _prim_flops(fused), records)
    elif trials is not None:
        out["notes"].append("the run has no successful record for any task of this module")
    call_flops = [t.get("flops") for t in out["tasks"]["baseline"]["tasks"]]
    out["flops"] = float(sum(call_flops)) if call_flops and None not in call_flops else None
    out["flops_source"] = "sum over kernel calls of estimate_tir_flops (legalized PrimFuncs)"
    out["task_records"] = records
    return out
