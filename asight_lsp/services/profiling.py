"""Profile a function (TVM-free orchestration): untuned vs its run's best schedule, tied to source.

``profile_file`` / ``profile_run`` ask the TVM worker's ``profile`` handler for raw measurements
(``worker/measure.py``) and ``analysis.attribution.finish_profile`` ties them to source blocks and
bindings.  A profile of a run is cached as ``profile.msgpack`` in the run directory
(``store/caches.py``; keyed by source hash, records file and options), so the language server and
reports reuse it.  Decisions: docs/profiling.md.
"""
from __future__ import annotations

import json
import os
import platform
import time
from dataclasses import asdict, dataclass

from ..analysis.attribution import PROFILE_SCHEMA, finish_profile
from ..analysis.measurement import comparison_record, is_current, load_of, noisier_than, spread_of
from ..engine import wire
from ..errors import AsightError
from ..engine.targets import foreign_cpu, foreign_words, machine_arch, runs_on_device
from ..engine.client import borrowed, trusted
from ..store.caches import archive_profile, load_profile, store_profile
from ..store.database import records_note
from ..store.owner import require_own
from ..store.runs import Run, RunMeta, RunStore
from ..tvmscript.diagnostics import require_parsed
from ..tvmscript.model import Outline
from ..tvmscript.outline import build_outline
from ..tvmscript.selection import Selection, check_selection, select
from .catalogue import Current, stale_reasons
from .jobs import LIVE_STATES
from .lookup import check_run_function, latest_run, prepare_run, read_text, run_source



@dataclass
class ProfileOptions:
    """What to measure (the CLI flags; the LSP uses the defaults)."""
    remeasure: bool = False        # time untuned vs tuned again although the run has a current record
    budget_s: float | None = None  # time for that comparison (None: the harness's default, docs/measurement.md)
    budget_ms: float = 300.0       # time per program for the per-stage timing
    check: bool = True
    stages: bool = True
    features: bool = True
    cachegrind: bool = False
    rtol: float = 1e-3
    atol: float = 1e-4
    seed: int = 0
    timeout: float = 900.0
    replace: bool = False          # make this measurement the shown one even if it is noisier than it
    by: str = "asight profile"     # who asked (kept with the measurement)

    def worker_params(self) -> dict:
        params = asdict(self)
        for local in ("timeout", "remeasure", "replace", "by"):
            params.pop(local)
        return params


# --------------------------------------------------------------------------- entry points


def profile_file(path: str, function: str | None = None, run: str | None = None, store_root: str | None = None,
                 worker=None, options: ProfileOptions | None = None, text: str | None = None,
                 candidate: str | None = None, use_cache: bool = True) -> dict:
    """Profile ``function`` of ``path`` against a run's best schedule.

    ``run`` is a run id/prefix/dir or ``latest``; None = the newest run of this file and function
    in the store (no run at all: untuned only, and the profile says so).  ``candidate`` is the path
    of a file holding a scheduled version of the function, compared instead of a run (a check of a
    hand-edited or applied schedule).  ``text`` replaces the file's content (unsaved editor text).
    """
    text = read_text(path) if text is None else text
    outline = build_outline(text, path)
    selection = select(outline, function)
    check_selection(outline, selection, "profile")
    found = None
    if candidate is None:
        found = RunStore(store_root).get(run) if run else latest_run(RunStore(store_root), path, selection, text)
        if run:
            check_run_function(found, selection)
    return _profile(text, path, outline, selection, found, worker, options or ProfileOptions(),
                    candidate=candidate, use_cache=use_cache)


def profile_run(run: Run, worker) -> dict:
    """Profile the function a run tuned, with default options (``asight demo`` and reports).

    Uses the file as it is when its function still hashes as tuned, else the run's source snapshot.
    """
    meta = run.load()
    text, path = run_source(run, meta)
    outline = build_outline(text, path)
    selection = select(outline, meta.function)
    check_selection(outline, selection, "profile")
    return _profile(text, path, outline, selection, run, worker, ProfileOptions(), candidate=None, use_cache=True)


# --------------------------------------------------------------------------- orchestration


