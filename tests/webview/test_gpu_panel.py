"""The loop view's GPU block drawn in headless Chromium from the payload the real CLI builds on the
adopted H100 run (fixtures/gpu: `asight adopt` then `asight loops --json`), without a GPU."""
from __future__ import annotations

import copy
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from asight_lsp.analysis.default_candidate import keep_baseline
from asight_lsp.store.runs import RunStore

pytestmark = [pytest.mark.tvm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "fixtures" / "gpu"
ARTIFACTS = ROOT / "test-artifacts" / "webview"
HOSTILE = '<img src=x onerror="window.__pwned=1">'


def asight(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asight_lsp", *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def loop_payload(store: Path) -> dict:
    proc = asight("loops", "--run", "latest", "--work-dir", str(store), "--json")
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)["loopView"]


@pytest.fixture(scope="module")
def drawn(extension_build, tmp_path_factory) -> dict:
    tmp = tmp_path_factory.mktemp("gpu-panel")
    measured, unmeasured = tmp / "measured" / ".asight", tmp / "unmeasured" / ".asight"
    proc = asight("adopt", str(GPU), "--file", str(GPU / "matmul1024.py"), "--work-dir", str(measured))
    assert proc.returncode == 0, proc.stderr
    bare = tmp / "bare"                                       # the same database without counters.jsonl
    bare.mkdir()
    for name in ("database_workload.json", "database_tuning_record.json"):
        (bare / name).write_bytes((GPU / name).read_bytes())
    proc = asight("adopt", str(bare), "--file", str(GPU / "matmul1024.py"), "--work-dir", str(unmeasured))
    assert proc.returncode == 0, proc.stderr
    partial = tmp / "partial" / ".asight"                      # counters of an ncu run without the throughput metrics
    some = tmp / "some"
    shutil.copytree(bare, some)
    keep = ("launch__registers_per_thread", "launch__shared_mem_per_block_static",
            "sm__warps_active.avg.pct_of_peak_sustained_active")
    (some / "counters.jsonl").write_text("".join(
        json.dumps({**entry, "metrics": {k: v for k, v in entry["metrics"].items() if k in keep}}) + "\n"
        for entry in map(json.loads, (GPU / "counters.jsonl").read_text().splitlines())))
    proc = asight("adopt", str(some), "--file", str(GPU / "matmul1024.py"), "--work-dir", str(partial))
    assert proc.returncode == 0, proc.stderr
    with_counters, without = loop_payload(measured), loop_payload(unmeasured)
    spaces = {}
    for key, store in (("measured", measured), ("unmeasured", unmeasured)):
        proc = asight("space", "--run", "latest", "--work-dir", str(store), "--json")
        assert proc.returncode == 0, proc.stderr
        spaces[key] = json.loads(proc.stdout)
    # the same run once its re-measurement found DLight faster (medians as test inputs; no GPU here)
    run = RunStore(str(measured)).get("latest")
    meta = run.load()
    meta.measurement = keep_baseline({"untuned": {"median_us": 120.0}, "tuned": {"median_us": 140.0},
                                      "verdict": "slower", "baseline": {"kind": "dlight"},
                                      "chosen": [{"task": "main", "trial": 76}], "defaults": []})
    run.save(meta)
    kept = loop_payload(measured)
    hostile = copy.deepcopy(with_counters)
    hostile["gpu"]["shared"] = [HOSTILE]
    hostile["gpu"]["limiter"]["text"] = HOSTILE
    cpu = json.loads((ROOT / "vscode-extension" / "test" / "fixtures" / "loopView.json").read_text())
    cases = {"measured": {"kind": "loopView", "payload": with_counters},
             "narrow": {"kind": "loopView", "payload": with_counters, "viewport": {"width": 420, "height": 800}},
             "unmeasured": {"kind": "loopView", "payload": without},
             "partial": {"kind": "loopView", "payload": loop_payload(partial)},
             "kept": {"kind": "loopView", "payload": kept},
             "spaceMeasured": {"kind": "searchSpace", "payload": spaces["measured"]},
             "spaceModel": {"kind": "searchSpace", "payload": spaces["unmeasured"]},
             "hostile": {"kind": "loopView", "payload": hostile},
             "cpu": {"kind": "loopView", "payload": cpu}}
    path = tmp / "cases.json"
    path.write_text(json.dumps(cases))
    proc = subprocess.run(["node", str(Path(__file__).with_name("gpu.mjs")), str(path), str(ARTIFACTS)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    facts = json.loads(proc.stdout)["cases"]
    for name, f in facts.items():
        assert "error" not in f, (name, f.get("error"))
        assert f["pageErrors"] == [] and f["consoleErrors"] == [] and f["violations"] == [], (name, f)
    return {"facts": facts, "payloads": cases}


def test_the_gpu_block_draws_binding_memory_and_the_measured_launch(drawn):
    f, g = drawn["facts"]["measured"], drawn["payloads"]["measured"]["payload"]["gpu"]
    assert g["trial"] == 76 and g["axes"] == {"blockIdx.x": 256, "threadIdx.x": 64, "vthread": 8}
    assert f["gpuBlocks"] == 1 and f["title"] == "GPU — best candidate (trial 76)" and f["trial"] == "76"
    assert f["axes"] == [["blockIdx.x", "256"], ["threadIdx.x", "64"], ["vthread", "8"]], "grid, block, vthread order"
    assert f["bindingText"] == "blockIdx.x 256 × threadIdx.x 64 · vthread 8 (256 blocks of 64 threads)"
    assert f["facts"]["shared"] == "A_shared, B_shared" and f["facts"]["local"] == "C_local"
    assert f["facts"]["registers"] == "128" and f["facts"]["shared_bytes"] == "13,056 B"
    assert f["facts"]["occupancy"] == "6.1 %"
    assert f["limiterKind"] == "latency-bound"
    assert f["limiter"].startswith("limiting factor: latency-bound: 6 % of warp slots busy, 128 registers a thread")
    assert "measured counters (counters.jsonl)" in f["source"]
    assert f["stages"] >= 1 and f["blockBeforeStages"], "the GPU block leads the per-stage cards"
    assert (ARTIFACTS / "gpu-measured.png").stat().st_size > 10_000


def test_without_counters_the_block_keeps_the_schedule_and_says_what_is_not_measured(drawn):
    f = drawn["facts"]["unmeasured"]
    assert f["gpuBlocks"] == 1 and f["axes"] == drawn["facts"]["measured"]["axes"]
    assert set(f["facts"]) == {"shared", "local"} and f["limiter"] is None
    assert f["source"].startswith("registers, occupancy, limiting factor: not measured")


def test_with_some_of_the_counters_the_block_says_which_figure_is_not_measured_and_why(drawn):
    f = drawn["facts"]["partial"]
    assert f["facts"]["registers"] == "128" and f["facts"]["occupancy"] == "6.1 %" and f["limiter"] is None
    assert f["source"] == "registers, shared memory, occupancy: measured counters (counters.jsonl)"
    assert f["notMeasured"] == ["limiting factor: not measured (the counters lack sm__throughput.avg.pct_of_peak_"
                                "sustained_elapsed, dram__throughput.avg.pct_of_peak_sustained_elapsed)"]
    assert drawn["facts"]["measured"]["notMeasured"] == [] and drawn["facts"]["unmeasured"]["notMeasured"] == []


def test_the_block_fits_a_narrow_panel(drawn):
    f = drawn["facts"]["narrow"]
    assert f["gpuBlocks"] == 1 and not f["overflowX"] and f["blockWidth"] <= 420


def test_names_in_the_block_are_text_and_a_cpu_run_has_no_block(drawn):
    f = drawn["facts"]["hostile"]
    assert f["pwned"] is None and f["imgs"] == 0 and HOSTILE in f["text"]
    cpu = drawn["facts"]["cpu"]
    assert cpu["gpuBlocks"] == 0 and cpu["stages"] >= 1


def test_when_dlight_was_kept_the_block_says_it_shows_the_best_tuned_candidate(drawn):
    f = drawn["facts"]["kept"]
    assert f["gpuBlocks"] == 1 and f["kept"] == ("DLight's default kept: tuned 140.0 µs vs DLight 120.0 µs: the run "
                                                 "keeps DLight's default schedule; this is the best tuned candidate")
    assert drawn["facts"]["measured"]["kept"] is None


def test_the_search_space_legend_names_the_measured_counters_of_the_gpu_run(drawn):
    f, p = drawn["facts"]["spaceMeasured"], drawn["payloads"]["spaceMeasured"]["payload"]["contour"]
    assert f["originKind"] == "measured" and f["contourLines"] == len(p["lines"]) > 0
    assert f["origin"] == ("contour: measured (Nsight Compute) (41 of 66 candidates profiled; gains against "
                           f"{p['origin']['against']})")
    assert "measured; dashed" in f["levels"] and "by the model" not in f["levels"]
    model = drawn["facts"]["spaceModel"]
    assert model["originKind"] == "model" and model["origin"] == "contour: model (MetaSchedule features)"
    assert "by the model" in model["levels"]
