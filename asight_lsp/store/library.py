"""The schedule library: every run's best schedule per workload, kept per user, read as data (TVM-free).

A folder per target (``<library>/<key>/``, ``key`` from the target's text as TVM prints it) holds
MetaSchedule's JSON database format (``database_workload.json``, ``database_tuning_record.json``),
``target.json`` (the target's text, for ``asight library``) and ``names.json`` (the task each workload
was fed under).  Where: ``$ASIGHT_LIBRARY`` (``off`` turns it off), else ``<user cache>/library``
(outside any workspace: a cloned project cannot plant schedules in it).

TVM never opens these files.  This module reads them as data (``read``: the valid entries, and what
was not valid, said once); the tuning job takes from it only the entries whose workload hash is one
of its tasks', has each replayed on its task in the sandboxed worker first (``worker/library.py``:
a record that crashes TVM kills that worker, never the job), and feeds it from its own run's records,
as data too (``feed``).  A damaged library costs a run its start from the library, never a
measurement.

One record per workload: a run's best replaces the library's where it is faster, or where the run
re-measured the library's own schedule (then the run's best is the truth on this machine); at most
``MAX_WORKLOADS`` workloads, those fed longest ago dropped.  Every change rewrites the files whole
(a temporary file, then ``os.replace``: a link in the folder is replaced, never written through),
under a file lock.  A library file (``export``/``import``) is one JSON object (``SCHEMA``).
"""
from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import AsightError
from .database import bad_seconds, is_workload_row
from .files import NotPlainFile, cache_dir, read_plain
from .runs import DB_RECORDS, DB_WORKLOADS, FAILED_LATENCY, UNREADABLE, is_record_row, json_lines

LIBRARY_ENV = "ASIGHT_LIBRARY"
TARGET_FILE = "target.json"
NAMES_FILE = "names.json"
SCHEMA = "asight.library/1"
MAX_WORKLOADS = 4096          # per target: a few hundred models' kernels
MAX_FILE_BYTES = 256 << 20    # a library file to import
MAX_NAME = 200
SHOWN_TASKS = 3


class LibraryProblem(AsightError):
    """The library cannot be changed as asked (a file that is a link or not a file, a bad library file)."""


def root() -> Path | None:
    """The library's folder, None when ``$ASIGHT_LIBRARY`` is ``off``."""
    chosen = os.environ.get(LIBRARY_ENV, "").strip()
    if chosen.lower() == "off":
        return None
    return Path(chosen).expanduser() if chosen else cache_dir() / "library"


def target_key(target: str) -> str:
    return hashlib.sha256(target.encode()).hexdigest()[:16]


def folder_for(target: str) -> Path | None:
    """The folder of ``target``'s records (it may not exist), None when the library is off."""
    base = root()
    return None if base is None else base / target_key(target)


def printable(text: str, limit: int = MAX_NAME) -> str:
    """``text`` as one printable line (a name or target from a library file is shown in a terminal)."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(text))[:limit]


@contextlib.contextmanager
def locked(folder: Path):
    """One writer at a time (two jobs feeding at once, an import, a prune)."""
    folder.mkdir(parents=True, exist_ok=True)
    try:
        handle = os.open(folder / ".lock", os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as err:
        raise LibraryProblem(f"the schedule library's lock {folder / '.lock'} cannot be opened ({err.strerror})") from None
    try:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)


# --------------------------------------------------------------------------- the files as data


@dataclass
class Entry:
    """One workload of the library and its record, as the files hold them."""
    workload: list          # [structural hash, base64 of 8-byte length + the workload's TVM JSON]
    record: list            # [trace, run_secs, target, args_info]
    name: str | None = None   # the task it was fed under, or None

    @property
    def hash(self) -> str:
        return str(self.workload[0])

    @property
    def mean_us(self) -> float | None:
        secs = [float(s) for s in self.record[1] or []]
        return sum(secs) / len(secs) * 1e6 if secs and min(secs) < FAILED_LATENCY else None

    @property
    def task(self) -> str:
        """The task it was fed under, or its workload's structural hash."""
        return self.name or f"workload {self.hash}"


