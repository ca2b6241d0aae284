"""Schedules transferred between twin and sibling tasks while a model tunes (TVM side).

``signature`` reports a task's main computation for ``analysis/twins.relate``.  ``TransferSearch``
wraps a task's search: each time the task scheduler gives the task a batch, the best record of each
donor (its twins, then its nearest siblings; ``analysis.twins.donors``) not transferred yet is
replayed onto this task's workload and measured with the batch:

* blocks the donor lacked (an extra epilogue here) are inlined first, as MetaSchedule's AutoInline
  would (after the trace, loop counts differed: "old_outputs.size() == new_outputs.size()");
* then the donor's trace without its postprocessing part; instructions on blocks this task lacks
  (an epilogue the donor had) are dropped with everything that depends on them;
* decisions that still fit are kept (a twin's all do); a tile decision whose product no longer equals
  its loop's extent is re-sampled (a sibling's), so a sibling gets ``SIBLING_VARIANTS`` draws;
* then this task's own postprocessors, as MetaSchedule does for its own candidates.

A measured transfer enters the database under this task's workload (MetaSchedule's own callback),
so the evolutionary search of this task starts from it (it seeds its population from the database's
best).  Each transfer is logged (``log``) for ``analysis.twins.summary``.
"""
from __future__ import annotations

from ..analysis import twins as rules
from .compat import derived_object, ms, s_tir, stmt_children, tvm_ffi
from .compat import Trace
from .programs import short_error

SIBLING_VARIANTS = 2
FAILED_SECS = 1e9


# --------------------------------------------------------------------------- signatures


def _blocks(func) -> list:
    found, stack = [], [func.body]
    while stack:
        stmt = stack.pop()
        if isinstance(stmt, s_tir.SBlock):
            found.append(stmt)
        stack.extend(stmt_children(stmt))
    return found


def _shape(buffer) -> list:
    return [int(d) if hasattr(d, "value") or isinstance(d, int) else str(d) for d in buffer.shape]


def signature(mod) -> dict | None:
    """The task's main computation: its heaviest reduction block (operator name without the numeric
    suffix TVM adds, iteration kinds and extents, the shapes and dtypes it reads and writes), or None."""
    func = mod["main"]
    best = None
    for block in _blocks(func):
        kinds = ["R" if int(iv.iter_type) == 2 else "S" for iv in block.iter_vars]
        if "R" not in kinds:
            continue
        extents = [int(iv.dom.extent) if hasattr(iv.dom.extent, "value") else -1 for iv in block.iter_vars]
        size = 1
        for e in extents:
            size *= max(e, 1)
        if best is None or size > best[0]:
            best = (size, block, kinds, extents)
    if best is None:
        return None
    _, block, kinds, extents = best
    op = block.name_hint.rstrip("0123456789_") or block.name_hint
    return {"op": op, "iters": [[k, e] for k, e in zip(kinds, extents)],
            "reads": [[_shape(r.source), str(r.source.dtype)] for r in block.reads],
            "writes": [[_shape(w.source), str(w.source.dtype)] for w in block.writes]}


def relations_for(tasks: list) -> dict[str, dict]:
    """``analysis.twins.relate`` on the plan's tasks (``metaschedule.Task``)."""
    return rules.relate({t.name: signature(t.mod) for t in tasks})


# --------------------------------------------------------------------------- trace transfer


def _block_names(mod) -> set[str]:
    return {b.name_hint for b in _blocks(mod["main"])}


def _key(obj):
    """The identity of a random variable (Python wrappers of one TVM object differ)."""
    return obj.__chandle__() if hasattr(obj, "__chandle__") else id(obj)


def prune(trace, names: set[str]):
    """The trace without its postprocessing, minus instructions on blocks not in ``names`` and every
    instruction depending on them; returns (trace, blocks it mentions)."""
    dead, insts, decisions, mentioned = set(), [], {}, set()
    for inst in trace.insts:
        if inst.kind.name == "EnterPostproc":
            break
        if inst.kind.name in ("GetSBlock", "GetBlock"):
            block = str(inst.attrs[0])
            mentioned.add(block)
            if block not in names:
                dead.update(_key(o) for o in inst.outputs)
                continue
        if any(_key(i) in dead for i in inst.inputs if i is not None):
            dead.update(_key(o) for o in inst.outputs)
            continue
        insts.append(inst)
        decision = trace.decisions.get(inst) if hasattr(trace.decisions, "get") else None
        if decision is not None:
            decisions[inst] = decision
    return Trace(insts, decisions), mentioned


