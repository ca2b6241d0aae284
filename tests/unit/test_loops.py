"""Loop view (strategy frequencies per stage) and stage graph, on the recorded run and synthetic runs."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import networkx as nx
import pytest

from asight_lsp.analysis.candidates import build_candidates
from asight_lsp.analysis.loopview import STRATEGIES, loop_view
from asight_lsp.analysis.stagegraph import build_graph, layered_positions
from asight_lsp.analysis.synthetic import SOURCE, synthetic_run
from asight_lsp.store.runs import Run
from asight_lsp.tvmscript.outline import build_outline
from asight_lsp.views.registry import missing_keys
from asight_lsp.views.loops import loop_view as loop_view_payload, stage_graph
from asight_lsp.services.run_data import load_run

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "fixtures" / "runs" / "mbr128"


@pytest.fixture(scope="module")
def fixture_data():
    return load_run(Run(RUN), extract=False)


def test_frequencies_add_up(fixture_data):
    stages = loop_view(fixture_data.table, fixture_data.function)
    assert [s["block"] for s in stages] == ["matmul", "bias_add", "relu"]
    for st in stages:
        n = st["candidates"]
        assert n == 40
        for name in STRATEGIES:
            if name == "tile":
                continue
            dist = st["strategies"][name]
            assert sum(d["count"] for d in dist) == n, (st["block"], name)
            assert sum(d["share"] for d in dist) == pytest.approx(1.0, abs=1e-3)
        for var, dist in st["strategies"]["tile"].items():
            assert sum(d["count"] for d in dist) == n
        for var, positions in st["strategies"]["tile_factors"].items():
            for dist in positions:
                assert sum(d["count"] for d in dist) == n
        assert all(0.0 <= v <= 1.0 for v in st["loop_share"].values())
    matmul = stages[0]
    assert set(matmul["strategies"]["tile"]) == {"i", "j", "k"} and matmul["iter_kinds"] == "SSR"
    shares = matmul["loop_share"]
    assert shares["parallel"] + shares["vectorized"] + shares["unrolled"] + shares["serial"] == pytest.approx(1.0, abs=1e-3)


def test_compute_at_follows_the_sketches(fixture_data):
    (bias,) = [s for s in loop_view(fixture_data.table, fixture_data.function) if s["block"] == "bias_add"]
    got = {d["value"]: d["count"] for d in bias["strategies"]["compute_at"]}
    sketches = {s["label"]: s["count"] for s in fixture_data.table.sketches}
    assert got.get("at matmul loop j0") == sketches["fuse bias_add at matmul j0"]
    assert got.get("at matmul loop j1") == sketches["fuse bias_add at matmul j1"]


def test_vectorize_and_parallel_come_from_the_scheduled_nests():
    fn = build_outline(SOURCE).functions[0]
    records, cache = synthetic_run(300, seed=5)
    table = build_candidates(records, cache, None, fn)
    (stage,) = loop_view(table, fn)
    expected_vec, expected_par = Counter(), Counter()
    for ds in table.decisions:
        tiles = [d.value for d in ds if d.inst == "SamplePerfectTile"]
        vec, par = tiles[1][-1], tiles[0][0] * tiles[1][0]
        expected_vec[vec] += 1
        expected_par[par] += 1
    got_vec = {d["value"]: d["count"] for d in stage["strategies"]["vectorize"] if d["value"] != "other"}
    assert all(expected_vec[v] == c for v, c in got_vec.items())
    got_par = {d["value"]: d["count"] for d in stage["strategies"]["parallel"] if d["value"] != "other"}
    assert all(expected_par[v] == c for v, c in got_par.items())
    cache_dist = {d["value"]: d["count"] for d in stage["strategies"]["cache"]}
    assert cache_dist["write global"] == sum("cache" in table.sketches[s]["label"] for s in table.sketch)


def test_loop_view_payload(fixture_data):
    p = loop_view_payload(fixture_data)
    assert p["schema"] == "asight.loopView/1" and p["status"] == "ok" and missing_keys(p) == []
    assert p["scheduled_loops_available"] is True
    assert p["stages"][0]["best"]["headline"]
    assert p["stages"][0]["range"]["start"]["line"] == 16
    assert set(p["sources"]) >= set(STRATEGIES)
    json.dumps(p, allow_nan=False)


def test_stage_graph_of_matmul_bias_relu(fixture_data):
    p = stage_graph(fixture_data)
    assert p["status"] == "ok" and missing_keys(p) == []
    edges = {(e["source"], e["target"], e["buffer"]) for e in p["edges"]}
    assert edges == {("input:A", "matmul", "A"), ("input:B", "matmul", "B"), ("matmul", "bias_add", "C"),
                     ("input:bias", "bias_add", "bias"), ("bias_add", "relu", "E"), ("relu", "output:D", "D")}
    nodes = {n["id"]: n for n in p["nodes"]}
    assert nodes["matmul"]["iter_kinds"] == "SSR" and nodes["matmul"]["schedule"]
    for e in p["edges"]:  # layered: every edge goes to a later layer
        assert nodes[e["target"]]["layer"] > nodes[e["source"]]["layer"]


def test_stage_graph_of_relax_function():
    outline = build_outline((ROOT / "fixtures" / "relax_cnn.py").read_text())
    fn = next(f for f in outline.functions if f.kind != "prim_func" and f.bindings)
    g = build_graph(fn)
    assert nx.is_directed_acyclic_graph(nx.DiGraph(g))
    assert {n for n, a in g.nodes(data=True) if a["kind"] == "binding"} == {b.name for b in fn.bindings}
    pos = layered_positions(g)
    assert all(pos[v][0] > pos[u][0] for u, v in g.edges())


def test_stage_graph_names_are_data_not_markup():
    text = SOURCE.replace('T.sblock("C")', 'T.sblock("C<b>x</b>")')
    fn = build_outline(text).functions[0]
    g = build_graph(fn)
    assert "C<b>x</b>" in g.nodes


def test_stage_graph_without_a_run():
    from asight_lsp.views.loops import stage_graph_of
    fn = build_outline((ROOT / "fixtures" / "matmul_bias_relu.py").read_text()).functions[0]
    p = stage_graph_of(fn)
    assert p["status"] == "ok" and p["run"] is None and missing_keys(p) == []
    assert {n["id"] for n in p["nodes"] if n["kind"] == "block"} == {"matmul", "bias_add", "relu"}
    assert not any("schedule" in n for n in p["nodes"])
