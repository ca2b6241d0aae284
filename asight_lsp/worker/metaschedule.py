"""MetaSchedule tuning (TVM side): targets, tasks, fast builds, baseline, progress.

The tuning job (``tune_job``) drives this module; the long-lived worker only uses the small
``HANDLERS``.  What it tunes:

* one PrimFunc, or every PrimFunc of an IRModule (one task per PrimFunc, as ``ms.tune_tir``);
* a Relax module: tasks are extracted from the legalized and fused module (docs/tvm.md §6).

Speed (docs/tvm.md §0/§2): ``intrinsics.prepare`` instead of the 17 s ``tvm.s_tir.tensor_intrin``
import, and ``builder.fast_build`` as the builder's ``f_build`` (``worker/builder.py``: the pooled
builder, each candidate exported into the builder's own folder).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Callable


from ..engine.targets import DEVICE_KINDS, GPU_WORD, TargetError, gpu_target, local_gpus, target_config
from ..engine import wire
from ..engine.rpc import parse_rpc, reach_tracker
from . import intrinsics
from .compat import (derived_object, fork_seed, tvm_ffi, host_target, hoist_root_allocs, ms, normalize_mod, relax, task_loggers, tirx, tvm)
from .compat import rpc as tvm_rpc
from .builder import cores, make_builder
from .constraint_guard import guided_space
from .inputs import runner_arguments
from .candidate_runner import SandboxedRunner
from .programs import estimate_flops
from .search import BudgetedSearch, TrialBudget, cost_model, search_strategy
from .task_limits import require_fits_memory, require_static_inputs
from .relax_pipeline import fuse, is_reshape

NUMBER, REPEAT, MIN_REPEAT_MS = 3, 1, 20   # the runner's EvaluatorConfig (per trial)
FAILED_SECS = 1e9                           # MetaSchedule stores failed trials as run_secs [1e10]
GPU_KINDS = DEVICE_KINDS


# --------------------------------------------------------------------------- build / run


def evaluator_config():
    return ms.runner.EvaluatorConfig(number=NUMBER, repeat=REPEAT, min_repeat_ms=MIN_REPEAT_MS,
                                     enable_cpu_cache_flush=False)


def make_runner(rpc: str | None = None, timeout_sec: float = 30.0, contained: bool = True):
    """The CPU runner: each candidate run by a sandboxed worker that answers with data
    (``candidate_runner.SandboxedRunner``; MetaSchedule's ``LocalRunner`` pickles results back to
    this unsandboxed process).  Without ``contained`` (a GPU, whose driver's ioctls the sandbox
    refuses): ``LocalRunner``.  Integer inputs are zero (``inputs.runner_arguments``) either way.  With
    ``rpc`` (``HOST:PORT:KEY``): an RPCRunner through a TVM RPC tracker (TVM's default fill there)."""
    if not rpc:
        if contained:
            return SandboxedRunner(timeout_sec=timeout_sec)
        return ms.runner.LocalRunner(timeout_sec=timeout_sec, evaluator_config=evaluator_config(),
                                     f_alloc_argument=runner_arguments)
    host, port, key = parse_rpc(rpc)
    config = ms.runner.RPCConfig(tracker_host=host, tracker_port=port, tracker_key=key,
                                 session_timeout_sec=max(int(timeout_sec), 10))
    return ms.runner.RPCRunner(rpc_config=config, evaluator_config=evaluator_config(),
                               max_workers=rpc_servers(host, port, key))


def rpc_servers(host: str, port: int, key: str) -> int:
    """How many servers the tracker has for ``key`` (one measurement in flight per server, at least 1).

    Raises a one-line ConnectionError when the tracker cannot be reached.
    """
    reach_tracker(host, port)
    try:
        summary = tvm_rpc.connect_tracker(host, port).summary()
    except Exception as err:  # noqa: BLE001  socket errors come wrapped in TVM errors
        raise ConnectionError(f"cannot reach the RPC tracker at {host}:{port}: {str(err).splitlines()[-1]}") from None
    total = sum(1 for item in summary.get("server_info") or [] if str(item.get("key", "")).split(":")[-1] == key)
    if total < 1:
        raise ConnectionError(f"the RPC tracker at {host}:{port} has no server with key '{key}'")
    return total


# --------------------------------------------------------------------------- targets


def resolve_target(spec: str | None):
    """A ``tvm.target.Target`` from the user's text.

    ``None``/``"host"`` -> the host CPU (real ``mcpu``, ``num-cores``).  ``llvm`` without ``mcpu``
    or ``mtriple`` also means this host and gets the host's ``mcpu`` and ``num-cores`` (a bare
    ``llvm`` is generic x86-64: 2-3x slower kernels, docs/tvm.md §0).  Accepted forms: Target JSON
    (``{"kind": ...}``), the classic ``"llvm -mcpu=... -num-cores=4"`` string (TVM 0.27 dropped
    that form; it is converted here), a kind or a tag (``cuda``, ``nvidia/...``).  GPU targets get
    the host CPU as their host.
    """
    if spec is None or not spec.strip() or spec.strip() == "host":
        return host_target()
    text = spec.strip()
    if text == GPU_WORD:       # this machine's first NVIDIA GPU: its TVM tag, else cuda with its sm_XY
        config = gpu_target(local_gpus()[0], set(tvm.target.list_tags()))
        return tvm.target.Target(config, host=host_target())
    config = target_config(text)
    if isinstance(config, dict) and config.get("kind") == "llvm" and "mcpu" not in config \
            and "mtriple" not in config:
        host = host_target()
        config = {**config, "mcpu": str(host.attrs["mcpu"])}
        config.setdefault("num-cores", int(host.attrs["num-cores"]))
    try:
        target = tvm.target.Target(config)
    except Exception as err:  # TVM raises ValueError / TVMError / AttributeError variants
        message = " ".join(str(err).split())
        raise TargetError(f"unknown target {text!r}: {message[:200]}") from None
    if target.kind.name in GPU_KINDS and target.host is None:
        target = tvm.target.Target(target, host=host_target())
    return target


def _plain(value):
    """TVM containers -> JSON-able Python values."""
    if isinstance(value, dict) or hasattr(value, "items"):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)) or (hasattr(value, "__len__") and hasattr(value, "__getitem__")
                                            and not isinstance(value, (str, bytes))):
        return [_plain(v) for v in value]
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    if hasattr(value, "export"):
        return _plain(value.export())
    try:
        return int(value)
    except (TypeError, ValueError):
        return str(value)


