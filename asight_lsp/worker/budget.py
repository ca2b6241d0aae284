"""The task scheduler of a model's tuning (TVM side): each batch to the task whose next trials are
expected to save the most end-to-end time (``analysis/budget.next_task``), instead of MetaSchedule's
round-robin warm-up and gradient.

It joins every task it dispatched before it chooses the next (MetaSchedule's gradient scheduler
joins only after the whole warm-up): the database then holds each batch's results at once, so a
twin's transfer (``worker/twins.py``) finds its donor's best from the donor's first batch on, and
the rule sees every measurement.  Measuring does not overlap the next search: on a 2-core host the
overlap only loaded the cores under the measurement.

``BudgetWatch`` (a measure callback) keeps per task its trials and best after every batch.
"""
from __future__ import annotations

from ..analysis import budget as rules
from .compat import derived_object, ms

FAILED_SECS = 1e9


class BudgetState:
    """Per task: weight, best µs, trials, batches, history [(trials, best_us)], floor µs; the outlook."""

    def __init__(self, names: list[str], weights: list[float], floors: list[float | None], batch: int):
        self.names, self.batch = names, batch
        self.tasks = [{"weight": w, "best_us": None, "trials": 0, "batches": 0, "history": [], "done": False,
                       "floor_us": f} for w, f in zip(weights, floors)]
        self.choices: list[int] = []

    def add(self, task_id: int, latencies_s: list) -> None:
        task = self.tasks[task_id]
        ok = [s * 1e6 for s in latencies_s if s is not None]
        task["trials"] += len(latencies_s)
        task["batches"] += 1
        if ok and (task["best_us"] is None or min(ok) < task["best_us"]):
            task["best_us"] = min(ok)
        if task["best_us"] is not None:
            task["history"].append((task["trials"], task["best_us"]))

    def outlook(self) -> list[dict]:
        return rules.outlook(self.names, self.tasks, self.batch)


@derived_object
class BudgetWatch(ms.measure_callback.PyMeasureCallback):
    """After each batch: the task's trials and best into ``state``."""

    def __init__(self, state: BudgetState):
        self.state = state

    def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results):
        latencies = []
        for built, ran in zip(builder_results, runner_results):
            secs = [float(s) for s in ran.run_secs] if ran.run_secs is not None else []
            bad = bool(built.error_msg or ran.error_msg) or not secs or min(secs) >= FAILED_SECS
            latencies.append(None if bad else sum(secs) / len(secs))
        self.state.add(int(task_id), latencies)


@derived_object
class ShareScheduler(ms.task_scheduler.PyTaskScheduler):
    """``analysis/budget.next_task`` as MetaSchedule's task scheduler (see the module text)."""

    def __init__(self, state: BudgetState):
        super().__init__()
        self.state = state
        self.pending: list[int] = []

    def next_task_id(self) -> int:
        outer = self._outer()
        records = list(outer.tasks_)
        for task_id in self.pending:
            if not records[task_id].is_terminated:
                self.join_running_task(task_id)
        self.pending = []
        for task_id, record in enumerate(records):
            self.state.tasks[task_id]["done"] = bool(record.is_terminated)
        choice = rules.next_task(self.state.tasks, self.state.batch)
        if choice is None:
            return -1
        self.pending.append(choice)
        self.state.choices.append(choice)
        return choice


def floors_us(tasks: list, peak_gflops: float | None) -> list[float | None]:
    """Per task, its main computation's time at the peak rate (``main_flops`` / peak), or None."""
    out = []
    for task in tasks:
        flops = main_flops(task.mod) if peak_gflops else None
        out.append(flops / (peak_gflops * 1e3) if flops and peak_gflops else None)
    return out


def main_flops(mod) -> float | None:
    """The lesser of TVM's FLOP count and 2 x the iterations of the task's heaviest reduction
    (``twins.signature``; a multiply-add each): a convolution's or a matmul's FLOPs, and a Winograd
    kernel's batched GEMM alone (TVM's count adds the input and output transforms' multiplications,
    which put the floor above the measured best).  A floor is a lower bound: the lesser count."""
    from .programs import estimate_flops
    from .twins import signature
    counted, sig = estimate_flops(mod), signature(mod)
    if sig is None:
        return counted
    product = 1
    for _, extent in sig["iters"]:
        product *= max(int(extent), 1)
    return min(2.0 * product, counted) if counted else 2.0 * product


def scheduler_for(plan, per_iter: int, peak_gflops: float | None = None, *, off: frozenset[str]):
    """(BudgetState, ShareScheduler, BudgetWatch) for a Relax plan of several tasks when the budget
    lever is on (not in ``off``), else (None, None, None): MetaSchedule's gradient scheduler then."""
    if plan.kind != "relax" or len(plan.tasks) < 2 or "budget" in off:
        return None, None, None
    state = BudgetState([t.name for t in plan.tasks], [t.weight for t in plan.tasks],
                        floors_us(plan.tasks, peak_gflops), per_iter)
    return state, ShareScheduler(state), BudgetWatch(state)
