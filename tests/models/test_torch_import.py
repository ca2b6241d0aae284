"""Issue 43: `asight import model.pt2` on what `torch.export` makes of ordinary models (built in code,
fixtures/models/torch_build.py): a BatchNorm CNN and a BERT layer whose output is a pytree class the
worker never imported load in the sandboxed worker, check clean and compute like PyTorch; a program
that cannot be loaded or imported fails in one line; a dynamic dimension gets its `--shape`; the
PyTorch path tunes and exports a small model."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="PyTorch is not installed (pip install -e '.[test]' pins torch==2.13.0)")

from asight_lsp.cli import main as asight  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "fixtures" / "models"))
torch_build = pytest.importorskip("torch_build")

pytestmark = [pytest.mark.tvm]


@pytest.fixture(scope="module")
def sandboxed():
    """One sandboxed worker for the module's imports (each CLI import would start its own)."""
    from asight_lsp.engine.client import WorkerClient
    with WorkerClient(default_timeout=600) as worker:
        yield worker


def _import(sandboxed, pt2: Path, shapes: dict | None = None) -> dict:
    from asight_lsp.services.model_import import import_exported
    return import_exported(str(pt2), str(pt2.with_name(pt2.stem + "_relax.py")), shapes or {}, worker=sandboxed)


def _checks_clean(script: Path, capsys) -> None:
    assert asight(["check", str(script)]) == 0
    assert "no problems" in capsys.readouterr().out


def test_a_batchnorm_cnn_imports_and_computes_like_pytorch(tmp_path, sandboxed, capsys):
    """BatchNorm's running statistics are buffers: they end up in the weights file, not as metadata."""
    module = torch_build.seeded(torch_build.ResidualBlock(channels=4), seed=1)
    torch_build.export_pt2(module, (torch.randn(1, 3, 8, 8),), tmp_path / "block.pt2")
    reply = _import(sandboxed, tmp_path / "block.pt2")
    assert reply["check"]["check"]["ok"] is True, reply["check"]
    text = Path(reply["script"]).read_text()
    assert "metadata[" not in text
    _checks_clean(Path(reply["script"]), capsys)
    weights = np.load(reply["weights"])
    stats = {module.bn.running_mean.numpy().tobytes(), module.bn.running_var.numpy().tobytes()}
    assert stats <= {weights[n].tobytes() for n in weights.files}


def test_a_bert_layer_returning_a_pytree_class_imports(tmp_path, sandboxed, capsys):
    """The output class is registered in this process, never in the worker's (transformers' BERT
    failed "We ran into an error when deserializing the saved file" there); its position and token-type
    ids are buffers."""
    module = torch_build.seeded(torch_build.TinyBert(vocab=50, dim=16, heads=2, ffn=32, layers=1, max_len=16))
    ids = torch.randint(0, 50, (1, 8), generator=torch.Generator().manual_seed(0))
    torch_build.export_pt2(module, (ids,), tmp_path / "bert.pt2")
    reply = _import(sandboxed, tmp_path / "bert.pt2")
    assert reply["inputs"] == [{"name": "input_ids", "shape": [1, 8], "dtype": "int64"}]
    check = reply["check"]["check"]
    assert check["ok"] is True and len(check["buffers"]) == 2, check     # last_hidden_state, pooler_output
    _checks_clean(Path(reply["script"]), capsys)


def test_a_cumsum_of_a_mask_sums_in_int64_as_pytorch_does(tmp_path, sandboxed):
    """`transformers` 5's GPT-2 and Llama build their causal mask with ``(diff != 1).cumsum(-1)``: TVM's
    translator kept the sum bool and the module did not compile."""
    class Mask(torch.nn.Module):
        def forward(self, ids):
            return (ids != 1).cumsum(-1) * 2
    torch_build.export_pt2(Mask(), (torch.randint(0, 3, (1, 8)),), tmp_path / "mask.pt2")
    reply = _import(sandboxed, tmp_path / "mask.pt2")
    assert reply["check"]["check"]["ok"] is True, reply["check"]
    assert 'R.cumsum(' in Path(reply["script"]).read_text() and 'dtype="int64", exclusive' in Path(reply["script"]).read_text()


