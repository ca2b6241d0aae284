"""The idle collector (server/idle_gc.py) and the release of closed documents (issue 14: memory bounded, no stall)."""
from __future__ import annotations

import asyncio
import gc
import threading
import weakref
from pathlib import Path

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


async def test_a_closed_big_document_is_released_in_a_thread(tmp_path, monkeypatch):
    """Closing a big file frees its outline off the event loop, and frees all of it."""
    import threading
    import time

    from asight_lsp.server import state as S
    from asight_lsp.server.options import ServerOptions
    monkeypatch.setattr(S, "RELEASE_OFF_LOOP_CHARS", 1000)
    server_state = S.ServerState(ServerOptions())
    text = (Path(__file__).resolve().parents[2] / "fixtures" / "matmul_bias_relu.py").read_text()
    uri = (tmp_path / "big.py").as_uri()
    doc = server_state.open(uri, text, 1)
    docout = await server_state.outline(doc)
    alive = weakref.ref(docout.outline)
    del docout
    threads, real_thread = [], threading.Thread
    monkeypatch.setattr(S.threading, "Thread", lambda **kw: threads.append(real_thread(**kw)) or threads[-1])
    assert server_state.close_document(uri) is doc
    assert doc.outline is None and len(threads) == 1
    threads[0].join(30)
    deadline = time.monotonic() + 30
    while alive() is not None and time.monotonic() < deadline:
        gc.collect()
        await asyncio.sleep(0.05)
    assert alive() is None


def test_big_messages_are_written_by_a_thread_in_order():
    """stdout: a big answer does not hold the event loop, and nothing overtakes it."""
    from asight_lsp.server.jsonrpc import OrderedWriter

    class SlowPipe:   # a client that reads slowly
        def __init__(self):
            self.got, self.threads, self.closed = [], set(), False
            self.read_on = threading.Event()

        def write(self, data):
            self.threads.add(threading.current_thread().name)
            if len(data) > OrderedWriter.BIG:
                assert self.read_on.wait(30)   # the client reads it only when the test says so
            self.got.append(data[:1])

        def close(self):
            self.closed = True
    pipe = SlowPipe()
    writer = OrderedWriter(pipe)
    writer.write(b"a")                      # idle: written at once, here
    assert pipe.got == [b"a"] and pipe.threads == {threading.current_thread().name}
    writer.write(b"B" * (OrderedWriter.BIG + 1))
    for part in (b"c", b"d", b"e"):
        writer.write(part)                  # queued behind the big one
    assert pipe.got == [b"a"]               # the big one is still being read: nothing overtook it
    pipe.read_on.set()
    writer.close()
    assert pipe.got == [b"a", b"B", b"c", b"d", b"e"] and pipe.closed
