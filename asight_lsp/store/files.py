"""Atomic file writes (TVM-free): a reader never sees half a file, and two writers never share a
temporary name.

The temporary file is made by ``tempfile.mkstemp`` in the target's folder, so concurrent writers of
one file — two threads of the language server saving a run's ``run.json``, say — each get their own
and the last ``os.replace`` wins whole.  (A name made from the process id alone was shared by the
threads of one process: one thread's replace moved the other's file away, and that one failed.)
"""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: str | os.PathLike, data: str | bytes, encoding: str = "utf-8") -> Path:
    """Write ``data`` to ``path`` through a private temporary file in the same folder."""
    path = Path(path)
    raw = data.encode(encoding) if isinstance(data, str) else data
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~_umask())      # mkstemp makes 0600; a file written plainly gets 0666 - umask
        with os.fdopen(fd, "wb") as out:
            out.write(raw)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    return path


def _umask() -> int:
    """This process's umask, read without changing it (``os.umask`` sets it, racing other threads)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    return 0o022
