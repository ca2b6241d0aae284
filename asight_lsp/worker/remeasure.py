"""Measurements after tuning (TVM side): the best by re-measurement, and untuned vs tuned compared.

* ``choose_best``: the top candidates of a workload by in-tuning latency (measured by MetaSchedule's
  runner while builders loaded the cores) are built again and re-measured with the harness; the
  fastest by re-measurement is the run's best for that workload.
* ``compare_tir``: untuned vs tuned PrimFuncs (one, or every PrimFunc of a module: sums), one round
  timing all of them; outputs compared on the same random inputs.
* ``compare_relax``: the untuned program vs the program built with the chosen records, end to end,
  after checking that the build really applied them (kernels marked ``tirx.is_scheduled`` against
  the tasks that have a chosen record).

Every timing goes through ``harness.time_rounds``; the statistics are ``analysis.measurement``.
"""
from __future__ import annotations

import os

import time

import numpy as np

from ..analysis import default_candidate as defaults_rule
from ..analysis import levers
from ..analysis.gpu_headline import headline as gpu_headline
from ..analysis.measurement import comparison_record
from ..engine import wire
from .compat import RemoveWeightLayoutRewriteBlock, load_ir, ms, relax, s_tir, tirx, tvm, tvm_ffi
from .baseline import DLIGHT, baseline_of, is_gpu, vendor_reference, vendor_workload
from .harness import Program, evaluator_timer, time_rounds
from .inputs import compare_outputs, random_arrays
from .programs import buffer_specs, entry_name
from .records import Trials, chosen_database, fresh_copy, read_trials
from . import lever_guard
from .relax_pipeline import build_tuned, fuse, is_reshape, load_weights
from .tune_plan import params_levers

TOP_K = 5
# seconds of interleaved rounds per program when the best candidates are re-measured (each task: its
# ``TOP_K`` trials and its default schedule); the test suite sets less (tests/conftest.py)
CANDIDATE_BUDGET_S = float(os.environ.get("ASIGHT_CANDIDATE_BUDGET_S", "0.6"))


def device_of(target):
    """The device a target's programs run on (``tvm.cuda(0)`` for a CUDA target)."""
    kind = target.kind.name
    return tvm.cpu(0) if kind in ("llvm", "c") else tvm.device(kind, 0)


def build_prim(mod, target):
    """A runtime module of a PrimFunc module (``tvm.tirx.build``), after the native-call rule."""
    from .parse import checked_for_build
    return tvm.tirx.build(checked_for_build(mod, target, "a scheduled kernel"), target=target)


def scheduled(mod, record):
    """``mod`` (a normalised PrimFunc module) with a record's trace replayed on a fresh copy."""
    sch = s_tir.Schedule(fresh_copy(mod))
    record.trace.apply_to_schedule(sch, remove_postproc=False)
    return sch.mod


def as_deployed(mod):
    """A scheduled kernel as a prepacked build runs it (``relax_pipeline.prepacks``): the weight
    re-layout its schedule added (``RewriteLayout``) removed, the weight taken already packed, as
    MetaSchedule's builder times it; the build folds that re-layout into the constants once."""
    return RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(mod)


def prim_inputs(mod, seed: int = 0) -> tuple[list[str], list[np.ndarray]]:
    specs = buffer_specs(mod["main"])
    return [name for name, _, _ in specs], random_arrays([(shape, dtype) for _, shape, dtype in specs], seed)


