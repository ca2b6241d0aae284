"""The contour's model is checked against the measured latencies before it is drawn (pure, no TVM)."""
import numpy as np
import pytest

from asight_lsp.analysis import contour as ct


def _latencies(n=40, seed=0):
    return np.exp(np.random.default_rng(seed).uniform(3, 7, n))


def test_spearman_matches_a_direct_rank_computation_with_ties():
    a = np.array([1, 2, 2, 3, 5, 4, np.nan, 7.0])
    b = np.array([2, 1, 3, 4, 6, 5, 0, 9.0])
    rho, n, p = ct.spearman(a, b)
    ra, rb = ct.ranks(a[:-2].tolist() + [7.0]), ct.ranks(np.delete(b, 6))
    assert n == 7
    assert rho == pytest.approx(np.corrcoef(ra, rb)[0, 1])
    assert 0 < p < 1
    assert ct.ranks(np.array([3.0, 1.0, 3.0])).tolist() == [2.5, 1.0, 2.5]


def test_a_model_that_ranks_like_the_measurement_agrees_and_is_drawn():
    lat = _latencies()
    gains = {"memory": -np.log2(lat) + np.random.default_rng(1).normal(0, 0.1, len(lat))}
    a = ct.agreement(gains, lat, best=int(np.argmin(lat)))
    assert a["verdict"] == "agrees" and a["draw"] == "full"
    assert a["rho"] > 0.9 and a["n"] == 40


def test_a_model_that_ranks_backwards_disagrees_and_is_not_drawn():
    lat = _latencies()
    a = ct.agreement({"memory": np.log2(lat)}, lat, best=int(np.argmin(lat)))
    assert a["verdict"] == "disagrees" and a["draw"] == "none"
    assert "not drawn" in a["message"]


def test_a_model_claiming_far_more_than_the_measured_speedup_is_a_contradiction():
    # the LayerNorm: the model said 12-14x at the best candidate, the measurement 0.5x
    lat = _latencies()
    gains = {"memory": 3.7 - 0.01 * np.argsort(np.argsort(lat))}
    best = int(np.argmin(lat))
    a = ct.agreement(gains, lat, best=best, measured_log2=-1.0)
    assert a["rho"] > 0.9                         # ranks fine, but the magnitude is contradicted
    assert a["contradiction"] and a["draw"] == "none"
    assert "contradicts" in a["message"] and "0.50×" in a["message"]


def test_weak_and_untested_models_are_drawn_faded():
    lat = _latencies(n=40, seed=3)
    noise = np.random.default_rng(4).normal(0, 1, 40)
    weak = ct.agreement({"compute": -np.log2(lat) * 0.25 + noise}, lat)
    assert ct.DISAGREE_RHO < weak["rho"] < ct.AGREE_RHO
    assert weak["verdict"] == "weak" and weak["draw"] == "faded"
    few = ct.agreement({"compute": -np.log2(lat[:5])}, lat[:5])
    assert few["verdict"] == "untested" and few["draw"] == "faded"


def test_neighbour_smoothing_averages_adjacent_cells_only():
    z = np.array([0.0, 4.0, 8.0, np.nan])
    out = ct.neighbour_smooth(z, [(0, 1), (1, 2)], np.array([1, 1, 2, 1]))
    assert out[0] == pytest.approx(2.0)
    assert out[1] == pytest.approx((0 + 4 + 16) / 4)
    assert np.isnan(out[3])


@pytest.fixture(scope="module")
def mbr128():
    from pathlib import Path
    from asight_lsp.services.run_data import load_run
    from asight_lsp.store.runs import Run
    return load_run(Run(Path(__file__).resolve().parents[2] / "fixtures" / "runs" / "mbr128"), extract=False)


def test_payload_legend_and_png_say_the_model_is_contradicted(mbr128, tmp_path):
    import dataclasses
    from asight_lsp.views.render import _contour_legend_text, render_search_space
    from asight_lsp.views.searchspace import search_space
    meta = dataclasses.replace(mbr128.meta, measurement={**(mbr128.meta.measurement or {}),
                                                         "speedup": {"estimate": 0.5}})
    payload = search_space(dataclasses.replace(mbr128, meta=meta))
    contour = payload["contour"]
    assert contour["draw"] == "none" and contour["lines"] == []
    assert contour["legend"][0].startswith("⚠ The model contradicts the measurement")
    assert any(line.startswith("memory traffic (ρ = ") for line in contour["legend"])
    text = _contour_legend_text(contour)
    assert text[0].startswith("⚠ The model contradicts") and all(len(t) <= 150 for t in text)
    out = render_search_space(payload, tmp_path / "s.png")
    assert (tmp_path / "s.png").stat().st_size > 20_000 and out.endswith("s.png")


def test_a_task_of_a_multi_task_run_has_no_run_level_speedup_to_compare(mbr128):
    import dataclasses
    from asight_lsp.views.searchspace import search_space
    meta = dataclasses.replace(mbr128.meta, measurement={**(mbr128.meta.measurement or {}),
                                                         "speedup": {"estimate": 0.5}})
    data = dataclasses.replace(mbr128, meta=meta, task="main", tasks=["main", "other"])
    contour = search_space(data)["contour"]
    # the run's speed-up is the whole program's: it is neither drawn per cell nor used to contradict
    assert contour["measured"]["available"] is False
    assert contour["agreement"]["measured_log2"] is None and not contour["agreement"]["contradiction"]
    assert contour["agreement"]["verdict"] == "agrees" and contour["lines"]
