"""A model with a Dropout node is tuned and exported (model probe round 5): TVM's ConvertLayout fails
on dropout's tuple ("Expected nested to match tuple"), so any such model (an MLP, a transformer
imported from ONNX) could not be tuned or viewed; ``relax_pipeline.inference_dropout`` first
replaces it by what TVM lowers it to."""
from __future__ import annotations

import json

import pytest

from tests.models.matmul_model import asight, write_model

pytestmark = [pytest.mark.tvm, pytest.mark.slow]

BODY = ['lv1: R.Tuple(R.Tensor((4, 32), dtype="float32"), R.Tensor((4, 32), dtype="float32")) = '
        'R.nn.dropout(lv, rate=0.5)',
        'lv2: R.Tensor((4, 32), dtype="float32") = lv1[0]',
        'gv: R.Tensor((4, 32), dtype="float32") = R.nn.relu(lv2)']


def test_a_model_with_dropout_is_tuned_and_exported(tmp_path):
    source = write_model(tmp_path, "mlp", "(4, 32)", BODY)
    tuned = asight("tune", str(source), "--trials", "6", "--no-profile", cwd=tmp_path)
    assert tuned.returncode == 0 and "nested" not in tuned.stderr, tuned.stdout + tuned.stderr
    exported = asight("export", str(source), "-o", str(tmp_path / "mlp.so"), "--json", "--allow-untuned",
                      cwd=tmp_path)
    reply = json.loads(exported.stdout)
    assert reply["status"] == "written" and reply["check"]["ok"], exported.stderr
