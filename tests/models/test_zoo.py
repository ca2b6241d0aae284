"""Every model of the corpus (fixtures/models/zoo.py: ResNet-50, MobileNetV2, DenseNet, Inception,
ShuffleNet, SqueezeNet, VGG, BERT, GPT-2), small, in both exporter styles (opset 9 with weights in
the graph and initializers listed as inputs; opset 17 with plain initializers): it imports, the
file checks clean (what `asight check` runs, in this process), and the import's own check says it
computes as onnxruntime does."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from asight_lsp.cli import main as asight

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "fixtures" / "models"))
zoo = pytest.importorskip("zoo")
pytest.importorskip("onnxruntime")

pytestmark = [pytest.mark.tvm]

MODELS = [(name, style) for name in zoo.CORPUS for style in zoo.STYLES]


@pytest.mark.parametrize("name, style", MODELS)
def test_corpus_model_imports_checks_and_computes_like_onnxruntime(tmp_path, name, style):
    from asight_lsp.views.outputs import verdict
    from zoo_check import import_and_check
    model = tmp_path / f"{name}_{style}.onnx"
    zoo.save(zoo.CORPUS[name]("small", style), model)
    reply, checked = import_and_check(model, tmp_path / f"{name}_{style}_relax.py")
    ok, line = verdict(checked)
    assert ok and line.startswith("outputs match onnxruntime"), line
    text = Path(reply["script"]).read_text()
    assert reply["params"] > 0 and "metadata[" not in text.split("@I.ir_module")[1]
    assert _check(text, reply["script"]) == []


def _check(text: str, path: str) -> list:
    """`asight check`'s findings, in this process: the safety gate's and the worker's (parse and
    well-formedness) problems of every unit."""
    from asight_lsp.engine import wire
    from asight_lsp.tvmscript.outline import build_outline
    from asight_lsp.worker.parse import check
    outline = build_outline(text, path)
    gate = [p for unit in outline.units for p in unit.problems]
    return gate + check(wire.check_params(text, outline, outline.units))["problems"]


def test_the_import_command_checks_the_outputs(tmp_path, capsys):
    """`asight import` prints the check's line; the file checks clean (`asight check`)."""
    zoo.save(zoo.vgg_block("small", "old"), tmp_path / "vgg.onnx")
    assert asight(["import", str(tmp_path / "vgg.onnx")]) == 0, capsys.readouterr().err
    out = capsys.readouterr().out
    assert "outputs match onnxruntime" in out and "tolerance rtol 0.001" in out, out
    assert asight(["check", str(tmp_path / "vgg_relax.py")]) == 0 and "no problems" in capsys.readouterr().out
