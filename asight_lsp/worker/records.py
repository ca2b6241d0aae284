"""A run's records on the TVM side: the JSON database, its trials by index, the best record of a
function (the one chosen by re-measurement when the run has one), a record's trace replayed on a
fresh copy of the function, and a database of the chosen records for building a model."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..store.database import require_intact
from ..store.runs import DB_RECORDS, DB_WORKLOADS, DamagedDatabase, read_json_lines
from .compat import Trace, hoist_root_allocs, ms, normalize_mod, s_tir, tvm, tvm_ffi

FAILED_SECONDS = 1e9          # MetaSchedule stores failed builds/runs as run_secs [1e10]


def run_database(run_dir: str | None):
    """The run's database for TVM: ``DamagedDatabase`` (one line) when TVM could not use it; its
    readable records in memory when only a torn last line would make TVM refuse the files (this
    worker is sandboxed and may not repair them; ``store/database.py``)."""
    if not run_dir or not (Path(run_dir) / DB_RECORDS).exists():
        return None
    health = require_intact(run_dir)
    try:
        if health.needs_memory_copy:
            return _memory_database(read_trials(run_dir))
        return ms.database.JSONDatabase(work_dir=str(run_dir), allow_missing=False)
    except Exception as err:  # noqa: BLE001 - TVM's check failures: say what they mean
        first = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise DamagedDatabase(f"damaged database in run {Path(run_dir).name}: TVM cannot load it ({first[:200]})") \
            from None


def _memory_database(trials: "Trials"):
    database = ms.database.MemoryDatabase(module_equality="structural")
    committed = {}
    for trial in range(len(trials.rows)):
        record = trials.record(trial)
        workload = committed.setdefault(trials.rows[trial][0], database.commit_workload(record.workload.mod))
        database.commit_tuning_record(ms.database.TuningRecord(record.trace, workload, record.run_secs,
                                                               record.target, record.args_info))
    return database


def record_latency(record) -> float | None:
    secs = [float(s) for s in (record.run_secs or [])]
    return sum(secs) / len(secs) if secs and min(secs) < FAILED_SECONDS else None


def _workload_records(db) -> dict[int, tuple[object, list]]:
    """All valid records grouped by workload (structural hash), best first."""
    groups: dict[int, tuple[object, list]] = {}
    for rec in db.get_all_tuning_records():
        if record_latency(rec) is None:
            continue
        key = int(tvm_ffi.structural_hash(rec.workload.mod))
        groups.setdefault(key, (rec.workload, []))[1].append(rec)
    for _, recs in groups.values():
        recs.sort(key=record_latency)
    return groups


def best_record(db, func, run_dir=None, chosen: list[dict] | None = None) -> tuple[object | None, str]:
    """The best valid record for ``func`` and how it was matched.

    The record the run's measurement chose by re-measurement (``chosen``, docs/measurement.md) wins;
    else the fastest while tuning.  MetaSchedule keys workloads by structural hash of the normalised
    module (``tune_tir`` of a PrimFunc adds ``tirx.noalias``; of an IRModule it does not), so both
    forms are tried.  A run of one workload whose hash no longer matches (the source was edited)
    still answers, flagged.
    """
    if chosen and run_dir:
        picked = _chosen_record(func, run_dir, chosen)
        if picked is not None:
            return picked, "chosen by re-measurement"
    for label, mod in (("structural", m) for m in workload_forms(func)):
        if db.has_workload(mod):
            top = db.get_top_k(db.commit_workload(mod), 1)
            if top and record_latency(top[0]) is not None:
                return top[0], label
            return None, "the run has no successful record for this function"
    groups = _workload_records(db)
    if len(groups) == 1:
        recs = next(iter(groups.values()))[1]
        return recs[0], "single-workload fallback (the function changed since the run)"
    if not groups:
        return None, "the run has no successful record yet"
    return None, "the run's workloads do not match this function (was it edited since?)"


def workload_forms(func) -> list:
    """The modules a run may have tuned for ``func``: normalised (``tune_tir``), normalised with its
    allocations in the root block (a GPU run, ``metaschedule.gpu_ready``), and plain."""
    normal = normalize_mod(func)
    hoisted = hoist_root_allocs(normal)
    return [normal] + ([hoisted] if hoisted is not normal else []) + [tvm.IRModule({"main": func})]


def apply_record(func, record, serial: bool = False):
    """A Schedule of ``func`` with the record's trace replayed (postprocessors included).

    ``serial`` drops the ``Parallel`` instructions: parallel loop bodies become lambdas without
    symbols or line info, so cachegrind/perf attribution needs the serial variant (docs/tvm.md §5).
    """
    sch = s_tir.Schedule(fresh_copy(normalize_mod(func)))
    trace = record.trace
    if serial:
        insts = [i for i in trace.insts if i.kind.name != "Parallel"]
        trace = Trace(insts, {i: d for i, d in trace.decisions.items() if i in insts})
    trace.apply_to_schedule(sch, remove_postproc=False)
    return sch


def fresh_copy(mod):
    """A deep copy (spans kept) of ``mod``.

    Replaying a trace on ``Schedule(mod)`` rewrites parts of ``mod``'s statements *in place*
    (observed in 0.27: the untuned function came out split and reordered), which would corrupt the
    baseline and the worker's parse cache.  A JSON round trip costs ~10 ms.
    """
    return tvm.ir.load_json(tvm.ir.save_json(mod))


def record_info(record, match: str) -> dict:
    return {"latency_us": record_latency(record) * 1e6, "match": match,
            "instructions": len(record.trace.insts), "source": "best record of the run's JSON database"}


@dataclass
class Trials:
    """The trials of a run by index (the JSON database in append order)."""
    workloads: list                      # ms.database.Workload (None where TVM cannot read one)
    hashes: list[str]                    # each workload's structural hash, as the file stores it
    rows: list[tuple[int, list]] = field(default_factory=list)   # trial -> (workload index, raw record)

    def record(self, trial: int):
        workload, raw = self.rows[trial]
        return ms.database.TuningRecord.from_json(raw, self.workloads[workload])

    def valid(self, workload: int) -> list[tuple[int, float]]:
        """``(trial, in-tuning seconds)`` of a workload's successful trials, fastest first."""
        out = []
        for trial, (w, raw) in enumerate(self.rows):
            secs = [float(s) for s in (raw[1] or [])] if w == workload else []
            if secs and max(secs) < FAILED_SECONDS:
                out.append((trial, sum(secs) / len(secs)))
        return sorted(out, key=lambda item: item[1])

    def workload_of(self, mod) -> int | None:
        """The index of the workload ``mod`` (as MetaSchedule tunes it) is stored under."""
        shash = str(tvm_ffi.structural_hash(mod))
        if shash in self.hashes:
            return self.hashes.index(shash)
        for i, workload in enumerate(self.workloads):
            if workload is not None and tvm_ffi.structural_equal(workload.mod, mod):
                return i
        return None


