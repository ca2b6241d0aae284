"""The search strategy every task tunes with (TVM side): MetaSchedule's evolutionary search, its
population scaled to the batch, wrapped so that a run keeps its budget and a resumed run never
measures a schedule its database already holds (docs/tuning.md)."""
from __future__ import annotations

import time
from pathlib import Path

from ..analysis import shortfall
from .compat import derived_object, ms, s_tir, tvm, tvm_ffi
from .programs import short_error


def search_strategy(per_iter: int):
    """MetaSchedule's evolutionary search, its population scaled to the batch size.

    The default population (512, evolved 4 times) costs the same for a batch of 4 as for 64:
    with small batches the search dominated (a conv2d task: 44 s of search for 4 trials).
    Batches of 32 or more keep TVM's default.  A smaller population fills its initial sample less
    surely where most samples are invalid: an 8x64x16 matmul on the H100's tag failed in half of its
    seeds with population 128 ("Cannot sample enough initial population": 0 trials, every sample
    rejected by VerifyGPUCode), so sampling retries up to 20 rounds
    (TVM: 5), which costs nothing where the first round fills it.
    """
    population = max(128, min(512, 16 * per_iter))
    return ms.search_strategy.EvolutionarySearch(population_size=population, max_fail_count=MAX_FAIL_COUNT)


MAX_FAIL_COUNT = 20


def cost_model(threads: int):
    """MetaSchedule's XGBoost cost model, trained only once its predictions are used.

    TVM's ``XGBModel`` predicts at random until it holds ``num_warmup_samples`` (100) measured
    candidates, yet it imports XGBoost and retrains from scratch after every batch from the first:
    wasted work in every run's first 100 trials (a tiny model's 12-trial run, one trial a batch, trained
    12 boosters it never asked).  Below the warm-up the training is skipped and its adaptive-training mark
    kept at 0, so the batch that reaches the warm-up trains on everything measured by then; from there
    it trains as TVM does.  The features of every measured candidate are kept from the first, as TVM keeps them.
    """
    model = ms.cost_model.XGBModel(num_tuning_cores=threads, tree_method="auto")
    train = model._train

    def train_once_used(xs, ys) -> None:
        if model.data_size < model.num_warmup_samples:
            model.last_train_size = 0
            return
        train(xs, ys)

    model._train = train_once_used
    return model


class TrialBudget:
    """Trials a run may still measure, shared by the search of every task, and the time it may still
    search (``deadline``, a ``time.monotonic()`` instant, or None); ``repeats_skipped`` counts
    candidates dropped because the database already held their schedule."""

    def __init__(self, trials: int, tasks: list[str] | None = None, deadline: float | None = None):
        self.left = trials
        self.deadline = deadline
        self.deadline_hit = False     # the search stopped at the deadline with trials left
        self.repeats_skipped = 0
        self.ended: list[dict] = []   # tasks whose search stopped with budget left (analysis/shortfall.py)
        self.waiting = set(tasks or [])   # tasks that have not proposed their first batch yet

    def exhausted(self, task: str | None = None) -> bool:
        """No trial left for ``task``: the trials are spent, or the deadline passed.  Past the deadline a
        task still waiting for its first batch gets one trial (a kernel without one is a kernel ``asight
        export`` refuses), every other proposes nothing more; a batch already proposed is still built
        and measured (the deadline is kept to within one batch, plus a trial per untried task)."""
        if not self.deadline_hit and self.deadline is not None and time.monotonic() >= self.deadline:
            self.deadline_hit = True
            self.left = min(self.left, len(self.waiting))
        return self.left <= 0 or (self.deadline_hit and task not in self.waiting)

    def seconds_left(self) -> float | None:
        return None if self.deadline is None else max(0.0, self.deadline - time.monotonic())

    def started(self, task: str) -> None:
        self.waiting.discard(task)

    def cap(self, task: str) -> int:
        """The most trials ``task``'s next batch may take: one is kept for every other task still
        waiting for its first batch (at least one, while any is left)."""
        return max(1, self.left - len(self.waiting - {task})) if self.left > 0 else 0

    def spare(self) -> int:
        """Trials beyond one for every task still waiting for its first batch: what extras (twin
        transfers) may take without leaving a kernel untried for the export to refuse."""
        return 0 if self.exhausted() else max(0, self.left - len(self.waiting))

    def search_ended(self, task: str, why: str, proposed: int, error: str | None = None) -> None:
        """Note that ``task``'s search stopped early: ``why`` is "sampling" (nothing to offer),
        "repeats" (only known schedules) or "failed" (the search raised ``error``); ``proposed`` =
        candidates it gave this session."""
        self.waiting.discard(task)   # nothing to wait for: its reserved trial goes back to the others
        if self.left > 0 or error:
            self.ended.append({"task": task, "why": why, "proposed": proposed, **({"error": error} if error else {})})


