"""`asight import` takes a model as exporters write it (issue 38): external data beside the model
(and nowhere else), an opset-9 graph TVM's converters read only in a later form, a per-channel PReLU
slope of rank 1; what TVM cannot import is one line naming the operator and its nodes."""
from __future__ import annotations

import os

import numpy as np
import pytest

from asight_lsp.cli import main as asight

pytestmark = [pytest.mark.tvm]


def _model(nodes, inputs, outputs, inits=(), opset=17):
    from onnx import helper
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs, list(inits)),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8 if opset > 9 else 4
    return model


def _vm(reply: dict):
    """The imported file's deployable build (weights bound), untuned."""
    from asight_lsp.worker.compat import parse_script, relax, tvm
    from asight_lsp.worker.relax_pipeline import deployable
    text = open(reply["script"]).read()
    mod, _ = deployable(parse_script(text[text.index("@I.ir_module"):]), "main", reply["weights"])
    return relax.VirtualMachine(tvm.compile(mod, target="llvm"), tvm.cpu()), tvm


def _matmul(tmp_path, location: str | None = None):
    """y = x @ w with w (8x4) saved as external data at ``location`` (relative to the model)."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    w = numpy_helper.from_array(np.arange(32, dtype="float32").reshape(8, 4) / 32, "w")
    model = _model([helper.make_node("MatMul", ["x", "w"], ["y"], name="mm")],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], [w])
    path = tmp_path / "m.onnx"
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=True, location="m.data",
              size_threshold=0)
    if location is not None:         # point the tensor elsewhere, as a hostile or careless file would
        model = onnx.load(path, load_external_data=False)
        for entry in model.graph.initializer[0].external_data:
            if entry.key == "location":
                entry.value = location
        onnx.save(model, path)
    return path


def test_external_data_beside_the_model_is_read(tmp_path, capsys):
    path = _matmul(tmp_path)
    assert asight(["import", str(path), "--no-check"]) == 0, capsys.readouterr().err
    with np.load(tmp_path / "m_relax.weights.npz") as data:
        assert np.array_equal(data[data.files[0]], np.arange(32, dtype="float32").reshape(8, 4) / 32)


@pytest.mark.parametrize("where, words", [("../secret.bin", "climbs out of the folder (..)"),
                                          ("/etc/passwd", "is an absolute path"),
                                          ("link.bin", "is a link to a file outside the folder")])
def test_external_data_outside_the_folder_is_refused(tmp_path, where, words):
    from asight_lsp.worker.model_import import import_model
    folder = tmp_path / "model"
    folder.mkdir()
    path = _matmul(folder, where)
    (tmp_path / "outside.bin").write_bytes(b"\0" * 128)
    os.symlink(tmp_path / "outside.bin", folder / "link.bin")
    with pytest.raises(ValueError) as refused:
        import_model({"model": str(path), "out": str(folder / "m_relax.py")})
    assert words in str(refused.value) and "nothing was read" in str(refused.value) and "\n" not in str(refused.value)
    assert not (folder / "m_relax.py").exists()


def test_an_operator_tvm_cannot_convert_is_one_line_naming_it(tmp_path, capsys):
    import onnx
    from onnx import TensorProto, helper
    nodes = [helper.make_node("Celu", ["x"], ["a"], name="act1"), helper.make_node("Celu", ["a"], ["y"], name="act2")]
    onnx.save(_model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                     [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])]), tmp_path / "c.onnx")
    assert asight(["import", str(tmp_path / "c.onnx")]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "no converter for Celu (nodes act1, act2)" in err, err


def test_a_failed_conversion_names_the_operator_and_its_nodes():
    """TVM printed "Error converting operator <Op>" and raised a bare exception: the line names the op
    and the model's nodes of that type, with TVM's reason."""
    from onnx import TensorProto, helper
    from asight_lsp.worker.onnx_prepare import failure_line
    model = _model([helper.make_node("Slice", ["x"], ["y"], name="cut", starts=[0], ends=[1])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], opset=9)
    line = failure_line(model, "Error converting operator Slice, with inputs: [x]\n",
                        TypeError("Cannot cast <class 'NoneType'> to list of Expr\nmore"))
    assert "failed on operator Slice (node cut): Cannot cast <class 'NoneType'> to list of Expr;" in line
    assert "\n" not in line


def test_opset9_forms_tvm_reads_only_later_are_upgraded(tmp_path):
    """Slice with starts/ends attributes and Upsample with a scales input (opset 9): TVM's converters
    read Slice's inputs and Upsample's attribute only; the model is upgraded by ONNX's version
    converter and computes as onnxruntime does."""
    import onnx
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper
    from asight_lsp.worker.model_import import import_model
    nodes = [helper.make_node("Constant", [], ["sc"], value=numpy_helper.from_array(np.array([1, 1, 2, 2], "float32"))),
             helper.make_node("Upsample", ["x", "sc"], ["u"], mode="nearest"),
             helper.make_node("Slice", ["u"], ["y"], starts=[1], ends=[3], axes=[1])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 3, 3])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 6, 6])], opset=9)
    onnx.save(model, tmp_path / "old.onnx")
    reply = import_model({"model": str(tmp_path / "old.onnx"), "out": str(tmp_path / "old_relax.py")})
    vm, tvm = _vm(reply)
    x = np.random.default_rng(0).standard_normal((1, 4, 3, 3)).astype("float32")
    want = onnxruntime.InferenceSession(str(tmp_path / "old.onnx")).run(None, {"x": x})[0]
    np.testing.assert_allclose(vm["main"](tvm.runtime.tensor(x)).numpy(), want)


def test_a_per_channel_prelu_slope_of_rank_one_builds_and_computes(tmp_path):
    """Slope (C,) on NCHW: TVM imported it as prelu(axis=3) and its build failed with a bare
    AssertionError; it is applied per channel."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    from asight_lsp.worker.model_import import import_model
    slope = np.array([0.1, 0.2, 0.3, 0.4], "float32")
    model = _model([helper.make_node("PRelu", ["x", "s"], ["y"])],
                   [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 3, 5])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 3, 5])],
                   [numpy_helper.from_array(slope, "s")])
    onnx.save(model, tmp_path / "p.onnx")
    vm, tvm = _vm(import_model({"model": str(tmp_path / "p.onnx"), "out": str(tmp_path / "p_relax.py")}))
    x = np.random.default_rng(0).standard_normal((1, 4, 3, 5)).astype("float32")
    want = np.where(x < 0, x * slope.reshape(4, 1, 1), x)
    np.testing.assert_allclose(vm["main"](tvm.runtime.tensor(x)).numpy(), want, rtol=1e-6)


