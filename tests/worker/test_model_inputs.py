"""Clear refusals before or at the start of a model's tuning (found by an outside tester):
a symbolic input dimension, a typo in the ablation switch."""
from __future__ import annotations

from pathlib import Path

import pytest

from asight_lsp.cli import main as asight

pytestmark = [pytest.mark.tvm]

SYMBOLIC = '''from tvm.script import ir as I, relax as R, tirx as T

@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor(("n", 3), dtype="float32")) -> R.Tensor(("n", 3), dtype="float32"):
        with R.dataflow():
            y = R.nn.relu(x)
            R.output(y)
        return y
'''


def test_a_symbolic_input_is_named_with_the_fix(tmp_path: Path, capsys):
    script = tmp_path / "sym.py"
    script.write_text(SYMBOLIC)
    assert asight(["tune", str(script), "--trials", "4", "--work-dir", str(tmp_path / "store")]) != 0
    err = capsys.readouterr().err
    assert "input 'x' has a symbolic shape (n, 3); tuning needs static shapes: re-import with --shape x=" in err
    assert "DisallowDynamicLoop" not in err


def test_a_lever_typo_is_refused_before_a_run_is_made(tmp_path: Path, capsys, monkeypatch):
    script = tmp_path / "m.py"
    script.write_text(SYMBOLIC.replace('("n", 3)', "(2, 3)"))
    monkeypatch.setenv("ASIGHT_LEVERS_OFF", "layuot")
    assert asight(["tune", str(script), "--trials", "4", "--work-dir", str(tmp_path / "store")]) != 0
    assert "unknown lever(s) layuot; known: twins, budget, default, layout" in capsys.readouterr().err
    assert not list((tmp_path / "store").glob("runs/*"))          # nothing half-made for export to trip on


def test_what_a_models_call_returns_is_read_from_its_function():
    """The load snippet says what the call gives back (a two-output model returns a tuple: model probe)."""
    from asight_lsp.worker.compat import parse_script
    from asight_lsp.worker.model_import import tensor_outputs
    two = parse_script('''@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((4, 10), dtype="float32")):
        return (x, R.argmax(x, axis=1))
''', aliases={"I": "I", "R": "R"})
    assert tensor_outputs(two["main"]) == [{"shape": [4, 10], "dtype": "float32"}, {"shape": [4], "dtype": "int64"}]
    one = parse_script(SYMBOLIC.split("\n", 1)[1], aliases={"I": "I", "R": "R", "T": "T"})
    assert tensor_outputs(one["main"]) == [{"shape": ["n", 3], "dtype": "float32"}]
