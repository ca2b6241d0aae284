"""A model in the real stdio server: the file `asight import` printed, tuned through asight.tune;
when tuning ends the server times each kernel call by itself, and every call of a repeated kernel
gets an inlay hint on its own binding; a binding's hover names its call.  On a model tuned by the
CLI (module fixture): the Model lens and panel payload, per-task views and code with call sites,
and the export command (progress, library, applied records, load snippet, clear errors)."""
from __future__ import annotations

import shutil
import re
import subprocess
import sys
from pathlib import Path

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


@pytest.fixture(scope="module")
def tuned_model(cli_tuned_tiny_resnet) -> Path:
    """The tiny model imported and tuned by the CLI (12 trials, one per batch: each of its 6 kernels
    gets one, so the export has a record for every kernel), its calls profiled (``asight model``): the
    session's copy (tests/tuned_models.py), as the CLI left it, for this module."""
    return cli_tuned_tiny_resnet.checkout() / "tiny_relax.py"


async def _open_tuned(client, script: Path, options: dict | None = None) -> str:
    await initialize(client, "vscode", script.parent, {**OPTIONS, **(options or {})})
    return open_doc(client, script)


async def _command(client, command: str, arg: dict):
    return plain(await client.workspace_execute_command_async(types.ExecuteCommandParams(command=command, arguments=[arg])))


async def test_model_lens_panel_views_and_code_per_task(client: LanguageClient, tuned_model):
    uri = await _open_tuned(client, tuned_model)
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(text_document=ident(uri)))
    model_lens = [lens for lens in lenses if lens.command and lens.command.command == P.CLIENT_CMD_MORE]
    assert len(model_lens) == 1 and model_lens[0].command.command == P.CLIENT_CMD_MORE
    # a model's lens line is one short lens (issue 23): "40 µs" (⚠ when noisy), the rest in its quick pick
    line = [lens.command for lens in lenses if lens.range.start.line == model_lens[0].range.start.line]
    assert len(line) == 1 and re.fullmatch(r"[\d.]+ (µs|ms|s)( ⚠)?", line[0].title), [c.title for c in line]
    assert "trials" in line[0].tooltip
    more = plain(line[0].arguments[0])
    assert {i["label"] for i in more["items"]} >= {
        "Model", "▶ Tune", "Profile", "Re-measure", "Scheduled code", "Stage graph", "Hotspots", "Search space", "Loop view"}
    model_item = next(i for i in more["items"] if i["label"] == "Model")
    assert model_item["command"] == P.CMD_SHOW_MODEL
    arg = model_item["argument"]
    model = await _command(client, P.CMD_SHOW_MODEL, arg)                 # what the lens click returns
    assert model["schema"] == P.SCHEMA_MODEL and model["status"] == "ok", model
    repeated = [t for t in model["tasks"] if len(t["calls"]) == 2]
    assert repeated, model["tasks"]
    first, second = repeated[0]["calls"]
    assert first["lines"][1] < second["lines"][0]                        # every call its own lines
    runs = plain(await client.protocol.send_request_async(P.REQ_RUNS, {"uri": uri, "function": arg["function"]}))
    run = runs["runs"][0]
    assert run["kind"] == "relax" and repeated[0]["task"] in run["tasks"]
    task = next(t["task"] for t in model["tasks"] if t["trials"])        # a task with a measured candidate
    space = plain(await client.protocol.send_request_async(P.REQ_SEARCH_SPACE, {**arg, "task": task}))
    assert space["run"]["task"] == task and task in space["run"]["tasks"]
    loops = plain(await client.protocol.send_request_async(P.REQ_LOOP_VIEW, {**arg, "task": task}))
    assert loops["run"]["task"] == task and loops["run"]["tasks"] == space["run"]["tasks"]   # the panels' selector
    code = await _command(client, P.CMD_SHOW_CODE, {**arg, "task": task})   # the Scheduled code lens + a task
    assert code["status"] == "ok" and code["task"] == task, code
    rows = next(t for t in model["tasks"] if t["task"] == task)
    assert [c["lines"][0] + 1 for c in rows["calls"]] == [min(s["lines"]) for s in code["callSites"]]
    unnamed = await _command(client, P.CMD_SHOW_CODE, arg)               # no task: the error names them
    assert unnamed["status"] == "unavailable" and task in unnamed["message"]


