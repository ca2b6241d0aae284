"""The Relax graphs a model's hotspots match, kept in the run (store/caches.py): read back for their key in
the user's own run only, never from a shipped one, and a damaged file reads as missing."""
from __future__ import annotations

from pathlib import Path

from asight_lsp.store.caches import GRAPHS_FILE, load_graphs, store_graphs
from asight_lsp.store.owner import mark_own

GRAPHS = {"function": "main", "source": {"nodes": [1]}, "transformed": {"nodes": [2]}}


def own_run(tmp_path: Path) -> Path:
    run = tmp_path / "runs" / "r"
    run.mkdir(parents=True)
    mark_own(run)
    return run


def test_kept_graphs_are_read_back_for_their_key_only(tmp_path):
    run = own_run(tmp_path)
    assert load_graphs(run, "k1") is None
    store_graphs(run, "k1", GRAPHS)
    assert load_graphs(run, "k1") == GRAPHS
    assert load_graphs(run, "k2") is None                   # another text, function or weights
    store_graphs(run, "k2", {**GRAPHS, "function": "f"})    # the last key only
    assert load_graphs(run, "k1") is None and load_graphs(run, "k2")["function"] == "f"


def test_a_shipped_runs_graphs_are_neither_read_nor_written(tmp_path):
    run = own_run(tmp_path)
    store_graphs(run, "k", GRAPHS)
    shipped = tmp_path / "runs" / "s"
    shipped.mkdir()
    (shipped / GRAPHS_FILE).write_bytes((run / GRAPHS_FILE).read_bytes())   # a forged file with the right key
    assert load_graphs(shipped, "k") is None
    store_graphs(shipped, "k2", GRAPHS)
    assert (shipped / GRAPHS_FILE).read_bytes() == (run / GRAPHS_FILE).read_bytes()


def test_a_damaged_or_misshapen_file_reads_as_missing(tmp_path):
    import msgpack
    run = own_run(tmp_path)
    (run / GRAPHS_FILE).write_bytes(b"\xc1not msgpack")
    assert load_graphs(run, "k") is None
    (run / GRAPHS_FILE).write_bytes(msgpack.packb({"key": "k", "graphs": {"source": "x", "transformed": {}}}))
    assert load_graphs(run, "k") is None
    (run / GRAPHS_FILE).write_bytes(msgpack.packb({"key": "k", "graphs": ["not", "a", "map"]}))
    assert load_graphs(run, "k") is None
