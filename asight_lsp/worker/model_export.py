"""``asight export``'s TVM side: a Relax model built with a run's chosen records into a shared
library that ``tvm.runtime.load_module`` + ``relax.VirtualMachine`` run.

* The module built is ``relax_pipeline.deployable``: the weights file beside the source bound as
  constants, the same module the tuning job tuned, so the library takes only the model's inputs.
* Every kernel of the build must take a record (``tirx.is_scheduled``, as the measurements check).
  A kernel on TVM's default schedule is never silent: the export measures what each one costs in
  the built program (VM instrument hook) and refuses to write the library, unless the request
  tunes them first (``tune_missing``: N trials into ``<run>/export-tuned/``, progress as events)
  or accepts them (``allow_untuned``).
* The library is then loaded back from disk, in a sandboxed worker (``check_export``: loading a library
  runs its code), and its outputs compared with the untuned build.
* ``measure_export`` (asked of a *separate* worker process) times the written library interleaved
  with the build the run's headline measured, through the same harness (docs/models.md).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

from ..analysis import failures as fails
from ..analysis import shortfall
from ..analysis.default_candidate import NOTHING_TO_TUNE
from ..analysis.measurement import comparison_record
from ..engine import wire
from .baseline import is_gpu
from .compat import ms, relax, tvm, tvm_ffi
from .harness import Program, evaluator_timer, time_rounds
from .inputs import compare_outputs
from .model_import import tensor_outputs, tensor_params
from .parse import parse_to_run
from .programs import measuring_target
from .records import chosen_database, read_trials, run_database
from .relax_pipeline import bind_weights, build_tuned, deployable, fuse  # noqa: F401  (bind_weights: bench/model_vs_ort.py)
from .relax_profile import call_sites, per_call
from .remeasure import applied_kernels, choose_tasks, device_of, flatten, relax_inputs, split_defaults
from .search import TrialBudget, logged_rejections
from .tune_plan import params_levers

EXPORT_TUNED = "export-tuned"          # <run>/export-tuned/: records of kernels tuned at export
EXPORT_CHOSEN = "chosen.json"          # their best by re-measurement (trial indices into that database)
HEADLINE, LIBRARY = "headline build", "exported library"


def _relax_entry(parsed, fn: str) -> None:
    funcs = {gv.name_hint: f for gv, f in parsed.functions_items()} if isinstance(parsed, tvm.IRModule) else {}
    if not isinstance(funcs.get(fn), relax.Function):
        raise ValueError(f"export builds a Relax model: the unit has no Relax function '{fn}'")


def _export_tuned(run_dir: str) -> tuple[object, list[dict]]:
    """(trials, chosen entries) of the kernels an earlier export tuned for this run, or (None, [])."""
    path = Path(run_dir) / EXPORT_TUNED
    if not (path / EXPORT_CHOSEN).is_file():
        return None, []
    return read_trials(path), json.loads((path / EXPORT_CHOSEN).read_text(encoding="utf-8"))


def _database(params: dict):
    """The run's chosen records (or its whole database) plus the kernels tuned at export, and the
    tasks whose default schedule re-measured faster than every trial (kept on purpose)."""
    chosen = params.get("chosen")
    kept = list(params.get("defaults") or [])
    if chosen is None:        # a run without a measurement: its fastest records while tuning
        return run_database(params["run_dir"]), chosen, [], kept
    database = chosen_database(read_trials(params["run_dir"]), chosen)
    trials, entries = _export_tuned(params["run_dir"])
    extra, won = split_defaults(entries)
    if extra:
        chosen_database(trials, extra, database)
    return database, chosen, extra, kept + won


def kernels_applied(mod, database, target, chosen: list[dict] | None, extra: list[dict], kept: set, *,
                    off: frozenset[str]) -> dict:
    """Which kernels of the deployable build take a record; ``default_kept``: on the default
    schedule because the run's re-measurement found it faster than every trial (``kept``);
    ``missing``: on the default schedule without such a measurement; ``folded``: tuned tasks the
    deployable build no longer has (weight-only kernels of a run tuned before the build bound its
    weights); ``tuned_at_export``: kernels whose record an export tuned.  ``off``: the run's levers off."""
    applied = applied_kernels(mod, database, target, off=off)
    kept_entries, kept = kept, kept_now(mod, target, kept, off=off)
    tuned = {c["task"] for c in chosen or []} | kept
    applied["default_kept"] = sorted(set(applied["default"]) & kept)
    applied["nothing_to_tune"] = sorted({e["task"] for e in kept_entries if e.get("default") == NOTHING_TO_TUNE}
                                        & set(applied["default_kept"]))
    applied["missing"] = [k for k in applied["default"] if k not in kept]
    applied["folded"] = sorted(tuned - set(applied["from_records"]) - set(applied["default"]))
    applied["tuned_at_export"] = sorted({c["task"] for c in extra} & set(applied["from_records"]))
    return applied


