"""Atomic file writes (TVM-free): a reader never sees half a file, and two writers never share a
temporary name.

The temporary file is made by ``tempfile.mkstemp`` in the target's folder, so concurrent writers of
one file — two threads of the language server saving a run's ``run.json``, say — each get their own
and the last ``os.replace`` wins whole.  (A name made from the process id alone was shared by the
threads of one process: one thread's replace moved the other's file away, and that one failed.)
"""
from __future__ import annotations

import errno
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import Iterator

from ..errors import AsightError


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


def write_model(out: str, weights_path: str, text: str, weights: dict) -> None:
    """An imported model: its TVMScript file and its weights (``np.savez``, one array per parameter
    name) beside it, each written atomically (a link there is replaced, never followed)."""
    import io

    import numpy as np
    buffer = io.BytesIO()
    np.savez(buffer, **weights)
    write_atomic(weights_path, buffer.getvalue())
    write_atomic(out, text)


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


MAX_RUN_FILE_BYTES = 128 << 20      # ~20,000 trials of a large model; a shipped file may be any size


class NotPlainFile(AsightError):
    """A run folder's file that is a link, not a regular file, or larger than the product reads."""


def read_plain(path: str | os.PathLike, limit: int = MAX_RUN_FILE_BYTES) -> bytes:
    """A run folder's file, read only when it is a regular file of at most ``limit`` bytes and not a
    symbolic link (``O_NOFOLLOW``): a run folder is data a repository can ship, and a link to
    /dev/zero would be read without end.  FileNotFoundError as ``open``;
    NotPlainFile otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0))
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise NotPlainFile(f"{path} is a symbolic link; asight reads a store's files only when they are plain "
                               "files") from None
        raise
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(handle.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise NotPlainFile(f"{path} is not a regular file; asight reads a store's files only when they are plain "
                               "files")
        if info.st_size > limit:
            raise NotPlainFile(f"{path} is {info.st_size >> 20} MiB, more than the {limit >> 20} MiB the product "
                               "reads of a store's file")
        data = handle.read(info.st_size + 1)       # read(limit) would allocate the limit (128 MiB) each time
        if len(data) > info.st_size:               # it grew since (a tuning job appending): the rest, bounded
            data += handle.read(limit - len(data) + 1)
        return data[:limit]


# A line with something on it, from its first non-blank byte (blank lines hold no record; JSON ignores
# the blanks before a value).  The match starts at a non-blank byte and never backtracks: the scan is
# linear in the bytes, however long a line of blanks is.
_LINE = re.compile(rb"[^\s][^\n]*")


MAX_LINE_BYTES = 4 << 20      # a record line longer than this is not parsed (a large model's trace: ~50 KB)


# A blank line after the first: a newline, blanks, then a newline or the end.  The pattern starts with a
# literal, so ``re`` finds its candidates with a fast scan for newlines (``(?m)^...$`` tried a match at
# every byte: 2 s on a 126 MB line, holding the GIL and so every other request of the server).
_BLANK_AFTER = re.compile(rb"\n[ \t\r\f\v]*(?:\n|\Z)")
_BLANK_FIRST = re.compile(rb"[ \t\r\f\v]*(?:\n|\Z)")


def first_blank_line(raw: bytes) -> int | None:
    """The 1-based number of the first blank line of a file's bytes (the end after a last newline is
    none), or None: TVM's JSON database loader crashes the process on one."""
    if raw and _BLANK_FIRST.match(raw):
        return 1
    match = _BLANK_AFTER.search(raw)
    if match is None or match.start() + 1 == len(raw):
        return None
    return raw.count(b"\n", 0, match.start()) + 2


def first_unicode_escape(raw: bytes) -> int | None:
    """The 1-based number of the first line of a file's bytes holding a JSON ``\\uXXXX`` escape (a ``u``
    after an odd number of backslashes: ``\\\\u`` is an escaped backslash and a letter u), or None.
    TVM's JSON reader refuses one ("Unsupported escape sequence: \\u"), and Python's ``json.dumps``
    writes one for every non-ASCII character.  ``bytes.find`` scans for the pair; a lookbehind pattern
    would try every byte (9 s on a 126 MB line, holding the GIL)."""
    at = raw.find(b"\\u")
    while at != -1:
        start = at
        while start and raw[start - 1] == 0x5C:
            start -= 1
        if (at - start) % 2 == 0:
            return raw.count(b"\n", 0, at) + 1
        at = raw.find(b"\\u", at + 1)
    return None


def record_lines(raw: bytes) -> Iterator[bytes | None]:
    """The non-blank lines of a line-per-record file (``file_lines``), each ``None`` when it is longer
    than ``MAX_LINE_BYTES``: no record is, and such a line is never decoded nor parsed (a shipped
    126 MB line held the server for seconds in each reader).  Callers count a ``None`` as unreadable."""
    for line in file_lines(raw):
        yield None if len(line) > MAX_LINE_BYTES else line


def file_lines(raw: bytes) -> Iterator[bytes]:
    """The non-blank lines of a file's bytes, one at a time: ``splitlines()`` builds a list of every line
    first, and 128 MiB of newlines (218 KiB in git) would become 134 million entries, ~1 GB in the
    untrusted server.  The scan runs in C (``re``), linear in the bytes; a line keeps its
    ``\r``, which JSON ignores, and loses the blanks before its first byte."""
    for match in _LINE.finditer(raw):
        yield match.group(0)


def stamp(path: str | os.PathLike) -> tuple | None:
    """A file's size, mtime and inode (a rewrite of the same size within one mtime tick, by rename, is
    another inode): the key of a cache of what was read from it; None when it is not there."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_size, info.st_mtime_ns, info.st_ino


def printable_name(text, limit: int) -> bool:
    """One short line of printable text: a name from another machine that the views print (a tool, a
    metric, a target's tag).  Control characters reach a terminal (a newline, ESC, BEL), and format
    characters (``Cf``: bidirectional overrides) reorder what is shown; ``isprintable`` rejects both."""
    return isinstance(text, str) and len(text) <= limit and text.isprintable()


CACHE_ENV = "ASIGHT_CACHE_DIR"


def cache_dir() -> Path:
    """The user's cache (the kept tensor intrinsics, the schedule library): ``$ASIGHT_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/asight``, else ``~/.cache/asight``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "asight"
