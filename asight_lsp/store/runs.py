"""The run store: ``<workspace>/.asight/runs/<run-id>/`` (TVM-free).

A run directory is MetaSchedule's own ``work_dir`` (``database_workload.json``,
``database_tuning_record.json``, ``logs/``) plus:

* ``run.json``     — metadata (file, function, per-function source hash, target, budget, state, timings)
* ``events.jsonl`` — progress events streamed by the tuning job, one JSON object per line
* ``*.msgpack``    — caches (features, profiles) written by later analysis

Everything here reads plain files and never imports TVM, so the language server and the analysis
can use it directly.  A torn last line (a job killed mid-write) is tolerated and *reported*
(``store/database.py``); any other unreadable line makes the database
``damaged`` (``DamagedDatabase``: TVM cannot load it and trial numbers would shift).
"""
from __future__ import annotations

import json
import math
import os
import re
import secrets
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ..errors import AsightError
from .files import MAX_LINE_BYTES, NotPlainFile, file_lines, read_plain, record_lines, write_atomic
from .folders import MAX_META_BYTES, meta_json, require_plain_folder, require_plain_store, require_run_name
from .owner import is_own, make_own_folder
from .place import belongs, relative_file
from .record import RUN_SCHEMA, Adopted, Build, Measurement, Shortfall, Space

STATES = ("queued", "running", "done", "cancelled", "failed")
FAILED_LATENCY = 1e9  # MetaSchedule stores failed builds/runs as run_secs [1e10]
DB_RECORDS = "database_tuning_record.json"
DB_WORKLOADS = "database_workload.json"
SET_ASIDE = ".unreadable"      # suffix of the file a repair appends the lines it drops to


class DamagedDatabase(AsightError):
    """MetaSchedule's JSON database of a run cannot be used (one line; the CLI exits 2)."""


def default_store_root(workspace: str | os.PathLike | None = None) -> Path:
    """``$ASIGHT_HOME`` if set, else ``<workspace or cwd>/.asight``."""
    env = os.environ.get("ASIGHT_HOME")
    if env:
        return Path(env)
    return Path(workspace or os.getcwd()) / ".asight"


@dataclass
class RunMeta:
    id: str
    file: str
    function: str                      # function id (``Mod.main``) or unit name for a whole module
    kind: str = "tir"                  # tir | relax
    source_hashes: dict = field(default_factory=dict)  # function id -> source_hash
    target: Any = None                 # Target JSON (dict) or string
    target_label: str = ""
    trials_requested: int = 0
    trials_done: int = 0
    state: str = "queued"
    created: float = field(default_factory=time.time)
    started: float | None = None
    finished: float | None = None
    pid: int | None = None
    baseline_us: float | None = None   # the headline: measurement["untuned"] when measured (docs/measurement.md)
    best_us: float | None = None       # measurement["tuned"]; while tuning, the best the runner saw
    measurement: dict | None = None    # the run's measurement record (analysis/measurement.py)
    error: str | None = None
    rpc: str | None = None
    tasks: list = field(default_factory=list)          # [{name, weight, functions}] for Relax / multi-func
    sessions: list = field(default_factory=list)       # one entry per tune invocation (resume history)
    guided_by: str | None = None
    extra: dict = field(default_factory=dict)
    schema: str = RUN_SCHEMA
    workspace_file: str | None = None  # ``file`` relative to the store's workspace (store/place.py)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> "RunMeta":
        known = {f for f in cls.__dataclass_fields__}
        meta = cls(**{k: v for k, v in data.items() if k in known})
        meta.extra.update({k: v for k, v in data.items() if k not in known})
        return meta

    # run.json's sections, typed (store/record.py): None when absent or not of the shape asight writes
    @property
    def adopted(self) -> Adopted | None:
        return Adopted.from_extra(self.extra)

    @property
    def space(self) -> Space | None:
        return Space.from_extra(self.extra)

    @property
    def build(self) -> Build | None:
        return Build.from_extra(self.extra)

    @property
    def shortfall(self) -> Shortfall | None:
        return Shortfall.from_extra(self.extra)

    @property
    def measured(self) -> Measurement | None:
        """``measurement`` typed (writers and run.json keep the dict)."""
        return Measurement.of(self.measurement)


