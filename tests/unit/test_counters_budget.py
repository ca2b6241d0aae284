"""One check of a counters budget (``services/counters.budget_seconds``) for ``asight counters --budget-s``,
``asight tune --counters-budget`` and the editor's ``countersBudget`` / ``countersBudgetSeconds`` (probe 4, F4:
nan, inf and 1e400 were 'internal error', -inf dumped a command line, -5 was not checked while the editor refused -1)."""
from __future__ import annotations

from pathlib import Path

import pytest
from pygls.exceptions import JsonRpcInvalidParams

from asight_lsp.cli import main
from asight_lsp.server.commands import _counters_budget
from asight_lsp.server.options import ServerOptions
from asight_lsp.services import counters

ROOT = Path(__file__).resolve().parents[2]
BAD = ["nan", "inf", "-inf", "1e400", "-5", "-0.5"]


@pytest.fixture
def nothing_starts(monkeypatch):
    def started(*args, **kwargs):
        raise AssertionError("a process was started")
    monkeypatch.setattr(counters.subprocess, "run", started)


@pytest.mark.parametrize("budget", BAD)
def test_a_bad_counters_budget_is_one_line_before_anything_starts(budget, capsys, tmp_path, nothing_starts):
    code = main(["counters", f"--budget-s={budget}", "--work-dir", str(tmp_path / ".asight")])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "--budget-s must be a finite number of seconds >= 0" in err and "internal error" not in err
    assert not (tmp_path / ".asight").exists()


@pytest.mark.parametrize("budget", BAD)
def test_tunes_counters_budget_is_refused_the_same_way_and_makes_no_run(budget, capsys, tmp_path):
    store = tmp_path / ".asight"
    code = main(["tune", str(ROOT / "fixtures" / "matmul64.py"), "--trials", "2", f"--counters-budget={budget}",
                 "--work-dir", str(store)])
    err = capsys.readouterr().err
    assert code == 2 and "--counters-budget must be a finite number of seconds >= 0" in err, err
    assert not (store / "runs").exists() or not any((store / "runs").iterdir())


def test_the_editor_takes_what_the_cli_takes():
    assert counters.budget_seconds(0, "--budget-s") == 0.0 and counters.budget_seconds(30, "x") == 30.0
    assert _counters_budget(0, 15.0) is None and _counters_budget(45, None) == 45.0 and _counters_budget(None, 9.0) == 9.0
    for bad in (float("nan"), float("inf"), float("-inf"), -1, "soon", True):
        with pytest.raises(JsonRpcInvalidParams, match="'countersBudget' must be a finite number of seconds >= 0"):
            _counters_budget(bad, None)
        assert ServerOptions(counters_budget_s=30.0).updated({"countersBudgetSeconds": bad}).counters_budget_s == 30.0


def test_a_target_json_object_in_the_settings_or_the_tune_command_is_json_text():
    """Outside probe 6, N4: a Target JSON object was "not valid JSON" in the settings (Python's repr) and
    "internal error: AttributeError: 'dict' object has no attribute 'strip'" in the Tune command."""
    import json
    from asight_lsp import protocol as P
    from asight_lsp.server.options import ServerOptions, target_text
    options = ServerOptions().updated({P.OPT_TARGET: {"kind": "cuda", "arch": "sm_90a"}})
    assert json.loads(options.target) == {"kind": "cuda", "arch": "sm_90a"}
    assert ServerOptions().updated({P.OPT_TARGET: "llvm"}).target == "llvm"
    assert ServerOptions().updated({P.OPT_TARGET: 42}).target is None          # ignored, as other bad types
    assert target_text(["cuda"], "bad") == "bad" and target_text(None, "bad") is None
