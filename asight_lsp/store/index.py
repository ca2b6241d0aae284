"""Which run speaks for which function, and what its best schedule did (TVM-free, cached).

Runs are found in the run store by file and function id; a run is *fresh* for a function when the
function's current source hash equals the one the run recorded, *stale* otherwise.  Everything the
editor shows (lenses, hovers, inlay hints) is recomputed from the current outline by stable id, so
ranges follow the text and edits to other functions leave a function's results alone.

The index is cheap to ask often: ``run.json`` files are re-read only when their mtime changes, the
records database is read incrementally (it is append-only) keeping the best record per workload,
and trace summaries are cached per record.
"""
from __future__ import annotations

import base64
import json
import os
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..analysis.trace_summary import source_blocks, summarize_trace
from ..errors import AsightError
from ..services.profiling import profile_blocks
from .runs import DB_RECORDS, DB_WORKLOADS, FAILED_LATENCY, Run, RunMeta
from ..tvmscript.outline import Function

LIVE_STATES = ("queued", "running")
PROFILE_FILE = "profile.msgpack"   # written by asight_lsp.services.profiling


@dataclass
class FunctionResult:
    """The run shown for one function, with its best record and what that record did."""
    function_id: str
    meta: RunMeta
    run_dir: Path
    stale: bool
    best: dict | None = None          # {"latency_us", "insts", "decisions", "trial", "workload"}
    summary: dict | None = None       # trace_summary.summarize_trace(...) of ``best``
    profile: dict | None = None       # {block name: {"us": float, "share": float, "source": str}}

    @property
    def running(self) -> bool:
        return self.meta.state in LIVE_STATES

    @property
    def speedup(self) -> float | None:
        m = self.meta
        return m.baseline_us / m.best_us if m.baseline_us and m.best_us else None

    def block(self, name: str) -> dict | None:
        return (self.summary or {}).get("blocks", {}).get(name)


def run_summary(meta: RunMeta, stale: bool | None = None) -> dict:
    """``protocol.RunSummary`` of a run."""
    speedup = meta.baseline_us / meta.best_us if meta.baseline_us and meta.best_us else None
    out = {"id": meta.id, "file": meta.file, "function": meta.function, "state": meta.state,
           "trialsRequested": meta.trials_requested, "trialsDone": meta.trials_done,
           "baselineUs": meta.baseline_us, "bestUs": meta.best_us, "speedup": speedup,
           "target": meta.target_label or str(meta.target or ""), "created": meta.created,
           "finished": meta.finished, "error": meta.error}
    if stale is not None:
        out["stale"] = stale
    return out


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
        with self.path.open("rb") as stream:
            stream.seek(self.offset)
            data = stream.read()
        end = data.rfind(b"\n") + 1
        self.offset += end
        for line in data[:end].splitlines():
            self._add(line)

    def _add(self, line: bytes) -> None:
        try:
            workload, (trace, run_secs, *_rest) = json.loads(line)
            insts, decisions = trace
            secs = [float(s) for s in run_secs or []]
        except (ValueError, TypeError):
            return
        trial = self.count
        self.count += 1
        if not secs or min(secs) >= FAILED_LATENCY:
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
        self._summaries: dict[tuple, dict] = {}
        self._profiles: dict[str, tuple[int, dict | None]] = {}
        self._by_file: dict[str, tuple] = {}
        self._sorted: list[RunMeta] = []
        self.version = 0   # bumped whenever a run appears, changes or goes
        self.lock = threading.RLock()  # payload builders use the index from worker threads

    # -- metadata
    def invalidate(self) -> None:
        self._checked = 0.0

    def metas(self) -> list[RunMeta]:
        """Every readable run, oldest first (re-scanned at most every ``min_interval`` s)."""
        with self.lock:
            return self._metas_locked()

    def _metas_locked(self) -> list[RunMeta]:
        now = time.monotonic()
        if now - self._checked >= self.min_interval:
            self._checked = now
            if self._scan():
                self.version += 1
                self._sorted = sorted((m for _, m in self._metas.values()), key=lambda m: (m.created or 0, m.id))
        return self._sorted

    def _scan(self) -> bool:
        """Re-read changed run.json files; True when anything changed."""
        seen, changed = set(), False
        try:
            entries = list(os.scandir(self.runs_dir))
        except (FileNotFoundError, NotADirectoryError):
            entries = []
        for entry in entries:
            meta_path = os.path.join(entry.path, "run.json")
            try:
                mtime = os.stat(meta_path).st_mtime_ns
            except OSError:
                continue
            seen.add(entry.name)
            cached = self._metas.get(entry.name)
            if cached and cached[0] == mtime:
                continue
            try:
                meta = Run(entry.path).load()
            except AsightError:
                continue
            self._metas[entry.name] = (mtime, meta)
            changed = True
        for gone in set(self._metas) - seen:
            del self._metas[gone]
            changed = True
        return changed

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
            self._by_file[path] = (key, [m for m in metas if os.path.abspath(m.file) == path])
        return self._by_file[path][1]

    def for_function(self, file: str, function_id: str) -> list[RunMeta]:
        """Runs of a function, newest first."""
        runs = [m for m in self.for_file(file) if function_id in (m.source_hashes or {}) or m.function == function_id]
        return list(reversed(runs))

    # -- results
    def result(self, file: str, fn: Function, current_hash: str | None, with_details: bool = True) -> FunctionResult | None:
        """The run to show for ``fn``: a live one, else the newest fresh one with results, else the
        newest stale one with results."""
        runs = self.for_function(file, fn.id)
        if not runs:
            return None

        def fresh(meta: RunMeta) -> bool:
            recorded = (meta.source_hashes or {}).get(fn.id)
            return recorded is None or current_hash is None or recorded == current_hash

        useful = [m for m in runs if m.best_us is not None or m.trials_done]
        chosen = (next((m for m in runs if m.state in LIVE_STATES and fresh(m)), None)
                  or next((m for m in useful if fresh(m)), None)
                  or next((m for m in useful), None)
                  or runs[0])
        result = FunctionResult(fn.id, chosen, self.run_dir(chosen.id), stale=not fresh(chosen))
        if with_details:
            self.fill_details(result, fn)
        return result

    def fill_details(self, result: FunctionResult, fn: Function) -> None:
        """The best record of the function's workload and its trace summary."""
        with self.lock:
            self._fill_details(result, fn)

    def _fill_details(self, result: FunctionResult, fn: Function) -> None:
        best = self.best_record(result.meta.id, fn)
        result.best = best
        if best is not None and fn.kind == "prim_func":
            key = (result.meta.id, best["workload"], best["trial"], fn.id, _blocks_key(fn))
            if key not in self._summaries:
                self._summaries[key] = summarize_trace(best["insts"], best["decisions"], source_blocks(fn))
            result.summary = self._summaries[key]
        result.profile = self.block_profile(result.meta.id, fn)

    def block_profile(self, run_id: str, fn: Function) -> dict | None:
        """Per source block latency of the run's cached profile (``profiles.load_profile``), if any."""
        path = self.run_dir(run_id) / PROFILE_FILE
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            return None
        cached = self._profiles.get(run_id)
        if cached is None or cached[0] != mtime:
            try:
                from ..services.profiling import load_profile  # TVM-free; optional module
                profile = load_profile(Run(self.run_dir(run_id)))
            except ImportError:
                profile = None
            cached = self._profiles[run_id] = (mtime, profile)
        return profile_blocks(cached[1], fn)

    def best_record(self, run_id: str, fn: Function | None = None) -> dict | None:
        with self.lock:
            return self._best_record(run_id, fn)

    def _best_record(self, run_id: str, fn: Function | None) -> dict | None:
        records = self._records.get(run_id)
        if records is None:
            records = self._records[run_id] = _Records(self.run_dir(run_id) / DB_RECORDS)
        records.update()
        if not records.best:
            return None
        if len(records.best) == 1:
            return next(iter(records.best.values()))
        index = self.workload_of(run_id, fn) if fn is not None else None
        if index is None:
            return None
        return records.best.get(index)

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
        names = []
        for line in path.read_text(errors="replace").splitlines():
            names.append(_workload_strings(line))
        self._workload_names[run_id] = (size, names)
        return names