def read_trials(run_dir: str | Path) -> Trials:
    """Every trial of a run, readable one by one (a torn last line is left out; a damaged database
    raises ``DamagedDatabase``)."""
    require_intact(run_dir)
    workloads, hashes = [], []
    for row in read_json_lines(Path(run_dir) / DB_WORKLOADS):
        try:
            workloads.append(ms.database.Workload.from_json(row))
        except Exception:  # noqa: BLE001 - a workload TVM cannot read: its trials cannot be replayed
            workloads.append(None)
        hashes.append(str(row[0]) if isinstance(row, list) and row else "")
    trials = Trials(workloads, hashes)
    for row in read_json_lines(Path(run_dir) / DB_RECORDS):
        if isinstance(row, list) and len(row) == 2 and isinstance(row[0], int) and row[0] < len(workloads):
            trials.rows.append((row[0], row[1]))
    return trials


def chosen_database(trials: Trials, chosen: list[dict], database=None):
    """A database holding one record per workload: the trial chosen by re-measurement (its
    re-measured latency as run_secs), so every build from it applies exactly those schedules
    (``database``: add them to that one instead of a new one)."""
    database = ms.database.MemoryDatabase() if database is None else database
    for entry in chosen:
        record = trials.record(entry["trial"])
        workload = database.commit_workload(record.workload.mod)
        secs = [tvm.tirx.FloatImm("float32", entry.get("measured_us", entry.get("tuning_us", 1.0)) / 1e6)]
        database.commit_tuning_record(ms.database.TuningRecord(record.trace, workload, secs, record.target,
                                                               record.args_info))
    return database


def _chosen_record(func, run_dir, chosen: list[dict]):
    """The record ``chosen`` names for ``func``'s workload, or None."""
    trials = read_trials(run_dir)
    by_hash = {c.get("workload_hash"): c for c in chosen}
    for mod in workload_forms(func):
        workload = trials.workload_of(mod)
        if workload is not None and trials.hashes[workload] in by_hash:
            return trials.record(int(by_hash[trials.hashes[workload]]["trial"]))
    return None
