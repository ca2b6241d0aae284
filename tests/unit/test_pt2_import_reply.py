"""Issue 43, the TVM-free side of `asight import model.pt2`: the weights come back from the sandboxed
worker as raw bytes in parts and are rebuilt without a pickle; the check's line is the one every
output check has (views/outputs.verdict, tests/unit/test_output_verdict.py)."""
from __future__ import annotations

import numpy as np

from asight_lsp.views.outputs import verdict
from asight_lsp.services.model_import import Weights


def test_weights_are_rebuilt_from_parts_in_order():
    gathered = Weights()
    big = np.arange(12, dtype=np.float32).reshape(3, 4)
    raw = big.tobytes()
    for start in (0, 20, 40):                   # one weight (48 bytes) in three parts, as send_weight splits a large one
        gathered({"type": "weight", "name": "w", "dtype": big.dtype.str, "shape": [3, 4], "data": raw[start:start + 20]})
    gathered({"type": "weight", "name": "b", "dtype": "|b1", "shape": [2], "data": np.array([True, False]).tobytes()})
    gathered({"type": "status", "message": "not a weight"})
    arrays = gathered.arrays()
    np.testing.assert_array_equal(arrays["w"], big)
    assert arrays["b"].dtype == bool and list(arrays["b"]) == [True, False]


def test_the_pytorch_check_is_worded_as_every_output_check():
    check = {"ok": True, "rtol": 1e-3, "atol": 1e-4, "buffers": [{"max_abs_err": 2e-7, "max_rel_err": 1e-6},
                                                                  {"max_abs_err": 1e-6, "max_rel_err": 2e-6}]}
    ok, line = verdict({"check": check, "against": "PyTorch 2.13.0"})
    assert ok and line.startswith("outputs match PyTorch 2.13.0 on one seeded input (2 outputs; max abs diff 1e-06")
    ok, line = verdict({"skipped": "the inputs have dynamic dimensions (give --shape to check)"})
    assert ok and line == "outputs: not compared (the inputs have dynamic dimensions (give --shape to check))"
