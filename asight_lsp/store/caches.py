"""Caches a run directory keeps beside MetaSchedule's database (msgpack, written atomically).

* ``profile.msgpack``  — ``{"key": ..., "profile": ...}``: the last profile of the run
  (``services/profiling.py``), reused by the editor and reports while its key matches;
* ``profiles/<id>.msgpack`` — every profile measured for the run, the shown one included (one
  record per measurement, never overwritten; the newest ``KEEP_PROFILES`` are kept);
* ``relax-graphs.msgpack`` — ``{"key": ..., "graphs": ...}``: the worker's source and transformed graphs
  of a model's Relax function (``services/hotspots.relax_graphs``), for the key they were built for;
  read and written in this user's own runs only (``owner.is_own``);
* ``features.msgpack`` — ``{"schema": "asight.features/1", "records": {trial: entry},
  "baselines": {workload: entry}}``: feature rows and loop nests per trial from the worker's
  ``features`` request (rows as little-endian float32 bytes).  It only grows.

A cache that cannot be read is treated as missing; one that cannot be written only loses the cache.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

import msgpack

from .files import NotPlainFile, read_plain, write_atomic
from .owner import is_own
from .runs import Run

PROFILE_FILE = "profile.msgpack"
GRAPHS_FILE = "relax-graphs.msgpack"
FEATURES_FILE = "features.msgpack"
FEATURES_SCHEMA = "asight.features/1"
PROFILES_DIR = "profiles"
KEEP_PROFILES = 8
PROFILE_ID = re.compile(r"\d{8}-\d{6}-\d{3}")     # how ``services/profiling`` names a measurement


PROFILE_LIMIT, FEATURES_LIMIT = 8 << 20, 64 << 20   # bytes of a cache read (a profile is KBs; features of
                                                   # 128 trials 0.4 MB): unpacked, bytes became ~50x objects


def _read(path: Path, limit: int = PROFILE_LIMIT):
    """A cache, or None when it is missing, unreadable, not plain or over ``limit`` (a run folder is data
    a repository can ship: 20 MB of empty maps would become 20 million dicts in the server)."""
    try:
        return msgpack.unpackb(read_plain(path, limit), raw=False, strict_map_key=False)
    except (OSError, ValueError, NotPlainFile, msgpack.exceptions.ExtraData, msgpack.exceptions.UnpackException):
        return None


def _write(path: Path, data) -> None:
    write_atomic(path, msgpack.packb(data, use_bin_type=True))


def load_profile(run: Run) -> dict | None:
    """The profile cached in a run directory (whatever its key), or None, also when it does not have a
    profile's shape (a run folder is data: a string as its profile would end `asight profile` in an
    AttributeError)."""
    data = _read(run.path / PROFILE_FILE)
    profile = data.get("profile") if isinstance(data, dict) else None
    shaped = isinstance(profile, dict) and all(isinstance(profile.get(key, {}), dict) for key in ("measured", "cache_key"))
    return profile if shaped else None


def store_profile(run: Run, entry: dict) -> None:
    """Write ``{"key", "profile"}``; a store that cannot be written only loses the cache."""
    try:
        _write(run.path / PROFILE_FILE, entry)
    except OSError:
        pass


def archive_profile(run: Run, entry: dict, ident: str) -> None:
    """Keep a measured profile as ``profiles/<ident>.msgpack``.  In this user's own run (``owner.is_own``)
    the oldest of the profiles it named beyond ``KEEP_PROFILES`` are removed; a file named otherwise, and
    anything in a shipped run, is never removed (names someone else chose decide nothing)."""
    folder = run.path / PROFILES_DIR
    try:
        folder.mkdir(exist_ok=True)
        _write(folder / f"{ident}.msgpack", entry)
        if is_own(run.path):
            ours = sorted(p for p in folder.glob("*.msgpack") if PROFILE_ID.fullmatch(p.stem))
            for old in ours[:-KEEP_PROFILES]:
                old.unlink()
    except OSError:
        pass


def archived_profiles(run: Run) -> list[dict]:
    """Every kept profile of the run, oldest first (entries ``{"key", "profile"}``)."""
    folder = run.path / PROFILES_DIR
    entries = [_read(p) for p in sorted(folder.glob("*.msgpack"))] if folder.is_dir() else []
    return [e for e in entries if isinstance(e, dict) and isinstance(e.get("profile"), dict)]


def load_graphs(run_dir: str | os.PathLike, key: str) -> dict | None:
    """The Relax graphs kept in this user's own run for ``key``, else None.  A shipped run's file is not
    read: graphs decide which lines the hotspots name, and its key is one anybody can compute."""
    if not is_own(Path(run_dir)):
        return None
    data = _read(Path(run_dir) / GRAPHS_FILE)
    graphs = data.get("graphs") if isinstance(data, dict) and data.get("key") == key else None
    return graphs if isinstance(graphs, dict) and all(isinstance(graphs.get(k), dict)
                                                      for k in ("source", "transformed")) else None


def store_graphs(run_dir: str | os.PathLike, key: str, graphs: dict) -> None:
    """Keep the graphs of ``key`` in this user's own run (the last key only); a shipped run is left as it is."""
    if not is_own(Path(run_dir)):
        return
    try:
        _write(Path(run_dir) / GRAPHS_FILE, {"key": key, "graphs": graphs})
    except OSError:
        pass


def read_feature_cache(run_dir: str | os.PathLike) -> dict | None:
    """The cached worker answer, or None when missing, unreadable or of another schema."""
    data = _read(Path(run_dir) / FEATURES_FILE, FEATURES_LIMIT)
    if not isinstance(data, dict) or data.get("schema") != FEATURES_SCHEMA:
        return None
    data.setdefault("records", {})
    data.setdefault("baselines", {})
    return data


def write_feature_cache(run_dir: str | os.PathLike, data: dict) -> None:
    _write(Path(run_dir) / FEATURES_FILE, data)
