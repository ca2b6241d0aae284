"""Lenses, hovers, inlay hints, code actions and payloads over a recorded run (no tuning here).

The run is fixtures/runs/mbr128 (40 real MetaSchedule trials of fixtures/matmul_bias_relu.py),
installed in the workspace's run store.  Each test runs with VS Code and with Neovim capabilities.
"""
from __future__ import annotations

import asyncio
import re

import pytest
import pytest_lsp
from lsprotocol import types
from pytest_lsp import LanguageClient

from asight_lsp import protocol as P
from tests.lsp.conftest import CONFIG, copy_fixture, ident, initialize, open_doc, replace_all, request

OPTIONS = {"disabledFeatures": ["tvmDiagnostics"]}
MATMUL_LOOP, MATMUL_BLOCK = 15, 16   # 0-based lines in matmul_bias_relu.py


@pytest_lsp.fixture(config=CONFIG)
async def client(lsp_client: LanguageClient):
    yield
    await lsp_client.shutdown_session()



async def lenses(client, uri):
    return await client.text_document_code_lens_async(types.CodeLensParams(text_document=ident(uri)))


async def hover(client, uri, line, char=12):
    return await client.text_document_hover_async(types.HoverParams(
        text_document=ident(uri), position=types.Position(line=line, character=char)))


async def hints(client, uri, first, last):
    return await client.text_document_inlay_hint_async(types.InlayHintParams(
        text_document=ident(uri), range=types.Range(start=types.Position(line=first, character=0),
                                                     end=types.Position(line=last, character=0))))


@pytest.mark.parametrize("kind", ["vscode", "neovim"])
async def test_lenses_show_commands_and_the_run_result(client, kind, workspace, tuned):
    await initialize(client, kind, workspace, OPTIONS)
    uri = open_doc(client, tuned)
    found = await lenses(client, uri)
    titles = [lens.command.title for lens in found]
    assert titles[:4] == ["▶ Tune", "Profile", "Search space", "Loop view"]
    assert [lens.command.command for lens in found[:4]] == [P.CMD_TUNE, P.CMD_PROFILE, P.CMD_SHOW_SEARCH_SPACE,
                                                            P.CMD_SHOW_LOOP_VIEW]
    assert list(found[0].command.arguments) == [{"uri": uri, "function": "MatmulBiasRelu.main"}]
    assert all(lens.range.start.line == 7 for lens in found)  # above the @T.prim_func decorator
    # the fixture run's measurement record: 34.9 µs tuned, 2438 µs untuned (70×); 40 trials; 3 minutes ago
    assert titles[4] == "35 µs · 70× vs untuned · 40 trials · 3 min ago"
    assert "interleaved rounds" in found[4].command.tooltip and "95% CI" in found[4].command.tooltip
    # a finished run of >= 20 trials offers a guided re-tune by its principles, then its code
    assert titles[5:] == ["Re-tune with principles", "Scheduled code"]
    assert found[5].command.command == P.CMD_TUNE and found[5].command.arguments[0]["guidedBy"] == "mbr128"


async def test_hover_on_block_has_static_facts_and_the_best_schedule(client, workspace, tuned):
    await initialize(client, "vscode", workspace, OPTIONS)
    uri = open_doc(client, tuned)
    text = (await hover(client, uri, MATMUL_BLOCK + 2)).contents.value
    assert "**block `matmul`**" in text and "iterators `SSR`" in text
    assert "2,097,152 iterations" in text and "4,194,304 FLOPs" in text
    assert "reads: `A`, `B`" in text     # as TVM infers a reduction block's reads (C is written)
    assert "**run `mbr128`** (done, 40 trials" in text and "→ tuned 35 µs: 70× faster (95% CI" in text
    assert re.search(r"split i → \d+×\d+×\d+×\d+", text)
    assert "decompose reduction at k0" in text
    # the loop header: the chosen splits of each loop var
    loop = (await hover(client, uri, MATMUL_LOOP, 8)).contents.value
    assert "**loop `i, j, k`**" in loop and "grid(128, 128, 128)" in loop
    assert re.search(r"`i` in `matmul`: split \d+×\d+×\d+×\d+", loop)
    # static hover without any run: a file with no run in the store
    plain = copy_fixture("matmul64.py", workspace)
    text64 = (await hover(client, open_doc(client, plain), 8, 16)).contents.value
    assert "**block `C`**" in text64 and "run `" not in text64


