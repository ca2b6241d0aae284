"""Contour legend, model agreement and failures drawn in headless Chromium from payloads that the
Python views build from the recorded run mbr128 (tests/webview/insight.mjs)."""
from __future__ import annotations

import copy
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from asight_lsp.services.run_data import load_run
from asight_lsp.store.runs import Run
from asight_lsp.views.principles import principles
from asight_lsp.views.searchspace import search_space

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts" / "webview"
FAILURES = [{"reason": "InternalError: S_global has duplicate definitions", "count": 17, "stage": "build",
             "log": "/ws/.asight/runs/r1/failures.log"},
            {"reason": "LocalRunner: Timeout, killed after N seconds", "count": 2, "stage": "run",
             "log": "/ws/.asight/runs/r1/failures.log"}]
SHORTFALL = "measured 21 of 40 trials: 17 build(s) failed (most often: InternalError: S_global has duplicate definitions)"


@pytest.fixture(scope="module")
def drawn(extension_build, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("insight")
    run_dir = tmp / "mbr128"
    shutil.copytree(ROOT / "fixtures" / "runs" / "mbr128", run_dir)
    run = Run(run_dir)
    meta = run.load()
    meta.extra["failures"] = FAILURES
    meta.extra["shortfall"] = {"measured": 21, "requested": 40, "text": SHORTFALL}
    run.save(meta)
    agrees = search_space(load_run(run, extract=False))
    # The same run whose re-measured speed-up is 0.5x: the model's 8x at the best candidate contradicts it.
    meta.measurement = {**(meta.measurement or {}), "speedup": {"estimate": 0.5}}
    run.save(meta)
    contradicted = search_space(load_run(run, extract=False))
    found = principles(load_run(run, extract=False))
    short_dir = tmp / "r26"                       # the first 26 records: nothing significant yet
    shutil.copytree(ROOT / "fixtures" / "runs" / "mbr128", short_dir)
    db = short_dir / "database_tuning_record.json"
    db.write_text("\n".join(db.read_text().splitlines()[:26]) + "\n")
    unsettled = principles(load_run(Run(short_dir), extract=False))
    cases = {"agrees": {"kind": "searchSpace", "payload": agrees, "extra": found},
             "unsettled": {"kind": "searchSpace", "payload": agrees, "extra": unsettled},
             "contradicted": {"kind": "searchSpace", "payload": contradicted},
             "loopFailures": {"kind": "loopView", "payload": {**copy.deepcopy(_loop_fixture()), "run": agrees["run"]}}}
    path = tmp / "cases.json"
    path.write_text(json.dumps(cases))
    proc = subprocess.run(["node", str(Path(__file__).with_name("insight.mjs")), str(path), str(ARTIFACTS)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = json.loads(proc.stdout)["cases"]
    for name, f in facts.items():
        assert "error" not in f, (name, f.get("error"))
        assert f["pageErrors"] == [] and f["consoleErrors"] == [], (name, f["pageErrors"], f["consoleErrors"])
    return {"facts": facts, "payloads": cases}


def _loop_fixture() -> dict:
    return json.loads((ROOT / "vscode-extension" / "test" / "fixtures" / "loopView.json").read_text())


def test_a_model_that_agrees_is_drawn_with_its_legend_and_figures(drawn):
    f, p = drawn["facts"]["agrees"], drawn["payloads"]["agrees"]["payload"]["contour"]
    assert p["agreement"]["verdict"] == "agrees"
    assert f["verdict"] == "agrees" and f["contourDraw"] == "full"
    assert f["contourLines"] == len(p["lines"]) > 0
    assert f"n = {p['agreement']['n']}" in f["agreement"] and "ρ = +" in f["agreement"]
    assert f["levels"] and "by the model" in f["levels"]
    assert len(f["sources"]) == len(p["categories"]) and all("ρ = " in s for s in f["sources"])


def test_a_model_contradicted_by_the_measurement_is_not_drawn_and_says_why(drawn):
    f, p = drawn["facts"]["contradicted"], drawn["payloads"]["contradicted"]["payload"]["contour"]
    assert p["agreement"]["contradiction"] and p["lines"] == []
    assert f["contourDraw"] == "none" and f["contourLines"] == 0
    assert f["verdict"] == "disagrees" and "contradicts" in f["agreement"] and "0.50×" in f["agreement"]


def test_failures_are_listed_by_reason_with_the_log_in_every_panel(drawn):
    for name in ("agrees", "loopFailures"):
        f = drawn["facts"][name]
        assert f["failuresTitle"] == "Failed candidates: 19"
        assert f["failures"][0].startswith("17 ×") and "S_global has duplicate definitions" in f["failures"][0]
        assert "run" in f["failures"][1]
        assert f["failuresLog"] == "/ws/.asight/runs/r1/failures.log"
        assert f["shortfall"] == SHORTFALL
    assert (ARTIFACTS / "insight-contradicted.png").stat().st_size > 10_000


def test_principles_show_next_steps_and_the_closest_ranges_with_estimates(drawn):
    f, p = drawn["facts"]["agrees"], drawn["payloads"]["agrees"]["extra"]
    assert len(f["nextSteps"]) == len(p["principles"]) > 0
    assert "--guided-by" in f["nextSteps"][0] and f["nextSteps"][0].startswith("Next: re-tune")
    f, p = drawn["facts"]["unsettled"], drawn["payloads"]["unsettled"]["extra"]
    assert "Closest to significant" in f["principlesText"]
    need = p["closest"][0]["settle"]["candidates_needed"]
    assert f"≈ {need:,} measured candidates would settle it" in f["principlesText"]
    assert len(f["nextSteps"]) == len(p["closest"]) and "--trials" in f["nextSteps"][0]