def kept_now(mod, target, entries: list[dict], *, off: frozenset[str]) -> set[str]:
    """The tasks whose default schedule won the re-measurement AND whose workload is still the one
    measured (same structural hash): a changed scalar weight is another kernel, not a kept default."""
    if not entries:
        return set()
    hashes = {t.task_name: str(tvm_ffi.structural_hash(t.dispatched[0]))
              for t in ms.relax_integration.extract_tasks(fuse(mod, target, off=off), target)}
    return {e["task"] for e in entries if hashes.get(e["task"]) == str(e.get("workload_hash"))}


def tune_missing(mod, fn: str, target, names: list[str], trials: int, run_dir: str,
                 emit=None, *, off: frozenset[str]) -> dict | None:
    """Tune the kernels ``names`` of the deployable module with ``trials`` trials into
    ``<run>/export-tuned/``, their best by re-measurement saved for later exports; returns why fewer
    trials were measured than asked (``analysis/shortfall.summarise``; None when all were)."""
    from . import metaschedule as tuning
    plan = tuning.plan_for(mod, fn, target, off=off)
    tasks = [t for t in plan.tasks if t.name in set(names)]
    if not tasks:
        return None
    work = Path(run_dir) / EXPORT_TUNED
    work.mkdir(exist_ok=True)
    done, failures = [0, 0], []
    budget = TrialBudget(trials, [t.name for t in tasks])

    def on_batch(task_id: int, latencies: list, errors: int, failed: list) -> None:
        done[0] += len(latencies)
        done[1] += errors
        failures.extend(failed)
        if emit:
            emit({"type": "progress", "stage": "tune-missing", "task": tasks[task_id].name, "trials_done": done[0],
                  "trials": trials, "failed": errors})

    tuning.tune(tuning.Plan("relax", tasks, mod, fn), target, str(work), trials, on_batch=on_batch, budget=budget)
    short = shortfall.summarise(trials, done[0], done[1], fails.group(failures), budget.ended, logged_rejections(work))
    if emit:
        emit({"type": "status", "message": f"re-measuring the best candidates of {len(tasks)} kernels"})
    chosen = choose_tasks(read_trials(work), [(t.name, t.mod) for t in tasks], target, with_default=True, off=off)
    _, before = _export_tuned(run_dir)
    keep = [c for c in before if c["task"] not in {n["task"] for n in chosen}] + chosen
    (work / EXPORT_CHOSEN).write_text(json.dumps(keep), encoding="utf-8")
    return short


def kernel_costs(executable, mod, target, arrays, fn: str, names: list[str], *, off: frozenset[str]) -> list[dict]:
    """µs each named kernel takes in one run of the built program (all its calls; VM instrument
    hook, median per call), with its share of the program's kernel time."""
    measured = per_call(executable, arrays, call_sites(mod, target, True, fn, off=off), {}, {})
    total = measured["sum_us"] or None
    out = []
    for name in names:
        calls = [t["us"] for t in measured["tasks"] if t["task"] == name]
        us = sum(calls) if calls else None
        out.append({"kernel": name, "calls": len(calls), "us": us,
                    "share": us / total if us is not None and total else None})
    return sorted(out, key=lambda c: -(c["us"] or 0.0))