async def test_inlay_hints_only_within_the_requested_range(client, workspace, tuned):
    await initialize(client, "vscode", workspace, OPTIONS)
    uri = open_doc(client, tuned)
    everything = await hints(client, uri, 0, 40)
    lines = sorted({h.position.line for h in everything})
    assert MATMUL_LOOP in lines and MATMUL_BLOCK in lines
    loop_hint = next(h for h in everything if h.position.line == MATMUL_LOOP)
    assert re.fullmatch(r"i: split \d+(×\d+){3}.* · j: split .* · k: split \d+×\d+", loop_hint.label)
    block_hint = next(h for h in everything if h.position.line == MATMUL_BLOCK)
    assert "parallel" in block_hint.label
    assert loop_hint.position.character == len(tuned.read_text().splitlines()[MATMUL_LOOP].rstrip())
    window = await hints(client, uri, 20, 40)
    assert window and all(20 <= h.position.line <= 40 for h in window)
    assert not await hints(client, uri, 0, 5)


async def test_results_follow_edits(client, workspace, tuned):
    await initialize(client, "vscode", workspace, OPTIONS)
    uri = open_doc(client, tuned)
    text = tuned.read_text()
    # an unrelated edit (a comment above the module) keeps the result and moves everything down
    replace_all(client, uri, "# a comment\n" + text, 2)
    moved = await lenses(client, uri)
    assert moved[4].command.title.startswith("35 µs") and moved[0].range.start.line == 8
    assert MATMUL_LOOP + 1 in {h.position.line for h in await hints(client, uri, 0, 40)}
    # editing the function itself makes the run stale: marked on the lens, no inlay hints
    replace_all(client, uri, text.replace("D[vi, vj] = T.max(E[vi, vj], T.float32(0))",
                                          "D[vi, vj] = T.max(E[vi, vj], T.float32(1))"), 3)
    stale = await lenses(client, uri)
    assert stale[4].command.title.startswith("⚠ stale")
    assert not await hints(client, uri, 0, 40)
    assert "stale" in (await hover(client, uri, MATMUL_BLOCK + 2)).contents.value
    # undoing the edit brings the fresh result back
    replace_all(client, uri, text, 4)
    assert (await lenses(client, uri))[4].command.title.startswith("35 µs")


async def test_half_typed_function_keeps_its_last_good_ranges(client, workspace, tuned):
    await initialize(client, "vscode", workspace, OPTIONS)
    uri = open_doc(client, tuned)
    lines = tuned.read_text().splitlines()
    lines[MATMUL_BLOCK + 1] = "                vi, vj, vk = T.axis.remap("   # typing in progress
    replace_all(client, uri, "\n".join(lines), 2)
    symbols = await client.text_document_document_symbol_async(types.DocumentSymbolParams(text_document=ident(uri)))
    assert symbols and symbols[0].name == "MatmulBiasRelu" and symbols[0].children[0].name == "main"
    found = await lenses(client, uri)
    assert [lens.command.title for lens in found[:1]] == ["▶ Tune"]


async def test_code_actions_and_payloads(client, workspace, tuned):
    await initialize(client, "vscode", workspace, OPTIONS)
    uri = open_doc(client, tuned)
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=ident(uri), range=types.Range(start=types.Position(line=16, character=0),
                                                     end=types.Position(line=16, character=0)),
        context=types.CodeActionContext(diagnostics=[])))
    # VS Code resolves edits lazily: the actions carry data, the edit comes with codeAction/resolve
    assert [a.data["mode"] for a in actions] == ["trace", "script"] and all(a.edit is None for a in actions)
    assert all(a.kind == "refactor.rewrite.asight" for a in actions)
    runs = await request(client, P.REQ_RUNS, {"uri": uri, "function": "MatmulBiasRelu.main"})
    assert runs["schema"] == P.SCHEMA_RUNS and [r["id"] for r in runs["runs"]] == ["mbr128"]
    assert runs["runs"][0]["stale"] is False and runs["runs"][0]["trialsDone"] == 40
    payloads = {}
    for method in (P.REQ_SEARCH_SPACE, P.REQ_LOOP_VIEW, P.REQ_STAGE_GRAPH, P.REQ_PRINCIPLES):
        payload = payloads[method] = await request(client, method, {"uri": uri, "run": "mbr128"})
        assert payload["schema"] == P.REQUEST_SCHEMAS[method] and payload["status"] == P.STATUS_OK, payload
        assert payload["run"]["id"] == "mbr128"
    # one best per run: the trial the run's measurement chose (7), not the fastest while tuning (36),
    # in the search space, the loop view and the hover alike
    assert payloads[P.REQ_SEARCH_SPACE]["best"]["trial"] == 7
    best = payloads[P.REQ_LOOP_VIEW]["stages"][0]["best"]
    assert (best["trial"], best["chosen_by"], best["fastest_trial"]) == (7, "re-measurement", 36)
    assert "best schedule (trial 7," in (await hover(client, uri, MATMUL_BLOCK, 16)).contents.value
    # the stage graph exists before any run; a view that needs a run says so
    plain64 = open_doc(client, copy_fixture("matmul64.py", workspace))
    graph = await request(client, P.REQ_STAGE_GRAPH, {"uri": plain64, "function": "matmul64"})
    assert graph["status"] == P.STATUS_OK and [n["label"] for n in graph["nodes"] if n["kind"] == "block"] == ["C"]
    assert (await request(client, P.REQ_LOOP_VIEW, {"uri": plain64}))["status"] == P.STATUS_UNAVAILABLE
    compared = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=P.CMD_COMPARE_RUNS, arguments=[{"runs": ["mbr128", "mbr128"]}]))
    assert compared["schema"] == P.SCHEMA_COMPARE_RUNS and compared["speedupOfSecond"] == pytest.approx(1.0)
    assert any(b["block"] == "matmul" and b["runs"][0]["headline"] for b in compared["blocks"])


