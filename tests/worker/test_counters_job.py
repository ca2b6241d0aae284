"""Counters collected by ASight itself (``asight counters``, and the tuning job's ``--counters-budget``
step, both ``worker/counters.collect``), exercised without a GPU:

* a fake ``ncu`` on PATH (tests/worker/fake_ncu/ncu) replays the recorded H100 CSV
  (fixtures/gpu/h100_ncu_first3.csv), so the real build and export of every program, the real CSV
  parse and the real counters.jsonl writing run; only the device check is skipped
  (``ASIGHT_COUNTERS_SKIP_DEVICE_CHECK=1``: nothing runs on a device under a fake ncu);
* without ncu, without a device, and on a CPU run's tuning job: nothing written, the reason said in
  one line (CLI, run.json ``extra.counters``) and the contour stays the model, labelled."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from asight_lsp.store.runs import RunStore

pytestmark = [pytest.mark.tvm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "fixtures" / "gpu"
FAKE = Path(__file__).with_name("fake_ncu")
BARE_PATH = "/usr/bin:/bin"            # no ncu there (nor on this machine at all)


def asight(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asight_lsp", *args], capture_output=True, text=True, timeout=900,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


@pytest.fixture
def adopted(tmp_path):
    """The H100 run adopted without its counters (the collector writes them)."""
    folder = tmp_path / "tuned"
    folder.mkdir()
    for name in ("database_workload.json", "database_tuning_record.json"):
        (folder / name).write_bytes((GPU / name).read_bytes())
    store = tmp_path / ".asight"
    proc = asight("adopt", str(folder), "--file", str(GPU / "matmul1024.py"), "--work-dir", str(store))
    assert proc.returncode == 0, proc.stderr
    run = RunStore(str(store)).get("latest")
    assert not (run.path / "counters.jsonl").exists()
    return store, run


def test_a_replaying_ncu_gives_counters_for_the_baseline_the_best_and_more_within_the_budget(adopted, tmp_path):
    store, run = adopted
    log = tmp_path / "ncu-calls.jsonl"
    env = {"PATH": f"{FAKE}:{BARE_PATH}", "ASIGHT_COUNTERS_SKIP_DEVICE_CHECK": "1",
           "FAKE_NCU_CSV": str(GPU / "h100_ncu_first3.csv"), "FAKE_NCU_LOG": str(log)}
    proc = asight("counters", "--run", run.id, "--work-dir", str(store), "--budget-s", "1", env=env)
    assert proc.returncode == 0, proc.stderr
    calls = [json.loads(x) for x in log.read_text().splitlines()]
    lines = [json.loads(x) for x in (run.path / "counters.jsonl").read_text().splitlines()]
    measured = sorted((r for r in run.records() if r["latency_us"] is not None), key=lambda r: r["latency_us"])
    assert len(lines) == len(calls) >= 2                       # the baseline and the best, whatever the budget
    assert [x["candidate"] for x in lines] == ["baseline"] + [r["trial"] for r in measured[:len(lines) - 1]]
    assert lines[1]["candidate"] == 76
    assert len(lines) < 1 + len(measured), "a 1 s budget cannot profile 66 candidates"
    skipped = 1 + len(measured) - len(lines)
    assert f"{len(lines)} programs profiled (baseline included); {skipped} left out by the 1 s budget" in proc.stdout
    from asight_lsp.analysis import ncu
    assert calls[0]["metrics"] == ncu.METRICS
    first = lines[0]["metrics"]                                # kernel 0 of the recorded CSV, parsed for real
    assert first["launch__registers_per_thread"] == 128 and first["launch__shared_mem_per_block_static"] == 13056
    assert first["gpu__time_duration.sum"] == 216768 and first["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == 1.16
    assert lines[0]["tool"].startswith("ncu (") and str(FAKE) in lines[0]["tool"]
    space = json.loads(asight("space", "--run", run.id, "--work-dir", str(store), "--json").stdout)
    origin = space["contour"]["origin"]
    assert origin["origin"] == "measured" and origin["against"] == "the baseline's counters"
    assert origin["profiled"] == len(lines) - 1


def test_without_ncu_or_without_a_device_nothing_is_written_and_the_reason_is_one_line(adopted):
    store, run = adopted
    proc = asight("counters", "--run", run.id, "--work-dir", str(store), "--budget-s", "5",
                  env={"PATH": BARE_PATH, "ASIGHT_COUNTERS_SKIP_DEVICE_CHECK": "1"})
    assert proc.returncode == 2
    assert proc.stderr.strip().endswith("not collected: Nsight Compute (ncu) is not installed: the contour stays "
                                        "the model, labelled as a model")
    proc = asight("counters", "--run", run.id, "--work-dir", str(store), "--budget-s", "5",
                  env={"PATH": f"{FAKE}:{BARE_PATH}", "ASIGHT_COUNTERS_SKIP_DEVICE_CHECK": "0"})
    assert proc.returncode == 2 and "no CUDA device on this machine" in proc.stderr
    assert not (run.path / "counters.jsonl").exists()


def test_the_tuning_job_asked_for_counters_on_a_cpu_says_why_it_has_none(tmp_path):
    store = tmp_path / ".asight"
    proc = asight("tune", str(ROOT / "fixtures" / "matmul64.py"), "--trials", "2", "--counters-budget", "30",
                  "--work-dir", str(store))
    assert proc.returncode == 0, proc.stderr
    meta = RunStore(str(store)).get("latest").load()
    counters = meta.extra["counters"]
    assert meta.state == "done" and meta.extra["counters_request"] == {"budget_s": 30.0}
    assert counters["status"] == "unavailable" and counters["contour"] == "model (MetaSchedule features)"
    why = "counters are Nsight Compute's: the run's target is llvm, not a CUDA GPU"
    assert counters["text"] == f"not collected: {why}; the contour stays the model (MetaSchedule features)"
    assert f"counters not collected: {why}" in proc.stdout
    assert not (RunStore(str(store)).get("latest").path / "counters.jsonl").exists()
    space = json.loads(asight("space", "--run", "latest", "--work-dir", str(store), "--json").stdout)
    assert space["contour"]["origin"]["origin"] == "model"
    assert space["contour"]["origin"]["why"].endswith(f"(the tuning job's counters: {why})")
    assert space["contour"]["legend"][-1] == (f"not measured: the run has no counters.jsonl (the tuning job's counters: "
                                              f"{why}); the contour is the model (MetaSchedule features)")


def test_an_error_of_the_product_is_said_as_it_is_and_another_with_its_type():
    """Outside probe 14, F6: "not collected: AsightError: run R: run.json is unreadable (…)"."""
    from asight_lsp.errors import AsightError
    from asight_lsp.worker.counters import error_line
    assert error_line(AsightError("run R: run.json is unreadable (x)\nmore")) == "run R: run.json is unreadable (x)"
    assert error_line(KeyError("k")) == "KeyError: 'k'"