class MeasuredSchedules:
    """The scheduled modules a database already holds for one task.

    MetaSchedule's evolutionary search starts a resumed run with an empty set of measured modules
    (``measured_workloads_``, "TODO: add records from the database to avoid re-measuring",
    src/s_tir/meta_schedule/search_strategy/evolutionary_search.cc) and seeds its population with the
    database's best records, so it proposes them again.  Each record's trace is replayed (postprocessors
    included, as it was measured) and the module kept by structural hash, as the search keys them.
    """

    def __init__(self, database=None, mod=None):
        self._by_hash: dict[int, list] = {}
        if database is None or mod is None or not database.has_workload(mod):
            return
        for record in database.get_all_tuning_records():
            if not tvm_ffi.structural_equal(record.workload.mod, mod):
                continue
            try:
                sch = s_tir.Schedule(tvm.ir.load_json(tvm.ir.save_json(mod)))
                record.trace.apply_to_schedule(sch, remove_postproc=False)
            except Exception:  # noqa: BLE001 - a trace that no longer replays cannot be proposed either
                continue
            self._by_hash.setdefault(int(tvm_ffi.structural_hash(sch.mod)), []).append(sch.mod)

    def __len__(self) -> int:
        return sum(len(mods) for mods in self._by_hash.values())

    def remember(self, mod) -> None:
        """Add a schedule measured outside the search (a twin's transfer, ``worker/twins.py``)."""
        self._by_hash.setdefault(int(tvm_ffi.structural_hash(mod)), []).append(mod)

    def holds(self, mod) -> bool:
        known = self._by_hash.get(int(tvm_ffi.structural_hash(mod)), [])
        return any(tvm_ffi.structural_equal(mod, other) for other in known)


@derived_object
class BudgetedSearch(ms.search_strategy.PySearchStrategy):
    """MetaSchedule's search that never proposes more candidates than the run's budget has left,
    nor a schedule its database already holds (a resumed run, ``MeasuredSchedules``).

    MetaSchedule checks the global budget only before it asks a task for a batch, so the last batch
    overran it (3 PrimFuncs in batches of 10 measured 40 trials of 32; 24 ResNet tasks 131 of 128).
    A batch made only of known schedules is asked for again, at most ``REPEAT_ROUNDS`` times in a row
    (then the task ends, as TVM's own search ends after 5 empty rounds).
    """

    REPEAT_ROUNDS = 5

    def __init__(self, inner, budget: TrialBudget):
        self.inner, self.budget = inner, budget
        self.mod, self.measured = None, MeasuredSchedules()
        self.task, self.proposed = "", 0

    def _initialize_with_tune_context(self, context) -> None:
        self.mod = context.mod
        self.task = str(context.task_name or "")
        self.inner._initialize_with_tune_context(context)

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None) -> None:
        self.measured = MeasuredSchedules(database, self.mod)
        self.inner.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database, cost_model)

    def post_tuning(self) -> None:
        self.inner.post_tuning()

    def generate_measure_candidates(self):
        for _ in range(self.REPEAT_ROUNDS):
            if self.budget.exhausted(self.task):
                return None
            try:
                candidates = self.inner.generate_measure_candidates()
            except Exception as err:  # noqa: BLE001 - one task's search failing ends that task, not the run
                self.budget.search_ended(self.task, "failed", self.proposed, short_error(err))
                return None
            if candidates is None:
                self.budget.search_ended(self.task, "sampling", self.proposed)
                return None
            self.budget.started(self.task)
            fresh = [c for c in candidates if not self.measured.holds(c.sch.mod)]
            self.budget.repeats_skipped += len(candidates) - len(fresh)
            if fresh or not candidates:
                fresh = fresh[:self.budget.cap(self.task)]
                self.budget.left -= len(fresh)
                self.proposed += len(fresh)
                return fresh
        self.budget.search_ended(self.task, "repeats", self.proposed)
        return None

    def notify_runner_results(self, measure_candidates, results) -> None:
        self.inner.notify_runner_results(measure_candidates, results)

    def clone(self):
        clone = BudgetedSearch(self.inner.clone(), self.budget)
        clone.task = self.task
        return clone


def logged_rejections(work_dir) -> dict:
    """Post-processor rejections summed over the MetaSchedule task logs of ``work_dir`` (``logs/``)."""
    counts = []
    for log in sorted((Path(work_dir) / "logs").glob("*task_*.log")):
        try:
            counts.append(shortfall.rejections(log.read_text(encoding="utf-8", errors="replace")))
        except OSError:
            continue
    return shortfall.merge_rejections(counts)
