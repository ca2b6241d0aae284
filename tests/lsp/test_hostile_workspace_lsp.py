"""Issue 40 through the real stdio server: a hostile workspace (a tower of constants, unfoldable
arithmetic, a records file of one long blank line, run folders whose run.json is megabytes of ``[],``)
freezes nothing; another file's hover is answered while it is read, and the hostile file gets warnings
at its lines instead of internal errors."""
from __future__ import annotations

import asyncio
import time

import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from asight_lsp import protocol as P
from tests.lsp.conftest import CONFIG, copy_fixture, ident, initialize, install_run, open_doc, request, wait_for

HOSTILE = '''A = 10 ** 64
B = A ** 64
C = B ** 64
D = C ** 64
X = 1e300 ** 2
Y = 0 ** -1
Z = 0x''' + "f" * 4000 + '''
from tvm.script import tirx as T

@T.prim_func
def h(A: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.sblock("b"):
            A[i] = T.float32(0)
'''


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()


def hostile_store(workspace, victim) -> None:
    """The victim's run with a records file of one 1 MiB blank line, beside 6 refused run folders."""
    run = install_run(workspace, victim, "mbr128")
    records = run / "database_tuning_record.json"
    records.write_bytes(records.read_bytes() + b" " * (1 << 20) + b"\n")
    for i in range(6):
        folder = workspace / ".asight" / "runs" / f"h-20260101-00000{i}-beef"
        folder.mkdir()
        (folder / "run.json").write_bytes(b"[" + b"[]," * (1 << 18) + b"[]]")


async def test_a_hostile_workspace_freezes_nothing(client, workspace):
    await initialize(client, "vscode", workspace, {"disabledFeatures": ["tvmDiagnostics"]})
    victim = copy_fixture("matmul_bias_relu.py", workspace)
    hostile_store(workspace, victim)
    victim_uri = open_doc(client, victim)
    assert await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=ident(victim_uri)))
    hostile = workspace / "hostile.py"
    hostile.write_text(HOSTILE)
    hostile_uri = open_doc(client, hostile)
    started = time.perf_counter()
    hostile_requests = asyncio.gather(
        client.text_document_code_lens_async(types.CodeLensParams(text_document=ident(hostile_uri))),
        client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=ident(hostile_uri))),
        client.text_document_inlay_hint_async(types.InlayHintParams(
            text_document=ident(hostile_uri), range=types.Range(types.Position(0, 0), types.Position(20, 0)))))
    hover = await asyncio.wait_for(client.text_document_hover_async(types.HoverParams(
        text_document=ident(victim_uri), position=types.Position(line=16, character=24))), 10)
    hovered = time.perf_counter() - started
    lenses, symbols, _hints = await asyncio.wait_for(hostile_requests, 30)
    assert hover is not None and hovered < 10
    assert [s.name for s in symbols] == ["h"] and lenses
    warnings = await wait_for(lambda: [(d.range.start.line, d.message) for d in client.diagnostics.get(hostile_uri, [])
                                       if d.severity == types.DiagnosticSeverity.Warning], 30)
    assert [line for line, _ in warnings] == [1, 4, 5, 6]
    assert "too large to analyse" in warnings[0][1] and not any("internal error" in m for _, m in warnings)
    runs = await request(client, P.REQ_RUNS, {"uri": victim_uri})
    assert [r["id"] for r in runs["runs"]] == ["mbr128"]                   # the victim's run, still read
    assert "**block `matmul`**" in hover.contents.value     # with the run, or said to be still read
    assert "mbr128" in hover.contents.value or "still being read" in hover.contents.value


async def test_a_shipped_run_is_marked_until_it_is_the_users_own(client, workspace):
    """A run folder of the workspace this user did not make here is marked shipped in ``asight/runs`` and
    the lens's tooltip; once the user's own run exists (made by RunStore.create), it is not."""
    from asight_lsp.store.owner import mark_own
    await initialize(client, "vscode", workspace, {"disabledFeatures": ["tvmDiagnostics"]})
    victim = copy_fixture("matmul_bias_relu.py", workspace)
    run = install_run(workspace, victim, "mbr128", shipped=True)
    uri = open_doc(client, victim)
    runs = await request(client, P.REQ_RUNS, {"uri": uri})
    assert [(r["id"], r.get("shipped")) for r in runs["runs"]] == [("mbr128", True)]
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(text_document=ident(uri)))
    assert any((lens.command.tooltip or "").startswith("Shipped run") and lens.command.title.startswith("shipped · ")
               for lens in lenses if lens.command)
    mark_own(run)          # as if this user had made it here: the index sees the folder change
    deadline = time.monotonic() + 15
    while (await request(client, P.REQ_RUNS, {"uri": uri}))["runs"][0].get("shipped"):
        assert time.monotonic() < deadline, "the run stayed shipped"
        await asyncio.sleep(0.1)