@dataclass
class Shelf:
    """One target's library as read: its valid entries (oldest fed first) and what was not valid."""
    entries: list[Entry] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    unplain: str | None = None     # a file that is a link or not a file: the folder is not rewritten

    def problem(self) -> str | None:
        said = self.unplain or (self.problems[0] if self.problems else None)
        more = len(self.problems) - (0 if self.unplain else 1)
        return None if said is None else said + (f" (and {more} more)" if more > 0 else "")


def entry_problem(workload, record) -> str | None:
    """Why a workload line and a record are not a library entry, or None."""
    if not is_workload_row(workload):
        return "a workload that is not [hash, base64 of TVM's JSON]"
    if not is_record_row([0, record]):
        return "a record that is not MetaSchedule's [trace, run_secs, target, args_info]"
    bad = bad_seconds(record[1])
    return f"run_secs {bad} (MetaSchedule writes positive seconds)" if bad else None


def read(folder: Path) -> Shelf:
    """``folder``'s entries, one per workload (its newest record), oldest fed first; every line that is
    not a valid entry is left out and said in ``problems``."""
    shelf = Shelf()
    try:
        workloads, records = json_lines(folder / DB_WORKLOADS), json_lines(folder / DB_RECORDS)
    except (NotPlainFile, OSError) as err:
        shelf.unplain = str(err).split(";")[0] if isinstance(err, NotPlainFile) else f"{folder}: {err.strerror}"
        return shelf
    named = names(folder)
    newest: dict[int, list] = {}
    for number, row in enumerate(records, 1):
        index = row[0] if is_record_row(row) else None
        if index is None or not 0 <= index < len(workloads) or workloads[index] is UNREADABLE:
            shelf.problems.append(f"{DB_RECORDS} line {number} is not a record of a readable workload")
            continue
        why = entry_problem(workloads[index], row[1][:4])
        if why:
            shelf.problems.append(f"{DB_RECORDS} line {number}: {why}")
            continue
        newest.pop(index, None)       # re-inserted: the order is the order last fed
        newest[index] = row[1][:4]
    shelf.entries = [Entry(workloads[i], record, named.get(str(workloads[i][0]))) for i, record in newest.items()]
    return shelf


def names(folder: Path) -> dict:
    try:
        data = json.loads(read_plain(folder / NAMES_FILE))
    except (OSError, ValueError, RecursionError, NotPlainFile):
        return {}
    return {str(k): printable(v) for k, v in data.items() if isinstance(v, str)} if isinstance(data, dict) else {}


def write(folder: Path, kept: list[Entry], target: str) -> None:
    """``folder`` holding exactly ``kept`` (each file rewritten whole: a temporary file, then replaced)."""
    folder.mkdir(parents=True, exist_ok=True)

    def replace(name: str, text: str) -> None:
        tmp = folder / f".{name}.{os.getpid()}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, folder / name)

    def lines(rows: list) -> str:   # no \uXXXX escapes: TVM's JSON loader refuses them (store/database.py)
        return "".join(json.dumps(row, separators=(",", ":"), ensure_ascii=False) + "\n" for row in rows)
    replace(DB_WORKLOADS, lines([e.workload for e in kept]))
    replace(DB_RECORDS, lines([[i, e.record] for i, e in enumerate(kept)]))
    replace(NAMES_FILE, json.dumps({e.hash: e.name for e in kept if e.name}, ensure_ascii=False))
    replace(TARGET_FILE, json.dumps({"target": target}))


def change(folder: Path, target: str, edit) -> tuple[Shelf, list[Entry]]:
    """Under the lock: read ``folder``, ``edit(entries) -> entries``, write the result (the newest
    ``MAX_WORKLOADS``).  A folder holding a link or a non-file is not touched: ``LibraryProblem``."""
    with locked(folder):
        shelf = read(folder)
        if shelf.unplain:
            raise LibraryProblem(f"the schedule library is damaged ({shelf.unplain}): nothing was changed; "
                                 f"remove {folder} to start it again")
        kept = edit(list(shelf.entries))[-MAX_WORKLOADS:]
        write(folder, kept, target)
    return shelf, kept


