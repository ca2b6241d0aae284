"""asight.tune's options through the real stdio server: the GPU counters budget (the
``countersBudgetSeconds`` option or the command's ``countersBudget``: the tuning job is asked for
counters and, on this CPU-only machine, records why it has none, docs/gpu.md), and the time budget
(the ``tuneMinutes`` option or the command's ``minutes``: the time alone bounds the session where it
is set, docs/tuning.md)."""
from __future__ import annotations

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from asight_lsp import protocol as P
from asight_lsp.store.runs import Run
from tests.lsp.conftest import TUNING_CONFIG, copy_fixture, initialize, open_doc, wait_for, watch_runs

pytestmark = [pytest.mark.tvm, pytest.mark.slow]


@pytest_lsp.fixture(config=TUNING_CONFIG)
async def client(lsp_client: LanguageClient):
    watch_runs(lsp_client)
    yield
    await lsp_client.shutdown_session()


async def test_the_option_asks_the_tuning_job_for_counters_and_the_run_says_why_none(client: LanguageClient, workspace):
    await initialize(client, "vscode", workspace, {"disabledFeatures": ["tvmDiagnostics"], "countersBudgetSeconds": 15})
    uri = open_doc(client, copy_fixture("matmul64.py", workspace))
    with pytest.raises(Exception, match="'countersBudget' must be a finite number of seconds"):
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command=P.CMD_TUNE, arguments=[{"uri": uri, "function": "matmul64", "trials": 2, "countersBudget": -1}]))
    started = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=P.CMD_TUNE, arguments=[{"uri": uri, "function": "matmul64", "trials": 2}]))
    await wait_for(lambda: [u for u in client.run_updates if u["event"] == "finished"], timeout=300)
    meta = Run(workspace / ".asight" / "runs" / started["run"]["id"]).load()
    assert meta.state == "done" and meta.extra["counters_request"] == {"budget_s": 15.0}
    assert meta.extra["counters"]["text"] == ("not collected: counters are Nsight Compute's: the run's target is "
                                              "llvm, not a CUDA GPU; the contour stays the model (MetaSchedule features)")


async def test_the_time_budget_setting_replaces_the_trial_setting(client: LanguageClient, workspace):
    await initialize(client, "vscode", workspace, {"disabledFeatures": ["tvmDiagnostics"], "tuneMinutes": 0.05,
                                                  "trials": 2})
    uri = open_doc(client, copy_fixture("matmul64.py", workspace))
    with pytest.raises(Exception, match="'minutes': must be more than 0"):
        await client.workspace_execute_command_async(types.ExecuteCommandParams(
            command=P.CMD_TUNE, arguments=[{"uri": uri, "function": "matmul64", "minutes": -1}]))
    started = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=P.CMD_TUNE, arguments=[{"uri": uri, "function": "matmul64"}]))
    assert "budget) in run" in started["message"] and "trials ·" in started["message"]
    await wait_for(lambda: [u for u in client.run_updates if u["event"] == "finished"], timeout=300)
    meta = Run(workspace / ".asight" / "runs" / started["run"]["id"]).load()
    assert meta.state == "done" and meta.extra["time_budget"]["minutes"] == 0.05
    assert meta.extra["time_budget"]["trials"] is False and meta.extra["tuning"]["deadline_hit"] is True
    assert meta.trials_done > 2          # the trial setting (2) did not bound it: the time did