def target_json(target) -> dict:
    return _plain(target.export())


# --------------------------------------------------------------------------- tasks


@dataclass
class Task:
    name: str
    mod: object            # IRModule MetaSchedule tunes (normalized)
    weight: float = 1.0
    functions: list = field(default_factory=list)   # source functions behind it


@dataclass
class Plan:
    """What one run tunes: ``kind`` tir|relax, its tasks, and the program to measure end to end."""
    kind: str
    tasks: list
    program: object        # PrimFunc, IRModule of PrimFuncs, or the raw Relax IRModule
    entry: str = "main"

    def task_records(self) -> list[dict]:
        return [{"name": t.name, "weight": t.weight, "functions": t.functions,
                 "workload_hash": str(tvm_ffi.structural_hash(t.mod))} for t in self.tasks]


def plan_for(parsed, function: str | None, target, *, off: frozenset[str]) -> Plan:
    """Tasks for a parsed unit, each one's buffers small enough to allocate (``require_fits_memory``);
    a Relax module's are the kernels of its pipeline without the levers ``off`` (``relax_pipeline.fuse``)."""
    plan = _plan_for(parsed, function, target, off)
    for task in plan.tasks:
        require_fits_memory(task)
    return plan


def _plan_for(parsed, function: str | None, target, off: frozenset[str]) -> Plan:
    """Tasks for a parsed unit.

    ``parsed`` is a PrimFunc or an IRModule; ``function`` (a name inside the module, or None for
    the whole unit) picks one PrimFunc.  A module with a Relax function is tuned as Relax.
    """
    if isinstance(parsed, relax.Function):
        parsed = tvm.IRModule({function or "main": parsed})
    if isinstance(parsed, tirx.PrimFunc):
        name = _symbol(parsed) or "main"
        return Plan("tir", [Task("main", normalize_mod(parsed), 1.0, [name])], parsed)
    funcs = {gv.name_hint: f for gv, f in parsed.functions_items()}
    if function is not None and isinstance(funcs.get(function), tirx.PrimFunc):
        return Plan("tir", [Task(function, normalize_mod(funcs[function]), 1.0, [function])], funcs[function])
    if any(isinstance(f, relax.Function) for f in funcs.values()):
        entry = function if function in funcs and isinstance(funcs[function], relax.Function) else "main"
        require_static_inputs(funcs.get(entry))
        fused = fuse(parsed, target, off=off)
        tasks = [Task(t.task_name, t.dispatched[0], float(t.weight), [t.task_name])
                 for t in ms.relax_integration.extract_tasks(fused, target) if not is_reshape(t.dispatched[0]["main"])]
        if not tasks:
            raise ValueError("the Relax module has no operator to tune (no task after legalize+fuse)")
        return Plan("relax", heaviest_first(tasks), parsed, entry)
    prims = sorted((n, f) for n, f in funcs.items() if isinstance(f, tirx.PrimFunc))
    if not prims:
        raise ValueError("nothing to tune: the unit has no PrimFunc or Relax function")
    return Plan("tir", [Task(n, normalize_mod(f), 1.0, [n]) for n, f in prims], parsed)


