"""Helpers shared by the sub-commands."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from ..errors import AsightError


def read_source(path: str) -> bytes:
    """The file's bytes, or a one-line error."""
    file = Path(path)
    if not file.exists():
        raise AsightError(f"no such file: {path}")
    if file.is_dir():
        raise AsightError(f"{path} is a directory, not a TVMScript file")
    from ..services.lookup import read_bytes
    return read_bytes(path)


def add_file_run_options(p, what: str) -> None:
    """FILE, --run, --func, --work-dir, --json, --python: the options of a command on a file's run."""
    p.add_argument("file")
    p.add_argument("--run", dest="run_ref", help="run id, prefix or directory (default: the newest run of the file)")
    p.add_argument("--func", help="unit or function (default: the file's only unit)")
    p.add_argument("--work-dir", help="where runs are stored (default ./.asight)")
    p.add_argument("--json", action="store_true", help=f"machine-readable output ({what})")
    p.add_argument("--python", help="interpreter for the TVM worker (default: this one)")


def show(payload: dict, as_json: bool, render) -> int:
    """Print an ``ok`` payload as JSON or through ``render``; any other status is the error."""
    if payload.get("status", "ok") != "ok":
        raise AsightError(payload.get("message") or "unavailable")
    if as_json:
        print_json(payload)
    else:
        sys.stdout.write(render(payload))
    return 0


def print_json(payload) -> None:
    json.dump(payload, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def human_location(path: str, rng: dict) -> str:
    """``FILE:LINE:COL`` with 1-based line and column, as compilers print."""
    return f"{path}:{rng['start']['line'] + 1}:{rng['start']['character'] + 1}"
