"""The schedule library: every run's best schedule per workload, kept per user, read as data (TVM-free).

A folder per target (``<library>/<key>/``, ``key`` from the target's text) holds MetaSchedule's JSON
database (``database_workload.json``, ``database_tuning_record.json``: the format every run keeps,
so TVM's ``JSONDatabase`` opens it) and ``target.json`` (the target's text, for ``asight library``).
The tuning job adds to it (``worker/library.feed``) and starts a run's tasks from it
(``worker/library.LibraryStart``); this module reads, bounds, prunes, exports and imports it without
TVM.  Where: ``$ASIGHT_LIBRARY`` (``off`` turns it off), else ``<user cache>/library`` (outside any
workspace: a cloned project cannot plant schedules in it).

One record per workload: ``compact`` keeps each workload's newest record (the job writes a record
only when it is the best it knows for that workload here) and at most ``MAX_WORKLOADS`` workloads,
dropping those fed longest ago.  A library file (``export``/``import``) is one JSON object
(``SCHEMA``); importing checks it as data here and, in a sandboxed worker, that every record's trace
replays on its workload (``worker/library.check_records``): a record that does not is refused with
its reason, never run.
"""
from __future__ import annotations

import base64
import binascii
import contextlib
import fcntl
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import AsightError
from .database import is_workload_row
from .files import cache_dir, read_plain
from .runs import DB_RECORDS, DB_WORKLOADS, FAILED_LATENCY, is_record_row, read_json_lines

LIBRARY_ENV = "ASIGHT_LIBRARY"
TARGET_FILE = "target.json"
NAMES_FILE = "names.json"       # workload hash -> the task name it was fed under (for listings only)
SCHEMA = "asight.library/1"
MAX_WORKLOADS = 4096          # per target: a few hundred models' kernels
MAX_FILE_BYTES = 256 << 20    # a library file to import


def root() -> Path | None:
    """The library's folder, None when ``$ASIGHT_LIBRARY`` is ``off``."""
    chosen = os.environ.get(LIBRARY_ENV, "").strip()
    if chosen.lower() == "off":
        return None
    return Path(chosen).expanduser() if chosen else cache_dir() / "library"


def target_key(target: str) -> str:
    return hashlib.sha256(target.encode()).hexdigest()[:16]


def folder_for(target: str, make: bool = False) -> Path | None:
    """The folder of ``target``'s records (created when ``make``), None when the library is off."""
    base = root()
    if base is None:
        return None
    folder = base / target_key(target)
    if make:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / TARGET_FILE).write_text(json.dumps({"target": target}), encoding="utf-8")
    return folder


@contextlib.contextmanager
def locked(folder: Path):
    """One writer at a time (two jobs feeding at once, an import, a prune)."""
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / ".lock", "a", encoding="utf-8") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


# --------------------------------------------------------------------------- the files as data


@dataclass
class Entry:
    """One workload of the library and its record, as the files hold them."""
    workload: list          # [structural hash, base64 of the workload's TVM JSON]
    record: list            # [trace, run_secs, target, args_info]
    name: str | None = None   # the task it was fed under (names.json), or None

    @property
    def mean_us(self) -> float | None:
        secs = [float(s) for s in self.record[1] or []]
        return sum(secs) / len(secs) * 1e6 if secs and min(secs) < FAILED_LATENCY else None

    @property
    def task(self) -> str:
        """The task it was fed under, or its workload's structural hash."""
        return self.name or f"workload {self.workload[0]}"


def workload_json(encoded) -> str | None:
    """The TVM JSON inside a workload line's base64 (8 bytes of length first, as TVM writes it)."""
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError, TypeError):
        return None
    return raw[8:].decode("utf-8", errors="replace") if len(raw) > 8 else None


def names(folder: Path) -> dict:
    try:
        data = json.loads(read_plain(folder / NAMES_FILE))
    except (OSError, ValueError, RecursionError):
        return {}
    return {str(k): str(v)[:200] for k, v in data.items()} if isinstance(data, dict) else {}


def name_workloads(folder: Path, new: dict) -> None:
    """Remember the task names ``new`` ({workload hash: name}) feeds under."""
    merged = {**names(folder), **{str(k): v for k, v in new.items()}}
    tmp = folder / f".{NAMES_FILE}.tmp"
    tmp.write_text(json.dumps(merged, ensure_ascii=False), encoding="utf-8")
    os.replace(tmp, folder / NAMES_FILE)


def entries(folder: Path) -> list[Entry]:
    """The library's entries of one target, one per workload (the newest record), oldest fed first."""
    named = names(folder)
    workloads = list(read_json_lines(folder / DB_WORKLOADS))
    newest: dict[int, list] = {}
    for row in read_json_lines(folder / DB_RECORDS):
        if is_record_row(row) and 0 <= row[0] < len(workloads) and is_workload_row(workloads[row[0]]):
            newest.pop(row[0], None)       # re-inserted: the order is the order last fed
            newest[row[0]] = row[1][:4]
    return [Entry(workloads[index], record, named.get(str(workloads[index][0]))) for index, record in newest.items()]


