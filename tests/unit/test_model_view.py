"""The model view's per-task verdict (views/model.py), pure: no TVM."""
from asight_lsp.views.model import model_view


def _profile(trials: dict[str, int], untuned: dict[str, float], tuned: dict[str, float]) -> dict:
    """A Relax profile of one call per task: binding ``v_<task>`` computed by the task's kernel."""
    return {"relax": {
        "function": "main",
        "tasks": {"baseline": {"tasks": [{"task": t, "us": us, "vars": [f"v_{t}"]} for t, us in untuned.items()]},
                  "tuned": {"tasks": [{"task": t, "us": us, "vars": [f"v_{t}"], "lines": [1, 2]}
                                      for t, us in tuned.items()]}},
        "task_records": {t: {"trials": n} for t, n in trials.items()}}}


def test_slower_needs_trials_and_a_clear_margin():
    view = model_view(_profile({"tried": 4, "never": 0, "close": 4, "faster": 4},
                               {"tried": 10.0, "never": 10.0, "close": 10.0, "faster": 10.0},
                               {"tried": 13.0, "never": 18.0, "close": 11.5, "faster": 2.0}))
    slower = {t["task"]: t["slower"] for t in view["tasks"]}
    # A task with no trial runs its default schedule in both builds: 1.8x there is timing noise.
    assert slower == {"tried": True, "never": False, "close": False, "faster": False}


def test_rendered_table_names_untried_tasks():
    from asight_lsp.commands.model import render
    view = model_view(_profile({"tried": 4, "never": 0}, {"tried": 10.0, "never": 10.0}, {"tried": 13.0, "never": 18.0}))
    text = render(view)
    tried = next(line for line in text.splitlines() if line.startswith("tried"))
    never = next(line for line in text.splitlines() if line.startswith("never"))
    assert "SLOWER than untuned" in tried and "untuned (no trial)" in never and "SLOWER" not in never


def test_the_view_says_which_measurement_it_shows():
    from asight_lsp.views.measured import others_text, shown_measurement
    busy = {"other_cores": 1.2, "busy": True, "reasons": ["other processes used 1.20 cores on average"]}
    shown = {"measured": {"id": "a", "taken": 1795674078.0, "by": "asight profile", "load": {"other_cores": 0.1, "busy": False},
                          "headline": {"same": False}},
             "measurement": {"taken": 1795674000.0, "by": "tuning job", "load": busy}}
    newer = {"measured": {"id": "b", "taken": 1795674500.0, "by": "hotspots", "load": busy},
             "not_adopted": "measured while busy; the shown one was quiet"}
    info = shown_measurement(shown, [shown, newer])
    assert info["id"] == "a" and info["same"] is False
    assert "two different measurements" in info["text"] and "quiet (other processes 0.10 cores)" in info["text"]
    assert "tuning job, busy (other processes 1.20 cores)" in info["text"]
    assert [o["id"] for o in info["others"]] == ["b"]
    assert "kept but not shown: measured while busy" in others_text(info)
    one = shown_measurement({**shown, "measured": {**shown["measured"], "headline": {"same": True}}})
    assert one["same"] and one["text"].startswith("Per-call times and end to end: one measurement")
    assert others_text(one) is None


def test_twins_and_kept_defaults_are_shown():
    """Issue 21: the view says which tasks are twins, what the transfer gave, and which tasks kept
    their default schedule because no trial beat it in the re-measurement."""
    from asight_lsp.commands.model import render
    profile = _profile({"conv_a": 4, "conv_b": 4, "mean": 2}, {"conv_a": 10.0, "conv_b": 10.0, "mean": 1.0},
                       {"conv_a": 5.0, "conv_b": 3.0, "mean": 1.0})
    profile["measurement"] = {"defaults": [{"task": "mean", "default_us": 0.9, "measured_us": 3900.0}]}
    sig = {"op": "conv2d_nchw", "iters": [["S", 4], ["R", 4]], "reads": [], "writes": []}
    from asight_lsp.analysis.twins import relate
    tuning = {"twins": {"relations": relate({"conv_a": sig, "conv_b": sig, "mean": None}),
                        "transfers": [{"task": "conv_a", "donor": "conv_b", "relation": "twin", "latency_us": 2.0,
                                       "own_best_us": 8.0, "resampled": 0}]}}
    tuning["budget"] = {"outlook": [
        {"task": "conv_a", "trials": 40, "share": 0.6, "rate": 0.01, "gap": 1.0, "batch": 32,
         "expectedSavingUs": 1.2, "expectedSavingShare": 0.12, "done": False},
        {"task": "mean", "trials": 2, "share": 0.1, "rate": 0.1, "gap": 1.0, "batch": 32,
         "expectedSavingUs": 0.1, "expectedSavingShare": 0.01, "done": False}]}
    view = model_view(profile, None, tuning=tuning)
    rows = {t["task"]: t for t in view["tasks"]}
    assert rows["conv_a"]["nextTrials"]["expectedSavingUs"] == 1.2 and "nextTrials" not in rows["conv_b"]
    assert rows["conv_a"]["twins"]["twins"] == ["conv_b"] and rows["conv_a"]["twins"]["bestGain"] == 4.0
    assert view["twinGroups"] == [["conv_a", "conv_b"]]
    assert rows["mean"]["defaultKept"] == {"defaultUs": 0.9, "bestTrialUs": 3900.0} and "twins" not in rows["mean"]
    text = render(view)
    assert "conv_a: twin of conv_b; 1 transfer(s), 1 adopted" in text and "(4.00x)" in text
    mean = next(line for line in text.splitlines() if line.startswith("mean"))
    assert "default schedule kept (0.9 µs vs best trial 3.90 ms" in mean
    outlook = text.split("next trials")[1].splitlines()
    assert outlook[1].strip().startswith("conv_a: ~1.2 µs saved (12.0% of the model); 40 trials")
    assert outlook[2].strip().startswith("mean: ~0.1 µs")
    assert "twins" not in render(model_view(profile)) and "next trials" not in render(model_view(profile))