def choose_best(trials: Trials, workload: int, mod, target, name: str, k: int = TOP_K,
                with_default: bool = False, cold: bool = False) -> dict | None:
    """Re-measure the ``k`` fastest trials (in-tuning) of one workload, and the workload's default
    (unscheduled: what the untuned build runs) schedule in the same rounds; the best by re-measurement.
    ``cold``: every call timed with its inputs but the first flushed from the CPU caches (a model's
    kernel, whose weights the other kernels evicted; the ``cold`` lever, ``cold_remeasure``).

    Returns ``{"task", "workload", "workload_hash", "trial", "tuning_us", "measured_us",
    "candidates": [{trial, tuning_us, measured_us | error}], "harness", "default_us",
    "default_wins"}`` or None without a valid trial.  ``default_wins``: no trial beat the default
    schedule, so the tuned build must keep the default for this task (``measure_run``)."""
    top = trials.valid(workload)[:k]
    if not top:
        return None
    _, arrays = prim_inputs(mod)
    dev = device_of(target)
    programs, table = [], []
    for trial, secs in top:
        entry = {"trial": trial, "tuning_us": secs * 1e6}
        try:
            built = as_deployed(scheduled(mod, trials.record(trial)))
            rt = build_prim(built, target)
            args = [tvm.runtime.tensor(a.copy(), dev) for a in prim_inputs(built)[1]]
            programs.append(Program(f"trial {trial}", evaluator_timer(rt.time_evaluator, entry_name(built), dev, args, cold)))
        except Exception as err:  # noqa: BLE001 - a trace that no longer builds is left out, with its reason
            entry["error"] = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        table.append(entry)
    if not programs:
        return None
    default, once_us = default_program(mod, target, arrays, dev, cold) if with_default else (None, None)
    if default is not None and not defaults_rule.worth_timing(once_us, min(e["tuning_us"] for e in table)):
        default = None     # clearly slower (one call): not worth the rounds (an untuned conv takes ~0.1-1 s)
    raw = time_rounds(programs + ([default] if default else []), budget_s=CANDIDATE_BUDGET_S * (len(programs) + 1))
    for entry in table:
        samples = raw["samples_us"].get(f"trial {entry['trial']}")
        if samples:
            entry["measured_us"] = float(np.median(samples))
    best = min((e for e in table if "measured_us" in e), key=lambda e: e["measured_us"])
    default_samples = raw["samples_us"].get(DEFAULT_LABEL) if default else None
    default_us = float(np.median(default_samples)) if default_samples else once_us
    return {"task": name, "workload": workload, "workload_hash": trials.hashes[workload], "trial": best["trial"],
            "tuning_us": best["tuning_us"], "measured_us": best["measured_us"], "candidates": table,
            "default_us": default_us, "default_wins": defaults_rule.default_wins(default_us, best["measured_us"]),
            "harness": {"rounds": raw["rounds"], "calls_per_repeat": raw["calls_per_repeat"], "load": raw["load"],
                        "cold": cold}}


DEFAULT_LABEL = "default schedule"


def default_program(mod, target, arrays, dev, cold: bool = False) -> tuple[Program, float]:
    """The workload as the untuned build runs it (no schedule applied), one more candidate (issue 21:
    no task ends slower than untuned), and one call's µs.  Asked only with the default lever on
    (``choose_tasks``)."""
    plain = baseline_of(mod, target)[0] if is_gpu(target) else fresh_copy(mod)   # a GPU's default: DLight
    rt = build_prim(plain, target)
    args = [tvm.runtime.tensor(a.copy(), dev) for a in arrays]
    once_us = float(rt.time_evaluator(entry_name(plain), dev, number=1, repeat=1)(*args).mean) * 1e6
    return Program(DEFAULT_LABEL, evaluator_timer(rt.time_evaluator, entry_name(plain), dev, args, cold)), once_us


def choose_all(trials: Trials, tasks: list[tuple[str, object]], target, k: int = TOP_K,
               with_default: bool = False, *, off: frozenset[str]) -> list[dict]:
    """``choose_best`` for every task that has a valid trial and (``with_default``: a model's tasks)
    whose best beat its default schedule (``tasks``: (name, tuned module)): the records a build applies."""
    return split_defaults(choose_tasks(trials, tasks, target, k, with_default, off=off))[0]


def choose_tasks(trials: Trials, tasks: list[tuple[str, object]], target, k: int = TOP_K,
                 with_default: bool = False, *, off: frozenset[str]) -> list[dict]:
    """``choose_best`` for every task that has a valid trial, default-schedule winners included.
    ``with_default``: a model's tasks, whose default schedule competes unless ``off`` names the
    ``default`` lever, re-measured cold unless it names ``cold``."""
    cold = with_default and cold_lever(target, off=off)   # a model's tasks run in a chain, their weights evicted
    defaults = with_default and "default" not in off
    k = max(k, levers.COLD_TOP_K) if cold else k
    chosen = []
    for name, mod in tasks:
        workload = trials.workload_of(mod)
        entry = None if workload is None else pick(trials, workload, mod, target, name, k, defaults, cold)
        if entry is None and defaults and nothing_to_tune(mod, target):
            entry = default_alone(mod, target, name, cold)
        if entry is not None:
            chosen.append(entry)
    return chosen