def test_a_program_that_cannot_be_loaded_or_imported_fails_in_one_line(tmp_path, sandboxed, capsys):
    from asight_lsp.errors import WorkerError
    (tmp_path / "junk.pt2").write_bytes(b"PK\x03\x04 not a zip")
    assert asight(["import", str(tmp_path / "junk.pt2")]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "is not a saved torch.export program" in err, err

    class Det(torch.nn.Module):
        def forward(self, x):
            return torch.linalg.det(x)
    torch_build.export_pt2(Det(), (torch.randn(2, 3, 3),), tmp_path / "det.pt2")
    with pytest.raises(WorkerError) as refused:
        _import(sandboxed, tmp_path / "det.pt2")
    assert "\n" not in str(refused.value) and "Unsupported function types ['_linalg_det.default']" in str(refused.value)
    assert not list(tmp_path.glob("*_relax*"))


def test_a_failure_inside_the_translator_names_its_node():
    """TVM's translator raises without saying which node it was converting: the frame's ``node`` does."""
    from asight_lsp.worker.torch_import import failing_node

    class Node:
        op, target, name = "call_function", "aten.scatter_reduce.two", "scatter_reduce_3"

    def convert(node):
        raise KeyError("reduce")
    with pytest.raises(KeyError) as raised:
        convert(Node())
    assert failing_node(raised.value).name == "scatter_reduce_3"


def test_a_dynamic_dimension_gets_the_shape_to_give(tmp_path, sandboxed, capsys):
    module = torch_build.seeded(torch_build.ResidualBlock(channels=4))
    batch = torch.export.Dim("batch", min=1, max=8)
    torch_build.export_pt2(module, (torch.randn(2, 3, 8, 8),), tmp_path / "dyn.pt2", dynamic_shapes={"x": {0: batch}})
    assert asight(["import", str(tmp_path / "dyn.pt2")]) == 0
    out = capsys.readouterr().out
    assert "not compared (the inputs have dynamic dimensions" in out
    assert "has symbolic dimensions" in out and "--shape x=1,3,8,8" in out, out
    reply = _import(sandboxed, tmp_path / "dyn.pt2", {"x": [3, 3, 8, 8]})
    assert reply["inputs"][0]["shape"] == [3, 3, 8, 8] and reply["check"]["check"]["ok"] is True
    from asight_lsp.errors import WorkerError
    with pytest.raises(WorkerError) as refused:       # the CLI exits 2 on a UsageError
        _import(sandboxed, tmp_path / "dyn.pt2", {"x": [9, 3, 8, 8]})
    assert refused.value.error_type == "UsageError" and "exported for sizes 1..8, not 9" in str(refused.value)


@pytest.mark.slow
def test_the_pytorch_path_tunes_and_exports_a_small_model(tmp_path):
    """conv -> BatchNorm -> ReLU on 8x8 (three kernels), 4 trials, the library written and checked
    (not timed: --no-measure; the export's timing is tested on the ONNX path)."""
    module = torch_build.seeded(torch.nn.Sequential(torch_build.conv_bn(3, 4, 3), torch.nn.ReLU()), seed=2)
    torch_build.export_pt2(module, (torch.randn(1, 3, 8, 8),), tmp_path / "m.pt2")

    def cli(*args):
        done = subprocess.run([sys.executable, "-m", "asight_lsp", *args], cwd=tmp_path, capture_output=True,
                              text=True, timeout=900)
        assert done.returncode == 0, done.stderr
        return done.stdout
    assert "outputs match PyTorch 2.13" in cli("import", "m.pt2")
    cli("tune", "m_relax.py", "--trials", "4", "--seed", "0", "--no-profile")
    reply = json.loads(cli("export", "m_relax.py", "-o", "m.so", "--json", "--tuned", "--no-measure"))
    assert (tmp_path / "m.so").is_file() and reply["check"]["ok"], reply
    applied = reply["applied"]          # each kernel from a record, or its default kept because it re-measured faster
    assert not applied["missing"] and set(applied["from_records"]) | set(applied["default_kept"]), applied
