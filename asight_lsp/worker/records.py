"""A run's records on the TVM side: the JSON database, the best record of a function, a record's
trace replayed on a fresh copy of the function."""
from __future__ import annotations

from pathlib import Path

from .compat import Trace, ms, normalize_mod, s_tir, tvm, tvm_ffi

FAILED_SECONDS = 1e9          # MetaSchedule stores failed builds/runs as run_secs [1e10]


def run_database(run_dir: str | None):
    if not run_dir or not (Path(run_dir) / "database_tuning_record.json").exists():
        return None
    return ms.database.JSONDatabase(work_dir=str(run_dir), allow_missing=False)


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


def best_record(db, func) -> tuple[object | None, str]:
    """The best valid record for ``func`` and how it was matched.

    MetaSchedule keys workloads by structural hash of the normalised module (``tune_tir`` of a
    PrimFunc adds ``tirx.noalias``; of an IRModule it does not), so both forms are tried.  A run of
    one workload whose hash no longer matches (the source was edited) still answers, flagged.
    """
    for label, mod in (("structural", normalize_mod(func)), ("structural", tvm.IRModule({"main": func}))):
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
