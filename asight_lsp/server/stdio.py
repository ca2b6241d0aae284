"""stdin read on the event loop itself.

pygls reads stdin in its thread pool: every header line and every body is one ``run_in_executor``
round trip (a thread wakes, reads, hands the bytes back through the loop's self-pipe).  Each hop
needs the GIL, which an outline build in another thread holds for up to the switch interval (5 ms),
so a keystroke's didChange and the request after it reached the server late (issue 14: the first
codeLens after an edit).  Here stdin is an asyncio pipe transport: reading costs the loop nothing
until bytes arrive.  Used when stdin is a pipe or socket of its own (not a file, nor the same
object as stdout, whose blocking writes a non-blocking shared descriptor would break); otherwise
pygls' reader.
"""
from __future__ import annotations

import asyncio
import os
import stat
from typing import BinaryIO

READ_LIMIT = 1 << 20   # a header line longer than this is dropped (it cannot be a real header)
OVERLONG = b"X-Asight-Dropped: an overlong header line\r\n"


def pipe_usable(stdin: BinaryIO, stdout: BinaryIO) -> bool:
    """Whether ``stdin`` can be read as a pipe transport without touching ``stdout``."""
    try:
        fin, fout = os.fstat(stdin.fileno()), os.fstat(stdout.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    if not (stat.S_ISFIFO(fin.st_mode) or stat.S_ISSOCK(fin.st_mode)):
        return False
    return (fin.st_dev, fin.st_ino) != (fout.st_dev, fout.st_ino)


class PipeReader:
    """pygls' reader interface (``readline``, ``readexactly``) over an asyncio ``StreamReader``."""

    def __init__(self, stdin: BinaryIO):
        self.stdin = stdin
        self.stream: asyncio.StreamReader | None = None

    async def _connected(self) -> asyncio.StreamReader:
        if self.stream is None:
            loop = asyncio.get_running_loop()
            stream = asyncio.StreamReader(limit=READ_LIMIT)
            await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(stream), self.stdin)
            self.stream = stream
        return self.stream

    async def readline(self) -> bytes:
        stream = await self._connected()
        try:
            return await stream.readline()
        except ValueError:   # over the limit: asyncio dropped it; a line that matches no header
            return OVERLONG

    async def readexactly(self, n: int) -> bytes:
        stream = await self._connected()
        try:
            return await stream.readexactly(n)
        except asyncio.IncompleteReadError as err:   # the client went away mid-body
            return err.partial
