"""Workspace trust and bad requests: clear LSP errors, never a crashed server."""
from __future__ import annotations

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from asight_lsp import protocol as P
from tests.lsp.conftest import CONFIG, FIXTURES, copy_fixture, initialize, install_run, open_doc, request, uri_of

OPTIONS = {"disabledFeatures": ["tvmDiagnostics"]}


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


async def command(client, name, *arguments):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(command=name,
                                                                                   arguments=list(arguments)))


async def expect_error(coro, code: int, text: str = "") -> str:
    with pytest.raises(JsonRpcException) as info:
        await coro
    assert info.value.code == code, info.value
    assert text in info.value.message, info.value.message
    return info.value.message


@pytest.mark.parametrize("kind", ["vscode", "neovim"])
async def test_untrusted_workspace_refuses_tune_and_profile_but_keeps_static_features(client, kind, workspace):
    await initialize(client, kind, workspace, {"trusted": False, **OPTIONS})
    source = copy_fixture("matmul64.py", workspace)
    install_run(workspace, source, "mbr128", fresh=False)
    uri = open_doc(client, source)
    for name in (P.CMD_TUNE, P.CMD_PROFILE):
        message = await expect_error(command(client, name, {"uri": uri, "function": "matmul64"}),
                                     P.ERROR_REQUEST_FAILED, "not trusted")
        assert "Trust the workspace" in message
    assert not (workspace / ".asight" / "runs").exists() or [p.name for p in (workspace / ".asight" / "runs").iterdir()] == ["mbr128"]
    symbols = await client.text_document_document_symbol_async(
        types.DocumentSymbolParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    assert symbols and symbols[0].name == "matmul64"
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(line=8, character=16)))
    assert "**block `C`**" in hover.contents.value
    status = await request(client, P.REQ_STATUS)
    assert status["trusted"] is False
    hot = await request(client, P.REQ_HOTSPOTS, {"uri": uri, "run": "mbr128"})
    assert hot["status"] == P.STATUS_UNAVAILABLE and "untrusted" in hot["message"]


async def test_a_client_that_does_not_say_the_workspace_is_trusted_gets_no_tuning(client, workspace):
    """The server never assumes trust (red team, round 5): a client that sends no ``trusted`` (any editor
    but VS Code, or a hostile one) is refused tuning; the message says how a real editor turns it on."""
    await client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(), root_uri=workspace.as_uri(), initialization_options=dict(OPTIONS)))
    source = copy_fixture("matmul64.py", workspace)
    uri = open_doc(client, source)
    message = await expect_error(command(client, P.CMD_TUNE, {"uri": uri, "function": "matmul64", "trials": 2}),
                                 P.ERROR_REQUEST_FAILED, "not trusted")
    assert "asight serve --trusted" in message and "initializationOptions.trusted" in message
    assert not (workspace / ".asight" / "runs").exists()
    assert (await request(client, P.REQ_STATUS))["trusted"] is False


async def test_an_untrusted_client_cannot_pick_the_interpreter_the_server_runs(client, workspace, tmp_path):
    """``workerPython`` is an executable the server starts: from a client of an untrusted workspace (or a
    workspace setting it forwards) it is ignored, and opening a file runs our own worker (red team 5)."""
    import os
    import sys
    marker = tmp_path / "ran"
    evil = tmp_path / "python.sh"
    evil.write_text(f"#!/bin/sh\ntouch {marker}\nexec {sys.executable} \"$@\"\n")
    evil.chmod(0o755)
    await client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(), root_uri=workspace.as_uri(),
        initialization_options={"workerPython": str(evil), "diagnosticsDelayMs": 0}))
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(   # a project's settings,
        settings={"asight": {"workerPython": str(evil), "trusted": True}}))               # forwarded: no trust
    uri = open_doc(client, copy_fixture("matmul64.py", workspace))
    from tests.lsp.conftest import wait_for
    await wait_for(lambda: uri in client.diagnostics, timeout=120)
    status = await request(client, P.REQ_STATUS)
    assert status["trusted"] is False and status.get("workerPid")
    assert not marker.exists() and os.path.exists(sys.executable)
    message = await expect_error(command(client, P.CMD_TUNE, {"uri": uri, "function": "matmul64", "trials": 2}),
                                 P.ERROR_REQUEST_FAILED, "not trusted")
    assert "Trust the workspace" in message
    client.protocol.notify(P.NOTIFY_WORKSPACE_TRUSTED, {})     # what VS Code sends when the user trusts it
    await wait_for(lambda: True, timeout=1)
    assert (await request(client, P.REQ_STATUS))["trusted"] is True


async def test_cancel_signals_no_process_a_shipped_run_names(client, workspace):
    """A run folder is data a cloned repository can ship: its run.json's pid is never signalled unless
    that process is the run's own tuning job (red team round 7 killed an unrelated process group)."""
    import os
    import subprocess
    import time
    from asight_lsp.store.runs import Run
    await initialize(client, "vscode", workspace, OPTIONS)
    source = copy_fixture("matmul64.py", workspace)
    run_dir = install_run(workspace, source, "mbr128")
    victim = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        meta = Run(run_dir).load()
        meta.state, meta.pid = "running", victim.pid
        Run(run_dir).save(meta)
        await command(client, P.CMD_CANCEL, {"run": "mbr128"})
        time.sleep(2.5)
        assert victim.poll() is None, "the process a shipped run.json named was signalled"
        os.kill(victim.pid, 0)
    finally:
        victim.kill()