def export_model(params: dict, emit=None, off: frozenset[str] | None = None) -> dict:
    """Build, refuse or write, reload and check; see the module docstring.  ``off``: the request's
    levers (its run's: the kernels as tuned, ``tune_plan.params_levers``)."""
    off = params_levers(params) if off is None else off
    fn = params.get("function") or "main"
    parsed = parse_to_run(params)
    _relax_entry(parsed, fn)
    target = measuring_target(params.get("target"), device=True)
    mod, bound = deployable(parsed, fn, params.get("weights"))
    if params.get("untuned"):      # the run measured the untuned build faster (analysis/deployable.untuned_wins)
        applied = {"from_records": [], "kernels": None, "untuned_build": True}
        return _written(params, fn, mod, target, tvm.compile(mod, target=target), applied, len(bound))
    database, chosen, extra, kept = _database(params)
    applied = kernels_applied(mod, database, target, chosen, extra, kept, off=off)
    # without the weights bound none may fit (the run's schedules pack bound weights): a refusal that
    # says so (services/export.py), not "do the records match this model?"
    if chosen and not applied["from_records"] and bound and not int(params.get("tune_missing") or 0):
        raise ValueError(f"the build applied none of the run's {len(chosen)} tuned kernels (do the records match "
                         "this model? re-tune after editing it, or export with --tune-missing N)")
    tuned_missing = None
    if applied["missing"] and int(params.get("tune_missing") or 0) > 0:
        require_device(target, "tune the missing kernels")
        trials = int(params["tune_missing"])
        short = tune_missing(mod, fn, target, applied["missing"], trials, params["run_dir"], emit, off=off)
        tuned_missing = {"kernels": list(applied["missing"]), "trials": trials, "shortfall": short}
        database, chosen, extra, kept = _database(params)
        applied = kernels_applied(mod, database, target, chosen, extra, kept, off=off)
    if emit:
        emit({"type": "status", "message": f"building with {len(applied['from_records'])} tuned kernels"})
    executable = build_tuned(database, mod, target, off=off)
    if applied["missing"]:
        if not is_gpu(target):     # per-call costs are measured on the CPU (a GPU's: DLight's, not measured)
            arrays = relax_inputs(mod[fn], int(params.get("seed") or 0))
            applied["missing_cost"] = kernel_costs(executable, mod, target, arrays, fn, applied["missing"], off=off)
        if not params.get("allow_untuned"):
            return {**_reply(fn, mod, target, applied, len(bound)), "tuned_missing": tuned_missing,
                    "status": "refused", "library": None}
    return {**_written(params, fn, mod, target, executable, applied, len(bound)), "tuned_missing": tuned_missing}


def require_device(target, what: str) -> None:
    """ValueError where this machine has no device of ``target``'s kind (a GPU run exported here: the
    search sampled and built, then every candidate failed to run, said as a design-space problem)."""
    if is_gpu(target) and not device_of(target).exist:
        raise ValueError(f"this machine has no {target.kind.name} device to {what} on: run the export where the "
                         "GPU is, or export here with --allow-untuned (those kernels get DLight's default schedule)")


def _reply(fn: str, mod, target, applied: dict, bound: int) -> dict:
    return {"target": str(target), "device": target.kind.name if is_gpu(target) else "cpu",
            "applied": applied, "bound_weights": bound, "function": fn,
            "inputs": tensor_params(mod[fn], len(mod[fn].params)), "outputs": tensor_outputs(mod[fn]),
            "tuned_missing": None}


def _written(params: dict, fn: str, mod, target, executable, applied: dict, bound: int) -> dict:
    """``executable`` written to ``params["out"]``.  This worker never loads it: loading a library runs
    its code, so the output check (``check_export``) runs in a sandboxed worker on the CPU."""
    reply = _reply(fn, mod, target, applied, bound)
    out = params["out"]
    executable.export_library(out)
    return {**reply, "status": "written", "library": out, "bytes": os.path.getsize(out)}


