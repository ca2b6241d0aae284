"""publishDiagnostics through the real TVM worker: appear, move, clear; hostile files are never run."""
from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest
import pytest_lsp
from pytest_lsp import LanguageClient

from asight_lsp import protocol as P
from tests.lsp.conftest import CONFIG, FIXTURES, ROOT, initialize, messages, open_doc, replace_all, request, wait_for

pytestmark = pytest.mark.tvm


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


def starts(client, uri) -> list[tuple[int, int, str]]:
    return [(d.range.start.line, d.range.start.character, d.source) for d in client.diagnostics.get(uri, [])]


async def test_tvm_diagnostic_appears_moves_and_clears(client: LanguageClient, workspace):
    await initialize(client, "vscode", workspace, {"diagnosticsDelayMs": 200})
    broken = (FIXTURES / "broken" / "not_well_formed.py").read_text()
    path = workspace / "nwf.py"
    path.write_text(broken)
    uri = open_doc(client, path)
    await wait_for(lambda: any("not well-formed" in m for m in messages(client, uri)))
    assert starts(client, uri) == [(12, 12, "asight/well-formed")]
    # two lines added above: the diagnostic follows at once (same unit text, cached result)
    replace_all(client, uri, "# one\n# two\n" + broken, 2)
    await wait_for(lambda: starts(client, uri) == [(14, 12, "asight/well-formed")], timeout=10)
    # fixed: cleared
    replace_all(client, uri, broken.replace("B[i] = B[vi]", "B[vi] = B[vi]"), 3)
    await wait_for(lambda: uri in client.diagnostics and not client.diagnostics[uri], timeout=60)
    # a parse error typed into the clean file comes back after the debounce
    replace_all(client, uri, broken.replace("B[i] = B[vi]", "B[vi] = B[vi]").replace("range(16)", "T.grd(16)", 1), 4)
    await wait_for(lambda: any("grd" in m for m in messages(client, uri)))
    assert starts(client, uri)[0][:2] == (5, 13)


async def test_syntax_errors_are_static_and_half_typed_units_are_not_sent_to_tvm(client: LanguageClient, workspace):
    await initialize(client, "neovim", workspace)
    uri = open_doc(client, FIXTURES / "broken" / "one_of_two_broken.py")
    await wait_for(lambda: messages(client, uri))
    assert [(line, src) for line, _, src in starts(client, uri)] == [(16, "asight/python")]
    assert "never closed" in messages(client, uri)[0]
    # plain Python (no TVMScript) with a syntax error: not ours to report
    other = workspace / "plain.py"
    other.write_text("def f(:\n    pass\n")
    plain_uri = open_doc(client, other)
    await wait_for(lambda: plain_uri in client.diagnostics, timeout=10)
    assert list(client.diagnostics[plain_uri]) == []


@pytest.mark.parametrize("name", ["decorator_call.py", "dunder_import.py", "namespace_escape.py"])
async def test_hostile_file_gets_a_diagnostic_and_is_never_executed(client: LanguageClient, workspace, name):
    await initialize(client, "vscode", workspace)
    uri = open_doc(client, FIXTURES / "hostile" / name)
    await wait_for(lambda: messages(client, uri))
    assert all(d.source == "asight/safety" for d in client.diagnostics[uri])
    assert "not evaluated" in messages(client, uri)[0] or "refus" in messages(client, uri)[0].lower()
    status = await request(client, P.REQ_STATUS)
    assert status["tvmImported"] is False
    for where in (ROOT, workspace, Path.cwd()):
        assert not (where / "ASIGHT_PWNED").exists()


async def test_a_killed_worker_is_restarted(client: LanguageClient, workspace):
    await initialize(client, "vscode", workspace, {"diagnosticsDelayMs": 100})
    text = (FIXTURES / "broken" / "wrong_arity.py").read_text()  # an error only TVM finds
    path = workspace / "bad.py"
    path.write_text(text)
    uri = open_doc(client, path)
    await wait_for(lambda: any("(2 vs. 1)" in m for m in messages(client, uri)))
    status = await request(client, P.REQ_STATUS)
    os.kill(status["workerPid"], signal.SIGKILL)
    # a new unit text needs the worker again: it comes back and answers
    replace_all(client, uri, text.replace("[i])", "[i, j])"), 2)
    await wait_for(lambda: uri in client.diagnostics and not client.diagnostics[uri], timeout=60)
    replace_all(client, uri, text.replace('"SS", [i])', '"SSS", [i, j])'), 3)
    await wait_for(lambda: any("(3 vs. 2)" in m for m in messages(client, uri)), timeout=60)
    status = await request(client, P.REQ_STATUS)
    assert status["workerRestarts"] >= 1 and status["workerPid"] is not None