def heaviest_first(tasks: list[Task]) -> list[Task]:
    """Tasks by estimated work (calls x FLOPs), most first; ties keep TVM's order.

    MetaSchedule's gradient scheduler warms up round-robin in the order it is given, one batch per
    task.  In TVM's order (graph order) a budget smaller than tasks x batch never reaches the last
    tasks: ResNet-18 at 64 trials left three stride-2 convolutions untried, 62 % of the tuned
    model's time.  Heaviest first spends a short budget where the time is.
    """
    def work(task: Task) -> float:
        return -(task.weight * (estimate_flops(task.mod) or 0.0))
    return sorted(tasks, key=work)


def _symbol(func) -> str | None:
    attrs = func.attrs
    return str(attrs["global_symbol"]) if attrs is not None and "global_symbol" in attrs else None


def tune_contexts(plan: Plan, target, work_dir: str, seed: int | None, threads: int, per_iter: int = 32,
                  constraints: list | None = None, space=None, budget: TrialBudget | None = None,
                  wrap: Callable | None = None) -> list:
    """One TuneContext per task, as ``tune_tir``/``tune_relax`` build them; with ``constraints`` (a
    guided run) the design space carries the principle guard (``worker/constraint_guard.py``); ``space`` (a
    SpaceGenerator: the user's design space, ``worker/userspace.py``) replaces the default one."""
    names = [t.name for t in plan.tasks]
    loggers = task_loggers(work_dir, names)
    contexts = []
    for task, logger, rand_state in zip(plan.tasks, loggers, fork_seed(seed, n=len(plan.tasks))):
        generator = space or (guided_space(target, constraints) if constraints else "post-order-apply")
        strategy = search_strategy(per_iter)
        if budget is not None:
            strategy = BudgetedSearch(strategy, budget)
        if wrap is not None:   # e.g. worker/twins.TransferSearch: (task, strategy) -> strategy
            strategy = wrap(task, strategy)
        contexts.append(ms.TuneContext(mod=task.mod, target=target, space_generator=generator,
                                       search_strategy=strategy, task_name=task.name, logger=logger,
                                       rand_state=rand_state, num_threads=threads).clone())
    return contexts


# --------------------------------------------------------------------------- progress


@derived_object
class ProgressCallback(ms.measure_callback.PyMeasureCallback):
    """Calls ``on_batch(task_index, latencies_s, errors, failures)`` after every measured batch.

    ``latencies_s`` has one entry per candidate (None when its build or run failed); ``failures`` one
    ``{"index", "stage": "build"|"run", "message"}`` per failed candidate (MetaSchedule keeps no error
    text in its database: this is the only place it exists).  It runs after MetaSchedule's default
    callbacks, so the batch is already in the database when it fires.
    """

    def __init__(self, on_batch: Callable[[int, list, int, list], None]):
        self.on_batch = on_batch

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
        latencies, errors, failures = [], 0, []
        for index, (built, ran) in enumerate(zip(builder_results, runner_results)):
            secs = [float(s) for s in ran.run_secs] if ran.run_secs is not None else []
            failed = bool(built.error_msg or ran.error_msg) or not secs or min(secs) >= FAILED_SECS
            errors += failed
            latencies.append(None if failed else sum(secs) / len(secs))
            if failed:
                stage = "build" if built.error_msg else "run"
                message = str(built.error_msg or ran.error_msg or "no latency measured")
                failures.append({"index": index, "stage": stage, "message": message})
        self.on_batch(int(task_id), latencies, errors, failures)


class BestTracker:
    """Best latency per task and the weighted sum over tasks (µs)."""

    def __init__(self, plan: Plan, trials_before: int = 0):
        self.plan = plan
        self.best = [None] * len(plan.tasks)
        self.trials_before = self.trials_done = trials_before
        self.errors = 0

    def seed_from_db(self, db) -> None:
        for i, task in enumerate(self.plan.tasks):
            if db.has_workload(task.mod):
                top = db.get_top_k(db.commit_workload(task.mod), 1)
                if top:
                    secs = [float(s) for s in top[0].run_secs]
                    if secs and min(secs) < FAILED_SECS:
                        self.best[i] = sum(secs) / len(secs)

    def add(self, task_id: int, latencies: list, errors: int) -> None:
        self.trials_done += len(latencies)
        self.errors += errors
        ok = [x for x in latencies if x is not None]
        if ok and (self.best[task_id] is None or min(ok) < self.best[task_id]):
            self.best[task_id] = min(ok)

    def total_us(self) -> float | None:
        """Weighted sum of per-task bests; None until every task has a valid measurement."""
        if any(b is None for b in self.best):
            return None
        return sum(b * t.weight for b, t in zip(self.best, self.plan.tasks)) * 1e6

    def per_task_us(self) -> dict:
        return {t.name: (None if b is None else b * 1e6) for t, b in zip(self.plan.tasks, self.best)}