def check_export(params: dict, emit=None, off=None) -> dict:
    """The written library (``params["library"]``) loaded and its outputs compared with the untuned
    build's on the same seeded inputs: the compare record (``ok``, ``rtol``, per output); on the
    target's device, and ``{"ok": None, "skipped": why}`` where this machine has none (a model built
    here for a GPU elsewhere)."""
    fn = params.get("function") or "main"
    parsed = parse_to_run(params)
    _relax_entry(parsed, fn)
    target = measuring_target(params.get("target"), device=True)
    mod = deployable(parsed, fn, params.get("weights"))[0]
    dev = device_of(target)
    if not dev.exist:
        return {"ok": None, "skipped": f"this machine has no {target.kind.name} device: the library was written, "
                                       "not loaded, checked or timed (run it where the GPU is)"}
    arrays = relax_inputs(mod[fn], int(params.get("seed") or 0))
    loaded = relax.VirtualMachine(tvm.runtime.load_module(params["library"]), dev)
    reference = relax.VirtualMachine(tvm.compile(mod, target=target), dev)
    outputs = [flatten(vm[fn](*[tvm.runtime.tensor(a.copy(), dev) for a in arrays])) for vm in (reference, loaded)]
    return compare_outputs([f"output{i}" for i in range(len(outputs[0]))], outputs[0], outputs[1])


def headline_program(parsed, fn: str, build: str, weights: str | None):
    """The module the run's headline measured: the deployable one, or (a run tuned before the
    deployable build, ``build`` = ``parameters``) the weights as parameters, fed from the file."""
    if build == "deployable":
        return deployable(parsed, fn, weights)[0]
    return parsed


def measure_export(params: dict, emit=None, off: frozenset[str] | None = None) -> dict:
    """The written library vs the build the run's headline measured: interleaved rounds of the one
    harness (``harness.time_rounds``), same inputs, outputs compared; a measurement record whose
    ``speedup`` is headline build / library.  ``off``: the request's levers (its run's)."""
    off = params_levers(params) if off is None else off
    fn = params.get("function") or "main"
    parsed = parse_to_run(params)
    _relax_entry(parsed, fn)
    target = measuring_target(params.get("target"), device=True)
    weights = params.get("weights")
    program = headline_program(parsed, fn, params.get("headline_build") or "deployable", weights)
    database = chosen_database(read_trials(params["run_dir"]), params["chosen"])
    dev = device_of(target)
    headline_vm = relax.VirtualMachine(build_tuned(database, program, target, off=off), dev)
    library_vm = relax.VirtualMachine(tvm.runtime.load_module(params["library"]), dev)
    seed = int(params.get("seed") or 0)
    head_arrays = relax_inputs(program[fn], seed, weights)
    lib_arrays = relax_inputs(deployable(parsed, fn, weights)[0][fn], seed)
    programs, outputs = [], []
    for label, vm, arrays in ((HEADLINE, headline_vm, head_arrays), (LIBRARY, library_vm, lib_arrays)):
        args = [tvm.runtime.tensor(a.copy(), dev) for a in arrays]
        outputs.append(flatten(vm[fn](*args)))
        programs.append(Program(label, evaluator_timer(vm.time_evaluator, fn, dev, args)))
    raw = time_rounds(programs)
    check = compare_outputs([f"output{i}" for i in range(len(outputs[0]))], outputs[0], outputs[1])
    return comparison_record(raw, [HEADLINE], [LIBRARY], "asight export", "program", time.time(),
                             {"check": check, "headline_build": params.get("headline_build") or "deployable"}, seed)


HANDLERS = {wire.EXPORT_MODEL: export_model, wire.CHECK_EXPORT: check_export, wire.MEASURE_EXPORT: measure_export}