@pytest.mark.tvm
async def test_apply_best_schedule_resolves_to_an_edit(client, workspace, tuned):
    await initialize(client, "vscode", workspace, OPTIONS)
    uri = open_doc(client, tuned)
    rng = types.Range(start=types.Position(line=16, character=0), end=types.Position(line=16, character=0))
    actions = await client.text_document_code_action_async(types.CodeActionParams(
        text_document=ident(uri), range=rng, context=types.CodeActionContext(diagnostics=[])))
    trace, script = [await client.code_action_resolve_async(a) for a in actions]
    (edit,) = trace.edit.changes[uri]
    assert edit.range.start.line == 29  # at the end of the IRModule class
    assert "def schedule_main(sch" in edit.new_text and "sch.split(" in edit.new_text and "mbr128" in edit.new_text
    (replace,) = script.edit.changes[uri]
    assert (replace.range.start.line, replace.range.end.line) == (7, 29)
    assert replace.new_text.startswith("    @T.prim_func") and "def main(" in replace.new_text
    assert "T.parallel(" in replace.new_text and "T.vectorized(" in replace.new_text
    # the command does the same through workspace/applyEdit
    applied = []

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params: types.ApplyWorkspaceEditParams):
        applied.append(params.edit)
        return types.ApplyWorkspaceEditResult(applied=True)

    result = await client.workspace_execute_command_async(types.ExecuteCommandParams(
        command=P.CMD_APPLY_BEST_SCHEDULE, arguments=[{"uri": uri, "function": "main", "mode": "trace"}]))
    assert result["run"] == "mbr128" and result["applied"] is True
    assert applied[0].changes[uri][0].new_text == edit.new_text


async def test_runs_the_editor_cannot_show_are_said_not_dropped(client, workspace, tuned, tmp_path):
    """Outside probe 3, F9: with `.asight` a link, or a run.json hand-edited, `asight/runs` answered
    `runs: []` and nothing else (the CLI refuses in one line)."""
    import json
    import shutil
    store = workspace / ".asight"
    shutil.copytree(store / "runs" / "mbr128", store / "runs" / "edited")
    meta = json.loads((store / "runs" / "edited" / "run.json").read_text())
    (store / "runs" / "edited" / "run.json").write_text(json.dumps({**meta, "target": 42}))
    await initialize(client, "vscode", workspace, OPTIONS)
    uri = open_doc(client, tuned)
    runs = await request(client, P.REQ_RUNS, {"uri": uri})
    assert [r["id"] for r in runs["runs"]] == ["mbr128"]
    assert runs["notes"] == ["not shown: run edited: run.json is unreadable (its target 42 is not a target (a text "
                             "such as \"llvm\", or TVM's target JSON with a \"kind\"))"]
    shutil.move(store, tmp_path / "elsewhere")
    store.symlink_to(tmp_path / "elsewhere")
    await asyncio.sleep(0.6)                              # the run index re-scans at most every 0.5 s
    runs = await request(client, P.REQ_RUNS, {"uri": uri})
    assert runs["runs"] == [] and len(runs["notes"]) == 1 and "is a symbolic link" in runs["notes"][0]


