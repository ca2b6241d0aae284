"""The model path in a real VS Code (code-server): an imported, tuned model (the run recorded by the
CLI before the editor opens), its Model panel, a task's call sites selected in the editor, the
export from the palette, and a task's search space shown alone with a task selector.

One drive (conftest.model_session, drive_model.mjs); each test checks one part of it.
"""
from __future__ import annotations

import re
from pathlib import Path


def reached(facts: dict, step: str) -> None:
    assert step in facts["steps"], f"the drive stopped before '{step}': {facts.get('error')}"


def test_model_panel_lists_every_task_with_its_calls(model_session):
    reached(model_session, "model panel")
    assert [t.strip() for t in model_session["lenses"].split("|")][-1] == "Model", model_session["lenses"]
    rows = model_session["rows"]
    tasks = {r["task"] for r in rows}
    assert {"fused_conv2d_add_relu", "fused_conv2d1_add_relu", "fused_conv2d1_add_add1_relu"} <= tasks, tasks
    for r in rows:
        assert int(r["cells"][0]) == len(r["calls"]) >= 1, r                # the calls column = its listed calls
        assert re.fullmatch(r"[\d.]+ (µs|ms)", r["cells"][2]), r             # tuned time of the task
        assert r["views"] == ["searchSpace", "loopView", "code"], r
    repeated = [r for r in rows if len(r["calls"]) == 2]
    assert len(repeated) >= 2, rows                                          # the two identical residual blocks
    for r in repeated:                                                       # each call its own lines
        first, second = (re.search(r"lines? (\d+)", c).group(1) for c in r["calls"])
        assert first != second, r
    assert re.search(r"untuned [\d.]+ (µs|ms) → tuned [\d.]+ (µs|ms) end to end", model_session["headline"])


def test_clicking_a_task_selects_each_of_its_call_sites(model_session):
    reached(model_session, "task clicked")
    row = next(r for r in model_session["rows"] if r["task"] == model_session["clickedTask"])
    bindings = [re.match(r"#\d+ ([\w, ]+) ·", c).group(1).split(", ") for c in row["calls"]]
    selected = " ".join(model_session["selectedLines"])
    for call in bindings:                                                     # every binding of both calls
        assert all(re.search(rf"\b{b}: R\.Tensor", selected) for b in call), (call, model_session["selectedLines"])
    assert model_session["cursors"] == 2, model_session                       # one selection per call
    first_line_of = [int(re.search(r"lines? (\d+)", c).group(1)) for c in row["calls"]]
    assert first_line_of[0] < first_line_of[1]


def test_export_from_the_palette_writes_the_library(model_session):
    reached(model_session, "exported")
    msg = model_session["exportMessage"]
    lib = Path(model_session["workspace"]) / "tiny_relax.so"
    assert msg.startswith(f"ASight: wrote {lib}"), msg
    assert re.search(r"\d+ of \d+ kernels from run Module-[\w-]+'s records", msg), msg
    assert "12 weights bound" in msg and "outputs match the untuned build" in msg, msg
    assert lib.stat().st_size > 0
    assert model_session.get("exportProgress"), "a progress notification while exporting"
    assert "Open Load Snippet" in model_session["exportButtons"], model_session["exportButtons"]


def test_task_search_space_has_a_task_selector(model_session):
    reached(model_session, "task selector")
    sel = model_session["taskSelector"]
    assert sel["value"] == model_session["spaceTask"], sel
    assert {r["task"] for r in model_session["rows"]} <= set(sel["options"]), sel


def test_scheduled_code_lens_asks_for_the_task_under_the_cursor(model_session):
    reached(model_session, "task code")
    task = model_session["spaceTask"]
    assert re.match(rf"{task}\s*at the cursor · \d+ calls?", model_session["codePick"]), model_session["codePick"]
    assert re.fullmatch(r"Module\.main\.trial-\d+(-best)?\.scheduled\.py", model_session["codeTab"]), model_session["codeTab"]
    row = next(r for r in model_session["rows"] if r["task"] == task)
    # Every call's bindings are selected; Monaco renders only the lines in view, and which call the
    # editor scrolls to is its choice, so any call's first binding counts.
    firsts = {re.match(r"#\d+ (\w+)", call).group(1) for call in row["calls"]}
    assert any(line.startswith(f"{b}: R.Tensor") for b in firsts for line in model_session["codeSelected"]), \
        model_session["codeSelected"]


def test_no_page_errors(model_session):
    assert model_session["pageErrors"] == []
