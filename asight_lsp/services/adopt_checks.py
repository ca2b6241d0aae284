"""What ``asight adopt`` checks in records and counters made elsewhere before it writes a run (TVM-free).

A work folder from another machine is data nobody here measured: records of another target, a
latency no GPU reaches, counters of another run are refused with their line, never ranked.
"""
from __future__ import annotations

import os
import re
from collections import Counter
from pathlib import Path

from ..analysis.counters import metric_group
from ..analysis.gpu_peak import impossible_rate, warp_slots
from ..analysis.peak import cpu_impossible_rate
from ..analysis.ncu import DURATION                    # ns, Nsight Compute's kernel time
from ..errors import AsightError
from ..store.counters import COUNTERS, OCCUPANCY, REGISTERS, max_occupancy, read_counters
from ..store.database import database_health, require_records_target
from ..store.files import printable_name
from ..store.record import Adopted
from ..store.runs import DB_RECORDS, SET_ASIDE, read_records

FASTER = 2.0                            # ncu faster than the runner by more: said at adopt
APART = 5.0                             # ncu reads 1.1-1.6x the runner (../shared/gpu/README.md); 5x is another run


def require_adoptable(records: list[dict], reply: dict, folder: Path, label: str,
                      tail: str = "nothing was adopted") -> None:
    """AsightError (one line) when the function's records cannot make a run: none, none measured,
    several targets, a latency faster than any GPU of the target's architecture computes."""
    if reply.get("also"):
        lines = ", ".join(str(i + 1) for i in [reply["workload"], *reply["also"]])
        raise AsightError(f"{folder / 'database_workload.json'} lists {label} {len(reply['also']) + 1} times (lines "
                          f"{lines}: the same function under other hash strings, as a TVM whose structural hash "
                          "differs writes it): a run is one workload's records; put each copy's records in a work "
                          f"folder of its own; {tail}")
    mine = [r for r in records if r["workload"] == reply["workload"]]
    where = folder / DB_RECORDS
    if not mine:
        raise AsightError(f"{where} holds no record of {label} ({len(records)} records in all): nothing was tuned "
                          f"there yet; {tail}")
    targets = Counter(target_label(r["target"], tagged=False) for r in mine)    # untagged: a tag is only a name
    if len(targets) > 1:
        (main, _), *others = targets.most_common()
        first = next(r for r in mine if target_label(r["target"], tagged=False) != main)
        listed = "; ".join(f"{t}: {n}" for t, n in targets.most_common())
        other = target_label(first["target"], tagged=False)
        raise AsightError(f"{where}: the records of {label} were tuned for {len(targets)} targets ({listed}; line "
                          f"{first['trial'] + 1} is {other}): a run has one target; put each target's records in a "
                          f"work folder of its own; {tail}")
    measured = [r for r in mine if r["latency_us"] is not None]
    if not measured:
        raise AsightError(f"{where}: none of the {len(mine)} records of {label} has a latency: every build or run "
                          f"failed where it was tuned; {tail}")
    _require_plain_target(mine[0]["target"], where, tail)
    _require_possible_latencies(measured, mine[0]["target"], reply, where, tail)


def _require_plain_target(target, where: Path, tail: str) -> None:
    """The target's names the views print (kind, arch, mcpu, mtriple, tag) are short printable text: a
    tag holding ESC sequences or a newline would reach the terminal; an NVIDIA arch is sm_XY."""
    if not isinstance(target, dict):
        return
    for key in ("kind", "arch", "mcpu", "mtriple", "tag"):
        value = target.get(key)
        if value is not None and not printable_name(value, 80):
            raise AsightError(f"{where}: the records' target {key} {str(value)[:40]!r} is not a name (short printable "
                              f"text); {tail}")
    arch = target.get("arch")
    if target.get("kind") == "cuda" and arch is not None and not re.fullmatch(r"sm_[0-9]{2,3}[a-z]?", str(arch)):
        raise AsightError(f"{where}: the records' target arch {str(arch)[:40]!r} is no NVIDIA architecture (sm_XY, "
                          f"e.g. sm_90a); {tail}")


