"""What the run shown for a function did: its best schedule, its trace and profile (TVM-free, cached).

Which run is shown, and whether it is fresh, is the run catalogue's (``services/catalogue.py``).  Everything the
editor shows (lenses, hovers, inlay hints) is recomputed from the current outline by stable id, so
ranges follow the text and edits to other functions leave a function's results alone.  Trace
summaries are cached per record, block profiles per profile file.
"""
from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path

from ..analysis.trace_replay import source_blocks
from ..engine.targets import runs_here, runs_on_device
from ..analysis.attribution import before_after
from ..analysis.trace_summary import summarize_trace
from ..analysis.traces import blocks_got, blocks_named_otherwise
from ..store.caches import PROFILE_FILE, load_profile
from ..store.files import stamp
from ..store.index import RunIndex
from ..store.record import Measurement, measured_headline
from ..store.runs import DB_RECORDS, Run, RunMeta
from ..tvmscript.model import Function
from .adopt_checks import adopted_problem
from .catalogue import Catalogue, Current, RunView, names_of, unreadable_note
from .jobs import LIVE_STATES


@dataclass
class FunctionResult:
    """The run the catalogue shows for one function (``view``), with its best record and what that record did."""
    function_id: str
    view: RunView                     # which run, its status and reasons, shipped, moved (``services/catalogue.py``)
    best: dict | None = None          # {"latency_us", "insts", "decisions", "trial", "workload"}
    summary: dict | None = None       # trace_summary.summarize_trace(...) of ``best``
    profile: dict | None = None       # {block name: {"us": float, "share": float, "source": str}}
    calls: list | None = None         # Relax: each kernel call of the profiled build with its bindings
    refused: str | None = None        # why the run's records are not used (an adopted run edited since)
    blocks_gone: list | None = None   # blocks the fresh run's best record gets that the function names otherwise
    record_blocks: set | None = None  # the blocks the best record gets by name

    @property
    def meta(self) -> RunMeta:
        return self.view.meta

    @property
    def run_dir(self) -> Path:
        return self.view.run_dir

    @property
    def stale(self) -> bool:
        return self.view.stale

    @property
    def shipped(self) -> bool:
        """A run this user did not make here: shown read-only (``store/owner.py``)."""
        return self.view.shipped

    @property
    def unreadable_runs(self) -> list:
        """The function's other runs that cannot be read, ``(run id, why, whose)`` (``RunIndex.unreadable_for``)."""
        return list(self.view.unreadable)

    @property
    def unreadable(self) -> str | None:
        """The last of them, said in one sentence (``catalogue.unreadable_note``)."""
        return unreadable_note(*self.view.unreadable[-1]) if self.view.unreadable else None

    @property
    def running(self) -> bool:
        return self.meta.state in LIVE_STATES

    @property
    def profiles_here(self) -> bool:
        """A profile times programs on this machine's CPU: a GPU run has none
        (``services/profiling.device_run_refusal``), nor a CPU run tuned for another architecture
        (``services/profiling.foreign_run_refusal``; an adopted aarch64 folder on x86_64)."""
        return runs_here(self.meta.target)

    @property
    def on_device(self) -> bool:
        """A GPU run (its Tune lens tunes its target again)."""
        return runs_on_device(self.meta.target)

    @property
    def measured(self) -> Measurement | None:
        """The run's measurement record (docs/measurement.md) when it measured the untuned side: the
        figures the lens and hover show; None before one exists."""
        return measured_headline(self.meta)

    @property
    def measurement(self) -> dict:
        """``measured`` as run.json holds it (the texts of analysis/measurement.py take it), ``{}`` before one."""
        measured = self.measured
        return measured.raw if measured else {}

    @property
    def build(self) -> dict | None:
        """A Relax run: which build its headline measured, stale when an export would differ
        (``services/export.headline_of``); None for other runs."""
        if self.meta.kind != "relax":
            return None
        from .export import headline_of
        return headline_of(self.meta)

    @property
    def speedup(self) -> float | None:
        """Untuned / tuned as the measurement record has it (None before a measurement)."""
        measured = self.measured
        return measured.speedup_estimate if measured else None

    @property
    def named_otherwise(self) -> str | None:
        """Why the best schedule is not shown on the function's blocks: its records name them otherwise
        (an adopted folder whose source renamed a block), None when they agree."""
        return blocks_named_otherwise(self.meta.id, self.blocks_gone) if self.blocks_gone else None

    def unmatched(self, name: str) -> bool:
        """A block of the function the best record does not get, while it gets blocks the function lacks."""
        return bool(self.blocks_gone) and name not in (self.record_blocks or ())

    def block(self, name: str) -> dict | None:
        return (self.summary or {}).get("blocks", {}).get(name)


