"""A model in the real stdio server: the file `asight import` printed, tuned through asight.tune;
when tuning ends the server times each kernel call by itself, and every call of a repeated kernel
gets an inlay hint on its own binding; a binding's hover names its call."""
from __future__ import annotations

import subprocess
import sys

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from asight_lsp import protocol as P
from tests.lsp.conftest import ROOT, TUNING_CONFIG, ident, initialize, open_doc, plain, wait_for, watch_runs

pytestmark = [pytest.mark.tvm, pytest.mark.slow]
OPTIONS = {"disabledFeatures": ["tvmDiagnostics"]}


@pytest_lsp.fixture(config=TUNING_CONFIG)
async def client(lsp_client: LanguageClient):
    watch_runs(lsp_client)
    yield
    await lsp_client.shutdown_session()


def _import(workspace) -> str:
    sys.path.insert(0, str(ROOT / "fixtures" / "models"))
    import onnx_build
    onnx_build.save(onnx_build.tiny_resnet(seed=1, size=8, width=4), workspace / "tiny.onnx")
    subprocess.run([sys.executable, "-m", "asight_lsp", "import", str(workspace / "tiny.onnx")], check=True,
                   capture_output=True, timeout=300)
    return workspace / "tiny_relax.py"


async def _hints(client, uri):
    return await client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=ident(uri), range=types.Range(start=types.Position(line=0, character=0),
                                                    end=types.Position(line=200, character=0))))


async def test_tuned_model_gets_hints_per_call_without_a_profile_click(client: LanguageClient, workspace):
    await initialize(client, "vscode", workspace, OPTIONS)
    script = _import(workspace)
    uri = open_doc(client, script)
    started = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=P.CMD_TUNE, arguments=[{"uri": uri, "function": "Module", "trials": 9}]))
    assert started["status"] == "started", started
    await wait_for(lambda: [u for u in client.run_updates if u["event"] == "finished"], timeout=600)
    hints: list = []

    async def have_hints():
        hints[:] = [h for h in await _hints(client, uri) if "fused_conv2d" in str(h.label)]
        return len(hints) >= 4
    for _ in range(240):            # the server profiles each kernel call by itself after tuning
        if await have_hints():
            break
        import asyncio
        await asyncio.sleep(1)
    labels = [str(h.label) for h in hints]
    assert len(labels) >= 4, labels
    repeated = [lab for lab in labels if lab.endswith("#1")]
    assert repeated, labels                                   # the second call of a repeated kernel ...
    lines = [h.position.line for h in hints]
    assert len(lines) == len(set(lines))                      # ... on its own line
    second = next(h for h in hints if str(h.label).endswith("#1"))
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=ident(uri), position=types.Position(line=second.position.line, character=14)))
    assert "#1` (tuned build)" in hover.contents.value and "- tensor: float32[" in hover.contents.value
    model = plain(await client.protocol.send_request_async(P.REQ_MODEL, {"uri": uri, "function": "Module.main"}))
    assert model["schema"] == P.SCHEMA_MODEL and model["status"] == "ok", model
    assert any(len(t["calls"]) == 2 for t in model["tasks"])