def open_database(work_dir: str):
    return ms.database.JSONDatabase(work_dir=work_dir, module_equality="structural")


def tune(plan: Plan, target, work_dir: str, trials: int, *, seed: int | None = None, rpc: str | None = None,
         on_batch: Callable[[int, list, int, list], None] | None = None, per_iter: int | None = None,
         database=None, builder=None, runner=None, constraints: list | None = None, space=None,
         budget: TrialBudget | None = None, wrap: Callable | None = None, scheduler=None,
         extra_callbacks: tuple = ()):
    """Run MetaSchedule on the plan's tasks into ``work_dir`` (its own JSON database); returns the DB.
    ``budget`` (default: ``trials``) says afterwards how many known schedules the search skipped."""
    intrinsics.prepare(target)
    threads = cores()
    per_iter = per_iter or trials_per_iter(trials, len(plan.tasks))
    budget = budget or TrialBudget(trials)
    contexts = tune_contexts(plan, target, work_dir, seed, threads, per_iter, constraints, space, budget, wrap)
    callbacks = list(ms.measure_callback.MeasureCallback.create("default"))
    if on_batch is not None:
        callbacks.append(ProgressCallback(on_batch))
    callbacks.extend(extra_callbacks)     # e.g. worker/budget.BudgetWatch
    database = database if database is not None else open_database(work_dir)   # an empty one is falsy (len 0)
    own_builder = builder is None
    builder = builder or make_builder(threads, timeout_sec=build_timeout(target))
    try:
        ms.tune.tune_tasks(
            tasks=contexts, task_weights=[t.weight for t in plan.tasks], work_dir=work_dir,
            max_trials_global=trials, num_trials_per_iter=per_iter,
            builder=builder, runner=runner or make_runner(rpc, contained=target.kind.name not in GPU_KINDS),
            database=database, cost_model=cost_model(threads),
            measure_callbacks=callbacks, task_scheduler=scheduler or "gradient")
    finally:
        if own_builder and hasattr(builder, "shutdown"):
            builder.shutdown()
    return database


def build_timeout(target) -> float:
    """Seconds a builder worker may spend on one candidate: ``ASIGHT_BUILD_TIMEOUT_S``, else 30 on a
    CPU and 120 on a GPU (nvcc on a big kernel takes tens of seconds; the pooled workers never import
    the 15 s CUDA tensor intrinsics: ``fast_build`` skips them, the main process registers them)."""
    forced = os.environ.get("ASIGHT_BUILD_TIMEOUT_S")
    if forced:
        return float(forced)
    return 120.0 if target.kind.name in GPU_KINDS else 30.0


def gpu_ready(plan: Plan, target) -> Plan:
    """On a GPU target, each task's body-level ``T.alloc_buffer`` statements moved into its root
    block (``compat.hoist_root_allocs``).  As parsed, MetaSchedule's ``VerifyGPUCode`` rejects every
    sampled schedule of a function that keeps them (the search then ends with 0 trials, docs/tuning.md);
    CPU runs keep the parsed form, so their workload hashes stay those of earlier runs."""
    if target.kind.name not in GPU_KINDS:
        return plan
    for task in plan.tasks:
        if plan.kind == "tir":
            task.mod = hoist_root_allocs(task.mod)
    return plan


def trials_per_iter(trials: int, n_tasks: int = 1) -> int:
    """Batch size (``analysis/budget.batch_size``); ``ASIGHT_TRIALS_PER_ITER`` overrides it."""
    forced = os.environ.get("ASIGHT_TRIALS_PER_ITER")
    if forced:
        return max(1, int(forced))
    from ..analysis.budget import batch_size
    return batch_size(trials, n_tasks)


# --------------------------------------------------------------------------- measurement


# --------------------------------------------------------------------------- worker handlers


def handle_target(params: dict, emit=None, off=None) -> dict:
    """``tuning.target``: resolve a target text (None = host) to its JSON and a label."""
    target = resolve_target(params.get("target"))
    return {"target": target_json(target), "label": str(target)}


HANDLERS = {wire.TARGET: handle_target}