def _fits(sch, counter: list):
    """Decision provider: keep a tile decision whose product is its loop's extent, else re-sample."""
    def provide(inst, inputs, attrs, decision):
        if decision is None or inst.kind.name != "SamplePerfectTile":
            return decision
        extent = sch.get(inputs[0]).extent
        product = 1
        for factor in decision:
            product *= int(factor)
        if hasattr(extent, "value") and int(extent.value) == product:
            return decision
        counter[0] += 1
        return None
    return provide


class NoFit(Exception):
    """The donor's trace does not fit this workload (the reason is the message)."""


def transfer(trace, mod, postprocs, seed: int, donor_blocks: set[str] | None = None) -> tuple[object, int]:
    """A schedule of ``mod`` from a donor's trace (see the module text): (schedule, decisions
    re-sampled); ``NoFit`` with the reason when it does not fit.  ``donor_blocks``: the donor's own
    blocks; the blocks of ``mod`` it lacked are inlined first.  Without it, the blocks its trace never
    names are taken for those (a trace that reaches a block by ``get_producers``, as MetaSchedule's
    Winograd rules reach the transform matrices, then finds it inlined: "2 vs. 1" outputs)."""
    names = _block_names(mod)
    pruned, mentioned = prune(trace, names)
    sch = s_tir.Schedule(mod, seed=max(1, seed))
    resampled = [0]
    lacked = names - (mentioned if donor_blocks is None else donor_blocks)
    try:
        for name in sorted(lacked - {"root"}):   # first, so the donor's loops and blocks line up
            try:
                sch.compute_inline(sch.get_sblock(name))
            except Exception:  # noqa: BLE001 - not inlinable (the output, a reduction): left as it is
                pass
        pruned.apply_to_schedule(sch, remove_postproc=True, decision_provider=_fits(sch, resampled))
        # marked as postprocessing, as MetaSchedule marks its own: a search that mutates this record later
        # replays it without them (RewriteLayout's TransformLayout, replayed on re-sampled tiles, aborted
        # the whole tuning job: "args.size() == initial_indices_orig.size()")
        sch.enter_postproc()
        for postproc in postprocs:
            if not postproc.apply(sch):
                raise NoFit(f"postprocessor {postproc} refused the schedule")
    except NoFit:
        raise
    except Exception as err:  # noqa: BLE001 - the donor's structure does not fit this workload
        raise NoFit(short_error(err)) from None
    return sch, resampled[0]


def candidate(sch):
    return ms.MeasureCandidate(sch, ms.arg_info.ArgInfo.from_entry_func(sch.mod, remove_preproc=True))


def best_record(database, mod):
    """The donor's best valid record in the database, or None."""
    if database is None or not database.has_workload(mod):
        return None
    top = database.get_top_k(database.commit_workload(mod), 1)
    if not top or not top[0].run_secs or min(float(s) for s in top[0].run_secs) >= FAILED_SECS:
        return None
    return top[0]


def mean_us(secs) -> float | None:
    secs = [float(s) for s in secs or []]
    return sum(secs) / len(secs) * 1e6 if secs and min(secs) < FAILED_SECS else None


class TransferLog:
    """Shared by every task's search of one run: the donors per task and the transfers measured."""

    def __init__(self, tasks: list, relations: dict[str, dict]):
        self.mods = {t.name: t.mod for t in tasks}
        self.relations = relations
        self.entries: list[dict] = []
        self.done: set[tuple] = set()   # (task, donor, donor record's trace hash)

    def donors(self, name: str) -> list[tuple[str, str]]:
        return rules.donors(name, self.relations)


