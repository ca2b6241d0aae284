"""The tuned model against onnxruntime, interleaved (analysis/versus.py, pure)."""
import pytest

from asight_lsp.analysis import versus


def test_ratio_is_the_median_of_per_round_ratios_with_an_interval():
    tvm = [22.0, 24.0, 23.0, 40.0, 22.5]          # one loaded round hits both sides
    ort = [8.0, 8.5, 8.2, 14.0, 8.1]
    out = versus.ratio_interval(tvm, ort)
    ratios = sorted(a / b for a, b in zip(tvm, ort))
    assert out["ratio"] == pytest.approx(ratios[2]) and out["rounds"] == 5
    lo, hi = out["ci95"]
    assert ratios[0] <= lo <= out["ratio"] <= hi <= ratios[-1]
    with pytest.raises(ValueError):
        versus.ratio_interval([1.0], [1.0, 2.0])


def test_verdict_says_who_is_faster_only_when_the_interval_says_so():
    slow = versus.summary("tuned TVM", "onnxruntime", [22.0, 23.0, 22.5, 22.8], [8.0, 8.1, 8.2, 8.05])
    assert slow["verdict"].startswith("tuned TVM is slower: 0.36x onnxruntime's speed")
    assert slow["tuned TVM"]["median_us"] == pytest.approx(22.65)
    fast = versus.summary("tuned TVM", "onnxruntime", [5.0, 5.1, 5.2], [8.0, 8.1, 8.2])
    assert fast["verdict"].startswith("tuned TVM is faster: 1.59x")
    same = versus.summary("a", "b", [1.0, 1.2, 0.9, 1.1], [1.05, 1.0, 1.0, 1.1])
    assert same["verdict"].startswith("no clear difference")
