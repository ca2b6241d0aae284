"""``asight/status`` over stdio reports the TVM worker's OS sandbox from the worker's own self-test
(docs/sandbox.md); where the sandbox is not active, the file is checked statically only and a
warning diagnostic says why."""
from __future__ import annotations

import asyncio

import pytest
import pytest_lsp
from pytest_lsp import LanguageClient

from asight_lsp import protocol as P
from lsprotocol import types
from pytest_lsp import ClientServerConfig

from tests.lsp.conftest import CONFIG, SERVER, copy_fixture, ident, initialize, messages, open_doc, request, server_env, wait_for

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
    sandbox = status["workerSandbox"]
    assert sandbox["active"] is True and sandbox["mechanism"].startswith("seccomp")
    assert len(sandbox["selftest"]) >= 30 and all(v.startswith("refused") for v in sandbox["selftest"].values())
    assert {"fork", "execve", "socketpair_dgram", "tkill_parent", "open_tree", "move_mount"} <= set(sandbox["selftest"])
    assert sandbox["layers"]["seccomp"].startswith("allow-list") and "landlock" in sandbox["layers"]


UNAVAILABLE = "cannot load libseccomp (simulated by the test)"


@pytest_lsp.fixture(config=ClientServerConfig(server_command=SERVER,
                                              server_env={**server_env(), "ASIGHT_SANDBOX_UNAVAILABLE": UNAVAILABLE}))
async def unsandboxed(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


async def test_without_a_sandbox_the_file_is_outlined_statically_and_the_user_told_why(unsandboxed: LanguageClient,
                                                                                          workspace):
    client = unsandboxed
    await initialize(client, "vscode", workspace, {"diagnosticsDelayMs": 50})
    uri = open_doc(client, copy_fixture("matmul.py", workspace))
    said = await wait_for(lambda: [m for m in messages(client, uri) if "sandbox is not active" in m], timeout=120)
    assert UNAVAILABLE in said[0] and "TVM does not evaluate this file" in said[0]
    assert [d.severity for d in client.diagnostics[uri]] == [2]          # a warning, nothing else
    status = await request(client, P.REQ_STATUS)
    assert status["workerSandbox"]["active"] is False and status["workerSandbox"]["reason"] == UNAVAILABLE
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=ident(uri)))
    assert symbols                                                        # the outline is still there