def _require_possible_latencies(measured: list[dict], target, reply: dict, where: Path, tail: str) -> None:
    """No latency below a nanosecond (any target), none faster than the target computes: a GPU of the
    records' architecture (``gpu_peak.impossible_rate``) or the CPU cores (``cpu_impossible_rate``: 1 ps
    on a CPU record would read "best 0.0 µs"; a call under 1 µs is bounded by 4 cores whatever
    ``num-cores`` says)."""
    tiny = next((r for r in measured if r["latency_us"] < 1e-3), None)
    if tiny is not None:
        raise AsightError(f"{where} line {tiny['trial'] + 1}: a latency of {tiny['latency_us'] * 1e3:.3g} ns is below a "
                          f"nanosecond, faster than any kernel launch or call: not a measurement; {tail}")
    if not isinstance(target, dict) or target.get("kind") not in ("llvm", "cuda"):
        return
    flops, dtypes = reply.get("flops"), reply.get("dtypes") or []
    for record in measured:
        why = (cpu_impossible_rate(flops, record["latency_us"], target.get("num-cores"), dtypes)
               if target["kind"] == "llvm" else impossible_rate(flops, record["latency_us"], target.get("arch"), dtypes))
        if why:
            raise AsightError(f"{where} line {record['trial'] + 1}: {why}; {tail}")


def require_adopted_records(run, meta, records: list[dict]) -> None:
    """An adopted run's records and headline as adopt checked them: its records file edited after
    adopt (a 2 µs trial, another target's record) or run.json's best changed would be shown in every
    view; a change no check names (another GPU's arch, a copy of the workload, a trace that does not
    replay) is caught by the files' digests.  AsightError (one line) naming the run and, where a check
    names one, the line."""
    adopted = meta.adopted
    if adopted is None or meta.state in ("queued", "running"):
        return
    tail = f"run {meta.id}'s records changed after adopt: adopt the work folder again"
    health = database_health(run.path)
    if health.problems:
        raise AsightError(f"run {meta.id}: {health.problems[0]}: its records changed after adopt; adopt the work "
                          "folder again")
    reply = adopted.work()
    try:
        require_adoptable(records, reply, Path(run.path), meta.function, tail)
    except AsightError as err:
        if _changed_files(run, adopted) == []:     # the files are adopt's: run.json's fields were edited
            why = str(err).removesuffix(f"; {tail}").replace(f"{Path(run.path)}{os.sep}", "")
            raise AsightError(f"run {meta.id}: run.json was edited after adopt: its extra.adopted (workload "
                              f"{reply['workload']}) does not fit the database files adopt checked, which are "
                              f"unchanged ({why}); adopt the work folder again") from None
        raise
    _require_unchanged(run, meta.id, adopted)
    best = min(r["latency_us"] for r in records if r["workload"] == reply["workload"] and r["latency_us"] is not None)
    measured = meta.measured
    remeasured = measured is not None and bool(measured.tuned)      # then best_us is the re-measurement's
    if meta.best_us is not None and not remeasured and abs(meta.best_us - best) > 1e-3 * best:
        raise AsightError(f"run {meta.id}: run.json's best ({meta.best_us:,.1f} µs) is not its records' "
                          f"({best:,.1f} µs): run.json was edited; adopt the work folder again")


def _require_unchanged(run, run_id: str, adopted: Adopted) -> None:
    """The run's database files are the ones adopt checked (runs adopted before the digest: not checked)."""
    changed = _changed_files(run, adopted)
    if not changed:
        return
    aside = int(run.load().extra.get("set_aside_records") or 0) > int(adopted.set_aside or 0)
    torn = (f" (its last line was torn, a write cut short, and is set aside in {DB_RECORDS}{SET_ASIDE})" if aside
            else " (its last line is torn: a write cut short)" if database_health(run.path).unreadable else "")
    raise AsightError(f"run {run_id}: {' and '.join(changed)} changed after adopt checked "
                      f"{'them' if len(changed) > 1 else 'it'}{torn}: the views show only what adopt checked; "
                      "adopt the work folder again")


def _changed_files(run, adopted: Adopted) -> list[str] | None:
    """The database files whose digest is not the one adopt kept; None for a run adopted before the digest."""
    digest = adopted.digest
    if digest is None:
        return None
    now = run.database_digest()
    return [name for name in sorted(digest) if now.get(name) != digest[name]]


def adopted_problem(run, meta) -> str | None:
    """Why an adopted run is not used (its records or run.json changed after adopt: the checks of
    ``require_adopted_records``), None when it holds or was not adopted.  The editor's lens, hover and
    run list read run.json through the index, so they would show an edited best without it."""
    if meta.adopted is None or meta.state in ("queued", "running"):
        return None
    try:
        require_records_target(run, meta)
        require_adopted_records(run, meta, read_records(run.path))
    except AsightError as err:
        return str(err)
    return None


def run_counters(run_dir, records: list[dict], adopted: Adopted | None = None) -> list[dict] | None:
    """A run's own ``counters.jsonl`` as the views use it, checked as adopt checked it (one bad line
    refuses the whole file, AsightError naming it): a line edited, torn or appended after adopt would
    be shown as measured, or make every view drop all lines silently.  ``adopted``:
    run.json's ``extra.adopted`` (its workload, FLOPs and types: ``RunMeta.adopted``), if any.  None: no file."""
    entries = read_counters(run_dir)
    if entries:
        work = adopted.work() if adopted is not None else {}
        counter_candidates(entries, records, work.get("workload"), str(Path(run_dir) / COUNTERS), work=work)
    return entries