def better(new: Entry, old: Entry | None, remeasured: bool = False) -> bool:
    """Does ``new`` replace ``old`` for its workload: none held, faster, or ``remeasured`` (the run
    measured ``old``'s own schedule here: its best is the truth on this machine)."""
    if old is None or remeasured:
        return True
    return new.mean_us is not None and (old.mean_us is None or new.mean_us < old.mean_us)


def merge(entries: list[Entry], incoming: list[Entry], remeasured: dict | None = None) -> tuple[list[Entry], int]:
    """``entries`` with each of ``incoming`` taken where ``better``; ``remeasured``: {hash: the trace the run
    measured from the library}, honoured only while the library still holds that trace.  (entries, taken)."""
    held = {e.hash: e for e in entries}
    taken = 0
    for entry in incoming:
        old = held.get(entry.hash)
        again = old is not None and (remeasured or {}).get(entry.hash) == old.record[0]
        if better(entry, old, again):
            held.pop(entry.hash, None)
            held[entry.hash] = entry
            taken += 1
    return list(held.values()), taken


# --------------------------------------------------------------------------- a run's records fed in


def run_entries(run_dir: Path, tasks: dict[str, str]) -> list[Entry]:
    """The best valid record of each task (``tasks``: {workload hash: task name}) in a run's own database,
    as library entries (read as data)."""
    workloads, records = json_lines(run_dir / DB_WORKLOADS), json_lines(run_dir / DB_RECORDS)
    best: dict[int, list] = {}
    for row in records:
        if not is_record_row(row) or not 0 <= row[0] < len(workloads) or not is_workload_row(workloads[row[0]]):
            continue
        if str(workloads[row[0]][0]) not in tasks or entry_problem(workloads[row[0]], row[1][:4]):
            continue
        mean = Entry(workloads[row[0]], row[1][:4]).mean_us
        if mean is not None and (row[0] not in best or mean < Entry(workloads[row[0]], best[row[0]]).mean_us):
            best[row[0]] = row[1][:4]
    return [Entry(workloads[i], record, tasks[str(workloads[i][0])]) for i, record in best.items()]


def feed(target: str, run_dir: Path, tasks: dict[str, str], remeasured: dict | None = None) -> dict:
    """Add a run's best record of each task to ``target``'s library; ``{folder, fed, kept, set_aside?}``
    (``set_aside``: what of the library was not valid and is gone), ``{off}`` when the library is off.
    ``LibraryProblem`` when the folder cannot be changed."""
    folder = folder_for(target)
    if folder is None:
        return {"off": f"${LIBRARY_ENV} is off"}
    incoming = run_entries(run_dir, tasks)
    taken = [0]

    def edit(entries: list[Entry]) -> list[Entry]:
        entries, taken[0] = merge(entries, incoming, remeasured)
        return entries
    shelf, kept = change(folder, target, edit)
    out = {"folder": str(folder), "fed": taken[0], "kept": len(kept)}
    if shelf.problems:
        out["set_aside"] = shelf.problem()
    return out


def workload_json(workload: list) -> str | None:
    """The TVM JSON a workload line holds (after TVM's 8-byte length), or None."""
    try:
        return base64.b64decode(workload[1], validate=True)[8:].decode("utf-8")
    except (binascii.Error, ValueError, UnicodeDecodeError, TypeError, IndexError):
        return None



# --------------------------------------------------------------------------- listing, export, import


def targets() -> list[tuple[Path, str]]:
    """Each target folder of the library and its target's text."""
    base = root()
    if base is None or not base.is_dir():
        return []
    out = []
    for folder in sorted(p for p in base.iterdir() if p.is_dir() and not p.is_symlink()):
        try:
            target = json.loads(read_plain(folder / TARGET_FILE))["target"]
        except (OSError, ValueError, KeyError, TypeError, NotPlainFile):
            target = "?"
        out.append((folder, printable(str(target), 400)))
    return out


