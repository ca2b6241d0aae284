"""The one line an output comparison prints (``views/outputs.verdict``): a match with its largest
differences and the tolerance; a mismatch as a warning naming the first output that differs."""
from __future__ import annotations

from asight_lsp.views.outputs import verdict

CHECK = {"rtol": 1e-3, "atol": 1e-4, "ok": True,
         "buffers": [{"name": "logits", "ok": True, "max_abs_err": 2e-7, "max_rel_err": 3e-6, "mismatched": 0,
                      "elements": 10}]}


def test_a_match_states_the_differences_and_the_tolerance():
    ok, line = verdict({"check": CHECK, "against": "onnxruntime 1.32.0"})
    assert ok and line.startswith("outputs match onnxruntime 1.32.0")
    assert "max abs diff 2e-07" in line and "rtol 0.001, atol 0.0001 x max(1, max|reference|)" in line


def test_a_mismatch_names_the_first_output_that_differs():
    bad = {"name": "probs", "ok": False, "max_abs_err": 0.5, "max_rel_err": 0.9, "mismatched": 3, "elements": 10}
    ok, line = verdict({"check": {**CHECK, "ok": False, "buffers": [CHECK["buffers"][0], bad]}, "against": "onnxruntime"})
    assert not ok and line.startswith("warning: output probs differs from onnxruntime: 3 of 10 values")
    shaped = {**bad, "shape": {"reference": [1, 10], "candidate": [10]}}
    assert "shape [10] instead of [1, 10]" in verdict({"check": {**CHECK, "ok": False, "buffers": [shaped]}})[1]
    counted = {**CHECK, "ok": False, "count": {"reference": 2, "candidate": 1}}
    assert "returns 1 outputs, the reference 2" in verdict({"check": counted})[1]


def test_without_onnxruntime_it_says_so():
    ok, line = verdict({"skipped": "onnxruntime is not installed"})
    assert ok and line == "outputs: not compared (onnxruntime is not installed)"
