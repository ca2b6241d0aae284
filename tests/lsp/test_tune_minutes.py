"""asight.tune with a time budget (the ``tuneMinutes`` option or the command's ``minutes``) through the real
stdio server: the time alone bounds the session where it is set, and a bad value is refused in one line."""
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
