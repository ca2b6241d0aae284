"""The run index: every run of a store by file and function, with each run's best record per
workload (TVM-free, cached).

The index is cheap to ask often: ``run.json`` files are re-read only when their mtime changes and
the records database is read incrementally (it is append-only) keeping the best record per
workload.  Which run speaks for a function, and what its best schedule did, is
``services/results.py``.
"""
from __future__ import annotations

import base64
import json
import os
import threading
import time
from pathlib import Path

from ..errors import AsightError
from ..tvmscript.model import Function
from .files import MAX_RUN_FILE_BYTES, NotPlainFile, read_plain, record_lines
from .folders import claimed_owner, claims, require_plain_store
from .owner import is_own
from .place import belongs
from .runs import DB_RECORDS, DB_WORKLOADS, Run, RunMeta, RunStore, measured, measured_something


def chosen_entry(chosen: list | None, workload: int) -> dict | None:
    """The entry of a run's measurement ``chosen`` (``[{workload, trial, task?, ...}]``) for one
    workload: the record re-measurement chose for that task, or None (no measurement, or it chose
    none for it).  The one rule of a run's best record: this index (hover, code view) and every
    view of a run's candidates (``views.context.best_candidate``) follow it, else the fastest while tuning."""
    return next((c for c in chosen or [] if isinstance(c, dict) and isinstance(c.get("trial"), int)
                 and c.get("workload") == workload), None)


class _Records:
    """Incremental reader of one run's records: best record per workload."""

    def __init__(self, path: Path):
        self.path = path
        self.offset = 0
        self.count = 0
        self.best: dict[int, dict] = {}
        self.inode: tuple | None = None

    def update(self) -> None:
        try:
            st = self.path.stat()
        except FileNotFoundError:
            return
        ident = (st.st_ino, st.st_dev)
        if ident != self.inode or st.st_size < self.offset:  # rewritten (repair): start over
            self.inode, self.offset, self.count, self.best = ident, 0, 0, {}
        if st.st_size == self.offset:
            return
        if st.st_size > MAX_RUN_FILE_BYTES:      # as every other reader of a run's files (read_plain)
            return
        with self.path.open("rb") as stream:
            stream.seek(self.offset)
            data = stream.read(st.st_size - self.offset)
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in record_lines(data[:end]):
            self._add(line)

    def _add(self, line: bytes | None) -> None:
        try:
            if line is None:
                raise ValueError("a line longer than a record")
            workload, (trace, run_secs, *_rest) = json.loads(line)
            insts, decisions = trace
            secs = [float(s) for s in run_secs or []]
        except (ValueError, TypeError, RecursionError):    # not a record (nested past Python's limit, too)
            return
        trial = self.count
        self.count += 1
        if not measured(secs):
            return
        latency = sum(secs) / len(secs) * 1e6
        current = self.best.get(workload)
        if current is None or latency < current["latency_us"]:
            self.best[workload] = {"latency_us": latency, "insts": insts, "decisions": decisions,
                                   "trial": trial, "workload": workload}


