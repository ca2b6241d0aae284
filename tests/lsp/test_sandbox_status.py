"""``asight/status`` over stdio reports the TVM worker's OS sandbox (docs/sandbox.md)."""
from __future__ import annotations

import asyncio

import pytest
import pytest_lsp
from pytest_lsp import LanguageClient

from asight_lsp import protocol as P
from tests.lsp.conftest import CONFIG, copy_fixture, initialize, open_doc, request, wait_for

pytestmark = pytest.mark.tvm


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


async def test_status_reports_the_workers_sandbox(client: LanguageClient, workspace):
    await initialize(client, "vscode", workspace, {"diagnosticsDelayMs": 50})
    before = await request(client, P.REQ_STATUS)
    assert before["workerSandbox"] is None          # no worker yet: nothing to report
    uri = open_doc(client, copy_fixture("matmul.py", workspace))
    await wait_for(lambda: uri in client.diagnostics, timeout=120)
    for _ in range(600):     # the worker's first frame (its sandbox) comes before its first answer
        status = await request(client, P.REQ_STATUS)
        if status["workerSandbox"] is not None:
            break
        await asyncio.sleep(0.1)
    assert status["workerPid"] is not None and status["tvmImported"] is False
    assert status["workerSandbox"]["active"] is True and status["workerSandbox"]["mechanism"].startswith("seccomp")