class Results:
    """Function results over a ``RunIndex``; its caches live as long as the index."""

    def __init__(self, index: RunIndex):
        self.index = index
        self._summaries: dict[tuple, dict] = {}
        self._profiles: dict[str, tuple[int, dict | None]] = {}
        self._refusals: dict[str, tuple[tuple, str | None]] = {}
        self.lock = threading.RLock()   # payload builders ask from worker threads

    def result(self, file: str, fn: Function, current_hash: str | None, with_details: bool = True,
               constants: dict | None = None) -> FunctionResult | None:
        """The run the catalogue shows for ``fn`` (``catalogue.choose``), with what its best schedule did.
        ``current_hash`` / ``constants``: the function's source hash and the module constants it uses
        now (``hashing.constants_used``); None: not compared."""
        current = Current({fn.id: current_hash}, {fn.id: constants or {}}, file)
        view = Catalogue(self.index).view(file, names_of(fn), current)
        if view is None:
            return None
        result = FunctionResult(fn.id, view, refused=self.refusal(view.meta))
        if with_details and not result.refused:
            self.fill_details(result, fn)
        return result

    def has_runs(self, file: str, fn: Function) -> bool:
        """Whether ``fn`` has a readable run (cheap: no source hash needed to know it has none)."""
        return bool(Catalogue(self.index).runs_of(file, names_of(fn)))

    def refusal(self, meta: RunMeta) -> str | None:
        """Why a run's records are not used (``adopt_checks.adopted_problem``), cached per run.json and
        records file: the lens, hover and run list say it instead of run.json's figures."""
        run_dir = self.index.run_dir(meta.id)
        key = tuple(stamp(run_dir / name) for name in ("run.json", DB_RECORDS))
        with self.lock:
            cached = self._refusals.get(meta.id)
            if cached is None or cached[0] != key:
                cached = self._refusals[meta.id] = (key, adopted_problem(Run(run_dir), meta))
            return cached[1]

    def fill_details(self, result: FunctionResult, fn: Function) -> None:
        """The best record of the function's workload and its trace summary."""
        with self.lock:
            self._fill_details(result, fn)

    def _fill_details(self, result: FunctionResult, fn: Function) -> None:
        measured = result.measured
        best = self.index.best_record(result.meta.id, fn, measured.chosen if measured else None)
        result.best = best
        if best is not None and fn.kind == "prim_func":
            key = (result.meta.id, best["workload"], best["trial"], fn.id, _blocks_key(fn))
            if key not in self._summaries:
                self._summaries[key] = summarize_trace(best["insts"], best["decisions"], source_blocks(fn))
            result.summary = self._summaries[key]
            result.record_blocks = blocks_got([best["insts"]])
            gone = sorted(result.record_blocks - {b.name for b in fn.blocks} - {"root"})
            result.blocks_gone = gone if gone and not result.stale else None
        result.profile = self.block_profile(result.meta.id, fn)
        if fn.kind == "relax_function":
            result.calls = profile_calls(self._cached_profile(result.meta.id), fn)
            if result.calls:
                schedules = self._task_schedules(result.meta)
                for call in result.calls:
                    call["schedule"] = schedules.get(call.get("task"))

    def _task_schedules(self, meta: RunMeta) -> dict[str, str]:
        """``{task: what its chosen schedule did}`` (``task_schedules``), cached per run and records size."""
        run = Run(self.index.run_dir(meta.id))
        try:
            size = run.records_path.stat().st_size
        except OSError:
            return {}
        key = ("tasks", meta.id, size)
        if key not in self._summaries:
            self._summaries[key] = task_schedules(run, meta)
        return self._summaries[key]

    def block_profile(self, run_id: str, fn: Function) -> dict | None:
        """Per source block latency of the run's cached profile (``store.caches.load_profile``), if any."""
        return profile_blocks(self._cached_profile(run_id), fn)

    def _cached_profile(self, run_id: str) -> dict | None:
        path = self.index.run_dir(run_id) / PROFILE_FILE
        try:
            mtime = path.stat().st_mtime_ns
        except OSError:
            return None
        cached = self._profiles.get(run_id)
        if cached is None or cached[0] != mtime:
            profile = load_profile(Run(self.index.run_dir(run_id)))
            cached = self._profiles[run_id] = (mtime, profile)
        return cached[1]


