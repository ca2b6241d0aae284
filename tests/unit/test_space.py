"""Honeycomb layout, contour and the searchSpace payload, on synthetic data with known structure
and on the recorded run ``fixtures/runs/mbr128``."""
from __future__ import annotations

import json
from pathlib import Path

import networkx as nx
import numpy as np
import pytest
from sklearn.neighbors import NearestNeighbors

from asight_lsp.analysis import contour as ct
from asight_lsp.analysis import honeycomb as hc
from asight_lsp.analysis.candidates import build_candidates
from asight_lsp.analysis.synthetic import SOURCE, _row, synthetic_run
from asight_lsp.store.runs import Run, RunMeta
from asight_lsp.tvmscript.outline import build_outline
from asight_lsp.views.registry import missing_keys
from asight_lsp.views.context import RunData
from asight_lsp.services.run_data import load_run
from asight_lsp.views.searchspace import luminance, search_space

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "fixtures" / "runs" / "mbr128"


def blobs(n: int, k: int = 5, dims: int = 30, seed: int = 0):
    """n points in k Gaussian blobs on a 2-D plane embedded in ``dims`` dimensions, standardised."""
    rng = np.random.default_rng(seed)
    centres = rng.normal(0, 6, (k, 2))
    labels = rng.integers(0, k, n)
    X = (centres[labels] + rng.normal(0, 1, (n, 2))) @ rng.normal(0, 1, (2, dims)) + rng.normal(0, 0.05, (n, dims))
    return (X - X.mean(0)) / X.std(0), labels