async def test_bad_requests_get_errors_and_the_server_lives_on(client, workspace):
    await initialize(client, "vscode", workspace, OPTIONS)
    uri = open_doc(client, FIXTURES / "matmul64.py")
    ghost = uri_of(workspace / "missing.py")
    invalid = -32602
    await expect_error(command(client, "asight.noSuchCommand"), invalid, "not defined")
    await expect_error(command(client, P.CMD_TUNE, "not an object"), invalid, "one argument")
    await expect_error(command(client, P.CMD_TUNE, {"uri": uri}, {"extra": 1}), invalid, "one argument")
    await expect_error(command(client, P.CMD_TUNE, {"function": "matmul64"}), invalid, "missing 'uri'")
    await expect_error(command(client, P.CMD_TUNE, {"uri": uri, "trials": -3}), invalid, "'trials'")
    await expect_error(command(client, P.CMD_TUNE, {"uri": ghost}), invalid, "unknown document")
    await expect_error(command(client, P.CMD_TUNE, {"uri": uri, "function": "nope"}), P.ERROR_REQUEST_FAILED,
                       "no function 'nope'")
    await expect_error(command(client, P.CMD_COMPARE_RUNS, {"runs": ["a"]}), invalid, "two run ids")
    await expect_error(command(client, P.CMD_CANCEL, {"run": 5}), invalid, "run id")
    await expect_error(command(client, P.CMD_APPLY_BEST_SCHEDULE, {"uri": uri, "function": "matmul64", "mode": "x"}),
                       invalid, "'mode'")
    await expect_error(command(client, P.CMD_APPLY_BEST_SCHEDULE, {"uri": uri, "function": "matmul64"}),
                       P.ERROR_REQUEST_FAILED, "no run yet")
    doc = types.TextDocumentIdentifier(uri=uri)
    await expect_error(client.text_document_hover_async(types.HoverParams(
        text_document=doc, position=types.Position(line=500, character=0))), invalid, "outside the document")
    await expect_error(client.text_document_hover_async(types.HoverParams(
        text_document=types.TextDocumentIdentifier(uri=ghost), position=types.Position(line=0, character=0))),
        invalid, "unknown document")
    await expect_error(client.text_document_code_lens_async(types.CodeLensParams(
        text_document=types.TextDocumentIdentifier(uri="untitled:Untitled-1"))), invalid, "unknown document")
    await expect_error(request(client, P.REQ_SEARCH_SPACE, {"run": "no-such-run"}), invalid, "no run")
    await expect_error(request(client, P.REQ_RUNS, {"uri": 42}), invalid, "'uri'")
    await expect_error(request(client, P.REQ_LOOP_VIEW, {"uri": uri, "function": "nope"}), invalid, "no function")
    await expect_error(request(client, "asight/noSuchRequest"), -32601)
    # nothing of that broke the server
    unavailable = await request(client, P.REQ_SEARCH_SPACE, {"uri": uri})
    assert unavailable == {"schema": P.SCHEMA_SEARCH_SPACE, "status": P.STATUS_UNAVAILABLE,
                           "message": unavailable["message"]}
    runs = await request(client, P.REQ_RUNS, {})
    assert runs == {"schema": P.SCHEMA_RUNS, "status": "ok", "runs": []}
    status = await request(client, P.REQ_STATUS)
    assert status["status"] == "running"


async def test_switched_off_features_are_not_advertised(client, workspace):
    result = await client.initialize_session(types.InitializeParams(
        capabilities=types.ClientCapabilities(), initialization_options={"disabledFeatures": ["inlayHint", "hover"]}))
    caps = result.capabilities
    assert caps.hover_provider is None and caps.inlay_hint_provider is None
    assert caps.code_lens_provider is not None and caps.document_symbol_provider
    assert set(caps.execute_command_provider.commands) == set(P.COMMANDS)


KEYS = {
    "newline": 'k")\nimport os; os.system("touch {marker}")\n#',
    # round 9: a "# from tvm" line inside a string, which the insertion then dropped
    "strip": ('k", x=\'\'\'\n# from tvm \'\'\' + """\n\'\'\')\nif __import__("os").system("touch {marker}") and 0:\n'
              '#""", b=1)\n  sch.annotate(block_or_loop=b0, ann_key="k3'),
    "rebind": 'k")\n  sch = T.builder.external_kernel.os\n  sch.system("touch {marker}")\n  #',
}


@pytest.mark.tvm
@pytest.mark.parametrize("payload", sorted(KEYS))
async def test_a_record_that_injects_code_is_never_inserted_into_the_file(client, workspace, payload):
    """Red team round 8: TVM prints a trace's strings unescaped, so a shipped record whose annotation
    key holds a quote and a newline turned "Apply best schedule" into a top-level os.system() in the
    user's file.  The text is checked for a schedule's shape first (analysis/schedule_text)."""
    import json
    await initialize(client, "vscode", workspace, {"trusted": False, **OPTIONS})
    source = copy_fixture("matmul_bias_relu.py", workspace)
    run_dir = install_run(workspace, source, "mbr128")
    records = run_dir / "database_tuning_record.json"
    key = KEYS[payload].replace("{marker}", str(workspace / "MARKER"))
    rows = [json.loads(line) for line in records.read_text().splitlines() if line.strip()]
    for row in rows:
        row[1][0][0].append(["Annotate", ["b0", "\"v\""], [key], []])
    records.write_text("".join(json.dumps(row) + "\n" for row in rows))
    uri = open_doc(client, source)
    message = await expect_error(command(client, P.CMD_APPLY_BEST_SCHEDULE,
                                         {"uri": uri, "function": "MatmulBiasRelu.main", "mode": "trace",
                                          "apply": False}), -32803, "is not inserted")
    assert "a tampered record?" in message and not (workspace / "MARKER").exists()