def write(folder: Path, kept: list[Entry]) -> None:
    """``folder``'s two files holding exactly ``kept`` (atomically, each file)."""
    def replace(name: str, lines: list) -> None:
        tmp = folder / f".{name}.tmp"
        # no \\uXXXX escapes: TVM's JSON loader refuses them (store/database.py)
        tmp.write_text("".join(json.dumps(line, separators=(",", ":"), ensure_ascii=False) + "\n" for line in lines),
                       encoding="utf-8")
        os.replace(tmp, folder / name)
    replace(DB_WORKLOADS, [e.workload for e in kept])
    replace(DB_RECORDS, [[i, e.record] for i, e in enumerate(kept)])
    name_workloads(folder, {e.workload[0]: e.name for e in kept if e.name})


def compact(folder: Path, limit: int = MAX_WORKLOADS) -> int:
    """Keep each workload's newest record and the ``limit`` workloads fed last; returns how many."""
    kept = entries(folder)[-limit:] if limit > 0 else []
    write(folder, kept)
    return len(kept)


# --------------------------------------------------------------------------- listing, export, import


def targets() -> list[tuple[Path, str]]:
    """Each target folder of the library and its target's text."""
    base = root()
    if base is None or not base.is_dir():
        return []
    out = []
    for folder in sorted(p for p in base.iterdir() if p.is_dir()):
        try:
            target = json.loads((folder / TARGET_FILE).read_text(encoding="utf-8"))["target"]
        except (OSError, ValueError, KeyError, TypeError):
            target = "?"
        out.append((folder, str(target)))
    return out


def export_library(target_folder: Path, target: str) -> dict:
    """One target's library as one JSON object (``SCHEMA``), for a file a team shares."""
    kept = entries(target_folder)
    return {"schema": SCHEMA, "target": target, "workloads": [e.workload for e in kept],
            "records": [e.record for e in kept], "names": [e.name for e in kept]}


def read_library_file(path: str) -> tuple[str, list[Entry]]:
    """(target, entries) of a library file, checked as data; ``AsightError`` saying what is wrong."""
    try:
        data = json.loads(read_plain(Path(path), MAX_FILE_BYTES))
    except FileNotFoundError:
        raise AsightError(f"{path}: no such file") from None
    except (OSError, ValueError, RecursionError) as err:
        raise AsightError(f"{path} is not a library file (not JSON: {str(err)[:80]})") from None
    if not isinstance(data, dict) or data.get("schema") != SCHEMA:
        raise AsightError(f"{path} is not a library file (its schema is not {SCHEMA}: `asight library export` "
                          "writes one)")
    target, workloads, records = data.get("target"), data.get("workloads"), data.get("records")
    if not isinstance(target, str) or not target or not isinstance(workloads, list) or not isinstance(records, list) \
            or len(workloads) != len(records):
        raise AsightError(f"{path}: a library file holds a target text and as many workloads as records")
    labels = data.get("names") if isinstance(data.get("names"), list) else []
    out = []
    for k, (workload, record) in enumerate(zip(workloads, records)):
        if not is_workload_row(workload) or not is_record_row([0, record]):
            raise AsightError(f"{path}: entry {k} is not a workload and a MetaSchedule record: nothing was imported")
        label = labels[k] if k < len(labels) and isinstance(labels[k], str) else None
        out.append(Entry(workload, record[:4], label[:200] if label else None))
    return target, out


def merge(folder: Path, target: str, incoming: list[Entry]) -> tuple[int, int]:
    """Add ``incoming`` (checked) to ``target``'s folder: a workload the library lacks, or holds with a
    slower record, takes the incoming one.  Returns (added, kept as they were)."""
    with locked(folder):
        (folder / TARGET_FILE).write_text(json.dumps({"target": target}), encoding="utf-8")
        kept = {e.workload[1]: e for e in entries(folder)}
        added = 0
        for entry in incoming:
            old = kept.get(entry.workload[1])
            if old is None or (entry.mean_us is not None and (old.mean_us is None or entry.mean_us < old.mean_us)):
                kept.pop(entry.workload[1], None)
                kept[entry.workload[1]] = entry
                added += 1
        write(folder, list(kept.values())[-MAX_WORKLOADS:])
    return added, len(incoming) - added


SHOWN_TASKS = 3


def library_lines(extra: dict | None) -> list[str]:
    """The run's line about the library (run.json ``extra.library``), [] when no task started from it."""
    section = (extra or {}).get("library") if isinstance(extra, dict) else None
    if not isinstance(section, dict) or not isinstance(section.get("hits"), list) or not section["hits"]:
        return []
    hits = [h for h in section["hits"] if isinstance(h, dict)]
    tasks = section.get("tasks") if isinstance(section.get("tasks"), int) else len(hits)
    return [hits_text(hits, tasks)] if hits else []


def hits_text(hits: list[dict], tasks: int) -> str:
    """``2 of 19 tasks started from the schedule library: conv2d, dense (their library schedules measured
    41.2 µs here in all, 42.0 µs where recorded)``: what run.json's ``extra.library`` says of a run's start."""
    here = [h for h in hits if h.get("measured_us") is not None]
    names = [str(h.get("task")) for h in hits[:SHOWN_TASKS]]
    more = f" and {len(hits) - SHOWN_TASKS} more" if len(hits) > SHOWN_TASKS else ""
    text = f"{len(hits)} of {tasks} task{'s' if tasks != 1 else ''} started from the schedule library" + \
        (f": {', '.join(names)}{more}" if hits else "")
    if not here:
        return text + " (none of their library schedules ran here)" if hits else text
    measured = sum(h["measured_us"] for h in here)
    recorded = sum(h["library_us"] or 0 for h in here)
    return text + f" (their library schedules measured {measured:.1f} µs here in all, {recorded:.1f} µs where recorded)"
