"""The schedule library's TVM side (``store/library.py`` holds its files and rules).

* ``LibraryStart`` wraps a task's search: where the library holds the task's workload (structurally
  equal, for this target), the library's schedule is replayed onto the task and measured as the
  task's first batch, here and now; it then enters the run's database like any trial, so the
  evolutionary search starts from it and the run's best is whatever is fastest *here*.  The search
  never proposes it again (``search.MeasuredSchedules``).
* ``feed`` adds a finished run's best record of each task: where the library lacks the workload, holds
  a slower record, or the run measured the library's own schedule (then the run's best is the truth
  on this machine).
* ``check_records`` replays each record of a library file on its workload (``asight library import``,
  in the sandboxed worker): a record that does not replay is refused with its reason.
"""
from __future__ import annotations

from ..engine import wire
from ..store import library as shelf
from .compat import Trace, derived_object, ms, s_tir, tvm, tvm_ffi
from .programs import short_error
from .twins import FAILED_SECS, best_record, candidate


def open_library(target, make: bool = False):
    """(folder, MetaSchedule database) of ``target``'s records; (None, None) when the library is off
    or holds nothing for it (unless ``make``)."""
    folder = shelf.folder_for(str(target), make=make)
    if folder is None or not (make or (folder / shelf.DB_WORKLOADS).is_file()):
        return None, None
    return folder, ms.database.JSONDatabase(work_dir=str(folder), module_equality="structural")


def replay(record, mod):
    """The schedule of ``record`` on ``mod`` (postprocessing included, as it was measured), or None."""
    try:
        sch = s_tir.Schedule(mod)
        record.trace.apply_to_schedule(sch, remove_postproc=False)
        return sch
    except Exception:  # noqa: BLE001 - a record that no longer replays here is no start
        return None


def _mean_us(secs) -> float | None:
    secs = [float(s) for s in secs or []]
    return sum(secs) / len(secs) * 1e6 if secs and min(secs) < FAILED_SECS else None


class Starts:
    """Shared by every task's ``LibraryStart`` of one run: the library and what each task took from it."""

    def __init__(self, database, folder):
        self.database, self.folder = database, folder
        self.hits: list[dict] = []      # {task, library_us, measured_us}

    def summary(self, tasks: int) -> dict:
        return {"folder": str(self.folder), "tasks": tasks, "hits": self.hits}


@derived_object
class LibraryStart(ms.search_strategy.PySearchStrategy):
    """A task's search (``inner``: ``search.BudgetedSearch`` or a wrapper of it) whose first batch is the
    library's schedule of the task, when the library holds one (see the module text)."""

    def __init__(self, inner, name: str, starts: Starts, budget=None):
        self.inner, self.name, self.starts, self.budget = inner, name, starts, budget
        self.mod, self.pending, self.asked = None, None, False

    @property
    def measured(self):      # what twins.TransferSearch tells the inner search it measured
        return getattr(self.inner, "measured", None)

    def _initialize_with_tune_context(self, context) -> None:
        self.mod = context.mod
        self.inner._initialize_with_tune_context(context)

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None) -> None:
        self.inner.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database, cost_model)

    def post_tuning(self) -> None:
        self.inner.post_tuning()

    def _start(self):
        """The library's schedule of this task as a candidate and its record, or None."""
        if self.asked or self.starts.database is None or (self.budget is not None and self.budget.exhausted(self.name)):
            return None
        self.asked = True
        record = best_record(self.starts.database, self.mod)
        sch = replay(record, self.mod) if record is not None else None
        known = self.measured
        if sch is None or (known is not None and known.holds(sch.mod)):   # a resumed run measured it already
            return None
        return candidate(sch), record

    def generate_measure_candidates(self):
        start = self._start()
        if start is None:
            return self.inner.generate_measure_candidates()
        cand, record = start
        if self.budget is not None:
            self.budget.started(self.name)
            self.budget.left -= 1
        self.pending = {"task": self.name, "library_us": _mean_us(record.run_secs), "mod": cand.sch.mod}
        return [cand]

    def notify_runner_results(self, measure_candidates, results) -> None:
        if self.pending is None:
            self.inner.notify_runner_results(measure_candidates, results)
            return
        result = list(results)[0]
        known = self.measured
        if known is not None and hasattr(known, "remember"):
            known.remember(self.pending["mod"])
        self.starts.hits.append({"task": self.pending["task"], "library_us": self.pending["library_us"],
                                 "measured_us": None if result.error_msg else _mean_us(result.run_secs)})
        self.pending = None

    def clone(self):
        return LibraryStart(self.inner.clone(), self.name, self.starts, self.budget)