async def test_an_adopted_run_edited_after_adopt_shows_no_figure_in_lens_hover_or_runs(client, workspace, tuned):
    """Outside probe 6, N1: run.json's best_us edited to 2 µs after adopt was "best 2.0 µs" in the lens,
    the hover and asight/runs (the index reads run.json), while the code and space views refused."""
    import json
    path = workspace / ".asight" / "runs" / "mbr128" / "run.json"
    meta = json.loads(path.read_text())
    best = min(json.loads(line)[1][1][0] * 1e6 for line in
               (path.parent / "database_tuning_record.json").read_text().splitlines())
    meta.update(best_us=best, measurement=None)
    meta.setdefault("extra", {})["adopted"] = {"workload": 0, "flops": None, "dtypes": ["float32"]}
    path.write_text(json.dumps(meta))
    await initialize(client, "vscode", workspace, OPTIONS)
    uri = open_doc(client, tuned)
    assert "adopted, not re-measured" in [lens.command.title for lens in await lenses(client, uri)][4]
    path.write_text(json.dumps({**meta, "best_us": 2.0}))
    await asyncio.sleep(0.6)                              # the run index re-scans at most every 0.5 s
    found = await lenses(client, uri)
    assert found[4].command.title == "⚠ run mbr128 not used: its files changed after adopt"
    assert found[4].command.tooltip.startswith("run mbr128: run.json's best (2.0 µs) is not its records' (")
    assert "Scheduled code" not in [lens.command.title for lens in found]
    text = (await hover(client, uri, MATMUL_BLOCK)).contents.value
    assert "⚠ not used: run mbr128: run.json's best (2.0 µs)" in text and "best 2.0 µs" not in text
    runs = (await request(client, P.REQ_RUNS, {"uri": uri}))["runs"]
    assert runs[0]["bestUs"] is None and runs[0]["headline"].startswith("not used: run mbr128: run.json's best")


async def test_a_run_json_made_unreadable_names_the_run_in_the_lens_and_the_panels(client, workspace, tuned):
    """Outside probe 11, F2: run.json's extra.adopted edited to "yes": the CLI refused in one line, but
    the editor offered Profile and said "no run yet: tune the function first" in every panel."""
    import json
    path = workspace / ".asight" / "runs" / "mbr128" / "run.json"
    await initialize(client, "vscode", workspace, OPTIONS)
    uri = open_doc(client, tuned)
    assert len(await lenses(client, uri)) == 7
    meta = json.loads(path.read_text())
    path.write_text(json.dumps({**meta, "extra": {**meta.get("extra", {}), "adopted": "yes"}}))
    await asyncio.sleep(0.6)                              # the run index re-scans at most every 0.5 s
    found = await lenses(client, uri)
    assert [lens.command.title for lens in found][4:] == ["⚠ run mbr128 not shown: run.json is unreadable"]
    assert found[4].command.tooltip.startswith('run mbr128: run.json is unreadable (its extra.adopted is "yes"')
    assert "it is this function's run" in found[4].command.tooltip
    for method in (P.REQ_LOOP_VIEW, P.REQ_SEARCH_SPACE):
        answer = await request(client, method, {"uri": uri, "function": "MatmulBiasRelu.main"})
        assert answer["status"] == "unavailable" and answer["message"] == found[4].command.tooltip
    path.write_text(json.dumps(meta))                     # mended: the run is shown again
    await asyncio.sleep(0.6)
    assert "70× vs untuned" in [lens.command.title for lens in await lenses(client, uri)][4]


async def test_an_unreadable_run_beside_a_readable_one_is_named_in_the_lens_and_the_panels(client, workspace, tuned):
    """Outside probe 13, F1: with a second run of the function, the editor showed the readable one as if
    it were the latest, with no word of the run whose run.json could not be read."""
    import json
    import shutil
    runs = workspace / ".asight" / "runs"
    shutil.copytree(runs / "mbr128", runs / "mbr128b")
    meta = json.loads((runs / "mbr128b" / "run.json").read_text())
    (runs / "mbr128b" / "run.json").write_text(json.dumps({**meta, "target": 42}))
    await initialize(client, "vscode", workspace, OPTIONS)
    uri = open_doc(client, tuned)
    titles = [lens.command.title for lens in await lenses(client, uri)]
    assert "70× vs untuned" in titles[4] and titles[-1] == "⚠ run mbr128b not shown: run.json is unreadable"
    view = await request(client, P.REQ_LOOP_VIEW, {"uri": uri, "function": "MatmulBiasRelu.main"})
    assert view["run"]["id"] == "mbr128" and view["notes"][0].startswith("⚠ run mbr128b: run.json is unreadable (its "
                                                                         "target 42 is not a target")
    # the code panel and the hover too (outside probe 14, F4)
    code = await request(client, P.REQ_CODE, {"uri": uri, "function": "MatmulBiasRelu.main", "level": "scheduled"})
    assert code["note"].startswith("⚠ run mbr128b: run.json is unreadable")
    text = (await hover(client, uri, MATMUL_BLOCK)).contents.value
    assert "**run `mbr128`**" in text and "⚠ run mbr128b: run.json is unreadable" in text