def pick(trials: Trials, workload: int, mod, target, name: str, k: int, with_default: bool, cold: bool):
    """``choose_best``, cold when the lever is on, warm where TVM refuses the cold timing (``lever_guard``)."""
    def best(flush: bool):
        return choose_best(trials, workload, mod, target, name, k, with_default, flush)
    return lever_guard.either("cold", lambda: best(True), lambda: best(False), name) if cold else best(False)


def nothing_to_tune(mod, target) -> bool:
    """``default_candidate.nothing_to_tune`` of a task: its FLOPs and its design space's decisions."""
    from .programs import estimate_flops
    try:
        spaces = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply",
                                task_name="space").generate_design_space()
        decisions = sum(len(s.trace.decisions) for s in spaces)
    except Exception:  # noqa: BLE001 - a space TVM cannot generate: judged by its FLOPs alone
        decisions = None
    return defaults_rule.nothing_to_tune(estimate_flops(mod), decisions)


def default_alone(mod, target, name: str, cold: bool = False) -> dict:
    """A task without a trial that has nothing to tune, its default schedule timed alone as its measured
    candidate (``default_candidate.untried_entry``)."""
    dev = device_of(target)
    default, once_us = default_program(mod, target, prim_inputs(mod)[1], dev, cold)
    raw = time_rounds([default], budget_s=CANDIDATE_BUDGET_S)
    samples = raw["samples_us"].get(DEFAULT_LABEL)
    return defaults_rule.untried_entry(name, str(tvm_ffi.structural_hash(mod)),
                                       float(np.median(samples)) if samples else once_us,
                                       {"rounds": raw["rounds"], "calls_per_repeat": raw["calls_per_repeat"],
                                        "load": raw["load"], "cold": cold})


split_defaults = defaults_rule.split


def cold_lever(target, *, off: frozenset[str]) -> bool:
    """Whether a model's tasks are re-measured cold on ``target`` without the levers ``off``
    (``levers.cold_remeasure``)."""
    return levers.cold_remeasure(target.kind.name, off)


def compare_tir(pairs: list[tuple[str, object, object]], target, seed: int = 0, check: bool = True,
                budget_s: float | None = None, timed: bool = True) -> dict:
    """Untuned vs tuned PrimFuncs in interleaved rounds: ``pairs`` = (name, untuned mod, tuned mod or
    None); returns the harness result, the labels of each side, and the output check."""
    dev = device_of(target)
    programs, untuned, tuned, checks, last = [], [], [], [], None
    for name, base_mod, tuned_mod in pairs:
        names, arrays = prim_inputs(base_mod, seed)
        outputs = {}
        for side, mod in (("untuned", base_mod), ("tuned", tuned_mod)):
            if mod is None:
                continue
            rt = build_prim(mod, target)
            args = [tvm.runtime.tensor(a.copy(), dev) for a in arrays]
            rt[entry_name(mod)](*args)
            outputs[side] = [a.numpy() for a in args]
            label = f"{side} {name}"
            programs.append(Program(label, evaluator_timer(rt.time_evaluator, entry_name(mod), dev, args)))
            (untuned if side == "untuned" else tuned).append(label)
        if check and "tuned" in outputs:
            checks.append({"function": name, **compare_outputs(names, outputs["untuned"], outputs["tuned"])})
        last = (arrays, outputs)
    if tuned:   # a function without a tuned variant runs untuned in the tuned module too
        tuned = [f"tuned {n}" if t is not None else f"untuned {n}" for n, _, t in pairs]
    raw = time_rounds(programs, budget_s=budget_s) if timed else None
    return {"raw": raw, "untuned": untuned, "tuned": tuned, "check": _merge_checks(checks), "last": last}


