"""Every hostile payload opened in the real stdio server, with every request and every non-tuning
command on it: no payload ever runs (no marker in the server's cwd, the workspace or the temp dir)."""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import ClientServerConfig, LanguageClient

from asight_lsp import protocol as P
from asight_lsp.tvmscript.outline import build_outline
from tests.lsp.conftest import (FIXTURES, ROOT, ident, initialize, open_doc, request, server_env, wait_for,
                                watch_runs)

pytestmark = [pytest.mark.tvm, pytest.mark.slow]

MARKER = "ASIGHT_PWNED"
HOSTILE = sorted((FIXTURES / "hostile").glob("*.py"))
SERVER_CWD = Path(tempfile.gettempdir()) / f"asight-hostile-cwd-{os.getpid()}"
# the server (and the TVM worker it starts) runs in SERVER_CWD, where `touch ASIGHT_PWNED` would land
CONFIG = ClientServerConfig(server_command=["sh", "-c", f'mkdir -p "{SERVER_CWD}" && cd "{SERVER_CWD}" && '
                                            'exec "$0" -m asight_lsp serve', sys.executable], server_env=server_env())
REQUESTS = [P.REQ_RUNS, P.REQ_HOTSPOTS, P.REQ_SEARCH_SPACE, P.REQ_LOOP_VIEW, P.REQ_STAGE_GRAPH, P.REQ_PRINCIPLES,
            P.REQ_CODE]
COMMANDS = [P.CMD_PROFILE, P.CMD_SHOW_SEARCH_SPACE, P.CMD_SHOW_LOOP_VIEW, P.CMD_SHOW_CODE, P.CMD_APPLY_BEST_SCHEDULE]


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient):
    watch_runs(lsp_client)   # a text_* unit is safe: its Profile succeeds and asks for a lens refresh
    yield
    await lsp_client.shutdown_session()


def markers(*roots: Path) -> list[Path]:
    found = []
    for root in roots:
        found += list(root.rglob(MARKER)) if root != Path(tempfile.gettempdir()) else list(root.glob(MARKER))
    return found


async def answered(coro) -> None:
    """A request's answer, or the error it got: either is fine, silence or a dead server is not."""
    try:
        await coro
    except JsonRpcException:
        pass


async def command(client, name: str, arg: dict) -> None:
    await answered(client.workspace_execute_command_async(types.ExecuteCommandParams(command=name, arguments=[arg])))


async def every_request(client: LanguageClient, uri: str, text: str) -> None:
    doc, lines = ident(uri), text.splitlines()
    whole = types.Range(start=types.Position(line=0, character=0),
                        end=types.Position(line=len(lines), character=0))
    await answered(client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=doc)))
    await answered(client.text_document_inlay_hint_async(types.InlayHintParams(text_document=doc, range=whole)))
    for line, content in enumerate(lines):
        column = max(len(content) - len(content.lstrip()), 0)
        await answered(client.text_document_hover_async(types.HoverParams(
            text_document=doc, position=types.Position(line=line, character=column))))
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=doc, range=whole, context=types.CodeActionContext(diagnostics=[])))
    for action in actions or []:
        if isinstance(action, types.CodeAction):
            await answered(client.code_action_resolve_async(action))
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(text_document=doc))
    for lens in lenses or []:
        if lens.command and lens.command.command != P.CMD_TUNE:
            await command(client, lens.command.command, (lens.command.arguments or [{}])[0])
    for fn in build_outline(text).functions:
        arg = {"uri": uri, "function": fn.id}
        for name in REQUESTS:
            await answered(request(client, name, arg))
        await answered(request(client, P.REQ_CODE_DIFF, {**arg, "a": {"run": "x"}, "b": {"run": "y"}}))
        for name in COMMANDS:
            await command(client, name, arg)


async def test_no_hostile_payload_runs_in_the_language_server(client: LanguageClient, workspace):
    assert not markers(SERVER_CWD, workspace, Path(tempfile.gettempdir()), ROOT)
    await initialize(client, "vscode", workspace, {"diagnosticsDelayMs": 0})
    for path in HOSTILE:
        text = path.read_text()
        target = workspace / path.name
        target.write_text(text)
        uri = open_doc(client, target, text)
        # a text_* payload is a comment for Python: its file checks clean (an empty publication)
        clean = path.name.startswith("text_")
        await wait_for(lambda: client.diagnostics.get(uri) or (clean and uri in client.diagnostics), timeout=120)
        await every_request(client, uri, text)
        client.text_document_did_close(types.DidCloseTextDocumentParams(text_document=ident(uri)))
    status = await request(client, P.REQ_STATUS)
    assert isinstance(status, dict)  # the server still answers after all of it
    assert not markers(SERVER_CWD, workspace, Path(tempfile.gettempdir()), ROOT)
    shutil.rmtree(SERVER_CWD, ignore_errors=True)
