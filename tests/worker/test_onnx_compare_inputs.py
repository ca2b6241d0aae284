"""``--compare-onnx``'s inputs (model probe round 5): a dynamic batch takes the tuned model's size (the
user imported with --shape), booleans are booleans and integers valid indices (0 or 1); a round is
sized from blocks of calls, not from one call."""
from __future__ import annotations

import time

import numpy as np
import pytest

pytestmark = pytest.mark.tvm


def _session(tmp_path, inputs):
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto as TP, helper as h
    specs = [h.make_tensor_value_info(name, kind, shape) for name, kind, shape in inputs]
    out = h.make_tensor_value_info("y", TP.FLOAT, None)
    nodes = [h.make_node("Identity", [inputs[0][0]], ["y"])]
    model = h.make_model(h.make_graph(nodes, "g", specs, [out]), opset_imports=[h.make_opsetid("", 17)])
    onnx.save(model, tmp_path / "m.onnx")
    return ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])


def test_inputs_follow_the_tuned_model_where_the_onnx_file_is_symbolic(tmp_path):
    from onnx import TensorProto as TP
    from asight_lsp.worker.onnx_compare import _inputs
    session = _session(tmp_path, [("x", TP.FLOAT, ["N", 3]), ("mask", TP.BOOL, ["N"]), ("ids", TP.INT64, [4])])
    model = [{"shape": [2, 3]}, {"shape": [2]}, {"shape": [4]}]
    (_, x), (_, mask), (_, ids) = _inputs(session, model, 0)
    assert x.shape == (2, 3) and x.dtype == np.float32
    assert mask.dtype == np.bool_ and mask.shape == (2,)
    assert ids.dtype == np.int64 and set(np.unique(ids)) <= {0, 1}
    with pytest.raises(ValueError, match="does not fix them"):
        _inputs(session, [{"shape": ["n", 3]}, {"shape": [2]}, {"shape": [4]}], 0)


def test_a_call_is_timed_in_blocks():
    from asight_lsp.worker.onnx_compare import per_call_s
    calls = []

    def first_slow():
        calls.append(1)
        time.sleep(0.03 if len(calls) <= 2 else 0.0005)
    assert per_call_s(first_slow, least_s=0.05) < 0.005