async def test_the_clis_stage_graph_is_the_editors(client: LanguageClient, tuned_model):
    """`asight loops --run R --json` draws the model's stage graph the editor's panel draws: one node per
    kernel call and the tensors between them, node for node and edge for edge, under the whole run's header
    (the loop view beside it shows one task), not one box per binding; its text lists those calls and edges."""
    import json
    uri = await _open_tuned(client, tuned_model)
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(text_document=ident(uri)))
    more = next(plain(lens.command.arguments[0]) for lens in lenses if lens.command.command == P.CLIENT_CMD_MORE)
    arg = next(i["argument"] for i in more["items"] if i["label"] == "Stage graph")
    editor = plain(await client.protocol.send_request_async(P.REQ_STAGE_GRAPH, arg))    # the panel's request
    assert editor["status"] == "ok" and editor["level"] == "model", editor

    def cli(*extra: str) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, "-m", "asight_lsp", "loops", "--run", arg["run"], *extra],
                              cwd=tuned_model.parent, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done
    both = json.loads(cli("--json").stdout)
    graph = both["stageGraph"]
    assert graph["level"] == "model" and graph["function"] == editor["function"] == arg["function"]
    assert [n["id"] for n in graph["nodes"]] == [n["id"] for n in editor["nodes"]]
    assert [(e["source"], e["target"], e["buffer"]) for e in graph["edges"]] == \
        [(e["source"], e["target"], e["buffer"]) for e in editor["edges"]]
    assert graph["nodes"] == editor["nodes"] and graph["summary"] == editor["summary"]   # costs, trials, layout
    assert graph["run"]["task"] is None and graph["run"]["trials"] == editor["run"]["trials"] == 12
    assert both["loopView"]["run"]["task"] in editor["run"]["tasks"]                  # the loop view: one task
    kernels = [n for n in editor["nodes"] if n["kind"] == "kernel"]
    assert kernels and not any(n["kind"] == "binding" for n in graph["nodes"])
    text = cli("--no-extract").stdout.splitlines()
    assert f"kernel calls ({len(kernels)}):" in text
    assert [line.split(":")[0].strip() for line in text if line.startswith("  ") and "#" in line.split(":")[0]
            and " --" not in line] == [n["id"] for n in kernels]
    assert all(f"  {e['source']} --{e['buffer']}--> {e['target']}" in text for e in editor["edges"])
    from asight_lsp.services import report       # the HTML report embeds the same graph
    drawn: dict = {}
    html = report.report_html
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(report, "report_html", lambda payloads, *a, **k: drawn.update(payloads) or html(payloads, *a, **k))
        report.build_report(str(tuned_model), arg["run"], str(tuned_model.parent / ".asight"), hotspots=False)
    assert drawn["stageGraph"]["nodes"] == editor["nodes"] and drawn["stageGraph"]["edges"] == editor["edges"]


async def test_export_command_writes_a_checked_library_with_progress(client: LanguageClient, tuned_model, tmp_path):
    uri = await _open_tuned(client, tuned_model)
    export = [a for a in await _raw_code_actions(client, uri, 12) if (a.get("command") or {}).get("command") == P.CMD_EXPORT_MODEL]
    assert len(export) == 1 and export[0]["kind"] == "refactor.export.asight", export
    assert "export the tuned model" in export[0]["title"]
    out = tmp_path / "lib" / "tiny.so"
    out.parent.mkdir()
    result = await _command(client, P.CMD_EXPORT_MODEL, {**export[0]["command"]["arguments"][0], "output": str(out),
                                                         "build": "tuned"})   # even where a tiny model's tuned
    # headline tied or lost (CI 2026-11-27: the untuned build was exported and then timed 0.90x the headline's)
    assert result["status"] == "ok", result
    data = result["data"]
    assert data["library"] == str(out) and out.stat().st_size == data["bytes"] > 0
    applied = data["applied"]   # every kernel from a record, or its default schedule where that re-measured faster
    # (on this 8x8 model under load a single-threaded default often beats every parallel trial)
    assert len(applied["from_records"]) + len(applied["default_kept"]) == applied["kernels"] > 0, applied
    assert data["check"]["ok"] and data["bound_weights"] == 12
    assert f'load_module("{out}")' in data["load"]
    assert f"wrote {out}" in result["message"] and "kernels from run" in result["message"]
    assert data["applied"]["missing"] == [] and data["measured"]["verdict_export"]["direction"] != "unmeasured"  # issue 24
    assert "headline build" in result["message"] and "exported library" in result["message"]
    (reports,) = [r for r in client.progress_reports.values() if r and getattr(r[0], "title", "").startswith("ASight: exporting")]
    assert reports[-1].kind == "end"