def test_constants_in_their_opset12_attribute_forms_import(tmp_path):
    """``Constant`` with ``value_float`` / ``value_ints`` (tf2onnx writes them): TVM's converter read
    only ``value`` and failed with "no value in Constant"."""
    import onnx
    from onnx import TensorProto, helper
    from asight_lsp.worker.model_import import import_model
    nodes = [helper.make_node("Constant", [], ["half"], value_float=0.5),
             helper.make_node("Constant", [], ["shape"], value_ints=[4, 2]),
             helper.make_node("Mul", ["x", "half"], ["m"]), helper.make_node("Reshape", ["m", "shape"], ["y"])]
    model = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4])],
                   [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 2])])
    onnx.save(model, tmp_path / "c.onnx")
    vm, tvm = _vm(import_model({"model": str(tmp_path / "c.onnx"), "out": str(tmp_path / "c_relax.py")}))
    x = np.arange(8, dtype="float32").reshape(2, 4)
    np.testing.assert_allclose(vm["main"](tvm.runtime.tensor(x)).numpy(), (x * 0.5).reshape(4, 2))


def test_without_onnxruntime_the_check_says_so(monkeypatch):
    """No onnxruntime in the worker's Python: nothing is built or compared, and the line says why."""
    from asight_lsp.views.outputs import verdict
    from asight_lsp.worker import import_check

    def missing():
        raise ValueError("onnxruntime is not installed")
    monkeypatch.setattr(import_check, "onnxruntime_module", missing)
    result = import_check.check_import({"onnx": "never read"})
    assert verdict(result) == (True, f"outputs: not compared ({import_check.NOT_INSTALLED})")
    assert "pip install onnxruntime" in verdict(result)[1]
