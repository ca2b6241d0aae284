"""Issue 43, the TVM-free side of `asight import model.pt2`: the weights come back from the sandboxed
worker as raw bytes in parts and are rebuilt without a pickle; the check is one line."""
from __future__ import annotations

import numpy as np

from asight_lsp.commands.import_model import check_line
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


def test_the_check_is_one_line_whatever_its_outcome():
    ok = {"ok": True, "rtol": 1e-3, "atol": 1e-4, "buffers": [{"max_abs_err": 2e-7}, {"max_abs_err": 1e-6}]}
    assert check_line(ok).startswith("outputs vs PyTorch match on one seeded input (2 output(s), max abs error 1e-06")
    assert "DIFFER" in check_line({**ok, "ok": False})
    assert check_line({"ok": False, "why": "output shapes differ"}) == "outputs vs PyTorch DIFFER: output shapes differ"
    skipped = check_line({"ok": None, "skipped": "the inputs have dynamic dimensions"})
    assert skipped == "outputs vs PyTorch not compared: the inputs have dynamic dimensions"
    assert all("\n" not in line for line in (check_line(ok), skipped))
