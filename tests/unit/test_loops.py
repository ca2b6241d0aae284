"""Loop view (strategy frequencies per stage) and stage graph, on the recorded run and synthetic runs."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import networkx as nx
import numpy as np
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


# ---------------------------------------------------------------- latency per strategy value, cost per stage

def test_each_strategy_value_carries_the_median_latency_of_its_candidates(fixture_data):
    table = fixture_data.table
    stages = {s["block"]: s for s in loop_view(table, fixture_data.function)}
    valid = [i for i in range(len(table.latency_us)) if np.isfinite(table.latency_us[i])]
    # Tile shapes, recomputed straight from the trace decisions.
    by_shape: dict[str, list[float]] = {}
    for i in valid:
        for d in table.decisions[i]:
            if d.block == "matmul" and d.inst == "SamplePerfectTile" and d.loop_var == "k":
                by_shape.setdefault("×".join(str(v) for v in d.value), []).append(float(table.latency_us[i]))
    for entry in stages["matmul"]["strategies"]["tile"]["k"]:
        if entry["value"] == "other":
            continue
        want = by_shape[entry["value"]]
        assert entry["measured"] == entry["count"] == len(want)
        assert entry["median_us"] == pytest.approx(float(np.median(want)), abs=1e-3)
    # A value every candidate has: the median of the whole run.
    (cache,) = stages["relu"]["strategies"]["cache"]
    assert cache["count"] == len(valid)
    assert cache["median_us"] == pytest.approx(float(np.median(table.latency_us[valid])), abs=1e-3)
    # Compute-at of bias_add: the sampled locations and the sketches' placements split the candidates.
    at = stages["bias_add"]["strategies"]["compute_at"]
    assert sum(v["measured"] for v in at) == len(valid)
    assert len({v["median_us"] for v in at}) == len(at), "different placements, different medians"


def test_other_bucket_has_the_median_of_the_values_it_folds():
    from asight_lsp.analysis.loopview import TOP_VALUES, _distribution

    counter = Counter({f"v{i}": 1 for i in range(TOP_VALUES + 3)})
    lat = {f"v{i}": [float(i)] for i in range(TOP_VALUES + 3)}
    out = _distribution(counter, TOP_VALUES + 3, lat)
    other = out[-1]
    folded = sorted(counter)[TOP_VALUES:]
    assert other["value"] == "other" and other["count"] == 3
    assert other["median_us"] == pytest.approx(float(np.median([lat[v][0] for v in folded])))
    assert "median_us" not in _distribution(counter, TOP_VALUES + 3)[0], "tile_factors stay counts only"


def _profile(function, blocks: dict) -> dict:
    return {"kernels": [{"function": function.id, "blocks": {"tuned": [
        {"name": name, "us": us, "share": share} for name, (us, share) in blocks.items()]},
        "stages": {"tuned": {"source": "rdtsc around each stage"}}}]}


def test_stage_costs_come_from_the_profile_or_say_no_measurement(fixture_data):
    from asight_lsp.analysis.stagegraph import NO_MEASUREMENT, stage_costs

    fn = fixture_data.function
    costs = stage_costs(_profile(fn, {"matmul": (120.0, 0.9), "relu": (13.0, 0.1)}), fn)
    assert costs["matmul"] == {"us": 120.0, "share": 0.9, "source": "tuned program, rdtsc around each stage"}
    assert costs["bias_add"] == {"us": None, "share": None, "source": NO_MEASUREMENT}
    none = stage_costs(None, fn)
    assert set(none) == {"matmul", "bias_add", "relu"}
    assert all(c["us"] is None and c["source"] == NO_MEASUREMENT for c in none.values())
    other = {"kernels": [{"function": "another.main", "blocks": {"tuned": [{"name": "matmul", "us": 1.0, "share": 1.0}]}}]}
    assert stage_costs(other, fn)["matmul"]["us"] is None, "another function's profile is not this one's"


def test_stage_graph_payload_takes_costs_from_the_runs_cached_profile(tmp_path):
    import shutil

    from asight_lsp.store.caches import store_profile

    copy = tmp_path / "mbr128"
    shutil.copytree(RUN, copy)
    data = load_run(Run(copy), extract=False)
    before = stage_graph(data)
    blocks = [n for n in before["nodes"] if n["kind"] == "block"]
    assert blocks and all(n["cost"]["us"] is None and "no measurement" in n["cost"]["source"] for n in blocks)
    assert all("cost" not in n for n in before["nodes"] if n["kind"] == "io")
    store_profile(Run(copy), {"key": "k", "profile": _profile(data.function, {"matmul": (100.0, 0.8), "bias_add": (5.0, 0.04),
                                                                           "relu": (20.0, 0.16)})})
    after = {n["id"]: n.get("cost") for n in stage_graph(load_run(Run(copy), extract=False))["nodes"]}
    assert after["matmul"]["us"] == 100.0 and after["relu"]["share"] == 0.16


def test_relax_bindings_get_the_cost_of_the_kernel_call_that_runs_them():
    from asight_lsp.analysis.stagegraph import NO_MEASUREMENT, stage_costs

    outline = build_outline((ROOT / "fixtures" / "relax_cnn.py").read_text())
    fn = next(f for f in outline.functions if f.kind != "prim_func" and f.bindings)
    names = [b.name for b in fn.bindings]
    fused, alone = names[:2], names[2]
    profile = {"relax": {"function": fn.id, "tasks": {"tuned": {"tasks": [
        {"task": "fused_a", "vars": fused, "us": 90.0, "share": 0.9},
        {"task": "b", "vars": [alone], "us": 10.0, "share": 0.1}]}}}}
    costs = stage_costs(profile, fn)
    assert set(costs) == set(names)
    for name in fused:
        assert costs[name]["us"] == 90.0 and costs[name]["kernel"] == "fused_a"
        assert costs[name]["shared_with"] == [n for n in fused if n != name]
    assert costs[alone]["share"] == 0.1 and costs[alone]["shared_with"] == []
    rest = [n for n in names if n not in fused and n != alone]
    assert rest and all(costs[n] == {"us": None, "share": None, "source": NO_MEASUREMENT} for n in rest)
    assert all(c["us"] is None for c in stage_costs(None, fn).values())


def _fixture_copy(tmp_path: Path) -> Path:
    import shutil
    run_dir = tmp_path / "runs" / "mbr128"
    shutil.copytree(RUN, run_dir)
    return run_dir


def test_loop_views_best_is_the_record_the_measurement_chose_as_the_index_and_space_say(tmp_path):
    """mbr128's re-measurement chose trial 7 (159 µs while tuning); trial 36 was the fastest while
    tuning (116 µs).  The loop view's best schedule is trial 7's, the record the index gives hovers
    and the code view (``RunIndex.best_record``) and the search space marks; the CLI says which is which."""
    from dataclasses import replace

    from asight_lsp.analysis.trace_summary import block_headline, summarize_trace
    from asight_lsp.analysis.trace_replay import source_blocks
    from asight_lsp.commands.loops import render
    from asight_lsp.store.index import RunIndex
    from asight_lsp.views.context import best_candidate

    run_dir = _fixture_copy(tmp_path)
    data = load_run(Run(run_dir), extract=False)
    chosen = data.meta.measurement["chosen"]
    fastest = int(data.table.trials[data.table.best_index()])
    assert [c["trial"] for c in chosen] == [7] and fastest == 36
    assert RunIndex(tmp_path, min_interval=0).best_record("mbr128", data.function, chosen)["trial"] == 7
    assert data.table.trials[best_candidate(data)[0]] == 7

    record = next(r for r in data.table.records if r["trial"] == 7)
    want = summarize_trace(record["insts"], record["decisions"], source_blocks(data.function))["blocks"]
    p = loop_view_payload(data)
    for stage in p["stages"]:
        assert stage["best"]["headline"] == block_headline(want[stage["block"]])
        assert stage["best"]["steps"] == want[stage["block"]]["steps"]
        assert (stage["best"]["trial"], stage["best"]["chosen_by"], stage["best"]["fastest_trial"]) == \
            (7, "re-measurement", 36)
    assert p["stages"][0]["best"]["headline"] == "parallel 8 · vector 8 · unroll 16"
    assert "best schedule (trial 7, chosen by re-measurement; trial 36 was the fastest while tuning): " \
           "parallel 8 · vector 8 · unroll 16" in render(p, stage_graph(data))

    # no measurement, or one that chose for another workload only: the fastest while tuning, said so
    for measurement in (None, {**data.meta.measurement, "chosen": [{**chosen[0], "workload": 1}]}):
        other = replace(data, meta=replace(data.meta, measurement=measurement))
        best = loop_view_payload(other)["stages"][0]["best"]
        assert (best["trial"], best["chosen_by"]) == (36, "fastest while tuning") and "fastest_trial" not in best
        record = next(r for r in data.table.records if r["trial"] == 36)
        assert best["headline"] == block_headline(
            summarize_trace(record["insts"], record["decisions"], source_blocks(data.function))["blocks"]["matmul"])
        assert best["headline"] != p["stages"][0]["best"]["headline"]
