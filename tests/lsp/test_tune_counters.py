"""asight.tune with the GPU counters budget (the ``countersBudgetSeconds`` option or the command's
``countersBudget``) through the real stdio server: the tuning job is asked for counters and, on this
CPU-only machine, records why it has none (docs/gpu.md)."""
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
