"""Where a model's next trials go (pure): the task whose next batch is expected to save the most
end-to-end time.

MetaSchedule's gradient scheduler warms up round-robin (one batch per task, the reshapes and
transposes included) and then follows a finite-difference gradient of the weighted latency.  On
ResNet-18 at 512 trials that gave every convolution 21-42 trials while the best was still falling
steeply (issue 21).  The rule here:

* **warm-up**: a task with no valid measurement gets a batch first (plan order: heaviest first);
  a task whose first ``WARMUP_BATCHES`` batches all failed is left (its share is unknown);
* then every live task is scored by what its next batch is expected to save, in µs of the model:
  ``weight x best_us x min(gap, 1 - (1 - rate) ** batch)``:
  * ``weight x best_us``: the task's measured share of end-to-end time (calls x its best);
  * ``rate``: expected relative improvement per trial — the larger of what its last batches gave
    (``observed_rate``) and a prior that decays as ``PRIOR / (trials + PRIOR_OFFSET)`` (a search's
    best falls roughly as the log of its trials, so the gain of one more trial goes as 1/trials);
  * ``gap``: how much faster the task can still get, ``1 - floor_us / best_us`` where its floor is
    known (its main computation's FLOPs at the peak rate: a Winograd kernel's batched GEMM, not its
    transforms), else 1; a floor above the measured best is no floor (it was wrong: the rule
    would expect nothing from more trials of a task that is not at its peak), so the gap is 1;
* **no task starves**: a task holding at least ``STARVE_SHARE`` of the model whose trials are below
  ``FAIR_FRACTION`` of its share of the trials so far gets the batch first (the most under-served
  first): on ResNet-18 the rule gave the stage-1 Winograd pair, 8-10 % of the model, 17 trials of 512;
* the highest score gets the batch (ties: plan order).

``outlook`` gives the same figures per task for the model view ("the next 32 trials are expected
to save ~X µs").
"""
from __future__ import annotations

PRIOR = 0.5            # relative gain of the first trials after warm-up: ~0.5 / (trials + 4) each
PRIOR_OFFSET = 4
WARMUP_BATCHES = 2     # batches a task gets before its failures make it wait
WARMUP_SHARE = 3       # a model's warm-up (one batch a task) takes about a third of the budget
STARVE_SHARE = 0.05    # a task with this share of the model or more ...
FAIR_FRACTION = 0.5    # ... is never left below half its share of the trials


def observed_rate(history: list[tuple[int, float]]) -> float:
    """Relative improvement per trial over the last two points of ``history`` ((trials, best_us)
    after each batch); 0 without two points."""
    if len(history) < 2:
        return 0.0
    (t0, b0), (t1, b1) = history[-2], history[-1]
    if t1 <= t0 or not b0 or b0 <= 0:
        return 0.0
    return max(0.0, (b0 - b1) / b0) / (t1 - t0)


def rate(task: dict) -> float:
    """Expected relative improvement of one more trial of ``task``."""
    prior = PRIOR / (task.get("trials", 0) + PRIOR_OFFSET)
    return min(1.0, max(prior, observed_rate(task.get("history") or [])))


def gap(task: dict) -> float:
    """The fraction of the task's time a perfect schedule could still save (1 when unknown)."""
    best, floor = task.get("best_us"), task.get("floor_us")
    if not best or not floor or floor <= 0 or floor > best:
        return 1.0
    return 1.0 - floor / best


def expected_saving_us(task: dict, batch: int) -> float:
    """µs of the model the task's next ``batch`` trials are expected to save."""
    best = task.get("best_us")
    if not best:
        return 0.0
    fraction = min(gap(task), 1.0 - (1.0 - rate(task)) ** max(batch, 1))
    return float(task.get("weight", 1.0)) * best * fraction


def next_task(tasks: list[dict], batch: int) -> int | None:
    """Index of the task that gets the next batch, or None when every task is done.

    ``tasks[i]``: ``{weight, best_us (None: no valid measurement), trials, batches, history, done,
    floor_us (optional)}``."""
    live = [i for i, t in enumerate(tasks) if not t.get("done")]
    for i in live:                                     # warm-up, plan order: every task one batch first
        if tasks[i].get("batches", 0) == 0:            # (a task without trials is a kernel export refuses)
            return i
    for i in live:                                     # then a second for those without a valid measurement
        if tasks[i].get("best_us") is None and tasks[i].get("batches", 0) < WARMUP_BATCHES:
            return i
    starved = starving(tasks, live)
    if starved is not None:
        return starved
    scored = [(expected_saving_us(tasks[i], batch), -i) for i in live if tasks[i].get("best_us") is not None]
    if not scored:
        return None
    return -max(scored)[1]