@derived_object
class TransferSearch(ms.search_strategy.PySearchStrategy):
    """A task's search (``inner``, e.g. ``search.BudgetedSearch``) plus its donors' best schedules,
    measured in the same batches (see the module text); the budget is kept when ``budget`` is given."""

    def __init__(self, inner, name: str, log: TransferLog, budget=None):
        self.inner, self.name, self.log, self.budget = inner, name, log, budget
        self.mod, self.postprocs, self.database = None, [], None
        self.pending: list[dict] = []
        self.pending_mods: list = []
        self.seed = 0

    def _initialize_with_tune_context(self, context) -> None:
        self.mod = context.mod
        self.postprocs = list(context.space_generator.postprocs or [])
        self.inner._initialize_with_tune_context(context)

    def pre_tuning(self, max_trials, num_trials_per_iter, design_spaces, database=None, cost_model=None) -> None:
        self.database = database
        self.inner.pre_tuning(max_trials, num_trials_per_iter, design_spaces, database, cost_model)

    def post_tuning(self) -> None:
        self.inner.post_tuning()

    def _transfers(self) -> list[tuple[object, dict]]:
        out = []
        for donor, relation in self.log.donors(self.name):
            record = best_record(self.database, self.log.mods[donor])
            if record is None:
                continue
            key = (self.name, donor, int(tvm_ffi.structural_hash(record.trace.as_json())))
            if key in self.log.done:
                continue
            self.log.done.add(key)
            own = best_record(self.database, self.mod)
            for _ in range(1 if relation == "twin" else SIBLING_VARIANTS):
                self.seed += 1
                try:
                    sch, resampled = transfer(record.trace, self.mod, self.postprocs, self.seed,
                                              _block_names(record.workload.mod))
                except NoFit as err:
                    self.log.entries.append({"task": self.name, "donor": donor, "relation": relation,
                                             "latency_us": None, "own_best_us": mean_us(own.run_secs) if own else None,
                                             "resampled": 0, "error": str(err)})
                    break
                out.append((candidate(sch), {"task": self.name, "donor": donor, "relation": relation,
                                             "own_best_us": mean_us(own.run_secs) if own else None,
                                             "resampled": resampled}))
                if not resampled:
                    break
        return out

    def generate_measure_candidates(self):
        # transfers first: near the end of the budget a donor's best is worth more than a search draw
        transfers = [] if self.budget is not None and self.budget.spare() <= 0 else self._transfers()
        if self.budget is not None:   # never at the cost of a task's first batch (search.TrialBudget.spare)
            transfers = transfers[:self.budget.spare()]
            self.budget.left -= len(transfers)
        self.pending = [entry for _, entry in transfers]
        self.pending_mods = [c.sch.mod for c, _ in transfers]
        inner = self.inner.generate_measure_candidates()
        if not transfers:
            return inner
        return [c for c, _ in transfers] + list(inner or [])

    def notify_runner_results(self, measure_candidates, results) -> None:
        k = len(self.pending)
        for entry, result in zip(self.pending, list(results)[:k]):
            self.log.entries.append({**entry, "latency_us": mean_us(result.run_secs) if not result.error_msg else None})
        known = getattr(self.inner, "measured", None)     # search.BudgetedSearch: never propose them again
        for mod in self.pending_mods:
            if known is not None and hasattr(known, "remember"):
                known.remember(mod)
        self.pending, self.pending_mods = [], []
        rest_c, rest_r = list(measure_candidates)[k:], list(results)[k:]
        if rest_c:
            self.inner.notify_runner_results(rest_c, rest_r)

    def clone(self):
        return TransferSearch(self.inner.clone(), self.name, self.log, self.budget)


def transfer_wrap(plan, budget, off: frozenset[str]):
    """(TransferLog, wrap for ``metaschedule.tune``) for a Relax plan with related tasks when the twins
    lever is on (not in ``off``), else (None, None)."""
    if plan.kind != "relax" or "twins" in off:
        return None, None
    relations = relations_for(plan.tasks)
    if not any(rules.donors(name, relations) for name in relations):
        return TransferLog(plan.tasks, relations), None
    log = TransferLog(plan.tasks, relations)
    return log, lambda task, strategy: TransferSearch(strategy, task.name, log, budget)


def run_extra(log: TransferLog | None) -> dict | None:
    """What run.json keeps (``extra.twins``): the relations and every transfer measured."""
    if log is None:
        return None
    return {"relations": log.relations, "transfers": log.entries}
