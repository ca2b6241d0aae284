"""End to end: a real tiny tuning run through asight.tune (progress, runUpdated, result lens, inlay
hints, hover with the run's numbers, profile), and a run cancelled from the progress notification."""
from __future__ import annotations

import re

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from asight_lsp import protocol as P
from asight_lsp.store.runs import Run, read_records
from tests.lsp.conftest import TUNING_CONFIG, copy_fixture, ident, initialize, open_doc, plain, wait_for, watch_runs

pytestmark = [pytest.mark.tvm, pytest.mark.slow]
OPTIONS = {"disabledFeatures": ["tvmDiagnostics"]}


@pytest_lsp.fixture(config=TUNING_CONFIG)
async def client(lsp_client: LanguageClient):
    watch_runs(lsp_client)
    yield
    await lsp_client.shutdown_session()



async def tune(client, uri, trials):
    return await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=P.CMD_TUNE, arguments=[{"uri": uri, "function": "matmul64", "trials": trials}]))


def finished(client):
    return [u for u in client.run_updates if u["event"] == "finished"]


async def test_tune_end_to_end(client: LanguageClient, workspace):
    await initialize(client, "vscode", workspace, OPTIONS)
    source = copy_fixture("matmul64.py", workspace)
    uri = open_doc(client, source)
    started = await tune(client, uri, 8)
    assert started["status"] == "started" and started["run"]["function"] == "matmul64"
    run_id = started["run"]["id"]
    # while it runs, the lens says so (and cancels on click)
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(text_document=ident(uri)))
    assert lenses[4].command.command == P.CMD_CANCEL or finished(client)
    await wait_for(lambda: finished(client), timeout=300)
    end = finished(client)[-1]["run"]
    assert end["id"] == run_id and end["state"] == "done" and end["trialsDone"] >= 8
    assert end["bestUs"] and end["baselineUs"] and end["speedup"] > 1
    assert "codeLens" in client.refreshes  # VS Code re-asks for lenses as the run goes
    events = [u["event"] for u in client.run_updates]
    assert events[0] == "started" and "progress" in events
    # work-done progress: begin, reports with trials and best latency, end
    (reports,) = [r for r in client.progress_reports.values() if r and getattr(r[0], "title", "").startswith("ASight: tuning")]
    assert reports[0].kind == "begin" and reports[0].cancellable and reports[-1].kind == "end"
    assert any(re.search(r"\d+/8 trials · best", r.message or "") for r in reports if r.kind == "report")
    # the result lens, inlay hints and a hover with the run's numbers
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(text_document=ident(uri)))
    # (" · noisy" when the machine was busy while measuring: the title says so)
    assert re.fullmatch(r"[\d.]+ (µs|ms) · [\d.]+× vs untuned( · noisy)? · \d+ trials · just now",
                        lenses[4].command.title), lenses[4].command.title
    hints = await client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=ident(uri), range=types.Range(start=types.Position(line=0, character=0),
                                                    end=types.Position(line=20, character=0))))
    assert any(h.position.line == 7 and re.search(r"i: split \d+", h.label) for h in hints)
    hover = await client.text_document_hover_async(types.HoverParams(text_document=ident(uri),
                                                                     position=types.Position(line=9, character=16)))
    assert f"**run `{run_id}`** (done" in hover.contents.value and "best schedule (trial" in hover.contents.value
    # profile: per-block latency shows up in the hover
    profiled = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=P.CMD_PROFILE, arguments=[{"uri": uri, "function": "matmul64"}]))
    assert profiled["status"] == "ok" and profiled["data"]["summary"]["tuned_us"]
    # the profile is told to the client (open panels of the run redraw), with the measurement the run shows
    told = [u for u in client.run_updates if u["event"] == "profiled" and u["run"]["id"] == run_id]
    assert told and told[-1]["uri"] == uri, client.run_updates[-3:]
    stamp = told[-1]["run"]["measurement"]
    assert stamp["taken"] and re.fullmatch(r"measured \d\d \w+ [\d:]+ UTC by .+, (quiet|busy|load unknown).*", stamp["text"]), stamp
    hover = await client.text_document_hover_async(types.HoverParams(text_document=ident(uri),
                                                                     position=types.Position(line=9, character=16)))
    # before → after per block (untuned, then tuned, with the ratio), and the share of the function
    assert re.search(r"latency: untuned [\d.]+ (µs|ms) → tuned [\d.]+ (µs|ms), [\d.]+× (faster|slower)"
                     r"[^\n]*\(\d+ % of the function\)", hover.contents.value)
    # the panels' payloads of the new run: hotspots (from the cached profile) and the search space
    hot = plain(await client.protocol.send_request_async(P.REQ_HOTSPOTS, {"uri": uri, "function": "matmul64"}))
    assert hot["status"] == "ok" and hot["run"] == run_id and hot["parts"], hot
    space = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=P.CMD_SHOW_SEARCH_SPACE, arguments=[{"uri": uri, "function": "matmul64"}]))
    assert space["schema"] == P.SCHEMA_SEARCH_SPACE and space["status"] == "ok" and space["run"]["id"] == run_id


async def test_cancel_from_the_progress_notification_keeps_records(client: LanguageClient, workspace):
    await initialize(client, "neovim", workspace, OPTIONS)
    source = copy_fixture("matmul64.py", workspace)
    uri = open_doc(client, source)
    started = await tune(client, uri, 64)
    run_id = started["run"]["id"]
    await wait_for(lambda: any(u["event"] == "progress" and u["run"]["trialsDone"] > 0 for u in client.run_updates),
                   timeout=300)
    (token,) = [t for t, r in client.progress_reports.items() if r and getattr(r[0], "title", "").startswith("ASight")]
    client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    await wait_for(lambda: finished(client), timeout=60)
    end = finished(client)[-1]["run"]
    assert end["id"] == run_id and end["state"] == "cancelled"
    records = read_records(workspace / ".asight" / "runs" / run_id)
    assert 0 < len(records) < 64 and Run(workspace / ".asight" / "runs" / run_id).load().state == "cancelled"
    assert client.progress_reports[token][-1].kind == "end"
