"""Design spaces written by the user over the real stdio server: the lens, trust, a real tiny run
with the space (inlay hints and hovers on its sampling calls), and a space that raises."""
from __future__ import annotations

import re

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pytest_lsp import LanguageClient

from asight_lsp import protocol as P
from tests.lsp.conftest import TUNING_CONFIG, copy_fixture, ident, initialize, open_doc, plain, wait_for, watch_runs

pytestmark = [pytest.mark.tvm, pytest.mark.slow]
OPTIONS = {"disabledFeatures": ["tvmDiagnostics"]}


@pytest_lsp.fixture(config=TUNING_CONFIG)
async def client(lsp_client: LanguageClient):
    watch_runs(lsp_client)
    yield
    await lsp_client.shutdown_session()



def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines()) if needle in line)


async def lenses(client, uri):
    return await client.text_document_code_lens_async(types.CodeLensParams(text_document=ident(uri)))


async def tune_space(client, uri, **extra):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=P.CMD_TUNE, arguments=[{"uri": uri, "space": "schedule_matmul", **extra}]))


async def test_untrusted_workspace_refuses_to_run_a_space(client: LanguageClient, workspace):
    await initialize(client, "vscode", workspace, {"trusted": False, **OPTIONS})
    source = copy_fixture("matmul_space.py", workspace)
    uri = open_doc(client, source)
    text = source.read_text()
    found = [lens for lens in await lenses(client, uri) if lens.command.title == "▶ Tune with this space"]
    assert len(found) == 1 and found[0].range.start.line == line_of(text, "def schedule_matmul")
    assert plain(found[0].command.arguments) == [{"uri": uri, "space": "schedule_matmul"}]
    with pytest.raises(JsonRpcException) as err:
        await tune_space(client, uri, trials=8)
    assert err.value.code == P.ERROR_REQUEST_FAILED and "not trusted" in err.value.message
    assert "design space" in err.value.message
    assert not (workspace / ".asight" / "runs").exists() or not list((workspace / ".asight" / "runs").iterdir())
    # opening the file ran nothing and reported nothing wrong with it
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=ident(uri)))
    assert [s.name for s in symbols] == ["matmul64"]


async def test_space_run_gives_hints_and_hovers(client: LanguageClient, workspace):
    await initialize(client, "vscode", workspace, OPTIONS)
    source = copy_fixture("matmul_space.py", workspace)
    uri = open_doc(client, source)
    text = source.read_text()
    result = await tune_space(client, uri, trials=8, wait=True)
    assert result["status"] == "ok", result
    run_id = result["run"]["id"]
    titles = [lens.command.title for lens in await lenses(client, uri)
              if lens.range.start.line == line_of(text, "def schedule_matmul")]
    assert titles[:2] == ["▶ Tune with this space", "+ default rules"]
    assert re.fullmatch(r"alone: [\d.]+ (µs|ms) · 8 trials", titles[2])
    tile_line, unroll_line = line_of(text, "i_tiles = sch.sample"), line_of(text, "sch.sample_categorical")
    hints = await client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=ident(uri), range=types.Range(start=types.Position(line=0, character=0),
                                                    end=types.Position(line=len(text.splitlines()), character=0))))
    by_line = {h.position.line: h.label for h in hints}
    assert re.fullmatch(r"best \[\d+, \d+\]", by_line[tile_line])
    assert by_line[unroll_line] in ("best 0", "best 16", "best 64")
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=ident(uri), position=types.Position(line=tile_line, character=20)))
    value = hover.contents.value
    assert f"run `{run_id}`" in value and "8 candidates of this space" in value
    assert "sample_perfect_tile(i (loop 0 of block C))" in value and "★" in value
    assert re.search(r"\| `\[\d+, \d+\]` ★ \| \d+ \| [\d.]+ µs \|", value)


async def test_space_that_raises_fails_the_run(client: LanguageClient, workspace):
    await initialize(client, "neovim", workspace, OPTIONS)
    source = copy_fixture("matmul_space.py", workspace)
    text = source.read_text().replace('sch.get_sblock("C")', 'sch.get_sblock("nope")')
    source.write_text(text)
    uri = open_doc(client, source)
    started = await tune_space(client, uri, trials=8)
    await wait_for(lambda: [u for u in client.run_updates if u["event"] == "finished"], timeout=60)
    end = [u for u in client.run_updates if u["event"] == "finished"][-1]["run"]
    assert end["id"] == started["run"]["id"] and end["state"] == "failed"
    assert f"raised at {source.resolve()}:{line_of(text, 'nope') + 1}: ScheduleError" in end["error"]
    hover = await client.text_document_hover_async(types.HoverParams(
        text_document=ident(uri), position=types.Position(line=line_of(text, "i_tiles = sch.sample"), character=20)))
    assert "has no candidate of this call yet" in hover.contents.value