def _profile(text: str, path: str, outline: Outline, selection: Selection, run: Run | None, worker,
             options: ProfileOptions, candidate: str | None, use_cache: bool) -> dict:
    meta = prepare_run(run) if run is not None else None
    if meta is not None and candidate is None and runs_on_device(meta.target):
        raise AsightError(device_run_refusal(meta, options.by))
    if meta is not None and candidate is None and foreign_cpu(meta.target):
        raise AsightError(foreign_run_refusal(meta, foreign_cpu(meta.target), options.by))
    current = Current.of_text(text, selection.functions, path, outline.constants)   # the staleness and the cache key
    stale = stale_reasons(meta, current) if meta is not None and candidate is None else []
    fresh = meta is not None and candidate is None and not stale
    measured = meta.measured if fresh else None        # the run's record: its choice of records, its defaults
    record = measured.raw if measured and is_current(measured.raw, len(run.records())) else None
    measure = record is None or options.remeasure
    key = _cache_key(current, path, selection, run, options, record)
    if run is not None and use_cache and not options.remeasure:
        cached = _cached(run, key)
        if cached is not None:
            return _with_build(cached, meta)
    if run is not None:
        require_own(run.path, "measuring its profile now" if not options.remeasure else "re-measuring it")
    params = {**wire.source_params(text, outline, selection.unit, selection.member), **options.worker_params(),
              "run_dir": str(run.path) if run else None, "target": meta.target if meta else None,
              "weights": wire.weights_beside(path), "timing": measure, "chosen": measured.chosen if measured else None}
    params["choose"] = bool(run is not None and candidate is None and params["chosen"] is None)
    started = time.time()
    with borrowed(worker) as client:
        require_parsed(text, path, selection.unit, client)
        if candidate is not None:
            params["candidate"] = _candidate_params(candidate, client)
        raw = _measure(client, params, options)
    kept = measured.defaults if measured else None   # from the record chosen is from
    new_record = _new_record(raw, params, started, run if fresh else None, kept, options.by) if measure else None
    if measure:
        record = new_record
        key = _cache_key(current, path, selection, run, options, record)
    profile = finish_profile(raw, outline, selection, _run_summary(run, meta), record)
    profile.update(file=os.path.abspath(path), created=started, cache_key=key,
                   candidate=os.path.abspath(candidate) if candidate else None,
                   measured=_measured(raw, started, options.by, record, measure))
    _notes(profile, candidate, run, meta, stale)
    if run is not None and candidate is None:
        _keep(run, profile, key, new_record if fresh else None, options.replace)
    return _with_build(profile, meta)


def device_run_refusal(meta: RunMeta, by: str = "asight profile") -> str:
    """Why a GPU run has no profile or hotspots (or, ``by`` ``asight model``, no per-task table), and
    where its measured facts are: the profile times programs on this machine's CPU
    (docs/profiling.md); a kernel's time on its GPU is the tuning's."""
    kind = (meta.target or {}).get("kind", "gpu") if isinstance(meta.target, dict) else "gpu"
    best = f" ({meta.best_us:,.1f} µs on the machine that tuned it)" if meta.best_us else ""
    tasks = [t.get("name") for t in meta.tasks or [] if t.get("name")]
    code = (f"its kernels at `asight code --task TASK --level cuda` (tasks: {', '.join(tasks[:6])}"
            f"{', …' if len(tasks) > 6 else ''})" if meta.kind == "relax" else "its kernel at `asight code --level cuda`")
    what = ("the model view's per-task table times the model's kernels" if by == "asight model" and meta.kind == "relax"
            else f"asight model shows a tuned Relax model's tasks, and this run tuned the TIR function {meta.function}; "
            "its per-kernel times would come from a profile, which times programs" if by == "asight model"
            else "profile and hotspots time programs")
    return (f"run {meta.id} is a {kind} run: {what} on this machine's CPU, not on "
            f"a GPU; its measured time is the tuning's{best}, its counters are in `asight space` and "
            f"`asight loops`, {code}")


def foreign_run_refusal(meta: RunMeta, arch: str, by: str = "asight profile") -> str:
    """Why a CPU run tuned for another architecture (an adopted aarch64 folder here on x86_64) or OS (an
    ``x86_64-pc-windows-msvc`` folder on Linux) has no profile or hotspots: they
    time programs on this machine's CPU, and its programs are that CPU's or that system's code.
    Not ``require_runs_here``'s advice to adopt: the run is the adopted folder."""
    best = f" ({meta.best_us:,.1f} µs there)" if meta.best_us else ""
    what = "per-task times" if by == "asight model" else "profile and hotspots"
    here = platform.system() if "-" in arch else machine_arch()       # another OS's triple, or another CPU
    return (f"run {meta.id} was {foreign_words(arch)}, which cannot run on this {here} machine: {what} time "
            f"programs here; its measured time is the tuning's{best}, "
            "its candidates are in `asight space` and `asight loops`, its code at `asight code --level asm`")