def export_library(folder: Path, target: str) -> dict:
    """One target's library as one JSON object (``SCHEMA``), for a file a team shares."""
    kept = read(folder).entries
    return {"schema": SCHEMA, "target": target, "workloads": [e.workload for e in kept],
            "records": [e.record for e in kept], "names": [e.name for e in kept]}


def read_library_file(path: str) -> tuple[str, list[Entry]]:
    """(target text as written, entries) of a library file, checked as data; ``LibraryProblem`` saying
    what is wrong (nothing is imported then)."""
    try:
        data = json.loads(read_plain(Path(path), MAX_FILE_BYTES))
    except FileNotFoundError:
        raise LibraryProblem(f"{path}: no such file") from None
    except NotPlainFile as err:
        raise LibraryProblem(str(err).split(";")[0] + ": a library file is a plain file") from None
    except (OSError, ValueError, RecursionError) as err:
        raise LibraryProblem(f"{path} is not a library file (not JSON: {str(err)[:80]})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise LibraryProblem(f"{path} is not a library file (its schema is not {SCHEMA}: `asight library export` "
                             "writes one)")
    target, workloads, records = data.get("target"), data.get("workloads"), data.get("records")
    labels = data.get("names", [None] * len(records) if isinstance(records, list) else None)
    if not isinstance(target, str) or not target.strip() or not isinstance(workloads, list) \
            or not isinstance(records, list) or not isinstance(labels, list) \
            or not len(workloads) == len(records) == len(labels):
        raise LibraryProblem(f"{path}: a library file holds a target text and as many workloads, records and names")
    out = []
    for k, (workload, record, label) in enumerate(zip(workloads, records, labels)):
        why = entry_problem(workload, record[:4] if isinstance(record, list) else record)
        if why:
            raise LibraryProblem(f"{path}: entry {k} is {why}: nothing was imported")
        out.append(Entry(workload, record[:4], printable(label) if isinstance(label, str) and label else None))
    return target, out


def hits_text(hits: list[dict], tasks: int) -> str:
    """``2 of 19 tasks started from the schedule library: conv2d, dense (their library schedules measured
    41.2 µs here in all, 42.0 µs where recorded)``: what run.json's ``extra.library`` says of a run's start."""
    here = [h for h in hits if h.get("measured_us") is not None]
    names_ = [printable(h.get("task")) for h in hits[:SHOWN_TASKS]]
    more = f" and {len(hits) - SHOWN_TASKS} more" if len(hits) > SHOWN_TASKS else ""
    text = f"{len(hits)} of {tasks} task{'s' if tasks != 1 else ''} started from the schedule library" + \
        (f": {', '.join(names_)}{more}" if hits else "")
    if not here:
        return text + " (none of their library schedules ran here)" if hits else text
    measured = sum(h["measured_us"] for h in here)
    recorded = sum(h["library_us"] or 0 for h in here)
    return text + f" (their library schedules measured {measured:.1f} µs here in all, {recorded:.1f} µs where recorded)"


def library_lines(extra: dict | None) -> list[str]:
    """The run's lines about the library (run.json ``extra.library``): the tasks that started from it, and
    what went wrong with it (a damaged library, entries set aside, one not written)."""
    section = (extra or {}).get("library") if isinstance(extra, dict) else None
    if not isinstance(section, dict):
        return []
    hits = [h for h in section.get("hits") or [] if isinstance(h, dict)] if isinstance(section.get("hits"), list) else []
    tasks = section.get("tasks") if isinstance(section.get("tasks"), int) else len(hits)
    lines = [hits_text(hits, tasks)] if hits else []
    notes = section.get("notes") if isinstance(section.get("notes"), list) else []
    return lines + [printable(n, 400) for n in notes if isinstance(n, str)]
