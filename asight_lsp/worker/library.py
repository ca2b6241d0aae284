"""The schedule library's TVM side (``store/library.py`` holds its files, read and written as data).

* ``start_wrap``: the library's entries whose workload hash is one of the plan's tasks' are each
  replayed on that task in the sandboxed worker first (``library.check``: a record that crashes TVM
  kills that worker, never this job; it is left out and said); each that replays becomes the task's
  first batch (``LibraryStart``), measured here and now.  It then enters the run's database like any
  trial, so the evolutionary search starts from it and the run's best is whatever is fastest *here*;
  the search never proposes it again (``search.MeasuredSchedules``).
* ``run_section``: after the search, the run's best record of each task goes into the library
  (``store/library.feed``, as data, from the run's own files); whatever goes wrong with the library is
  said in run.json ``extra.library.notes`` and never fails the run.
* ``check_records``: the sandboxed worker's replay of library records (``asight library import``,
  and the job's start above).
"""
from __future__ import annotations

from pathlib import Path

from ..engine import wire
from ..store import library as shelf
from .compat import Trace, derived_object, load_ir, ms, s_tir, tvm, tvm_ffi
from .programs import short_error
from .twins import candidate, mean_us


def workload_hash(mod) -> str:
    return str(int(tvm_ffi.structural_hash(mod)))


class Starts:
    """Shared by every task's ``LibraryStart`` of one run: the checked entries by task, the notes, and
    what each task took from the library."""

    def __init__(self, entries: dict, notes: list[str]):
        self.entries, self.notes = entries, notes
        self.hits: list[dict] = []      # {task, library_us, measured_us}
        self.remeasured: dict = {}      # workload hash -> the library trace measured here


@derived_object
class LibraryStart(ms.search_strategy.PySearchStrategy):
    """A task's search (``inner``: ``search.BudgetedSearch`` or a wrapper of it) whose first batch is the
    library's schedule of the task, when the library holds one that replayed (see the module text)."""

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
        """The library's schedule of this task as a candidate and its entry, or None."""
        entry = self.starts.entries.get(self.name)
        if self.asked or entry is None or (self.budget is not None and self.budget.exhausted(self.name)):
            return None
        self.asked = True
        try:
            sch = s_tir.Schedule(self.mod)
            Trace.apply_json_to_schedule(entry.record[0], sch)
        except Exception:  # noqa: BLE001 - checked in the sandbox already; a record that no longer replays is no start
            return None
        known = self.measured
        if known is not None and known.holds(sch.mod):    # a resumed run measured it already
            return None
        return candidate(sch), entry

    def generate_measure_candidates(self):
        start = self._start()
        if start is None:
            return self.inner.generate_measure_candidates()
        cand, entry = start
        if self.budget is not None:
            self.budget.started(self.name)
            self.budget.left -= 1
        self.pending = {"entry": entry, "mod": cand.sch.mod}
        return [cand]

    def notify_runner_results(self, measure_candidates, results) -> None:
        if self.pending is None:
            self.inner.notify_runner_results(measure_candidates, results)
            return
        result, entry = list(results)[0], self.pending["entry"]
        known = self.measured
        if known is not None and hasattr(known, "remember"):
            known.remember(self.pending["mod"])
        measured = None if result.error_msg else mean_us(result.run_secs)
        self.starts.hits.append({"task": self.name, "library_us": entry.mean_us, "measured_us": measured})
        if measured is not None:
            self.starts.remeasured[entry.hash] = entry.record[0]
        self.pending = None

    def clone(self):
        return LibraryStart(self.inner.clone(), self.name, self.starts, self.budget)


def untouched(job, extra: dict) -> bool:
    """Runs with a design space or principles of the user's neither start from nor feed the library
    (their candidates are theirs)."""
    return job.space is not None or bool(extra.get("constraints"))