class RunIndex:
    """All runs of a store, looked up by file and function."""

    def __init__(self, store_root: str | os.PathLike, min_interval: float = 0.5):
        self.root = Path(store_root)
        self.runs_dir = self.root / "runs"
        self.min_interval = min_interval
        self._metas: dict[str, tuple[int, RunMeta]] = {}
        self._checked = 0.0
        self._records: dict[str, _Records] = {}
        self._workload_names: dict[str, tuple[int, list[set[str]]]] = {}
        self._trials: dict[tuple, dict | None] = {}
        self._by_file: dict[str, tuple] = {}
        self._sorted: list[RunMeta] = []
        self._refused: dict[str, str] = {}      # why the store, or a run in it, is not shown ("" -> the store)
        self._unreadable: dict[str, tuple] = {}  # run id -> (state, claimed_owner of its run.json, why not read)
        self._shipped: set[str] = set()          # runs this user did not make on this machine (``owner.is_own``)
        self.version = 0   # bumped whenever a run appears, changes or goes
        self.lock = threading.RLock()  # payload builders use the index from worker threads
        self.scan_on_read = True   # False (the server): only ``refresh`` reads the disk, off the event loop
        self._invalidations = 0    # a refresh that ``invalidate`` overtook leaves the index due

    # -- metadata
    def invalidate(self) -> None:
        self._checked = 0.0
        self._invalidations += 1

    def metas(self) -> list[RunMeta]:
        """Every readable run, oldest first (re-scanned at most every ``min_interval`` s)."""
        with self.lock:
            return self._metas_locked()

    def due(self) -> bool:
        """Whether the disk may have changed since the last scan (``min_interval`` passed, or invalidated)."""
        return time.monotonic() - self._checked >= self.min_interval

    def refresh(self) -> None:
        """Read what changed on disk: run.json files, every run's new records and workload names.  The
        server calls this off its event loop (``server/budget.py``); reads then use what it read."""
        invalidations = self._invalidations
        with self.lock:
            self._metas_locked(scan=True)
            for meta in self._sorted:
                self._records.setdefault(meta.id, _Records(self.run_dir(meta.id) / DB_RECORDS)).update()
                self._names(meta.id)
            if invalidations == self._invalidations:   # due ``min_interval`` after the read ends, not begins
                self._checked = time.monotonic()

    def _metas_locked(self, scan: bool = False) -> list[RunMeta]:
        now = time.monotonic()
        if (scan or self.scan_on_read) and now - self._checked >= self.min_interval:
            self._checked = now
            if self._scan():
                self.version += 1
                self._sorted = sorted((m for _, m in self._metas.values()), key=lambda m: (m.created or 0, m.id))
        return self._sorted

    def problems(self) -> list[str]:
        """Why runs are not shown: a linked store, unreadable run.json files (the LSP said nothing of
        them; the CLI refuses in one line)."""
        with self.lock:
            self._metas_locked()
            return list(self._refused.values())

    def _scan(self) -> bool:
        """Re-read changed run.json files; True when anything changed."""
        seen, changed = set(), False
        self._refused.pop("", None)
        try:
            require_plain_store(self.root)
            entries = list(os.scandir(self.runs_dir))
        except (FileNotFoundError, NotADirectoryError):
            entries = []
        except AsightError as err:                                     # a linked store shows no run, said
            self._refused[""], entries = str(err), []
        for entry in entries:
            mtime = _file_state(entry)
            if mtime is None:
                changed = self._headless(entry, seen) or changed
                continue
            seen.add(entry.name)
            cached = self._metas.get(entry.name)
            if cached and cached[0] == mtime or self._unreadable.get(entry.name, (None,))[0] == mtime:
                continue       # judged before, shown or refused, and nothing changed since
            try:
                meta = Run(entry.path).load()
            except AsightError as err:
                changed = self._refuse(entry, mtime, err) or changed
                continue
            self._refused.pop(entry.name, None)
            self._unreadable.pop(entry.name, None)
            self._metas[entry.name] = (mtime, meta)
            (self._shipped.discard if is_own(Path(entry.path)) else self._shipped.add)(entry.name)
            changed = True
        for gone in set(self._metas) - seen:
            del self._metas[gone]
            self._shipped.discard(gone)
            changed = True
        for gone in set(self._refused) - seen - {""}:
            del self._refused[gone]
            self._unreadable.pop(gone, None)
        return changed

    def _headless(self, entry: os.DirEntry, seen: set) -> bool:
        """A run folder with records and no run.json (deleted) is an unreadable run, said, not skipped
        (every view would skip it otherwise)."""
        try:
            mtime = (os.stat(os.path.join(entry.path, DB_RECORDS)).st_mtime_ns,)
        except OSError:
            return False
        seen.add(entry.name)
        if self._unreadable.get(entry.name, (None,))[0] == mtime:
            return False
        return self._refuse(entry, mtime, AsightError(f"run {entry.name} has no run.json (its records are there)"))

    def _refuse(self, entry: os.DirEntry, mtime: tuple, err: AsightError) -> bool:
        """Keep why a run is not shown and whose run it says it is; True when that is news (a run
        that was shown, or another reason: the lenses are drawn again)."""
        shown = self._metas.pop(entry.name, None) is not None
        news = shown or self._unreadable.get(entry.name, (0, 0, ""))[2] != str(err)
        self._refused[entry.name] = f"not shown: {err}"
        self._unreadable[entry.name] = (mtime, claimed_owner(Path(entry.path) / "run.json"), str(err))
        return news

    def unreadable_for(self, file: str, names: set[str]) -> list[tuple[str, str, str]]:
        """``(run id, why, whose)`` of the runs of ``names`` (a function's id, its unit's name) in ``file``
        whose run.json cannot be read (by the names it still holds, else by its id), oldest first: the
        editor names them instead of "no run yet"."""
        names = {name for name in names if name}
        with self.lock:
            self._metas_locked()
            found = sorted((mtime, run_id, why, whose) for run_id, (mtime, owner, why) in self._unreadable.items()
                           if (whose := claims(owner, run_id, file, names, RunStore.run_id_prefix)))
            return [(run_id, why, whose) for _, run_id, why, whose in found]

    def unreadable_all(self) -> list[tuple[str, str]]:
        """``(run id, why)`` of every run whose run.json cannot be read, oldest written first."""
        with self.lock:
            self._metas_locked()
            return [(run_id, why) for _, run_id, why in sorted((v[0], k, v[2]) for k, v in self._unreadable.items())]

    def written(self, run_id: str) -> int:
        """When a run's run.json was last written (ns; its records' time when it has none; -1 unknown)."""
        with self.lock:
            state = (self._metas.get(run_id) or self._unreadable.get(run_id) or ((-1,),))[0]
            return state[0]

    def measured(self, meta: RunMeta) -> bool:
        """The run measured something: its figures say so, or its records file holds a line."""
        if measured_something(meta):
            return True
        try:
            return (self.run_dir(meta.id) / DB_RECORDS).stat().st_size > 0
        except OSError:
            return False

    def newest(self) -> RunMeta:
        """The store's newest run (``--run latest``), passing over one that failed before measuring;
        AsightError when a newer run folder cannot be read, the store is refused, or it has no run."""
        refused = self.store_refusal()
        if refused:
            raise AsightError(refused)
        metas = list(reversed(self.metas()))
        meta = next((m for m in metas if not (m.state == "failed" and not self.measured(m))), None) \
            or next(iter(metas), None)
        after = self.written(meta.id) if meta is not None else -1
        newer = [why for rid, why in self.unreadable_all() if self.written(rid) > after]
        if newer:
            raise AsightError(f"{newer[-1]}; it is the newest run: view another with --run R (the runs are in "
                              f"{self.runs_dir})")
        if meta is None:
            raise AsightError(f"no run in {self.runs_dir}: tune a function first (asight tune FILE)")
        return meta

    def store_refusal(self) -> str | None:
        """Why the whole store is not read (a linked store), None when it is."""
        with self.lock:
            self._metas_locked()
            return self._refused.get("")

    def shipped(self, run_id: str) -> bool:
        """A run shown read-only: not made by this user on this machine (cloned, copied, unpacked)."""
        return run_id in self._shipped

    def run_dir(self, run_id: str) -> Path:
        return self.runs_dir / run_id

    def get(self, run_id: str) -> RunMeta | None:
        self.metas()
        found = self._metas.get(run_id)
        return found[1] if found else None

    def for_file(self, file: str) -> list[RunMeta]:
        """Runs of a file, oldest first (cached until a run.json changes)."""
        path = os.path.abspath(file)
        metas = self.metas()
        key = (path, self.version)
        if self._by_file.get(path, (None,))[0] != key:
            self._by_file[path] = (key, [m for m in metas if belongs(m, path, self.root)])
        return self._by_file[path][1]

    def best_record(self, run_id: str, fn: Function | None = None, chosen: list | None = None) -> dict | None:
        """The best record of ``fn``'s workload: the trial the run's measurement ``chosen`` by
        re-measurement when there is one, else the fastest while tuning."""
        with self.lock:
            best = self._best_record(run_id, fn)
            pick = chosen_entry(chosen, best["workload"]) if best is not None else None
            return self._trial_record(run_id, int(pick["trial"])) or best if pick else best

    def _trial_record(self, run_id: str, trial: int) -> dict | None:
        """One trial's record, as ``_Records`` keeps the best ones (cached per records file size)."""
        path = self.run_dir(run_id) / DB_RECORDS
        try:
            size = path.stat().st_size
        except OSError:
            return None
        key = (run_id, trial, size)
        if key not in self._trials and size <= MAX_RUN_FILE_BYTES:
            reader = _Records(path)
            with path.open("rb") as stream:
                for i, line in enumerate(stream):
                    if i == trial:
                        reader.count = trial
                        reader._add(line)
                        break
            self._trials[key] = next(iter(reader.best.values()), None)
        return self._trials.get(key)

    def _best_record(self, run_id: str, fn: Function | None) -> dict | None:
        records = self._records.get(run_id)
        if records is None:
            records = self._records[run_id] = _Records(self.run_dir(run_id) / DB_RECORDS)
        if self.scan_on_read or not records.inode:
            records.update()
        if not records.best:
            return None
        adopted = self._adopted_workload(run_id)
        if adopted is not None:         # adopt matched the function to this workload
            return records.best.get(adopted)
        if len(records.best) == 1:
            return next(iter(records.best.values()))
        index = self.workload_of(run_id, fn) if fn is not None else None
        if index is None:
            return None
        return records.best.get(index)

    def _adopted_workload(self, run_id: str) -> int | None:
        """The workload adopt matched an adopted run's function to (a run of one function), else None:
        by names, a folder holding a second kernel left the hover without a best."""
        meta = self.get(run_id)
        adopted = meta.adopted if meta is not None else None
        return adopted.workload if adopted is not None else None

    def workload_of(self, run_id: str, fn: Function) -> int | None:
        """The workload (task) of a function in a multi-workload run, by the names it contains."""
        names = self._names(run_id)
        wanted = {b.name for b in fn.blocks if b.name != "root"}
        scores = [(len(wanted & strings) + (2 if fn.name in strings else 0), i) for i, strings in enumerate(names)]
        scores.sort(reverse=True)
        if not scores or scores[0][0] == 0 or (len(scores) > 1 and scores[1][0] == scores[0][0]):
            return None
        return scores[0][1]

    def _names(self, run_id: str) -> list[set[str]]:
        path = self.run_dir(run_id) / DB_WORKLOADS
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return []
        cached = self._workload_names.get(run_id)
        if cached and cached[0] == size:
            return cached[1]
        try:
            raw = read_plain(path)
        except NotPlainFile:
            return []
        names = [_workload_strings(line) for line in raw.decode("utf-8", errors="replace").splitlines()]
        self._workload_names[run_id] = (size, names)
        return names


def _file_state(entry: os.DirEntry) -> tuple | None:
    """What a run folder's verdict depends on: its run.json's mtime and size, and the folder's own mtime
    (an entry added or removed); None when there is no run.json.  A run is read again, or judged
    again when it was refused, only when this changes."""
    try:
        meta, folder = os.stat(os.path.join(entry.path, "run.json")), entry.stat(follow_symlinks=False)
    except OSError:
        return None
    return meta.st_mtime_ns, meta.st_size, meta.st_ino, folder.st_mtime_ns


def _workload_strings(line: str) -> set[str]:
    """The string constants (function, block and buffer names) of one serialized workload."""
    try:
        _hash, encoded = json.loads(line)
        graph = json.loads(base64.b64decode(encoded)[8:])
        return {n["data"] for n in graph.get("nodes", []) if isinstance(n, dict)
                and n.get("type") in ("ffi.String", "String", "runtime.String") and isinstance(n.get("data"), str)}
    except (ValueError, TypeError, KeyError, RecursionError):
        return set()