def _blocks_key(fn: Function) -> tuple:
    return tuple((b.name, tuple(b.loops), tuple(b.reads), tuple(b.writes)) for b in fn.blocks)


def _workload_strings(line: str) -> set[str]:
    """The string constants (function, block and buffer names) of one serialized workload."""
    try:
        _hash, encoded = json.loads(line)
        graph = json.loads(base64.b64decode(encoded)[8:])
        return {n["data"] for n in graph.get("nodes", []) if isinstance(n, dict)
                and n.get("type") in ("ffi.String", "String", "runtime.String") and isinstance(n.get("data"), str)}
    except (ValueError, TypeError, KeyError):
        return set()


def relative_time(then: float | None, now: float | None = None) -> str:
    """``just now``, ``3 min ago``, ``2 h ago``, ``5 d ago``."""
    if not then:
        return ""
    delta = max((now or time.time()) - then, 0)
    if delta < 45:
        return "just now"
    if delta < 3600:
        return f"{max(round(delta / 60), 1)} min ago"
    if delta < 86400:
        return f"{round(delta / 3600)} h ago"
    return f"{round(delta / 86400)} d ago"


def format_latency(us: float | None) -> str:
    """``5.9 µs``, ``0.20 ms``, ``12.3 ms``, ``1.20 s``."""
    if us is None:
        return "—"
    if us < 100:
        return f"{us:.1f} µs" if us < 10 else f"{us:.0f} µs"
    if us < 1e6:
        ms = us / 1000
        return f"{ms:.2f} ms" if ms < 10 else f"{ms:.1f} ms"
    return f"{us / 1e6:.2f} s"


def format_speedup(speedup: float | None) -> str:
    if not speedup:
        return ""
    return f"{speedup:.0f}×" if speedup >= 10 else f"{speedup:.1f}×"


def result_lens_title(result: FunctionResult, now: float | None = None) -> str:
    """``0.20 ms · 107× vs untuned · 128 trials · 3 min ago`` (plus state / stale marks)."""
    m = result.meta
    if result.running:
        best = f" · best {format_latency(m.best_us)}" if m.best_us else ""
        return f"⟳ tuning {m.trials_done}/{m.trials_requested} trials{best}"
    parts = [format_latency(m.best_us)] if m.best_us else []
    if result.speedup:
        parts.append(f"{format_speedup(result.speedup)} vs untuned")
    parts.append(f"{m.trials_done} trials")
    when = relative_time(m.finished or m.started or m.created, now)
    if when:
        parts.append(when)
    title = " · ".join(parts)
    if m.state in ("cancelled", "failed"):
        title = f"{m.state}: {title}"
    if result.stale:
        title = f"⚠ stale (source changed since run) · {title}"
    return title