def _blocks_key(fn: Function) -> tuple:
    return tuple((b.name, tuple(b.loops), tuple(b.reads), tuple(b.writes)) for b in fn.blocks)


def profile_blocks(profile: dict | None, fn: Function) -> dict | None:
    """``{block name: {us, share, source}}`` of one function in a profile (tuned program first)."""
    if not isinstance(profile, dict):
        return None
    kernel = next((k for k in profile.get("kernels") or [] if k.get("function") in (fn.id, fn.name)), None)
    if kernel is None:
        return None
    blocks = kernel.get("blocks") or {}
    label = "tuned" if blocks.get("tuned") else "baseline"
    entries = blocks.get(label) or []
    stage_source = ((kernel.get("stages") or {}).get(label) or {}).get("source") or "profile"
    changes = {c["name"]: c for c in before_after(kernel)} if label == "tuned" else {}
    out = {}
    for entry in entries:
        if isinstance(entry, dict) and entry.get("name"):
            note = entry.get("attribution", "stage")
            out[entry["name"]] = {"us": entry.get("us"), "share": entry.get("share"), "program": label,
                                  "source": f"{label} program, {stage_source}" + ("" if note == "stage" else f"; {note}"),
                                  "change": changes.get(entry["name"])}
    return out or None


def profile_calls(profile: dict | None, fn: Function) -> list | None:
    """Kernel calls of a Relax function in a profile (the tuned build first), each with its task,
    call index, bindings, 0-based lines, µs and share of the calls' sum."""
    relax = (profile or {}).get("relax") if isinstance(profile, dict) else None
    if not isinstance(relax, dict) or relax.get("function") not in (fn.id, fn.name):
        return None
    tasks = relax.get("tasks") or {}
    label = "tuned" if tasks.get("tuned") else "baseline"
    calls = (tasks.get(label) or {}).get("tasks") or []
    untuned = {v: c.get("us") for c in (tasks.get("baseline") or {}).get("tasks") or [] if isinstance(c, dict)
               for v in c.get("vars") or []}
    out = []
    for c in calls:
        if isinstance(c, dict) and c.get("lines"):
            before = [untuned[v] for v in c.get("vars") or [] if untuned.get(v) is not None]
            out.append({**c, "program": label, "untuned_us": sum(before) if before else None})
    return out or None


def task_schedules(run: Run, meta: RunMeta) -> dict[str, str]:
    """Per task of a Relax run, one line on what the schedule the measurement chose did to its main
    block (the block with most steps): ``conv2d_nchw: parallel · unroll 16 · 7 loops tiled``."""
    from ..analysis.trace_replay import SourceBlock
    from ..analysis.trace_summary import block_headline
    from ..analysis.workload_loops import block_loop_vars
    from ..store.database import workload_graph
    from ..store.runs import read_records
    measured = meta.measured
    chosen = (measured.chosen if measured else None) or []
    out = {d["task"]: "default schedule kept (it re-measured faster than every trial)"
           for d in (measured.defaults if measured else None) or [] if d.get("task")}
    if not chosen:
        return out
    records = {r["trial"]: r for r in read_records(run.path)}
    rows = run.workloads()
    for pick in chosen:
        rec = records.get(pick.get("trial"))
        if rec is None or not pick.get("task"):
            continue
        graph = workload_graph(rows[rec["workload"]]) if 0 <= rec["workload"] < len(rows) else None
        blocks = [SourceBlock(name, loops, [None] * len(loops)) for name, loops in block_loop_vars(graph or {}).items()]
        summary = summarize_trace(rec["insts"], rec["decisions"], blocks)["blocks"]
        if not summary:
            continue
        name, main = max(summary.items(), key=lambda kv: len(kv[1].get("steps") or []))
        tiled = sum(1 for step in main.get("steps") or [] if step.startswith("split "))
        head = " · ".join(p for p in [block_headline(main), f"{tiled} loops tiled" if tiled else ""] if p)
        out[pick["task"]] = f"{name}: {head or 'default schedule'} (trial {pick.get('trial')})"
    return out