async def _raw_code_actions(client, uri: str, line: int) -> list[dict]:
    """The code actions as sent: lsprotocol's client converter reads a CodeAction that carries a
    command as a bare Command (the union's first member), losing its kind."""
    get = client.protocol.get_result_type
    client.protocol.get_result_type = lambda method: None if method == types.TEXT_DOCUMENT_CODE_ACTION else get(method)
    try:
        at = types.Position(line=line, character=0)
        return plain(await client.protocol.send_request_async(types.TEXT_DOCUMENT_CODE_ACTION, types.CodeActionParams(
            text_document=ident(uri), range=types.Range(start=at, end=at), context=types.CodeActionContext(diagnostics=[]))))
    finally:
        client.protocol.get_result_type = get


async def test_export_errors_are_clear(client: LanguageClient, tuned_model, tmp_path):
    copy = tuned_model.parent / "untuned_copy.py"                        # same model, no run of it
    shutil.copy(tuned_model, copy)
    uri = await _open_tuned(client, tuned_model)
    fresh = open_doc(client, copy)
    with pytest.raises(Exception, match="cannot export: no run of"):
        await _command(client, P.CMD_EXPORT_MODEL, {"uri": fresh, "function": "Module.main"})
    with pytest.raises(Exception, match="is a directory; name the library file"):
        await _command(client, P.CMD_EXPORT_MODEL, {"uri": uri, "function": "Module.main", "output": str(tmp_path)})
    with pytest.raises(Exception, match="'run' must be a string"):
        await _command(client, P.CMD_EXPORT_MODEL, {"uri": uri, "run": 3})
    with pytest.raises(Exception, match="'build' must be 'tuned' or 'untuned'"):
        await _command(client, P.CMD_EXPORT_MODEL, {"uri": uri, "build": "fast"})
    assert not list(tmp_path.glob("*.so"))
    weights = tuned_model.with_suffix(".weights.npz")
    weights.rename(tmp_path / "away.npz")                                # no weights beside the model:
    try:                                                                 # it says so, every parameter is an input
        args = {"uri": uri, "function": "Module.main", "output": str(tmp_path / "noweights.so"), "build": "tuned"}
        refused = await _command(client, P.CMD_EXPORT_MODEL, args)
        written_when_refused = (tmp_path / "noweights.so").exists()
        result = await _command(client, P.CMD_EXPORT_MODEL, {**args, "allowUntuned": True})
        with pytest.raises(Exception, match="'tuneMissing' must be a number of trials"):
            await _command(client, P.CMD_EXPORT_MODEL, {**args, "tuneMissing": "2"})
    finally:
        (tmp_path / "away.npz").rename(weights)
    # unbound, the bias reshapes and the FC weight's transpose are kernels again, which the run (tuned
    # with the weights bound) never tuned, and the tuned kernels' schedules pack weights that are now
    # inputs: refused, not silently built on TVM's default schedule (issues 21, 24)
    assert refused["status"] == "failed" and refused["data"]["status"] == "refused"
    assert refused["message"].startswith("export refused: ") and "transpose: " in refused["message"]
    assert "no weights file beside the model: the run was tuned with its weights bound" in refused["message"]
    assert not written_when_refused
    assert "no weights file beside the model" in result["message"] and result["data"]["bound_weights"] == 0
    assert "NOT TUNED" in result["message"] and (tmp_path / "noweights.so").exists()
    assert len(result["data"]["inputs"]) == 13                           # the input and the 12 weights


async def test_export_is_refused_in_an_untrusted_workspace(client: LanguageClient, tuned_model):
    uri = await _open_tuned(client, tuned_model, {"trusted": False})
    with pytest.raises(Exception, match="exporting a model is disabled because this workspace is not trusted"):
        await _command(client, P.CMD_EXPORT_MODEL, {"uri": uri, "function": "Module.main"})


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
    value = hover.contents.value
    assert "#1`: untuned " in value and " → tuned " in value and "- tensor: float32[" in value, value
    assert "- task `" in value and "trial" in value and "- its schedule: " in value, value   # issue 23
    profiled = [u for u in client.run_updates if u["event"] == "profiled"]     # a Model panel redraws on it
    assert len(profiled) == 1 and profiled[0]["uri"] == uri and profiled[0]["run"]["state"] == "done"
    model = plain(await client.protocol.send_request_async(P.REQ_MODEL, {"uri": uri, "function": "Module.main"}))
    assert model["schema"] == P.SCHEMA_MODEL and model["status"] == "ok", model
    assert any(len(t["calls"]) == 2 for t in model["tasks"])