def test_a_calls_selection_skips_another_kernels_bindings():
    from asight_lsp.views.model import own_ranges
    # fused_conv2d9's call spans lines 82-89; lines 84 and 86 are fused_conv2d10_add7's lv71, lv74
    owners = {82: "c9#0", 83: "c9#0", 84: "c10#0", 86: "c10#0", 88: "c9#0", 89: "c9#0"}   # 85, 87: folded weights
    assert own_ranges([82, 89], "c9#0", owners) == [[82, 83], [87, 89]]
    assert own_ranges([84, 86], "c10#0", owners) == [[84, 86]]      # its own span holds only folded lines between
    assert own_ranges([17, 20], "t#0", {17: "t#0", 19: "t#0", 20: "t#0"}) == [[17, 20]]   # contiguous: one range


def test_kernels_with_packed_weights_are_shown():
    """Issue 21's layout lever: the view names the kernels whose weights the build packed into their
    schedule's layout (a per-call flag from the profile), and says nothing when none did."""
    from asight_lsp.commands.model import render
    profile = _profile({"conv": 4, "mean": 2}, {"conv": 10.0, "mean": 1.0}, {"conv": 5.0, "mean": 1.0})
    plain = render(model_view(profile))
    assert "layout:" not in plain
    profile["relax"]["tasks"]["tuned"]["tasks"][0]["weights_packed"] = True
    view = model_view(profile)
    assert [t["task"] for t in view["tasks"] if t.get("weightsPacked")] == ["conv"]
    line = next(x for x in render(view).splitlines() if x.startswith("layout:"))
    assert "1 of 2 kernels" in line and line.endswith(": conv")


def test_each_row_says_what_the_levers_did():
    """The Model panel's per-task notes (views/model.lever_notes): a kept default, packed weights."""
    profile = _profile({"conv": 4, "mean": 2}, {"conv": 10.0, "mean": 1.0}, {"conv": 5.0, "mean": 1.0})
    profile["relax"]["tasks"]["tuned"]["tasks"][0]["weights_packed"] = True
    profile["measurement"] = {"defaults": [{"task": "mean", "default_us": 0.9, "measured_us": 3900.0}]}
    rows = {r["task"]: r["levers"] for r in model_view(profile)["tasks"]}
    assert rows["conv"] == ["weights packed into the schedule's layout at build time"]
    assert rows["mean"] == ["default schedule kept: 0.9 µs vs best trial 3.90 ms (re-measured)"]


def test_the_view_says_when_schedules_were_picked_cold():
    """The cold lever (issue 21): a note when every kernel's pick was re-measured cold, none otherwise."""
    profile = _profile({"conv": 4, "mean": 2}, {"conv": 10.0, "mean": 1.0}, {"conv": 5.0, "mean": 1.0})
    cold = {"cold": True, "rounds": 5}
    profile["measurement"] = {"chosen": [{"task": "conv", "harness": cold, "candidates": [{}] * 8}],
                              "defaults": [{"task": "mean", "harness": cold, "candidates": [{}] * 3}]}
    notes = model_view(profile)["notes"]
    assert any("up to 8) cold" in n and "ASIGHT_LEVERS_OFF=cold" in n for n in notes)
    profile["measurement"]["defaults"][0]["harness"] = {"rounds": 5}      # a run re-measured warm
    assert not any("cold" in n for n in model_view(profile)["notes"])


def test_a_model_without_a_run_says_why_its_table_is_empty():
    from asight_lsp.commands.model import render
    view = {"schema": "asight.model/1", "status": "ok", "run": None, "function": "Module.main",
            "headline": {"untunedUs": 18.0, "tunedUs": None, "speedup": None, "build": None}, "tasks": [],
            "kernelUs": None, "notTimed": [], "notes": [], "twinGroups": [], "measurement": None}
    text = render(view)
    assert "no tuning run" in text and "asight tune FILE" in text
    assert "no tuning run" not in render({**view, "run": {"id": "r1"}})


def test_the_view_names_the_kernels_computed_as_winograd():
    """The Winograd lever (issue 21): a note naming the kernels that compute their convolution so."""
    tasks = {"fused_conv2d_winograd_add_relu": 4, "fused_conv2d1_add_relu": 4}
    profile = _profile(tasks, {t: 10.0 for t in tasks}, {t: 5.0 for t in tasks})
    note = next(n for n in model_view(profile)["notes"] if "Winograd" in n)
    assert note.startswith("1 kernel(s)") and "fused_conv2d_winograd_add_relu" in note
    assert "fused_conv2d1_add_relu" not in note and "ASIGHT_LEVERS_OFF=winograd" in note
    direct = _profile({"fused_conv2d1_add_relu": 4}, {"fused_conv2d1_add_relu": 10.0}, {"fused_conv2d1_add_relu": 5.0})
    assert not any("Winograd" in n for n in model_view(direct)["notes"])
