"""The results of a design space's latest run (for lenses, hints, hovers).

Glue over the run index and ``analysis.spacestats`` (cached per run and records file size).  A run speaks for a space function when it was tuned with it
(``extra.space.function``); it is *fresh* when the function's text hash is the one tuned, and then
the recorded lines are moved by how far the function moved.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from ..analysis.spacestats import SiteStats, site_stats
from ..store.runs import DB_RECORDS, RunMeta, read_records
from ..tvmscript.design_spaces import SpaceFunction
from ..store.index import RunIndex

_STATS: dict[str, tuple] = {}   # run dir -> (records file size, stats by recorded line)
_STATS_LOCK = threading.Lock()


@dataclass
class SpaceResult:
    space: SpaceFunction
    meta: RunMeta
    stale: bool                 # the space function changed since the run
    by_line: dict               # current 0-based line -> SiteStats (empty when stale)


def space_runs(index: RunIndex, path: str, name: str) -> list[RunMeta]:
    """Runs of ``path`` tuned with the space function ``name``, newest first."""
    return [m for m in reversed(index.for_file(path)) if m.space is not None and m.space.function == name]


def space_result(index: RunIndex, path: str, space: SpaceFunction, current: str,
                 stats: bool = True) -> SpaceResult | None:
    """The latest run of ``path`` with this space (a fresh one with records first: ``current`` is the
    space's hash now) and, with ``stats``, its per-line statistics."""
    runs = space_runs(index, path, space.name)
    if not runs:
        return None
    fresh = [m for m in runs if m.space.hash == current]
    meta = next((m for m in fresh if m.trials_done), None) or (fresh[0] if fresh else runs[0])
    ran = meta.space
    stale = ran.hash != current
    by_line = {}
    mapping = ran.mapping
    if stats and not stale and mapping:
        shift = space.line - (ran.line if ran.line is not None else space.line)
        by_line = {line + shift: stats for line, stats in _stats(index.run_dir(meta.id), mapping).items()}
    return SpaceResult(space, meta, stale, by_line)


def _stats(run_dir, mapping: dict) -> dict[int, SiteStats]:
    path = os.path.join(run_dir, DB_RECORDS)
    try:
        size = os.path.getsize(path)
    except OSError:
        size = -1
    key = str(run_dir)
    with _STATS_LOCK:
        cached = _STATS.get(key)
        if cached and cached[0] == size:
            return cached[1]
    stats = site_stats(read_records(run_dir), mapping) if size >= 0 else {}
    with _STATS_LOCK:
        _STATS[key] = (size, stats)
    return stats
