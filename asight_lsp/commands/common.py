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
    try:
        return file.read_bytes()
    except OSError as err:
        raise AsightError(f"cannot read {path}: {err.strerror}") from None


def print_json(payload) -> None:
    json.dump(payload, sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")


def human_location(path: str, rng: dict) -> str:
    """``FILE:LINE:COL`` with 1-based line and column, as compilers print."""
    return f"{path}:{rng['start']['line'] + 1}:{rng['start']['character'] + 1}"
