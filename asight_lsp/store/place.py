"""Where a run's file is: its path relative to the workspace its store is in (TVM-free).

A run records its file's absolute path (``RunMeta.file``) and, when the file is inside the
workspace that holds the store (``<workspace>/.asight``, or ``$ASIGHT_HOME``'s parent), that path
relative to it (``RunMeta.workspace_file``).  A project moved or copied with its store keeps its
runs: a run belongs to a file when either path names it, and ``file_here`` is the file in the
workspace the run is in now.  Runs recorded before ``workspace_file`` match by the absolute path
only.  Whose run it is (``store/owner.py``) does not depend on where it is found.
"""
from __future__ import annotations

import os
from pathlib import Path


def workspace_of(store_root: str | os.PathLike) -> Path:
    """The folder a store's runs are relative to: the one holding ``.asight``."""
    return Path(os.path.abspath(store_root)).parent


def relative_file(file: str, store_root: str | os.PathLike) -> str | None:
    """``file`` relative to the store's workspace, None when it lies outside it."""
    try:
        rel = os.path.relpath(os.path.abspath(file), workspace_of(store_root))
    except ValueError:            # another drive
        return None
    return None if rel == os.pardir or rel.startswith(os.pardir + os.sep) else rel


def file_here(meta, store_root: str | os.PathLike) -> str:
    """The run's file in the workspace its store is in now (its recorded path when it has no relative one)."""
    rel = meta.workspace_file
    if isinstance(rel, str) and rel and not os.path.isabs(rel):
        here = os.path.normpath(os.path.join(workspace_of(store_root), rel))
        if relative_file(here, store_root) is not None:     # run.json is data: it never leads out
            return here
    return meta.file


def run_file(meta, run_dir: str | os.PathLike) -> str:
    """The file of the run in ``run_dir`` (``<store>/runs/<id>``), in the workspace its store is in now."""
    return file_here(meta, Path(run_dir).parent.parent)


def belongs(meta, file: str, store_root: str | os.PathLike) -> bool:
    """Whether the run tuned ``file``: by its recorded path, or by its place in the workspace."""
    path = os.path.abspath(file)
    return os.path.abspath(meta.file) == path or os.path.abspath(file_here(meta, store_root)) == path


def moved_from(meta, file: str) -> str | None:
    """The path the run recorded when it is found for ``file`` by its place (a moved or copied project)."""
    return None if os.path.abspath(meta.file) == os.path.abspath(file) else meta.file
