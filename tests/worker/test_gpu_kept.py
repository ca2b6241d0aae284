"""A GPU run whose tuned record lost to DLight's default schedule keeps DLight as its result: the
measurement record (``default_candidate.keep_baseline``, what ``remeasure.measure_run`` stores on a
GPU) moves the record to ``defaults``, and ``asight code`` then shows DLight's program through the
real worker, on the adopted H100 run (fixtures/gpu), without a GPU. The medians below are test
inputs (no DLight timing was recorded on the H100); what is checked is the selection."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from asight_lsp.analysis.default_candidate import keep_baseline
from asight_lsp.store.runs import RunStore

pytestmark = [pytest.mark.tvm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "fixtures" / "gpu"
SRC = str(GPU / "matmul1024.py")


def asight(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asight_lsp", *args], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


def measured(tmp_path: Path, dlight_us: float, tuned_us: float) -> Path:
    store = tmp_path / ".asight"
    proc = asight("adopt", str(GPU), "--file", SRC, "--work-dir", str(store))
    assert proc.returncode == 0, proc.stderr
    run = RunStore(str(store)).get("latest")
    meta = run.load()
    meta.measurement = keep_baseline({
        "schema": "asight.measurement/1", "scope": "function", "baseline": {"kind": "dlight"},
        "untuned": {"median_us": dlight_us}, "tuned": {"median_us": tuned_us},
        "verdict": "slower" if tuned_us > dlight_us else "faster",
        "chosen": [{"task": "main", "workload": 0, "trial": 76, "tuning_us": 134.6}], "defaults": []})
    run.save(meta)
    return store


def code(store: Path, *extra: str) -> dict:
    proc = asight("code", SRC, "--run", "latest", "--work-dir", str(store), "--json", *extra)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_when_dlight_wins_the_code_view_shows_dlights_program_and_says_so(tmp_path):
    store = measured(tmp_path, dlight_us=120.0, tuned_us=140.0)
    meta = RunStore(str(store)).get("latest").load()
    assert meta.measurement["chosen"] == [] and meta.measurement["defaults"][0]["trial"] == 76
    view = code(store, "--level", "scheduled")
    assert view["candidate"] == {"trial": None, "kept": "dlight", "latencyUs": 120.0, "best": True,
                                 "tunedTrial": 76, "tunedUs": 140.0}
    assert view["note"].startswith("DLight's default kept: tuned 140.0 µs vs DLight 120.0 µs")
    # DLight's matmul rule: reindexed shared stages and a 2-D grid; trial 76: A_shared and vthread 8
    assert "A_reindex_shared" in view["text"] and 'thread="blockIdx.y"' in view["text"]
    tuned = code(store, "--level", "scheduled", "--candidate", "76")
    assert tuned["candidate"]["trial"] == 76 and "A_reindex_shared" not in tuned["text"]
    assert 'T.thread_binding(8, thread="vthread.x")' in tuned["text"]
    cuda = code(store, "--level", "cuda")
    assert cuda["candidate"]["kept"] == "dlight" and "__global__" in cuda["text"]
    text = asight("code", SRC, "--run", "latest", "--work-dir", str(store), "--level", "cuda").stdout
    assert "DLight's default schedule, kept, 120.0 µs" in text.splitlines()[0]


def test_when_tuning_wins_the_tuned_record_is_the_result(tmp_path):
    store = measured(tmp_path, dlight_us=160.0, tuned_us=134.6)
    meta = RunStore(str(store)).get("latest").load()
    assert [c["trial"] for c in meta.measurement["chosen"]] == [76] and "kept" not in meta.measurement
    view = code(store, "--level", "scheduled")
    assert view["candidate"]["trial"] == 76 and "kept" not in view["candidate"]
    assert "A_reindex_shared" not in view["text"]