def _merge_checks(checks: list[dict]) -> dict | None:
    """One check over several functions (buffers named ``function.buffer`` when there are several)."""
    if not checks:
        return None
    several = len(checks) > 1
    buffers = [{**b, "name": f"{c['function']}.{b['name']}" if several else b["name"]}
               for c in checks for b in c["buffers"]]
    first = checks[0]
    return {"ok": all(c["ok"] for c in checks), "rtol": first["rtol"], "atol": first["atol"],
            "atol_scaled_by": first["atol_scaled_by"], "buffers": buffers, "source": first["source"]}


def applied_kernels(program, database, target, *, off: frozenset[str]) -> dict:
    """Which fused kernels a build with ``database`` takes from records (``tirx.is_scheduled``)."""
    fused = fuse(program, target, off=off)
    with target, database, tvm.transform.PassContext(opt_level=3):
        applied = relax.transform.MetaScheduleApplyDatabase()(fused)
    # a kernel is what the plan tuned (``metaschedule.plan_for``: the fused function is not a reshape);
    # a scheduled layout transform of singleton axes can read as a reshape afterwards
    reshapes = {gv.name_hint for gv, f in fused.functions_items() if isinstance(f, tirx.PrimFunc) and is_reshape(f)}
    kernels = {gv.name_hint: bool(f.attrs and f.attrs.get("tirx.is_scheduled"))
               for gv, f in applied.functions_items()
               if isinstance(f, tirx.PrimFunc) and gv.name_hint not in reshapes}
    return {"kernels": len(kernels), "from_records": sorted(k for k, v in kernels.items() if v),
            "default": sorted(k for k, v in kernels.items() if not v)}


def relax_inputs(func, seed: int = 0, weights: str | None = None) -> list[np.ndarray]:
    """One array per parameter of ``func``: the model's weights where the weights file has an
    array of that name, shape and dtype; seeded random values for the rest (the inputs)."""
    specs = []
    for param in func.params:
        info = getattr(param, "ty", None) or getattr(param, "struct_info", None)
        shape = getattr(info, "shape", None)
        if shape is None or not hasattr(shape, "values"):
            raise ValueError(f"parameter '{param.name}' is not a tensor of static shape")
        specs.append((tuple(int(x) for x in shape.values), str(info.dtype)))
    arrays = random_arrays(specs, seed)
    known = load_weights(weights)
    for i, (param, (shape, dtype)) in enumerate(zip(func.params, specs)):
        value = known.get(param.name)
        if value is not None and tuple(value.shape) == shape and str(value.dtype) == dtype:
            arrays[i] = value
    return arrays


def flatten(value) -> list[np.ndarray]:
    if hasattr(value, "numpy"):
        return [value.numpy()]
    return [a for item in value for a in flatten(item)]


def compare_relax(program, entry: str, database, target, tasks_with_records: list[str], seed: int = 0,
                  check: bool = True, budget_s: float | None = None, timed: bool = True,
                  weights: str | None = None, *, off: frozenset[str]) -> dict:
    """The untuned program vs the program built with ``database`` (without the levers ``off``), end to
    end, interleaved (without a database: the untuned program alone).

    Raises ``ValueError`` when the tuned build took none of the kernels that have records (a build
    that silently ignored the database, docs/tvm.md §6)."""
    executables = {"untuned": tvm.compile(program, target=target)}
    applied = None
    if database is not None:
        applied = applied_kernels(program, database, target, off=off)
        missing = sorted(set(tasks_with_records) - set(applied["from_records"]))
        applied.update(tasks_with_records=sorted(tasks_with_records), missing=missing)
        if tasks_with_records and not applied["from_records"]:
            raise ValueError(f"the tuned build applied none of the {len(tasks_with_records)} tuned kernels")
        executables["tuned"] = build_tuned(database, program, target, off=off)
    dev = device_of(target)
    arrays = relax_inputs(program[entry], seed, weights)
    programs, outputs = [], {}
    for side, executable in executables.items():
        vm = relax.VirtualMachine(executable, dev)
        args = [tvm.runtime.tensor(a.copy(), dev) for a in arrays]
        outputs[side] = flatten(vm[entry](*args))
        programs.append(Program(side, evaluator_timer(vm.time_evaluator, entry, dev, args)))
    raw = time_rounds(programs, budget_s=budget_s) if timed else None
    result = {"raw": raw, "untuned": ["untuned"], "tuned": ["tuned"] if "tuned" in outputs else [],
              "applied": applied, "check": None}
    if check and "tuned" in outputs:
        result["check"] = compare_outputs([f"output{i}" for i in range(len(outputs["untuned"]))],
                                          outputs["untuned"], outputs["tuned"])
    return result


