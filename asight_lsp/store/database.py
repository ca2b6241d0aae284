"""Is a run's MetaSchedule database usable, and what could not be read? (TVM-free)

TVM's ``JSONDatabase`` refuses a whole database over one unreadable line, and a damaged workload
file surfaces as an internal check failure (``workload_index < workloads.size()``) in the middle of
a profile or a code view.  ``database_health`` reads both files as plain data first:

* a torn **last** line of the records file (a job killed while appending) is tolerated: the measured
  records are kept and the line is counted, so every reader can say so (``records_note``);
* anything else TVM could not use is ``damage``: an unreadable line before the last one (dropping it
  would renumber the trials after it), a workload line that is not ``[hash, base64(length + JSON)]``,
  a record naming a workload the file does not hold, records without a workload file.
"""
from __future__ import annotations

import base64
import binascii
import json
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import AsightError
from .files import NotPlainFile, first_blank_line, first_unicode_escape, read_plain, stamp
from .runs import (DB_RECORDS, DB_WORKLOADS, FAILED_LATENCY, SET_ASIDE, UNREADABLE, DamagedDatabase, Run, RunMeta, is_record_row,
                   json_lines, read_json_lines)


@dataclass
class DatabaseHealth:
    records: int = 0                  # readable records
    unreadable: int = 0               # unreadable lines at the end of the records file (a torn write)
    workloads: int = 0                # workload lines
    torn_workload: bool = False       # the workload file ends in an unreadable line no record names
    damage: str | None = None         # why TVM cannot use the database; None: it can
    target_kinds: set = field(default_factory=set)   # the kinds of the targets the records were tuned for
    problems: list = field(default_factory=list)

    @property
    def needs_memory_copy(self) -> bool:
        """TVM's JSONDatabase would refuse the files although their records are usable."""
        return self.damage is None and (self.unreadable > 0 or self.torn_workload)


_CACHE: dict = {}


def database_health(run_dir: str | os.PathLike) -> DatabaseHealth:
    """The health of a run directory's JSON database (cached by the files' sizes and times)."""
    run_dir = Path(run_dir)
    key = (str(run_dir.resolve()), stamp(run_dir / DB_RECORDS), stamp(run_dir / DB_WORKLOADS))
    if key not in _CACHE:
        if len(_CACHE) > 64:
            _CACHE.clear()
        _CACHE[key] = _health(run_dir)
    return _CACHE[key]


def require_intact(run_dir: str | os.PathLike) -> DatabaseHealth:
    """``database_health``, raising ``DamagedDatabase`` with its one-line reason when the database is damaged."""
    health = database_health(run_dir)
    if health.damage:
        raise DamagedDatabase(f"damaged database in run {Path(run_dir).name}: {health.damage}")
    return health


def require_records_target(run: Run, meta: RunMeta) -> None:
    """A finished run's target is its records' (both written by the job, or by adopt): a run.json
    hand-edited to say ``llvm`` over records tuned for ``cuda`` would make ``asight profile`` time the
    GPU trace on this CPU.  AsightError when run.json names another kind."""
    kind = _kind(meta.target)
    kinds = {k for k in database_health(run.path).target_kinds if isinstance(k, str)}
    if meta.state in ("queued", "running") or kind == "a tag" or not kinds or kind in kinds:
        return
    if kind is None and kinds == {"llvm"}:      # no target named: the host CPU, as its records say
        return
    raise AsightError(f"run {run.id}: run.json says target {kind or 'none'}, but its records were tuned for "
                      f"{', '.join(sorted(kinds))}: run.json was edited or damaged (`asight adopt` or "
                      "`asight tune --new` makes a run whose target is its records')")


def _kind(target) -> str | None:
    """The kind a run.json target names: its JSON's, a text's first word; a tag ("nvidia/...") is
    TVM's to read."""
    if isinstance(target, dict):
        return target.get("kind")
    text = target.split()[0] if isinstance(target, str) and target.strip() else None
    return "a tag" if text and "/" in text else text