def hex_dist(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    dq, dr = a[:, 0] - b[:, 0], a[:, 1] - b[:, 1]
    return (np.abs(dq) + np.abs(dr) + np.abs(dq + dr)) // 2


@pytest.fixture(scope="module", params=[300, 2000])
def layout_case(request):
    X, _ = blobs(request.param, seed=request.param)
    return X, hc.layout(X, seed=0)


def test_every_candidate_in_exactly_one_cell(layout_case):
    X, lay = layout_case
    m = len(lay.cells_qr)
    assert lay.cell_of.shape == (len(X),) and lay.cell_of.min() >= 0 and lay.cell_of.max() < m
    counts = np.bincount(lay.cell_of, minlength=m)
    assert counts.sum() == len(X) and (counts > 0).all()  # no empty cell
    assert (counts <= lay.capacity).all()
    assert len({tuple(q) for q in lay.cells_qr}) == m  # one cell per hex


def test_each_cluster_is_one_connected_region(layout_case):
    _, lay = layout_case
    g = nx.Graph()
    g.add_nodes_from(range(len(lay.cells_qr)))
    g.add_edges_from(hc.adjacent_pairs(lay.cells_qr))
    for c in range(lay.k):
        cells = np.flatnonzero(lay.cells_cluster == c)
        assert len(cells) and nx.is_connected(g.subgraph(cells))
    # a point's cell belongs to the point's own cluster
    assert (lay.cells_cluster[lay.cell_of] == lay.labels).all()


def test_near_neighbours_share_or_neighbour_a_cell(layout_case):
    X, lay = layout_case
    nearest = NearestNeighbors(n_neighbors=2).fit(X).kneighbors(X, return_distance=False)[:, 1]
    d = hex_dist(lay.cells_qr[lay.cell_of], lay.cells_qr[lay.cell_of[nearest]])
    assert (d <= 1).mean() >= 0.9


def test_same_seed_same_layout():
    X, _ = blobs(500, seed=7)
    a, b = hc.layout(X, seed=3), hc.layout(X, seed=3)
    assert np.array_equal(a.cell_of, b.cell_of) and np.array_equal(a.cells_qr, b.cells_qr)
    assert a.clustering == b.clustering


def test_k_is_chosen_by_silhouette_and_stated():
    X, labels = blobs(600, k=3, seed=11)
    lay = hc.layout(X, seed=0)
    scores = {int(k): v for k, v in lay.clustering["scores"].items()}
    assert lay.k == max(scores, key=scores.get)
    assert "silhouette" in lay.clustering["criterion"]


def test_cells_grow_from_each_centre_outward():
    """The first cell of a cluster holds its point nearest to the centre (growth starts there)."""
    X, _ = blobs(400, seed=5)
    lay = hc.layout(X, seed=0)
    for c in range(lay.k):
        members = np.flatnonzero(lay.labels == c)
        first = members[np.argmin(np.linalg.norm(lay.xy[members] - lay.centres[c], axis=1))]
        seed_cell = np.flatnonzero(lay.cells_cluster == c)[0]
        assert lay.cell_of[first] == seed_cell


def test_hex_round_trip():
    qr = np.array([[0, 0], [3, -2], [-5, 7]])
    assert np.array_equal(hc.to_axial(hc.hex_centres(qr, 0.7), 0.7), qr)


# --------------------------------------------------------------------------- contour


def test_linear_field_contours_point_uphill():
    xs, ys = np.meshgrid(np.arange(-6, 7), np.arange(-6, 7))
    qr = np.stack([xs.ravel(), ys.ravel()], axis=1)
    xy = hc.hex_centres(qr, 1.0)
    z = xy[:, 0] * 0.5  # increases to the right
    out = ct.contour_lines(xy, z, 1.0)
    assert out["levels"] and out["lines"]
    for line in out["lines"]:
        pts = np.asarray(line["points"])
        assert np.allclose(pts[:, 0] * 0.5, line["level"], atol=0.15)  # a vertical line at z = level
        for _, _, dx, dy in line["ticks"]:
            assert dx > 0.9  # uphill = to the right
        # higher z on the left of the direction of travel: a vertical line with z rising to +x runs downward
        assert pts[-1, 1] < pts[0, 1]


def test_gains_from_feature_rows():
    fn = build_outline(SOURCE).functions[0]
    records, cache = synthetic_run(30, seed=1)
    table = build_candidates(records, cache, None, fn)
    idx = np.arange(len(table))
    gains, cats = ct.candidate_gains(table, idx, {"mcpu": "znver3"})
    assert [c["id"] for c in cats] == ["memory", "compute", "parallelism"]
    assert all(c["source"].startswith("model:") for c in cats)
    for i in range(len(table)):
        tiles = [d.value for d in table.decisions[i] if d.inst == "SamplePerfectTile"]
        vec, par = tiles[1][-1], tiles[0][0] * tiles[1][0]
        # the synthetic stores all do the same float ops, so flop weighting is a plain mean over stores;
        # a cache-write candidate's C_global store is vectorised but not parallel
        threads = np.mean([min(max(par, 1), 2) if s == "C" else 1 for s in table.stores[i]])
        assert gains["compute"][i] == pytest.approx(np.log2(min(max(vec, 1), 8)), abs=0.02)
        assert gains["parallelism"][i] == pytest.approx(np.log2(threads), abs=0.02)
    # memory: baseline lines / candidate lines, computed by hand for one candidate
    rows = table.rows[0]
    lines = ct.fl.unslog(rows[:, ct.fl.BUFFER_LINES]).sum()
    base = ct.fl.unslog(table.baseline_rows[0][:, ct.fl.BUFFER_LINES]).sum()
    assert gains["memory"][0] == pytest.approx(np.log2(base / lines), rel=1e-4)


def test_gain_caps_and_flop_weighting():
    table = build_candidates(*synthetic_run(1, seed=0), None, build_outline(SOURCE).functions[0])
    fast = _row(64, 64, 1000.0, 0, 5)  # vector 64 > 8 lanes, parallel 64 > 2 cores
    table.rows[0] = fast[None]
    gains, _ = ct.candidate_gains(table, np.array([0]), {"mcpu": "skylake-avx512"})
    assert gains["compute"][0] == pytest.approx(4.0, abs=0.01)  # 16 lanes on AVX-512
    assert gains["parallelism"][0] == pytest.approx(1.0, abs=0.01)  # 2 cores
    assert ct.simd_lanes({"mcpu": "znver3"}) == 8 and ct.simd_lanes(None) == 4
    _, cats = ct.candidate_gains(table, np.array([0]), {"kind": "cuda"}, gpu=True)    # the caller says GPU
    sources = " ".join(c["source"] for c in cats)
    assert "threads launched" in sources and "cores" not in sources


def test_cell_means_and_winner():
    values = np.array([1.0, 3.0, np.nan, 5.0])
    assert np.allclose(ct.cell_means(values, np.array([0, 0, 1, 2]), 4)[[0, 2]], [2.0, 5.0])
    z, win = ct.z_and_winner({"a": np.array([1.0, np.nan]), "b": np.array([0.5, np.nan])})
    assert z[0] == 1.0 and win == ["a", None]


# --------------------------------------------------------------------------- payload


@pytest.fixture(scope="module")
def synthetic_payload():
    fn = build_outline(SOURCE).functions[0]
    records, cache = synthetic_run(1500, seed=2, failed=0.02)
    meta = RunMeta(id="syn", file="mm.py", function="mm", baseline_us=60000.0,
                   target={"kind": "llvm", "mcpu": "znver3", "num-cores": 2})
    table = build_candidates(records, cache, meta, fn)
    return table, search_space(RunData(Run("/nonexistent"), meta, table, fn), seed=0)


def test_payload_schema_and_json(synthetic_payload):
    _, p = synthetic_payload
    assert p["schema"] == "asight.searchSpace/1" and p["status"] == "ok" and missing_keys(p) == []
    json.dumps(p, allow_nan=False)


def test_payload_cells_cover_candidates_once(synthetic_payload):
    table, p = synthetic_payload
    trials = [t for c in p["cells"] for t in c["trials"]]
    assert sorted(trials) == sorted(table.trials[table.valid].tolist())
    assert sorted(p["failed_trials"]) == sorted(table.trials[~table.valid].tolist())
    assert sum(c["count"] for c in p["cells"]) == len(trials)


def test_cell_category_is_the_majority(synthetic_payload):
    _, p = synthetic_payload
    cand = p["candidates"]
    for cell in p["cells"]:
        cats = [cand["category"][k] for k, c in enumerate(cand["cell"]) if c == cell["id"]]
        counts = np.bincount(cats)
        assert counts[cell["category"]] == counts.max()
        assert cell["category_share"] == pytest.approx(counts.max() / len(cats), abs=1e-3)


def test_boundaries_between_different_categories(synthetic_payload):
    _, p = synthetic_payload
    qr = np.array([[c["q"], c["r"]] for c in p["cells"]])
    expected = sum(p["cells"][a]["category"] != p["cells"][b]["category"] for a, b in hc.adjacent_pairs(qr))
    assert len(p["boundaries"]) == expected > 0


def test_colours_darker_for_slower_cells(synthetic_payload):
    _, p = synthetic_payload
    cells = sorted(p["cells"], key=lambda c: c["mean_latency_us"])
    lum = [luminance(c["color"]) for c in cells]
    assert all(a >= b - 1e-9 for a, b in zip(lum, lum[1:]))
    assert lum[0] > lum[-1]
    assert len(p["color_scale"]["stops"]) == 3


def test_best_candidate_marked(synthetic_payload):
    table, p = synthetic_payload
    best = int(table.trials[np.nanargmin(table.latency_us)])
    assert p["best"]["trial"] == best
    cell = p["cells"][p["best"]["cell"]]
    assert best in cell["trials"] and (cell["x"], cell["y"]) == (p["best"]["x"], p["best"]["y"])


def test_contour_values_are_cell_means(synthetic_payload):
    table, p = synthetic_payload
    idx = np.flatnonzero(table.valid)
    gains, _ = ct.candidate_gains(table, idx, {"mcpu": "znver3"})
    cell_of = np.array(p["candidates"]["cell"])
    for cell in p["cells"][:25]:
        mine = cell_of == cell["id"]
        for key, value in cell["gains"].items():
            assert value == pytest.approx(np.nanmean(gains[key][mine]), abs=1e-3)
        assert cell["z"] == pytest.approx(max(cell["gains"].values()), abs=1e-6)
        assert cell["gains"][cell["winner"]] == cell["z"]
    contour = p["contour"]
    zs = [c["z"] for c in p["cells"]]
    assert contour["lines"] and all(min(zs) < lv < max(zs) for lv in contour["levels"])
    assert {c["id"] for c in contour["categories"]} == {"memory", "compute", "parallelism"}
    assert contour["measured"]["available"] and "measured" in contour["measured"]["source"]


def test_fixture_run_payload_and_png(tmp_path):
    from asight_lsp.views.render import render_search_space
    data = load_run(Run(RUN), extract=False)
    p = search_space(data)
    assert p["status"] == "ok" and missing_keys(p) == []
    assert p["features"]["source"].startswith("MetaSchedule PerStoreFeature")
    assert len(p["categories"]) == 3 and sum(c["count"] for c in p["cells"]) == 40
    # the best marker is the trial the run's measurement chose by re-measurement (trial 7), with its
    # in-tuning latency like every cell (its runner figure was 159 µs: the noisiest of the top five)
    assert p["best"]["trial"] == 7 and p["best"]["chosen_by"] == "re-measurement"
    assert p["best"]["latency_us"] == pytest.approx(158.963, abs=0.01) and p["best"]["measured_us"] == pytest.approx(34.862)
    out = render_search_space(p, tmp_path / "space.png")
    data = Path(out).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 20_000


def test_without_features_the_layout_uses_decisions():
    fn = build_outline(SOURCE).functions[0]
    records, _ = synthetic_run(120, seed=4)
    table = build_candidates(records, None, None, fn)
    meta = RunMeta(id="x", file="mm.py", function="mm")
    p = search_space(RunData(Run("/nonexistent"), meta, table, fn))
    assert p["status"] == "ok" and p["features"]["source"].startswith("sampled decisions")
    assert p["contour"]["lines"] == [] and "note" in p["contour"]


def test_no_measured_candidate_is_unavailable():
    fn = build_outline(SOURCE).functions[0]
    records, cache = synthetic_run(5, seed=4, failed=1.0)
    table = build_candidates(records, cache, None, fn)
    p = search_space(RunData(Run("/nonexistent"), RunMeta(id="x", file="", function="mm"), table, fn))
    assert p["status"] == "unavailable" and p["message"]