def starving(tasks: list[dict], live: list[int]) -> int | None:
    """The live task most below its fair trials (``FAIR_FRACTION`` x its share x the trials so far),
    among those holding ``STARVE_SHARE`` of the model or more; None when none is."""
    total_us = sum(float(t.get("weight", 1.0)) * (t.get("best_us") or 0.0) for t in tasks)
    trials = sum(t.get("trials", 0) for t in tasks)
    if not total_us or not trials:
        return None
    worst, pick = 0.0, None
    for i in live:
        share = float(tasks[i].get("weight", 1.0)) * (tasks[i].get("best_us") or 0.0) / total_us
        owed = FAIR_FRACTION * share * trials - tasks[i].get("trials", 0)
        if share >= STARVE_SHARE and owed > worst:
            worst, pick = owed, i
    return pick


def outlook(names: list[str], tasks: list[dict], batch: int) -> list[dict]:
    """Per task, for the model view: its share of the (tuning-time) model, trials, the rate and gap the
    rule used, and what its next ``batch`` trials are expected to save."""
    total = sum(float(t.get("weight", 1.0)) * (t.get("best_us") or 0.0) for t in tasks) or None
    out = []
    for name, t in zip(names, tasks):
        saving = expected_saving_us(t, batch)
        share = float(t.get("weight", 1.0)) * (t.get("best_us") or 0.0) / total if total else None
        out.append({"task": name, "trials": t.get("trials", 0), "share": share, "rate": rate(t), "gap": gap(t),
                    "batch": batch, "expectedSavingUs": saving,
                    "expectedSavingShare": saving / total if total else None, "done": bool(t.get("done"))})
    return out


def batch_size(trials: int, n_tasks: int = 1) -> int:
    """Trials a batch: large enough to amortise a batch's fixed costs (builder pool, cost-model
    update: ~1-3 s here), small enough for live progress.  One task: at least two batches.  Several:
    the warm-up (one batch a task, so no kernel is left untried for `asight export` to refuse) takes
    about a third of the budget, so the rest follows the measured shares (a batch of trials/tasks
    spent 512 trials on ResNet-18's 19 tasks in the warm-up alone); below 4 only when the budget is
    smaller than 4 a task."""
    if n_tasks <= 1:
        return max(8, min(32, trials // 2))
    per_task = max(1, trials // n_tasks)
    return per_task if per_task < 4 else max(4, min(32, trials // (WARMUP_SHARE * n_tasks)))


# --------------------------------------------------------------------------- a time budget

SECONDS_PER_TRIAL = 4.0    # a model's trial on 2 Zen 4 cores: ResNet-18, 512 trials in 1,982 s (issue 41)
TRIAL_CEILING = 100_000    # the trials of a session bounded by its minutes alone (never reached)
MAX_MINUTES = 7 * 24 * 60


def trials_for_minutes(minutes: float, trials_left: int) -> int:
    """The trials a session of ``minutes`` plans its batches for (``batch_size``, the share scheduler):
    what fits at ``SECONDS_PER_TRIAL``, at most the trials it may still take.  The deadline, not this
    figure, ends the search; a batch sized for it keeps the overrun past the deadline to one batch."""
    return max(1, min(trials_left, int(minutes * 60 / SECONDS_PER_TRIAL)))


def planned_trials(time_budget, remaining: int) -> int:
    """The trials a session's batches are sized for: ``remaining``, or what fits its time budget
    (``store/record.TimeBudget``, None without one)."""
    return remaining if time_budget is None else trials_for_minutes(time_budget.minutes, remaining)


def minutes_problem(minutes) -> str | None:
    """Why ``minutes`` (``--minutes``) is not a time budget, or None."""
    if isinstance(minutes, bool) or not isinstance(minutes, (int, float)) or minutes != minutes:
        return f"--minutes must be a number of minutes (got {minutes!r})"
    if not 0 < minutes <= MAX_MINUTES:
        return f"--minutes must be more than 0 and at most {MAX_MINUTES} (a week), got {minutes}"
    return None
