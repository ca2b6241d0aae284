"""The statistics of a measurement record (no TVM): paired bootstrap interval, verdicts, load, texts."""
from __future__ import annotations

import numpy as np
import pytest

from asight_lsp.analysis import measurement as M

from tests.conftest import measured


def _rounds(base: float, tuned: float, n: int, noise: float, seed: int, spikes: tuple = ()):
    rng = np.random.default_rng(seed)
    load = np.ones(n)
    for r in spikes:
        load[r] = 3.0            # a load spike slows both programs of that round
    b = base * load * (1 + noise * rng.standard_normal(n))
    t = tuned * load * (1 + noise * rng.standard_normal(n))
    return b.tolist(), t.tolist()


def test_interval_covers_the_true_ratio_and_narrows_with_rounds():
    covered, widths = 0, {}
    for seed in range(40):
        base, tuned = _rounds(100.0, 25.0, 15, 0.05, seed)
        s = M.paired_speedup(base, tuned, seed=seed)
        covered += s["ci"][0] <= 4.0 <= s["ci"][1]
    assert covered >= 34                    # ~95 % nominal; 40 trials leave room for chance
    for n in (6, 60):
        base, tuned = _rounds(100.0, 25.0, n, 0.05, 1)
        widths[n] = np.diff(M.paired_speedup(base, tuned)["ci"])[0]
    assert widths[60] < widths[6] / 1.8


def test_pairing_keeps_a_load_spike_from_flipping_the_verdict():
    """A spike that hits one round slows untuned and tuned alike: the ratio of medians holds."""
    base, tuned = _rounds(100.0, 80.0, 9, 0.01, 3, spikes=(2, 5, 7))
    s = M.paired_speedup(base, tuned)
    assert s["estimate"] == pytest.approx(1.25, rel=0.05) and M.verdict(s) == M.FASTER


def test_verdicts_and_their_words():
    assert M.verdict({"ci": [1.1, 1.3]}) == M.FASTER and M.verdict({"ci": [0.7, 0.9]}) == M.SLOWER
    assert M.verdict({"ci": [0.95, 1.02]}) == M.SAME
    same = measured(57.0, 56.5, spread=0.05)
    assert same["verdict"] == M.SAME
    assert M.speedup_text(same).startswith("no measurable difference (1.01×, 95% CI")
    assert M.short_speedup(same) == "≈ untuned (no measurable difference)"
    slower = measured(27.0, 57.0)
    assert slower["verdict"] == M.SLOWER and M.short_speedup(slower) == "2.1× slower than untuned"
    assert M.speedup_text(slower).endswith("keep the untuned build")
    faster = measured(2500.0, 61.0)
    assert M.speedup_text(faster).startswith("41× faster (95% CI 4")
    assert M.speedup_text({}) == "no speed-up measured"


def test_load_verdict_and_how_text():
    assert M.load_verdict(0.05, 0.0) == {"busy": False, "reasons": []}
    busy = M.load_verdict(0.9, 0.08)
    assert busy["busy"] and len(busy["reasons"]) == 2 and "0.90 cores" in busy["reasons"][0]
    assert M.load_verdict(None, None)["busy"] is False
    record = measured(100.0, 10.0, busy=True)
    assert record["load"]["busy"] and "busy: other processes used 0.90 cores" in M.how_text(record)
    assert "9 interleaved rounds" in M.how_text(record) and "2 threads" in M.how_text(record)


def test_record_of_a_module_sums_its_functions_per_round():
    raw = {"samples_us": {"untuned a": [10.0, 12.0, 11.0], "untuned b": [5.0, 5.0, 6.0],
                          "tuned a": [1.0, 1.2, 1.1], "untuned c": [1.0, 1.0, 1.0]},
           "calls_per_repeat": {}, "rounds": 3, "load": {}}
    record = M.comparison_record(raw, ["untuned a", "untuned b"], ["tuned a", "untuned b"], "t", "module", 1.0)
    assert record["untuned"]["median_us"] == pytest.approx(17.0)      # median of the per-round sums 15, 17, 17
    assert record["tuned"]["median_us"] == pytest.approx(6.2)           # 6.0, 6.2, 7.1
    assert record["parts"]["tuned a"]["median_us"] == pytest.approx(1.1)
    untuned_only = M.comparison_record(raw, ["untuned a"], [], "t", "function", 1.0)
    assert "tuned" not in untuned_only and "speedup" not in untuned_only


def test_a_record_is_current_only_for_the_records_it_measured():
    record = {**measured(100.0, 10.0), "trials": 16}
    assert M.is_current(record, 16) and not M.is_current(record, 17)
    assert not M.is_current({"error": "boom", "trials": 16}, 16) and not M.is_current(None, 0)


def test_only_a_busier_measurement_is_kept_beside_the_shown_one():
    from asight_lsp.analysis.measurement import load_of, noisier_than
    quiet, busy, busier = load_of({"other_cores": 0.05}), load_of({"other_cores": 0.9}), load_of({"other_cores": 1.4})
    assert quiet["busy"] is False and busy["busy"] is True
    assert "the shown one was quiet" in noisier_than(busy, quiet)
    assert noisier_than(quiet, busy) is None                  # a quieter one always replaces
    assert "1.40 cores" in noisier_than(busier, busy)         # busy vs busy: only by more than a quarter core
    assert noisier_than(load_of({"other_cores": 1.0}), busy) is None
    assert noisier_than(busy, None) is None and noisier_than(busy, {}) is None   # unknown load never blocks


def test_a_busy_measurement_whose_calls_wobble_more_is_kept_aside():
    from asight_lsp.analysis.measurement import load_of, noisier_than, spread_of
    calm = [{"us": 4.0, "p25_us": 3.9, "p75_us": 4.1}, {"us": 2.0, "p25_us": 1.9, "p75_us": 2.1}]
    wild = [{"us": 259.0, "p25_us": 3.0, "p75_us": 300.0}, {"us": 2.0, "p25_us": 1.0, "p75_us": 3.0}]
    assert abs(spread_of(calm) - 0.075) < 1e-9 and spread_of([{"us": 1.0}]) is None
    shown = {**load_of({"other_cores": 1.63}), "spread": spread_of(calm)}
    new = {**load_of({"other_cores": 1.74}), "spread": spread_of(wild)}     # busy alike, within a quarter core
    assert "per-call times spread" in noisier_than(new, shown)
    assert noisier_than({**new, "spread": 0.06}, shown) is None