class Run:
    """One run directory."""

    def __init__(self, path: str | os.PathLike):
        self.path = Path(path).absolute()   # sent to workers, which do not run in this cwd (docs/sandbox.md)

    @property
    def id(self) -> str:
        return self.path.name

    @property
    def meta_path(self) -> Path:
        return self.path / "run.json"

    @property
    def events_path(self) -> Path:
        return self.path / "events.jsonl"

    @property
    def records_path(self) -> Path:
        return self.path / DB_RECORDS

    def exists(self) -> bool:
        return self.meta_path.exists()

    def load(self) -> RunMeta:
        """``run.json`` after ``require_plain_folder`` (shipped data); ``id``: the folder's name ("../../x" led out)"""
        try:
            require_run_name(self.path.name)
            require_plain_folder(self.path)
            meta = RunMeta.from_dict(meta_json(read_plain(self.meta_path, MAX_META_BYTES)))
        except FileNotFoundError:
            raise AsightError(f"run {self.id} has no run.json (not a run directory: {self.path})") from None
        except (ValueError, TypeError, RecursionError, AttributeError, NotPlainFile, OSError) as err:
            why = getattr(err, "strerror", None) or str(err)
            raise AsightError(f"run {self.id}: run.json is unreadable ({why[:200]})") from None
        meta.id = self.id       # the folder's name, whatever run.json says (a copied run; "../../x")
        return meta

    def save(self, meta: RunMeta) -> None:
        """Write ``run.json`` atomically (a reader never sees half a file), with the file's place in the
        workspace of the store it is in (``store/place.py``) when it has none yet."""
        self.path.mkdir(parents=True, exist_ok=True)
        meta.workspace_file = meta.workspace_file or relative_file(meta.file, self.path.parent.parent)
        write_atomic(self.meta_path, json.dumps(meta.to_dict(), indent=2, default=str))

    def update(self, **changes) -> RunMeta:
        meta = self.load()
        for key, value in changes.items():
            setattr(meta, key, value)
        self.save(meta)
        return meta

    def set_measurement(self, record: dict) -> RunMeta:
        """Make ``record`` the run's headline (``measurement``, ``baseline_us``, ``best_us``); the
        records it replaces stay in ``extra.measurement_history`` (newest last, at most 5)."""
        meta = self.load()
        if meta.measurement:
            meta.extra["measurement_history"] = (meta.extra.get("measurement_history") or [])[-4:] + [meta.measurement]
        meta.measurement = record
        if record.get("untuned"):
            meta.baseline_us = record["untuned"]["median_us"]
        if record.get("tuned"):
            meta.best_us = record["tuned"]["median_us"]
        self.save(meta)
        return meta

    def keep_unadopted(self, record: dict, why: str) -> RunMeta:
        """Keep a measurement that did not become the headline (noisier than it) in
        ``extra.measurement_history`` with ``adopted: false`` and the reason; the headline stays."""
        meta = self.load()
        kept = {**record, "adopted": False, "not_adopted": why}
        meta.extra["measurement_history"] = (meta.extra.get("measurement_history") or [])[-4:] + [kept]
        self.save(meta)
        return meta

    def append_event(self, event: dict) -> None:
        with self.events_path.open("a") as stream:
            stream.write(json.dumps(event, default=str) + "\n")

    def events(self) -> list[dict]:
        return list(read_json_lines(self.events_path))

    def records(self) -> list[dict]:
        """Tuning records in trial order (see ``read_records``)."""
        return read_records(self.path)

    def workloads(self) -> list[list]:
        return list(read_json_lines(self.path / DB_WORKLOADS))

    def workload_hashes(self) -> list[str]:
        """The structural hash of each workload, by index (what records' ``workload`` points at)."""
        return [str(row[0]) if isinstance(row, list) and row else "" for row in self.workloads()]

    def repair_db(self) -> int:
        """Make MetaSchedule's JSON database loadable by TVM after a hard kill: a torn last line is
        set aside (``repair_json_lines``) and counted in ``run.json`` (``extra.set_aside_records``).
        A damaged database is left exactly as it is (``store/database.py`` says why)."""
        from .database import database_health   # it reads this module's formats
        health = database_health(self.path)
        if health.damage:
            return 0
        dropped = repair_json_lines(self.records_path, is_record_row)
        if health.torn_workload:
            repair_json_lines(self.path / DB_WORKLOADS)
        if dropped and self.exists():
            meta = self.load()
            meta.extra["set_aside_records"] = int(meta.extra.get("set_aside_records") or 0) + dropped
            self.save(meta)
        return dropped

    def database_digest(self) -> dict[str, str]:
        """SHA-256 of each of the run's two database files as they are now (a missing one as empty):
        what adopt checked, kept in ``extra.adopted.digest``, so that no view shows records changed since."""
        import hashlib
        out = {}
        for name in (DB_WORKLOADS, DB_RECORDS):
            try:
                data = read_plain(self.path / name)
            except FileNotFoundError:
                data = b""
            out[name] = hashlib.sha256(data).hexdigest()
        return out

    @property
    def source_path(self) -> Path:
        """Snapshot of the source text the run tuned (written by ``jobs.start_tune``)."""
        return self.path / "source.py"


def read_json_lines(path: Path) -> Iterator[Any]:
    """JSON values of a line-per-record file; an unreadable line is skipped (``database_health`` counts them)."""
    for value in json_lines(path):
        if value is not UNREADABLE:
            yield value