def measure_run(kind: str, tasks: list[tuple[str, object]], run_dir, target, by: str, *, program=None,
                entry: str = "main", chosen: list[dict] | None = None, seed: int = 0,
                weights: str | None = None, off: frozenset[str]) -> dict | None:
    """The measurement record of a run: the best per task by re-measurement (unless ``chosen`` is
    given), then untuned vs tuned through the harness.  ``tasks``: (name, module MetaSchedule tuned);
    for Relax ``program`` is the raw module, measured end to end; ``off``: the run's levers off
    (``tune_plan.request_levers``).  None when no task has a record."""
    trials = read_trials(run_dir)
    # the default schedule competes in a model's tasks (a kernel run keeps showing its tuned schedule)
    chosen, defaults = split_defaults(choose_tasks(trials, tasks, target, with_default=kind == "relax", off=off)
                                      if chosen is None else chosen)
    if not chosen and not defaults:
        return None
    extra = {"chosen": chosen, "trials": len(trials.rows), "defaults": defaults}
    if kind == "relax":
        result = compare_relax(program, entry, chosen_database(trials, chosen), target,
                               [c["task"] for c in chosen], seed, weights=weights, off=off)
        extra["applied"] = result["applied"]
        scope = "program"
    else:
        by_task = {c["task"]: c for c in chosen}
        pairs = [(name, baseline_of(mod, target)[0],
                  scheduled(mod, trials.record(by_task[name]["trial"])) if name in by_task else None)
                 for name, mod in tasks]
        if is_gpu(target):   # the "untuned" side of a GPU record is DLight's default schedule
            extra["baseline"] = dict(DLIGHT)
        result = compare_tir(pairs, target, seed)
        scope = "function" if len(pairs) == 1 else "module"
        if is_gpu(target) and len(pairs) == 1 and result["last"] and "tuned" in result["last"][1]:
            arrays, outputs = result["last"]
            extra["vendor"] = vendor_reference(arrays, outputs["tuned"][-1], workload=vendor_workload(tasks[0][1]))
    extra["check"] = result["check"]
    record = comparison_record(result["raw"], result["untuned"], result["tuned"], by, scope, time.time(), extra, seed)
    if is_gpu(target):
        if kind != "relax":   # DLight won: its record moves to ``defaults`` (a model's tasks: per task, above)
            record = defaults_rule.keep_baseline(record)
        record["gpu"] = gpu_headline(record)      # tuned vs DLight (+ vendor); kept = the faster
    return record


def remeasure(params: dict, emit=None, off: frozenset[str] | None = None) -> dict:
    """``measure_run`` asked by the tuning job of its sandboxed worker (docs/sandbox.md): the tuned and
    untuned programs are built and timed where their code cannot write, start or signal anything.
    ``off``: the request's levers (its run's, ``tune_plan.params_levers``)."""
    from .sandbox import STATUS
    if not STATUS.active:
        raise RuntimeError("remeasure is answered only by a sandboxed worker")
    tasks = [(name, load_ir(text)) for name, text in params["tasks"]]
    program = load_ir(params["program"]) if params.get("program") else None
    record = measure_run(params["kind"], tasks, params["run_dir"], tvm.target.Target(params["target"]), params["by"],
                         program=program, entry=params.get("entry") or "main", weights=params.get("weights"),
                         chosen=params.get("chosen"), off=params_levers(params) if off is None else off)
    if record is not None:
        record["process"] = "sandboxed worker"    # where the programs ran (docs/sandbox.md)
    return {"record": record}


HANDLERS = {wire.REMEASURE: remeasure}
