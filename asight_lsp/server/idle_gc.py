"""Python's garbage collector, run when the server is idle rather than inside a request.

A 3,000-line file's outline is ~10^5 objects, a 100,000-line one's ~3*10^6; Python's full
collections walk them all now and then, in the middle of a request (codeLens p99 50+ ms instead of
~10 ms), and a full collection of a big file's outline takes 0.3-1 s.  So, once the client has
been quiet for ``delay`` seconds (no message, no outline being built), ``IdleCollector`` collects
what is not frozen and ``gc.freeze()``s the rest: later collections skip the frozen objects.

Frozen objects are still freed by reference counting (an outline replaced by a newer one), but
frozen objects that became garbage in a reference cycle are never collected.  The server keeps
its state free of cycles (a closed document lets go of its diagnostics task), and when the frozen
set has grown to twice what it was after the last full collection, the next idle collection
unfreezes and looks at everything: memory stays bounded, and the full walk is paid once per
doubling, not after every pause in typing.  A client that never pauses (a fuzzer, a script)
still gets a collection of what is not frozen every ``max_delay`` seconds (a full one waits
for a real pause: it can take seconds).  After each collection, glibc's
``malloc_trim`` hands the heap's free pages back to the system: the memory a big file's outline
took shows in RSS again once it is gone, instead of staying as free heap.

While an outline is being built (``building()``), automatic collections are off: a big file's
build allocates millions of objects and no garbage cycles (ast trees and outline data are freed by
reference counting), yet each automatic full collection would walk everything allocated so far,
with the GIL held, stalling the event loop for the length of the walk.  When a build has left more
than ``FREEZE_AFTER_BUILD`` new objects, they are frozen at once (O(1)): otherwise the next young
collection would walk them all (0.3 s after a 100,000-line file).
"""
from __future__ import annotations

import asyncio
import contextlib
import ctypes
import ctypes.util
import gc

FULL_MIN_OBJECTS = 50_000     # below this a full collection is cheap (a few ms): always do one
FREEZE_AFTER_BUILD = 200_000  # new objects a build may leave to the young generation
FULL_NEVER_BY_ITSELF = 1 << 30   # generation-1 collections before Python would start a full one


def _malloc_trim():
    """glibc's ``malloc_trim``, or None (another C library)."""
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):
        return None


MALLOC_TRIM = _malloc_trim()


class IdleCollector:
    def __init__(self, delay: float = 2.0, max_delay: float = 30.0):
        self.delay, self.max_delay = delay, max_delay
        self._pending_since = 0.0
        self.frozen_after_full = 0
        self.full_collections = 0
        self._handle: asyncio.TimerHandle | None = None
        self._builds = 0
        self._was_enabled = True

    @contextlib.contextmanager
    def building(self):
        """No automatic collection while an outline is built (nested and concurrent builds counted)."""
        if self._builds == 0:
            self._was_enabled = gc.isenabled()
            gc.disable()
        self._builds += 1
        try:
            yield
        finally:
            self._builds -= 1
            if self._builds == 0:
                if gc.get_count()[0] > FREEZE_AFTER_BUILD:
                    gc.freeze()
                if self._was_enabled:
                    gc.enable()

    @staticmethod
    def take_over_full_collections() -> None:
        """Leave full (generation 2) collections to this collector.  Python starts one by itself
        whenever enough objects survived younger collections: during a burst of typing that is in
        the middle of a request, walking every object built since the last pause (37 ms after a
        few hundred keystrokes in a 3,000-line module, issue 14).  Young collections stay
        automatic; the idle (or, for a client that never pauses, the ``max_delay``) collection
        does the full walk.  Called by ``asight serve`` only: a library user's process keeps Python's."""
        young, middle, _ = gc.get_threshold()
        gc.set_threshold(young, middle, FULL_NEVER_BY_ITSELF)

    def schedule(self) -> None:
        """(Re)start the idle wait (on each message from the client and after each outline build),
        never past ``max_delay`` seconds after the first call since the last collection."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        now = loop.time()
        if self._handle is None:
            self._pending_since = now
        else:
            self._handle.cancel()
        forced = self._pending_since + self.max_delay < now + self.delay
        self._handle = loop.call_at(min(now + self.delay, self._pending_since + self.max_delay), self._due, forced)

    def _due(self, forced: bool = False) -> None:
        self._handle = None
        if self._builds:
            self.schedule()   # a build is under way: wait for it
        else:
            self.collect(allow_full=not forced)
            if forced:
                self.schedule()   # the full collection waits for the next pause

    def collect(self, allow_full: bool = True) -> bool:
        """Collect and freeze; True when it was a full collection (frozen objects included).
        While an outline is being built, wait for it (the build schedules again when it ends).
        A collection forced by ``max_delay`` (the client is busy) is never full: unfreezing a big
        file's outline (3*10^6 objects) and walking it takes seconds; that waits for a real pause."""
        if self._builds:
            return False
        frozen = gc.get_freeze_count()
        full = allow_full and (frozen < FULL_MIN_OBJECTS or frozen > 2 * self.frozen_after_full)
        if full:
            gc.unfreeze()
        gc.collect()
        gc.freeze()
        if full:
            self.frozen_after_full = gc.get_freeze_count()
            self.full_collections += 1
        if MALLOC_TRIM is not None:
            MALLOC_TRIM(0)   # ~1 ms
        return full