def _health(run_dir: Path) -> DatabaseHealth:
    health = DatabaseHealth()
    records = json_lines(run_dir / DB_RECORDS)
    workloads = json_lines(run_dir / DB_WORKLOADS)
    bad_workloads = [i for i, row in enumerate(workloads) if not is_workload_row(row)]
    health.workloads = len(workloads)
    named = set()
    for number, row in enumerate(records, 1):
        if is_record_row(row):
            health.records += 1
            named.add(row[0])
            target = row[1][2] if len(row[1]) > 2 else None
            health.target_kinds.add(target.get("kind") if isinstance(target, dict) else None)
            bad = bad_seconds(row[1][1])
            if bad is not None:
                health.problems.append(f"{DB_RECORDS} line {number}: run_secs must be positive seconds, not {bad}")
        elif number == len(records):
            health.unreadable = 1
        else:
            health.problems.append(f"{DB_RECORDS} line {number} of {len(records)} is not a record")
    for name in (DB_RECORDS, DB_WORKLOADS):
        health.problems.extend(_unloadable_text(run_dir / name, name))
    for index in bad_workloads:
        if index == len(workloads) - 1 and index not in named:
            health.torn_workload = True
        else:
            health.problems.append(f"{DB_WORKLOADS} line {index + 1} is not a readable workload")
    missing = sorted(i for i in named if not 0 <= i < len(workloads))
    if missing and not (run_dir / DB_WORKLOADS).exists():
        health.problems.append(f"{DB_WORKLOADS} is missing")
    elif missing:
        health.problems.append(f"records name workload {missing[0]}, but {DB_WORKLOADS} holds {len(workloads)}")
    if health.problems:
        health.damage = (f"{health.problems[0]}" + (f" (and {len(health.problems) - 1} more)" if
                                                    len(health.problems) > 1 else "") +
                         f"; {_cannot(health.problems)} (its {health.records} readable records stay in {run_dir}; "
                         "`asight tune --new` starts a fresh run)")
    return health


def _unloadable_text(path: Path, name: str) -> list[str]:
    """What in a database file's text TVM's JSON loader cannot read though Python's can: a blank line
    (it crashes), a ``\\uXXXX`` escape (it refuses "Unsupported escape sequence: \\u"; Python's
    ``json.dumps`` writes one for a non-ASCII annotation key)."""
    try:
        raw = read_plain(path)
    except (OSError, NotPlainFile):
        return []
    problems, blank, escape = [], first_blank_line(raw), first_unicode_escape(raw)
    if blank is not None:
        problems.append(f"{name} line {blank} is blank: TVM's loader crashes on a blank line (remove it)")
    if escape is not None:
        problems.append(f"{name} line {escape} has a \\uXXXX escape, which TVM's JSON reader cannot read")
    return problems


def _cannot(problems: list) -> str:
    """What the damage means: TVM refuses most of it; a latency no runner writes it would load, wrongly."""
    if all(": run_secs must be" in p for p in problems):
        return "its latencies cannot be used"
    return "TVM cannot load it"


def bad_seconds(run_secs) -> str | None:
    """A record's run_secs that no runner writes (MetaSchedule writes positive seconds, 1e10 for a
    failure): negative, zero, NaN or not a number; TVM cannot load NaN, and a negative one would be
    the run's "best".  None when they are fine."""
    for value in run_secs or []:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 or value == float("inf"):
            return repr(value)[:40]
    failed = [v >= FAILED_LATENCY for v in run_secs or []]
    if any(failed) and not all(failed):     # else their mean, 3.3e9 s, reads as measured
        return f"{repr(list(run_secs))[:60]}, which mixes MetaSchedule's failure mark (1e10) with measured seconds"
    return None


def is_workload_row(row) -> bool:
    """``[structural hash, base64(8-byte little-endian length + JSON graph)]``, as TVM 0.27 writes it."""
    if row is UNREADABLE or not isinstance(row, list) or len(row) != 2 or not all(isinstance(x, str) for x in row):
        return False
    try:
        blob = base64.b64decode(row[1], validate=True)
        (length,) = struct.unpack("<Q", blob[:8])
        graph = json.loads(blob[8:]) if length == len(blob) - 8 else None
    except (binascii.Error, struct.error, ValueError):
        return False
    return isinstance(graph, dict) and "nodes" in graph and "root_index" in graph


def records_note(run: Run, meta: RunMeta | None = None) -> str | None:
    """One line on record lines that could not be read (a torn write), or None when there are none."""
    health = database_health(run.path)
    meta = meta or run.load()
    aside = int(meta.extra.get("set_aside_records") or 0)
    if not health.unreadable and not aside:
        return None
    if health.unreadable:
        what = f"the last line of {DB_RECORDS} is unreadable (a write cut short)"
    else:
        what = (f"{aside} torn line{'s' * (aside > 1)} of {DB_RECORDS} (a write cut short) set aside in "
                f"{DB_RECORDS}{SET_ASIDE}")
    return f"{what}; the {health.records} readable records are kept"


def workload_graph(row) -> dict | None:
    """The JSON graph of one workload row (``[hash, base64(length + JSON)]``) as plain data, or None."""
    if not isinstance(row, list) or len(row) != 2 or not isinstance(row[1], str):
        return None
    try:
        graph = json.loads(base64.b64decode(row[1], validate=True)[8:])
    except (binascii.Error, ValueError):
        return None
    return graph if isinstance(graph, dict) and isinstance(graph.get("nodes"), list) else None


def workloads_text(run_dir: str | os.PathLike) -> str | None:
    """The run's workloads as one JSON text (each row's graph decoded), or None without a workloads
    file: what a search for an attribute (``layout_free_buffers``) reads."""
    path = Path(run_dir) / DB_WORKLOADS
    if not path.is_file():
        return None
    graphs = [workload_graph(row) for row in read_json_lines(path)]
    return "\n".join(json.dumps(g) for g in graphs if g is not None)