def _with_build(profile: dict, meta: RunMeta | None) -> dict:
    """A model run's profile says which build its run's headline measured (now: the weights file
    may have changed since), ``analysis.deployable.headline_build``."""
    if meta is not None and meta.kind == "relax":
        from .export import headline_of
        profile["headline_build"] = headline_of(meta)
    return profile


def _measured(raw: dict, started: float, by: str, record: dict | None, timed_now: bool) -> dict:
    """When, by whom and under which load this profile was measured, and which measurement its
    end-to-end headline is (the same one when it was timed in this profile)."""
    head = record or {}
    calls = (((raw.get("relax") or {}).get("tasks") or {}).get("tuned") or {}).get("tasks") or [
        s for k in raw.get("kernels") or [] for s in (((k.get("stages") or {}).get("tuned") or {}).get("stages") or [])]
    load = {**load_of(raw.get("load")), "spread": spread_of(calls)}
    return {"id": time.strftime("%Y%m%d-%H%M%S", time.gmtime(started)) + f"-{int(started * 1000) % 1000:03d}",
            "taken": started, "by": by, "load": load, "seconds": raw.get("seconds"),
            "headline": {"taken": head.get("taken"), "by": head.get("by"), "load": head.get("load"),
                         "same": bool(timed_now and record)}}


def _keep(run: Run, profile: dict, key: dict, record: dict | None, replace: bool) -> None:
    """Keep every measured profile in the run (``profiles/``); it becomes the shown one (and its
    record the run's headline) unless the shown one is current and quieter, or covers more
    functions, and the user did not ask to replace it (``replace``)."""
    shown = load_profile(run)
    why = None if replace or shown is None else blocked_by(shown, profile, key)
    profile["adopted"] = why is None
    if why:
        profile["not_adopted"] = why
        note = (f"this measurement was kept beside the shown one of {_when(shown)}, not instead of it: {why} "
                "(`asight profile --remeasure --replace` makes it the shown one)")
        profile["note"] = f"{profile['note']}; {note}" if profile.get("note") else note
    archive_profile(run, {"key": key, "profile": profile}, profile["measured"]["id"])
    if why:
        if record is not None:
            run.keep_unadopted(record, why)
        return
    if record is not None and record.get("tuned"):
        run.set_measurement(record)
    store_profile(run, {"key": key, "profile": profile})


def blocked_by(shown: dict, new: dict, key: dict) -> str | None:
    """Why ``new`` must not replace the ``shown`` profile of the run (None: it may)."""
    if not _same_state(shown.get("cache_key") or {}, key):
        return None   # the shown one measured an older state of the run or source
    if set((shown.get("cache_key") or {}).get("source") or {}) - set(key.get("source") or {}):
        return "it profiled fewer functions than the shown one"
    return noisier_than((new.get("measured") or {}).get("load"), (shown.get("measured") or {}).get("load"))


def _when(profile: dict) -> str:
    from ..analysis.measurement import when_text
    return when_text((profile.get("measured") or {}).get("taken") or profile.get("created"))


def _measure(client, params: dict, options: ProfileOptions) -> dict:
    """The worker's raw profile.  With cachegrind, or on a GPU, it comes from a worker WITHOUT the OS
    sandbox (valgrind is a process, the kernel library a file; the GPU driver's device files and
    ioctls; docs/sandbox.md): the user's explicit command on their own file; that worker gets the
    program parsed by a sandboxed one and refuses native calls by name (``parse.parse_to_run``)."""
    if not options.cachegrind and not runs_on_device(params.get("target")):
        return client.request(wire.PROFILE, params, timeout=options.timeout)
    with trusted(getattr(client, "python", None), getattr(client, "default_timeout", 120.0)) as unsandboxed:
        return unsandboxed.request(wire.PROFILE, params, timeout=options.timeout)


