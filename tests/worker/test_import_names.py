"""ONNX names that cannot be Python parameters (a keyword, a leading digit, one of the file's aliases)
are renamed at import and said (model probe round 5: "the safety gate refuses (0 units)")."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = pytest.mark.tvm
ROOT = Path(__file__).resolve().parents[2]


def test_keyword_digit_and_alias_names_are_renamed(tmp_path):
    import onnx
    from onnx import TensorProto as TP, helper as h, numpy_helper
    w = numpy_helper.from_array(np.ones((4, 3, 1, 1), np.float32), "0_weight")
    b = numpy_helper.from_array(np.zeros(4, np.float32), "R")
    graph = h.make_graph([h.make_node("Conv", ["in", "0_weight", "R"], ["is"])], "g",
                         [h.make_tensor_value_info("in", TP.FLOAT, [1, 3, 8, 8])],
                         [h.make_tensor_value_info("is", TP.FLOAT, [1, 4, 8, 8])], [w, b])
    onnx.save(h.make_model(graph, opset_imports=[h.make_opsetid("", 17)]), tmp_path / "m.onnx")
    done = subprocess.run([sys.executable, "-m", "asight_lsp", "import", "m.onnx", "--json"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    reply = json.loads(done.stdout)
    assert reply["renamed"] == {"in": "in_", "0_weight": "t_0_weight", "R": "R_"}
    text = (tmp_path / "m_relax.py").read_text()
    assert "def main(in_: R.Tensor" in text and "t_0_weight: R.Tensor" in text
    checked = subprocess.run([sys.executable, "-m", "asight_lsp", "check", "m_relax.py"], cwd=tmp_path,
                             capture_output=True, text=True, timeout=300)
    assert checked.returncode == 0 and "no problems" in checked.stdout, checked.stdout + checked.stderr
    assert sorted(np.load(tmp_path / "m_relax.weights.npz").files) == ["R_", "t_0_weight"]