def checked_counters(run_dir, records: list[dict], adopted: Adopted | None = None) -> tuple[list | None, str | None]:
    """``run_counters`` for a view: ``(entries, None)``, or ``(None, why)`` when the file is refused,
    ``why`` naming the file by its name in the run folder ("counters.jsonl:1: ...")."""
    try:
        return run_counters(run_dir, records, adopted), None
    except AsightError as err:
        return None, str(err).replace(f"{Path(run_dir)}{os.sep}", "")


def counter_candidates(entries: list[dict], records: list[dict], workload: int | None, where: str | None,
                       torn: bool = False, work: dict | None = None) -> str | None:
    """Refuse a counters line naming a candidate the adopted function has no record for (``workload``
    None: a record of any workload, a tuned run of several tasks); say which lines name a record
    without a measured latency (a failed build: its counters are not used).  ``work``: the function's
    ``flops`` and ``dtypes`` (adopt's match), for the baseline line's kernel time."""
    _require_gpu_records(entries, [r for r in records if workload is None or r["workload"] == workload], where)
    by_trial = {r["trial"]: r for r in records}
    unused = []
    for entry in entries:
        cand = entry["candidate"]
        if cand == "baseline":
            _require_possible_baseline(entry, [r for r in records if workload is None or r["workload"] == workload],
                                       where, work or {})
            continue
        record = by_trial.get(cand)
        if record is None or workload is not None and record["workload"] != workload:
            what = (f"that record is of workload {record['workload']}, not the adopted function's {workload}"
                    if record is not None else f"record {cand} is the records file's torn last line (a write cut "
                    "short)" if torn and cand == len(records) else f"the records file has lines 0..{len(records) - 1}"
                    if records else "the records file is empty")
            raise AsightError(f"{where}:{entry['line']}: candidate {cand} is not a record of this function ({what})")
        if record["latency_us"] is None:
            unused.append(f"{cand} (line {entry['line']})")
        else:
            _require_same_kernel(entry, record, where)
            _require_possible_occupancy(entry, record, where)
    if not unused:
        return None
    return (f"counters of candidate{'s' * (len(unused) > 1)} {', '.join(unused[:5])}"
            f"{f' and {len(unused) - 5} more' if len(unused) > 5 else ''} not used: no measured latency there "
            "(a failed build or run)")


def _require_gpu_records(entries: list[dict], records: list[dict], where: str | None) -> None:
    """Counters are Nsight Compute's, of programs on a CUDA GPU: an llvm run adopted with them would show
    its CPU program's "measured (Nsight Compute)" DRAM / SM / GPU contour, where ``asight counters``
    refuses the same run."""
    target = records[0]["target"] if records else None
    kind = target.get("kind") if isinstance(target, dict) else None
    if not entries or kind is None or kind == "cuda":
        return
    where_from = (f"{target_label(target, tagged=False)}: they cannot be its programs' counters (adopt the folder "
                  "without them)")
    if any(metric_group(name) or name.startswith("launch__") for e in entries for name in e["metrics"]):
        raise AsightError(f"{where}: counters are Nsight Compute's, measured on a CUDA GPU; these records are for "
                          f"{where_from}")
    tool = next((e.get("tool") for e in entries if e.get("tool")), None)
    raise AsightError(f"{where}: holds no Nsight Compute metric{f' (tool {tool})' if tool else ''}: the measured contour "
                      f"reads Nsight Compute counters of a CUDA run, and these records are for {where_from}")


def _require_possible_baseline(entry: dict, records: list[dict], where: str | None, work: dict) -> None:
    """The baseline line (the untuned program's counters) judged as a candidate's is where it can be: its
    occupancy on the records' GPU, its kernel time against the architecture's peak for the function's
    FLOPs.  Every contour is a gain over it: a baseline at 1 ns made every candidate a loss."""
    target = records[0]["target"] if records else None
    if not (isinstance(target, dict) and target.get("kind") == "cuda"):
        return
    _require_possible_occupancy(entry, {"target": target}, where)
    duration = entry["metrics"].get(DURATION)
    if duration is None:
        return
    why = ("no kernel takes 0 µs" if duration <= 0 else
           impossible_rate(work.get("flops"), duration / 1e3, target.get("arch"), work.get("dtypes") or []))
    if why:
        raise AsightError(f"{where}:{entry['line']}: the baseline's counters time its kernel at "
                          f"{duration / 1e3:,.3g} µs: {why}")


