"""The idle collector (server/idle_gc.py) under a client that never pauses (issue 14: memory bounded)."""
from __future__ import annotations

import asyncio
import gc
import weakref

from asight_lsp.server.idle_gc import IdleCollector


async def test_a_client_that_never_pauses_still_gets_collections():
    collector = IdleCollector(delay=0.05, max_delay=0.2)
    collected = []
    collector.collect = lambda allow_full=True: collected.append(allow_full) or True
    for _ in range(500):   # a message every 10 ms, for up to 5 s: never 50 ms of quiet
        collector.schedule()
        await asyncio.sleep(0.01)
        if len(collected) >= 2:
            break
    assert collected == [False, False]   # collections, never a full one (it may take seconds)
    for _ in range(100):
        await asyncio.sleep(0.01)   # a real pause: the full one
        if len(collected) == 3:
            break
    assert collected == [False, False, True]


async def test_no_collection_while_an_outline_is_built_and_one_after():
    collector = IdleCollector(delay=0.01, max_delay=0.02)
    collected = []
    real = collector.collect
    collector.collect = lambda allow_full=True: collected.append(gc.isenabled()) or real(allow_full)
    with collector.building():
        assert not gc.isenabled()
        collector.schedule()
        await asyncio.sleep(0.1)
        assert collected == []
    assert gc.isenabled()
    for _ in range(200):
        await asyncio.sleep(0.01)
        if collected:
            break
    assert collected == [True] and gc.get_freeze_count() > 0
    gc.unfreeze()


class Node:
    pass


def test_full_collection_frees_frozen_garbage_cycles():
    collector = IdleCollector()
    node = Node()
    node.me = node   # a cycle: reference counting never frees it
    alive = weakref.ref(node)
    gc.freeze()
    del node
    gc.collect()
    assert alive() is not None   # frozen: plain collections skip it
    collector.frozen_after_full = 1   # the frozen set has more than doubled since: the next one is full
    assert collector.collect() is True
    assert alive() is None and collector.full_collections == 1
    gc.unfreeze()