def _new_record(raw: dict, params: dict, started: float, run: Run | None, kept: list | None = None,
                by: str = "asight profile") -> dict | None:
    """The measurement record of the worker's headline; a current run keeps it as its headline."""
    headline = raw.get("headline") or {}
    if not headline.get("raw"):
        return None
    chosen = raw.get("chosen") or params.get("chosen")
    extra = {"check": headline.get("check"), "chosen": chosen, "applied": headline.get("applied")}
    if run is not None and not raw.get("chosen"):   # the same choice: the tasks that kept their default keep it
        extra["defaults"] = kept                    # (``measurement.defaults``: the export does not count them missing)
    scope = "program" if raw.get("kind") == "relax" else "function" if len(raw.get("kernels") or []) == 1 else "module"
    if run is not None:
        extra["trials"] = len(run.records())
    record = comparison_record(headline["raw"], headline["untuned"], headline["tuned"], by, scope,
                               started, {k: v for k, v in extra.items() if v is not None})
    return record


def _notes(profile: dict, candidate: str | None, run: Run | None, meta: RunMeta | None, stale: list[str]) -> None:
    if candidate is None and run is None:
        profile["note"] = "no tuning run of this function: untuned only (tune it with `asight tune`)"
    elif meta is not None and meta.state in LIVE_STATES:
        profile["note"] = f"run {meta.id} is still tuning: best schedule so far"
    elif run is not None and candidate is None and stale:
        profile["note"] = (f"run {meta.id} is stale ({'; '.join(stale)}): measured now with its best trace, "
                           "not kept as the run's headline")
    unread = records_note(run) if run is not None and candidate is None else None
    if unread:
        profile["note"] = f"{profile['note']}; {unread}" if profile.get("note") else unread


def _candidate_params(path: str, worker) -> dict:
    text = read_text(path)
    outline = build_outline(text, path)
    selection = select(outline, None)  # the candidate file's only unit, holding one PrimFunc
    check_selection(outline, selection, "profile")
    require_parsed(text, path, selection.unit, worker)
    return wire.source_params(text, outline, selection.unit, selection.member)


# --------------------------------------------------------------------------- cache


def _cache_key(current: Current, path: str, selection: Selection, run: Run | None, options: ProfileOptions,
               record: dict | None) -> dict:
    """What a profile measured: the functions as the catalogue compares them (``current``: source hashes, the
    module constants each uses), the weights beside a model, the records, the options."""
    records = run.records_path if run is not None else None
    stat = records.stat() if records is not None and records.exists() else None
    constants = json.loads(json.dumps(current.constants, default=str))     # as msgpack gives it back (tuples: lists)
    return {"function": selection.label, "source": current.hashes, "constants": constants,
            "weights": wire.weights_digest(wire.weights_beside(path)),
            "records": [stat.st_size, stat.st_mtime_ns] if stat else None,
            "measurement": (record or {}).get("taken"),
            "options": options.worker_params(), "schema": PROFILE_SCHEMA}


def _cached(run: Run, key: dict) -> dict | None:
    """The run's shown profile when it measured the run and source as they are now (whichever
    options or function label it was asked with, as long as it covers the functions of ``key``)."""
    profile = load_profile(run)
    if profile is not None and _same_state(profile.get("cache_key") or {}, key):
        profile["cached"] = True
        return profile
    return None


def _same_state(cached: dict, key: dict) -> bool:
    """``cached`` (a profile's key) measured the same records, source, constants and weights as ``key`` asks
    (a profile kept before its key had constants and weights: the records and source only)."""
    source = cached.get("source") or {}
    constants = cached.get("constants") if isinstance(cached.get("constants"), dict) else None
    same = (cached.get("schema") == key.get("schema") and cached.get("records") == key.get("records")
            and all(source.get(fid) == h for fid, h in (key.get("source") or {}).items()))
    if same and constants is not None:
        same = all(constants.get(fid) == used for fid, used in (key.get("constants") or {}).items())
    return same and ("weights" not in cached or cached.get("weights") == key.get("weights"))


def _run_summary(run: Run | None, meta: RunMeta | None) -> dict | None:
    if meta is None:
        return None
    return {"id": meta.id, "dir": str(run.path) if run else None, "state": meta.state,
            "trials": meta.trials_done, "best_us": meta.best_us, "baseline_us": meta.baseline_us,
            "target": meta.target_label or meta.target}


