"""Work on workspace data under a budget, off the event loop.

What a workspace holds (run folders, their records, a file's constants) comes from its author, and the
event loop answers every document's requests: no request may hold it.  The rule, in one place:

* **Size.** Every reader of workspace data is bounded by size (``store.files.read_plain``,
  ``MAX_LINE_BYTES``, ``folders.MAX_META_CONTAINERS``/``MAX_RUN_ENTRIES``; the static reader folds
  numbers of at most ``pysource.MAX_FOLD_BITS`` bits) and linear (no backtracking pattern); a refusal is
  judged once per state of the files and cached like a success.
* **Place.** The run store is read only by ``RunIndex.refresh`` (and each run's verdict,
  ``Results.refusal``, judged after it), in a thread (``StoreRefresh``); the server's index never reads
  the disk on its own (``scan_on_read = False``).  Outlines are built in a
  thread too (``ServerState.outline``).
* **Time.** A request that needs the store waits for a refresh at most ``STORE_BUDGET_S``; past it (or
  while a refresh that already overran is still reading) it is answered at once with a RequestFailed
  error "too large to analyse: …" (a hover waits one second, then answers with the source's facts and
  says the runs are still being read), and requests that do not need the store never wait at all.
  A request reads the index on the loop right after its refresh ends; the next refresh is due only
  ``min_interval`` after that end, so it does not hold the index's lock under that request.
"""
from __future__ import annotations

import asyncio
import time

from pygls.exceptions import JsonRpcException

from .. import protocol as P
from ..store.index import RunIndex

STORE_BUDGET_S = 5.0


class TooLarge(JsonRpcException):
    """A request whose workspace data is past its budget (RequestFailed)."""
    CODE = P.ERROR_REQUEST_FAILED


class StoreRefresh:
    """One refresh of the server's run index at a time, in a thread, shared by the requests that wait."""

    def __init__(self):
        self._running: tuple[RunIndex, asyncio.Future, float] | None = None

    async def fresh(self, index: RunIndex, refresh, wait_s: float | None = None) -> bool:
        """True once ``refresh()`` (which reads ``index`` and what is judged from it) has read what changed
        on disk.  Past the budget ``TooLarge``; with ``wait_s``, past that wait (or the budget) False, and
        the index must not be read meanwhile.  A read that began before the index was invalidated (a job
        ended) is followed by another."""
        for _ in range(2):
            if not await self._one(index, refresh, wait_s):
                return False
            if not index.due():
                return True
        return True

    async def _one(self, index: RunIndex, refresh, wait_s: float | None) -> bool:
        if self._running is None or self._running[0] is not index:
            if not index.due():
                return True
            self._running = (index, asyncio.ensure_future(asyncio.to_thread(refresh)), time.monotonic())
        _, future, started = self._running
        left = STORE_BUDGET_S - (time.monotonic() - started)
        try:
            await asyncio.wait_for(asyncio.shield(future), max(left if wait_s is None else min(left, wait_s), 0))
        except asyncio.TimeoutError:
            if wait_s is not None:
                return False
            raise TooLarge(f"too large to analyse: reading the run store {index.root} has taken more than "
                           f"{STORE_BUDGET_S:g} s; other requests are answered meanwhile") from None
        finally:
            if future.done() and self._running is not None and self._running[1] is future:
                self._running = None
        future.result()
        return True