UNREADABLE = object()


def json_lines(path: Path) -> list:
    """Every non-empty line of a line-per-record file, parsed; ``UNREADABLE`` where it is not JSON."""
    try:
        raw = read_plain(path)
    except FileNotFoundError:
        return []
    out = []
    for line in record_lines(raw):
        try:
            out.append(UNREADABLE if line is None else json.loads(line.decode("utf-8", errors="replace")))
        except (json.JSONDecodeError, RecursionError):    # 100,000 "[" on a line: not a record
            out.append(UNREADABLE)
    return out


def is_record_row(row) -> bool:
    """A line of the records file: ``[workload_index, [[insts, decisions], run_secs, target, args_info]]``."""
    try:
        workload, (trace, run_secs, _target, _args) = row[0], row[1][:4]
        insts, _decisions = trace
        return isinstance(workload, int) and isinstance(insts, list) and isinstance(run_secs, (list, type(None)))
    except (TypeError, ValueError, IndexError, KeyError):
        return False


def repair_json_lines(path: str | os.PathLike, readable=lambda value: True) -> int:
    """Set aside a torn last line of a line-per-record file (rewritten atomically; the line is appended
    to ``<file>.unreadable``), as TVM's ``JSONDatabase`` refuses a whole database over it.

    Only the last line: an unreadable line in the middle is damage, not a torn write, and dropping it
    would renumber every trial after it (``DamagedDatabase``).  Returns how many lines were set aside.
    """
    path = Path(path)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return 0
    lines = [line.decode("utf-8", errors="replace") for line in file_lines(raw)]
    torn = bool(lines) and (len(lines[-1]) > MAX_LINE_BYTES or not _readable(lines[-1], readable))
    if not torn and (not raw or raw.endswith(b"\n")):
        return 0
    kept = lines[:-1] if torn else lines
    if torn:
        with open(str(path) + SET_ASIDE, "a", encoding="utf-8") as aside:
            aside.write(lines[-1] + "\n")
    write_atomic(path, "".join(line + "\n" for line in kept))
    return int(torn)


def _readable(line: str, readable) -> bool:
    try:
        return bool(readable(json.loads(line)))
    except (json.JSONDecodeError, RecursionError):
        return False


def read_records(run_dir: str | os.PathLike) -> list[dict]:
    """MetaSchedule's JSON database as plain dicts, in trial (append) order.

    Each line is ``[workload_idx, [[insts, decisions], run_secs, target, args_info]]``.  Returns
    ``{trial, workload, insts, decisions, run_secs, latency_us (None if failed), target, args_info}``.
    Records whose instruction list is textually identical (every candidate of one design space)
    share one parsed ``insts`` object (``TraceReader``): treat it as read-only.
    """
    out = []
    reader = TraceReader()
    try:
        raw = read_plain(Path(run_dir) / DB_RECORDS)
    except FileNotFoundError:
        return []
    trial = -1
    for line in record_lines(raw):
        row = UNREADABLE if line is None else reader.loads(line.decode("utf-8", errors="replace"))
        if row is UNREADABLE:
            continue
        trial += 1
        try:
            workload, (trace, run_secs, target, args_info) = row[0], row[1][:4]
            insts, decisions = trace
        except (TypeError, ValueError, IndexError):
            continue
        secs = [float(s) if isinstance(s, (int, float)) else math.nan for s in (run_secs or [])]
        out.append({"trial": trial, "workload": workload, "insts": insts, "decisions": decisions,
                    "run_secs": secs, "latency_us": (sum(secs) / len(secs) * 1e6) if measured(secs) else None,
                    "target": target, "args_info": args_info})
    return out


def measured_something(meta: RunMeta) -> bool:
    """The run's figures say it measured something (its records may too: ``RunIndex.measured``)."""
    return meta.best_us is not None or bool(meta.trials_done)


def measured(secs: list) -> bool:
    """Seconds a runner measured: every repeat positive and below the failure mark.  A failed trial
    (``[1e10]``) has none; a damaged one (negative, NaN, a failure mark among real repeats: a "mean"
    of 3.3e9 s; ``store/database``) is never a best."""
    return bool(secs) and all(0 < s < FAILED_LATENCY for s in secs)


_INSTS_START = re.compile(r"\s*\[\s*-?\d+\s*,\s*\[\s*\[\s*(?=\[)")