def start_wrap(job, budget, extra: dict):
    """(Starts, wrap for ``metaschedule.tune`` or None) for the job's target; (None, None) when the
    library is off, empty for it, or the run leaves it alone."""
    folder = shelf.folder_for(str(job.target))
    if untouched(job, extra) or folder is None or not folder.is_dir():
        return None, None
    read = shelf.read(folder)
    notes = [f"the schedule library's entries that are not valid were left out: {read.problem()}"] if read.problem() else []
    tasks = {workload_hash(t.mod): t for t in job.plan.tasks}
    checked = {}
    for entry in read.entries:
        task = tasks.get(entry.hash)
        if task is None:
            continue
        why = replay_in_sandbox(entry, task.mod)
        if why:
            notes.append(f"the library's schedule of {task.name} was left out: {why}")
        else:
            checked[task.name] = entry
    starts = Starts(checked, notes)
    wrap = (lambda task, strategy: LibraryStart(strategy, task.name, starts, budget)) if checked else None
    return starts, wrap


def replay_in_sandbox(entry, mod) -> str | None:
    """Why ``entry``'s record does not replay on ``mod``, asked of the sandboxed worker, or None."""
    from .compat import save_ir
    from .parse import sandboxed_worker
    return wire.library_replay_problem(sandboxed_worker(), entry.workload, entry.record, save_ir(mod))


def stacked(inner, outer):
    """One ``wrap`` (task, strategy) -> strategy of two, either None: ``outer`` wraps ``inner``'s result."""
    if inner is None or outer is None:
        return inner or outer
    return lambda task, strategy: outer(task, inner(task, strategy))


def run_section(job, run_dir, starts: Starts | None, extra: dict) -> tuple[dict | None, list[str]]:
    """Feed the library from a finished search: (run.json's ``extra.library``, the lines to say), or
    (None, []) for a run that leaves it alone.  A library that cannot be written is said; the run loses
    nothing."""
    if untouched(job, extra):
        return None, []
    tasks = {workload_hash(t.mod): shown_name(t) for t in job.plan.tasks}
    hits, notes = (starts.hits, list(starts.notes)) if starts is not None else ([], [])
    fed = {}
    try:
        fed = shelf.feed(str(job.target), Path(run_dir), tasks, starts.remeasured if starts is not None else None)
    except Exception as err:  # noqa: BLE001 - the library is the user's cache: its trouble never fails a run
        notes.append(f"the schedule library was not written: {short_error(err).split(': ', 1)[-1]}")
    if fed.get("set_aside"):
        notes.append(f"the schedule library's entries that were not valid were set aside: {fed.pop('set_aside')}")
    section = {"tasks": len(tasks), "hits": hits, **fed, **({"notes": notes} if notes else {})}
    return section, ([shelf.hits_text(hits, len(tasks))] if hits else []) + notes


def shown_name(task) -> str:
    """The name a library entry is listed under: a model's kernel name, a PrimFunc's own name (not "main")."""
    return task.functions[0] if task.name == "main" and task.functions else task.name


def check_records(params: dict, emit=None, off=None) -> dict:
    """``library.check``: ``{"entries": [[workload line, record], ...], "mod"?}`` -> ``{"refused": [{index,
    why}]}``: each record's trace must replay on ``mod`` (saved IR) where given, else on its own workload.
    Runs in the sandboxed worker: nothing is built or run."""
    refused = []
    given = load_ir(params["mod"]) if params.get("mod") else None
    for index, (workload, record) in enumerate(params["entries"]):
        try:
            mod = given if given is not None else tvm.ir.load_json(shelf.workload_json(workload))
            Trace.apply_json_to_schedule(record[0], s_tir.Schedule(mod, error_render_level="detail"))
            ms.database.TuningRecord.from_json(record, ms.database.Workload(mod))   # as a database would read it
        except Exception as err:  # noqa: BLE001 - the reason goes back, in one line
            refused.append({"index": index, "why": short_error(err)})
    return {"refused": refused}


HANDLERS = {wire.LIBRARY_CHECK: check_records}