def untouched(job, extra: dict) -> bool:
    """Runs with a design space or principles of the user's neither start from nor feed the library
    (their candidates are theirs)."""
    return job.space is not None or bool(extra.get("constraints"))


def start_wrap(job, budget, extra: dict):
    """(Starts, wrap for ``metaschedule.tune``) when the library holds records for the job's target,
    else (None, None)."""
    if untouched(job, extra):
        return None, None
    folder, database = open_library(job.target)
    if database is None:
        return None, None
    starts = Starts(database, folder)
    return starts, lambda task, strategy: LibraryStart(strategy, task.name, starts, budget)


def stacked(inner, outer):
    """One ``wrap`` (task, strategy) -> strategy of two, either None: ``outer`` wraps ``inner``'s result."""
    if inner is None or outer is None:
        return inner or outer
    return lambda task, strategy: outer(task, inner(task, strategy))


def run_section(job, run_db, starts: Starts | None, extra: dict) -> tuple[dict | None, str | None]:
    """Feed the library from a finished search: (run.json's ``extra.library``, the line to say), or
    (None, None) for a run that leaves it alone.  A library that cannot be written is said; the run
    loses nothing."""
    if untouched(job, extra):
        return None, None
    hits = starts.hits if starts is not None else []
    try:
        fed = feed(job.plan, job.target, run_db, hits)
    except OSError as err:
        fed = {"error": f"the schedule library was not written: {err}"}
    section = {"tasks": len(job.plan.tasks), "hits": hits, **fed}
    message = fed.get("error") or (shelf.hits_text(hits, len(job.plan.tasks)) if hits else None)
    return section, message


def feed(plan, target, run_db, hits: list[dict] | None = None) -> dict:
    """Add the run's best record of each task to the library (see the module text); returns
    ``{"folder", "fed", "kept"}`` or ``{"off": why}``."""
    folder = shelf.folder_for(str(target))
    if folder is None:
        return {"off": f"${shelf.LIBRARY_ENV} is off"}
    hit_tasks = {h["task"] for h in hits or [] if h.get("measured_us") is not None}
    fed, names = 0, {}
    with shelf.locked(folder):
        folder, library = open_library(target, make=True)
        for task in plan.tasks:
            record = best_record(run_db, task.mod)
            if record is None:
                continue
            held = best_record(library, task.mod)
            if held is not None and task.name not in hit_tasks and \
                    (_mean_us(held.run_secs) or float("inf")) <= (_mean_us(record.run_secs) or float("inf")):
                continue
            workload = library.commit_workload(task.mod)
            names[str(int(tvm_ffi.structural_hash(task.mod)))] = task.name if task.name != "main" or not task.functions \
                else task.functions[0]
            library.commit_tuning_record(ms.database.TuningRecord(record.trace, workload, record.run_secs,
                                                                  record.target, record.args_info))
            fed += 1
        shelf.name_workloads(folder, names)
        kept = shelf.compact(folder)
    return {"folder": str(folder), "fed": fed, "kept": kept}


def check_records(params: dict, emit=None, off=None) -> dict:
    """``library.check``: ``{"entries": [[workload line, record], ...]}`` -> ``{"refused": [{index, why}]}``;
    each record's trace must replay on its own workload.  Runs in the sandboxed worker: nothing is built."""
    import base64
    refused = []
    for index, (workload, record) in enumerate(params["entries"]):
        try:
            mod = tvm.ir.load_json(base64.b64decode(workload[1])[8:].decode("utf-8"))
            Trace.apply_json_to_schedule(record[0], s_tir.Schedule(mod, error_render_level="detail"))
            ms.database.TuningRecord.from_json(record, ms.database.Workload(mod))   # as the job will read it
        except Exception as err:  # noqa: BLE001 - the reason goes back, in one line
            refused.append({"index": index, "why": short_error(err)})
    return {"refused": refused}


HANDLERS = {wire.LIBRARY_CHECK: check_records}
