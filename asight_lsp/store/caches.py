"""Caches a run directory keeps beside MetaSchedule's database (msgpack, written atomically).

* ``profile.msgpack``  — ``{"key": ..., "profile": ...}``: the last profile of the run
  (``services/profiling.py``), reused by the editor and reports while its key matches;
* ``features.msgpack`` — ``{"schema": "asight.features/1", "records": {trial: entry},
  "baselines": {workload: entry}}``: feature rows and loop nests per trial from the worker's
  ``features`` request (rows as little-endian float32 bytes).  It only grows.

A cache that cannot be read is treated as missing; one that cannot be written only loses the cache.
"""
from __future__ import annotations

import os
from pathlib import Path

import msgpack

from .runs import Run

PROFILE_FILE = "profile.msgpack"
FEATURES_FILE = "features.msgpack"
FEATURES_SCHEMA = "asight.features/1"


def _read(path: Path):
    try:
        return msgpack.unpackb(path.read_bytes(), raw=False, strict_map_key=False)
    except (OSError, ValueError, msgpack.exceptions.ExtraData, msgpack.exceptions.UnpackException):
        return None


def _write(path: Path, data) -> None:
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    tmp.write_bytes(msgpack.packb(data, use_bin_type=True))
    os.replace(tmp, path)


def load_profile(run: Run) -> dict | None:
    """The profile cached in a run directory (whatever its key), or None."""
    data = _read(run.path / PROFILE_FILE)
    return data.get("profile") if isinstance(data, dict) else None


def store_profile(run: Run, entry: dict) -> None:
    """Write ``{"key", "profile"}``; a store that cannot be written only loses the cache."""
    try:
        _write(run.path / PROFILE_FILE, entry)
    except OSError:
        pass


def read_feature_cache(run_dir: str | os.PathLike) -> dict | None:
    """The cached worker answer, or None when missing, unreadable or of another schema."""
    data = _read(Path(run_dir) / FEATURES_FILE)
    if not isinstance(data, dict) or data.get("schema") != FEATURES_SCHEMA:
        return None
    data.setdefault("records", {})
    data.setdefault("baselines", {})
    return data


def write_feature_cache(run_dir: str | os.PathLike, data: dict) -> None:
    _write(Path(run_dir) / FEATURES_FILE, data)