class TraceReader:
    """Parses record lines, sharing the ``insts`` list between records whose instruction text is the
    same (MetaSchedule repeats a design space's whole instruction list in every record; only the
    decisions differ).  On a 20,000-record run this parses each distinct list once and keeps one
    copy: the records' Python objects went from ~290 MB to a few MB (bench/space.py).

    A line is parsed as ``json.loads`` would; any line that does not have the expected shape is
    simply parsed whole.
    """

    RECENT = 32  # instruction texts compared by prefix before falling back to a parse

    def __init__(self):
        self._known: dict[str, Any] = {}
        self._decoder = json.JSONDecoder()

    def loads(self, line: str) -> Any:
        m = _INSTS_START.match(line)
        try:
            if m is None:
                return json.loads(line)
            start = m.end()
            text = self._match(line, start)
            if text is None:
                insts, end = self._decoder.raw_decode(line, start)
                text = line[start:end]
                self._remember(text, insts)
            row = json.loads(line[:start] + "0" + line[start + len(text):])
            row[1][0][0] = self._known[text]
            return row
        except (json.JSONDecodeError, TypeError, IndexError, KeyError, RecursionError):
            try:
                return json.loads(line)
            except (json.JSONDecodeError, RecursionError):     # nested past Python's limit: not a record
                return UNREADABLE

    def _match(self, line: str, start: int) -> str | None:
        for text in self._known:
            if line.startswith(text, start):
                return text
        return None

    def _remember(self, text: str, insts: Any) -> None:
        if len(self._known) >= self.RECENT:
            self._known.pop(next(iter(self._known)))
        self._known[text] = insts


_SLUG = re.compile(r"[^A-Za-z0-9_.-]+")


def _records_said(run: Run) -> str:
    """How many records a refused run holds, read only from a plain folder (never through its links)."""
    try:
        require_plain_folder(run.path)
        return f"{len(read_records(run.path))} records measured"
    except (AsightError, OSError):
        return "its records are not read"


class RunStore:
    """All runs under one root (``.asight`` of a workspace)."""

    def __init__(self, root: str | os.PathLike | None = None):
        self.root = (Path(root) if root else default_store_root()).absolute()
        self.runs_dir = self.root / "runs"

    def new_run_id(self, function: str) -> str:
        return f"{self.run_id_prefix(function)}{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"

    @staticmethod
    def run_id_prefix(function: str) -> str:
        """How the ids of a function's runs begin (``<slug>-``; then date, time and a random tag)."""
        return (_SLUG.sub("-", function).strip("-")[:40] or "run") + "-"

    def create(self, meta: RunMeta) -> Run:
        require_plain_store(self.root)
        run = Run(self.runs_dir / meta.id)
        make_own_folder(run.path)
        run.save(meta)
        return run

    def all(self) -> list[Run]:
        require_plain_store(self.root)
        if not self.runs_dir.is_dir():
            return []
        runs = [Run(p) for p in self.runs_dir.iterdir() if (p / "run.json").exists()]
        return sorted(runs, key=lambda r: r.meta_path.stat().st_mtime)

    def metas(self) -> list[RunMeta]:
        out = []
        for run in self.all():
            try:
                out.append(run.load())
            except AsightError:
                continue
        return out

    def get(self, ref: str) -> Run:
        """A run by id, unique id prefix, directory path, or ``latest`` (``RunIndex.newest``)."""
        path = Path(ref)
        if (path / "run.json").exists():
            return Run(path)
        runs = self.all()
        if ref == "latest":
            from .index import RunIndex
            return Run(self.runs_dir / RunIndex(self.root, min_interval=0).newest().id)
        exact = [r for r in runs if r.id == ref]
        if exact:
            return exact[0]
        matches = [r for r in runs if r.id.startswith(ref)]
        if len(matches) == 1:
            return matches[0]
        if not matches:
            raise AsightError(f"no run '{ref}' in {self.runs_dir} (--work-dir names another store; "
                              "a run's directory path works from anywhere)")
        raise AsightError(f"run '{ref}' is ambiguous: {', '.join(r.id for r in matches[:5])}")

    def find_resumable(self, file: str, function: str, source_hashes: dict, target_label: str,
                       space_key: tuple | None = None) -> Run | None:
        """The newest run of the same function, source and target (and design space: ``(function, mode,
        hash)`` or None for MetaSchedule's own), whose records a new run can reuse.

        Only this user's runs (``owner.is_own``: a shipped run is never resumed); one whose ``run.json`` is unreadable
        and whose id says it tuned this function is refused (``AsightError``), never passed over (it hides records).
        """
        for run in reversed([run for run in self.all() if is_own(run.path)]):
            try:
                meta = run.load()
            except AsightError as err:
                if run.id.startswith(self.run_id_prefix(function)):
                    raise AsightError(f"{err}; it may be this function's run ({_records_said(run)}): repair or move "
                                      f"{run.path} away, or pass --new for a separate run") from None
                continue
            if (belongs(meta, file, self.root) and meta.function == function
                    and meta.source_hashes == source_hashes and meta.target_label == target_label
                    and not meta.guided_by  # a guided run is its own experiment: never resumed as plain
                    and Space.key_of(meta.extra) == space_key):
                return run
        return None
