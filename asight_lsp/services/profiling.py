"""Profile a function (TVM-free orchestration): untuned vs its run's best schedule, tied to source.

``profile_file`` / ``profile_run`` ask the TVM worker's ``profile`` handler for raw measurements
(``worker/measure.py``) and ``analysis.attribution.finish_profile`` ties them to source blocks and
bindings.  A profile of a run is cached as ``profile.msgpack`` in the run directory
(``store/caches.py``; keyed by source hash, records file and options), so the language server and
reports reuse it.  Decisions: docs/profiling.md.
"""
from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass

from ..analysis.attribution import PROFILE_SCHEMA, finish_profile
from ..engine import wire
from ..engine.client import borrowed
from ..store.caches import load_profile, store_profile
from ..store.runs import Run, RunMeta, RunStore
from ..tvmscript.hashing import function_hash
from ..tvmscript.diagnostics import require_parsed
from ..tvmscript.model import Outline
from ..tvmscript.outline import build_outline
from ..tvmscript.selection import Selection, check_selection, select
from .jobs import LIVE_STATES
from .lookup import check_run_function, latest_run, prepare_run, read_text, run_source



@dataclass
class ProfileOptions:
    """What to measure (the CLI flags; the LSP uses the defaults)."""
    repeats: int = 10          # single calls at least; more when they fit in budget_ms
    budget_ms: float = 300.0   # time per program for the headline timing
    check: bool = True
    stages: bool = True
    features: bool = True
    cachegrind: bool = False
    rtol: float = 1e-3
    atol: float = 1e-4
    seed: int = 0
    timeout: float = 900.0

    def worker_params(self) -> dict:
        params = asdict(self)
        params.pop("timeout")
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
    check_selection(outline, selection)
    store = RunStore(store_root)
    found = None
    if candidate is None:
        found = store.get(run) if run else latest_run(store, path, selection)
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
    check_selection(outline, selection)
    return _profile(text, path, outline, selection, run, worker, ProfileOptions(), candidate=None, use_cache=True)


# --------------------------------------------------------------------------- orchestration


def _profile(text: str, path: str, outline: Outline, selection: Selection, run: Run | None, worker,
             options: ProfileOptions, candidate: str | None, use_cache: bool) -> dict:
    meta = prepare_run(run) if run is not None else None
    key = _cache_key(text, selection, run, options)
    if run is not None and use_cache:
        cached = _cached(run, key)
        if cached is not None:
            return cached
    params = {**wire.source_params(text, outline, selection.unit, selection.member), **options.worker_params(),
              "run_dir": str(run.path) if run else None, "target": meta.target if meta else None}
    started = time.time()
    with borrowed(worker) as client:
        require_parsed(text, path, selection.unit, client)
        if candidate is not None:
            params["candidate"] = _candidate_params(candidate, client)
        raw = client.request(wire.PROFILE, params, timeout=options.timeout)
    profile = finish_profile(raw, outline, selection, _run_summary(run, meta))
    profile.update(file=os.path.abspath(path), created=started, cache_key=key,
                   candidate=os.path.abspath(candidate) if candidate else None)
    if candidate is None and run is None:
        profile["note"] = "no tuning run of this function: untuned only (tune it with `asight tune`)"
    elif meta is not None and meta.state in LIVE_STATES:
        profile["note"] = f"run {meta.id} is still tuning: best schedule so far"
    if run is not None and candidate is None:
        store_profile(run, {"key": key, "profile": profile})
    return profile


def _candidate_params(path: str, worker) -> dict:
    text = read_text(path)
    outline = build_outline(text, path)
    selection = select(outline, None)  # the candidate file's only unit, holding one PrimFunc
    check_selection(outline, selection)
    require_parsed(text, path, selection.unit, worker)
    return wire.source_params(text, outline, selection.unit, selection.member)


# --------------------------------------------------------------------------- cache


def _cache_key(text: str, selection: Selection, run: Run | None, options: ProfileOptions) -> dict:
    records = run.records_path if run is not None else None
    stat = records.stat() if records is not None and records.exists() else None
    return {"function": selection.label,
            "source": {f.id: function_hash(text, f) for f in selection.functions},
            "records": [stat.st_size, stat.st_mtime_ns] if stat else None,
            "options": options.worker_params(), "schema": PROFILE_SCHEMA}


def _cached(run: Run, key: dict) -> dict | None:
    profile = load_profile(run)
    if profile is not None and profile.get("cache_key") == key:
        profile["cached"] = True
        return profile
    return None


def _run_summary(run: Run | None, meta: RunMeta | None) -> dict | None:
    if meta is None:
        return None
    return {"id": meta.id, "dir": str(run.path) if run else None, "state": meta.state,
            "trials": meta.trials_done, "best_us": meta.best_us, "baseline_us": meta.baseline_us,
            "target": meta.target_label or meta.target}


