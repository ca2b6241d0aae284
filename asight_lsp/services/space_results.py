"""Design spaces of a document and the results of their latest runs (for lenses, hints, hovers).

Pure glue over ``spaces.find_spaces`` (static, per text) and ``analysis.spacestats`` (per run and
records file size).  A run speaks for a space function when it was tuned with it
(``extra.space.function``); it is *fresh* when the function's text hash is the one tuned, and then
the recorded lines are moved by how far the function moved.
"""
from __future__ import annotations

import os
import threading
from dataclasses import dataclass

from ..analysis.spacestats import SiteStats, site_stats
from ..store.runs import DB_RECORDS, RunMeta, read_records
from ..tvmscript.design_spaces import SampleSite, SpaceFunction, find_spaces, space_hash
from ..store.index import RunIndex

_STATS: dict[str, tuple] = {}   # run dir -> (records file size, stats by recorded line)
_STATS_LOCK = threading.Lock()


@dataclass
class SpaceResult:
    space: SpaceFunction
    meta: RunMeta
    stale: bool                 # the space function changed since the run
    by_line: dict               # current 0-based line -> SiteStats (empty when stale)


def document_spaces(doc) -> list[SpaceFunction]:
    """The document's space functions, memoised per text."""
    cached = doc.memo.get("spaces")
    if cached is None or cached[0] is not doc.text:
        found = find_spaces(doc.text, doc.path) if ".sample_" in doc.text else []   # most files: no parse
        cached = doc.memo["spaces"] = (doc.text, found)
    return cached[1]


def document_space_hash(doc, space: SpaceFunction) -> str:
    """``spaces.space_hash`` of one of the document's spaces, memoised per text: it parses the whole
    file, and hovers and inlay hints ask for it on every request."""
    cached = doc.memo.get("spaceHashes")
    if cached is None or cached[0] is not doc.text:
        cached = doc.memo["spaceHashes"] = (doc.text, {})
    if space.name not in cached[1]:
        cached[1][space.name] = space_hash(doc.text, space)
    return cached[1][space.name]


def space_runs(index: RunIndex, path: str, name: str) -> list[RunMeta]:
    """Runs of ``path`` tuned with the space function ``name``, newest first."""
    return [m for m in reversed(index.for_file(path)) if (m.extra.get("space") or {}).get("function") == name]


def space_result(index: RunIndex, doc, space: SpaceFunction, stats: bool = True) -> SpaceResult | None:
    """The latest run with this space (a fresh one with records first) and, with ``stats``, its
    per-line statistics."""
    runs = space_runs(index, doc.path, space.name)
    if not runs:
        return None
    current = document_space_hash(doc, space)
    fresh = [m for m in runs if m.extra["space"].get("hash") == current]
    meta = next((m for m in fresh if m.trials_done), None) or (fresh[0] if fresh else runs[0])
    stale = meta.extra["space"].get("hash") != current
    by_line = {}
    mapping = meta.extra["space"].get("mapping")
    if stats and not stale and mapping:
        shift = space.line - meta.extra["space"].get("line", space.line)
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


def site_at(spaces: list[SpaceFunction], line: int, character: int) -> tuple[SpaceFunction, SampleSite] | None:
    """The sampling call under a position."""
    for space in spaces:
        for site in space.sites:
            start, end = site.range["start"], site.range["end"]
            if (start["line"], start["character"]) <= (line, character) <= (end["line"], end["character"]):
                return space, site
    return None
