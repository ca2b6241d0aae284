"""A model with a Dropout node is tuned and exported (model probe round 5): TVM's ConvertLayout fails
on dropout's tuple ("Expected nested to match tuple"), so any such model (an MLP, a transformer
imported from ONNX) could not be tuned or viewed; ``relax_pipeline.inference_dropout`` first
replaces it by what TVM lowers it to."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytestmark = [pytest.mark.tvm, pytest.mark.slow]

MODEL = '''from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 16), dtype="float32"), w: R.Tensor((16, 32), dtype="float32")) -> R.Tensor((4, 32), dtype="float32"):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            lv: R.Tensor((4, 32), dtype="float32") = R.matmul(x, w, out_dtype=None)
            lv1: R.Tuple(R.Tensor((4, 32), dtype="float32"), R.Tensor((4, 32), dtype="float32")) = R.nn.dropout(lv, rate=0.5)
            lv2: R.Tensor((4, 32), dtype="float32") = lv1[0]
            gv: R.Tensor((4, 32), dtype="float32") = R.nn.relu(lv2)
            R.output(gv)
        return gv
'''


def asight(*args, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asight_lsp", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=900, env={**os.environ, "ASIGHT_HOME": str(cwd / "home")})


def test_a_model_with_dropout_is_tuned_and_exported(tmp_path):
    source = tmp_path / "mlp_relax.py"
    source.write_text(MODEL)
    np.savez(tmp_path / "mlp_relax.weights.npz", w=np.random.default_rng(0).standard_normal((16, 32)).astype("float32"))
    tuned = asight("tune", str(source), "--trials", "6", cwd=tmp_path)
    assert tuned.returncode == 0 and "nested" not in tuned.stderr, tuned.stdout + tuned.stderr
    exported = asight("export", str(source), "-o", str(tmp_path / "mlp.so"), "--json", "--allow-untuned",
                      cwd=tmp_path)
    reply = json.loads(exported.stdout)
    assert reply["status"] == "written" and reply["check"]["ok"], exported.stderr