def _require_same_kernel(entry: dict, record: dict, where: str | None) -> None:
    """Counters whose kernel time is far from their record's latency were measured on another program
    (counters of another tuning of the workload), e.g. 16.5 ms of counters for a 134.6 µs trial."""
    duration = entry["metrics"].get(DURATION)
    if duration is None:
        return
    ncu_us, latency = duration / 1e3, record["latency_us"]
    ratio = max(ncu_us / latency, latency / ncu_us) if ncu_us > 0 else float("inf")
    if ratio > APART:
        apart = f"{ratio:,.0f}× apart" if ncu_us > 0 else "no kernel takes 0 µs"
        unit = _unit_slip(latency / max(ncu_us, 1e-30))
        apart += f"; {DURATION} is in nanoseconds, and this one reads like {unit}" if unit else ""
        what = "these counters are in another unit" if unit else "these are counters of another program"
        shown = f"{ncu_us:,.1f}" if ncu_us >= 0.1 or ncu_us == 0 else f"{ncu_us:.3g}"
        raise AsightError(f"{where}:{entry['line']}: candidate {entry['candidate']}'s counters time its kernel at "
                          f"{shown} µs, its record at {latency:,.1f} µs ({apart}; Nsight Compute "
                          f"reads within {APART:g}× of the runner): {what}")


def _unit_slip(ratio: float) -> str | None:
    """The unit a kernel time reads in when the record is ~10³, 10⁶ or 10⁹ times it (ncu's is ns)."""
    for scale, unit in ((1e3, "microseconds"), (1e6, "milliseconds"), (1e9, "seconds")):
        if scale * 0.3 < ratio < scale * 3:
            return unit
    return None


def faster_counters(entries: list[dict], records: list[dict]) -> str | None:
    """Counters lines whose kernel time is more than ``FASTER``x below their record's latency: within
    ``APART`` (not refused) but the wrong way, as Nsight Compute locks the clocks and reads slower than
    the runner; said at adopt (4.5x faster is no reason to refuse, but worth a word)."""
    latency = {r["trial"]: r["latency_us"] for r in records if r["latency_us"]}
    fast = [(e["candidate"], e["metrics"][DURATION] / 1e3) for e in entries if e["candidate"] in latency
            and e["metrics"].get(DURATION) and e["metrics"][DURATION] / 1e3 * FASTER < latency[e["candidate"]]]
    if not fast:
        return None
    cand, ncu_us = fast[0]
    return (f"{len(fast)} counters line{'s' * (len(fast) > 1)} time{'s' * (len(fast) == 1)} the kernel more than "
            f"{FASTER:g}× faster than the record (candidate {cand}: {ncu_us:,.1f} µs against {latency[cand]:,.1f} "
            "µs), where Nsight Compute, which locks the clocks, reads 1.1-1.6× slower than the runner: check that "
            "they are this run's counters")


def _require_possible_occupancy(entry: dict, record: dict, where: str | None) -> None:
    """Achieved occupancy above what the record's GPU holds for warps of that many registers: 45 % with
    128 registers a thread on an H100 (64 warp slots: at most 25 %) is no measurement.
    ``store/counters`` bounds it for any SM; this, for the record's."""
    target = record.get("target")
    slots = warp_slots(target.get("arch")) if isinstance(target, dict) and target.get("kind") == "cuda" else None
    regs, occupancy = entry["metrics"].get(REGISTERS), entry["metrics"].get(OCCUPANCY)
    if slots is None or occupancy is None:
        return
    if occupancy < 100 / slots - 0.05:
        raise AsightError(f"{where}:{entry['line']}: achieved occupancy {occupancy:g} % is below one warp of the "
                          f"{slots} warp slots of an {target['arch']} SM ({100 / slots:.2f} %), and an active SM holds "
                          "at least one: not a measurement (percentages written as fractions?)")
    if regs is None:
        return
    most = max_occupancy(regs, slots)
    if occupancy > most + 0.05:        # ncu gives two decimals: 25.5 % over a 25 % ceiling is refused
        raise AsightError(f"{where}:{entry['line']}: achieved occupancy {occupancy:g} % with {int(regs)} registers a "
                          f"thread: on {target['arch']} ({slots} warp slots an SM) warps that use that many registers "
                          f"fill at most {most:.0f} %; these counters are not this candidate's")


def target_label(target, tagged: bool = True) -> str:
    """``cuda sm_90a`` from a record's Target JSON (its tag when it has one and ``tagged``)."""
    if not isinstance(target, dict):
        return str(target or "")
    if tagged and target.get("tag"):
        return str(target["tag"])
    parts = [str(target.get("kind", "?"))] + [str(target[k]) for k in ("arch", "mcpu") if target.get(k)]
    return " ".join(parts)
