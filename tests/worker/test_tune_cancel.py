"""Stopping a real tuning job: cancel (records kept, < 2 s), kill -9 (run readable, failed), then resume."""
from __future__ import annotations

import json
import os
import re
import signal
import time
from pathlib import Path

import psutil
import pytest

from asight_lsp.services.tuning import TuneRequest, start_tune
from asight_lsp.store.runs import read_records

pytestmark = [pytest.mark.tvm, pytest.mark.slow]

FIX = Path(__file__).resolve().parents[2] / "fixtures"


@pytest.fixture
def small_batches(monkeypatch):
    monkeypatch.setenv("ASIGHT_TRIALS_PER_ITER", "8")   # the job inherits it: progress every 8 trials


def start_and_wait_for_progress(tmp_path, trials=48, timeout=240):
    job = start_tune(TuneRequest(file=str(FIX / "matmul64.py"), trials=trials, store_root=str(tmp_path), seed=1))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(e["type"] == "progress" for e in job.poll_events()):
            return job
        assert not job.done, job.run.load().error
        time.sleep(0.1)
    job.cancel()
    pytest.fail("no progress event in time")


def group_members(pgid: int) -> list[int]:
    out = []
    for proc in psutil.process_iter(["pid"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.status() != psutil.STATUS_ZOMBIE:
                out.append(proc.pid)
        except (ProcessLookupError, psutil.Error):
            continue
    return out


def test_cancel_mid_run_keeps_records(tmp_path, small_batches, monkeypatch):
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))            # the job's temporary files, where the test sees them
    job = start_and_wait_for_progress(tmp_path)
    time.sleep(0.5)                                    # into the next batch (search/build/run)
    assert group_members(job.pid), "the job's process group should be alive"
    assert {p.name[:14] for p in temp.iterdir() if p.name.startswith("asight-")} == {"asight-builds-",
                                                                                    "asight-worker-"}
    started = time.monotonic()
    job.cancel()
    meta = job.wait(10)
    elapsed = time.monotonic() - started
    assert elapsed < 2.0, elapsed
    assert meta.state == "cancelled" and meta.error is None
    records = read_records(job.run.path)
    assert len(records) >= 8 and meta.trials_done == len(records) < 48
    assert job.run.events()[-1]["type"] == "finished" and job.run.events()[-1]["state"] == "cancelled"
    assert group_members(job.pid) == []                # builder/runner workers are gone too
    assert [p for p in temp.iterdir() if p.name.startswith("asight-")] == []   # and their libraries and folders


def test_kill9_leaves_readable_failed_run_that_resumes(tmp_path, small_batches, monkeypatch):
    temp = tmp_path / "tmp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))            # the job's temporary files, where the test sees them
    job = start_and_wait_for_progress(tmp_path)
    os.kill(job.pid, signal.SIGKILL)
    meta = job.wait(10)
    assert meta.state == "failed" and "signal 9" in meta.error
    orphans = [p for p in temp.iterdir() if p.name.startswith(f"asight-builds-{job.pid}-")]
    assert len(orphans) == 1                           # no atexit ran: the next job's builder removes it
    kept = read_records(job.run.path)
    assert len(kept) >= 8 and meta.trials_done == len(kept)
    assert group_members(job.pid) == []
    # a torn last line (a job killed while appending) must not break TVM's database on resume
    with job.run.records_path.open("a") as out:
        out.write('[0,[[[["GetSBlock",[],["C","main"],["b0"]],')
    assert len(read_records(job.run.path)) == len(kept)
    again = start_tune(TuneRequest(file=str(FIX / "matmul64.py"), trials=len(kept) + 8, store_root=str(tmp_path)))
    assert again.run.path == job.run.path
    meta = again.wait(240)
    assert meta.state == "done", meta.error
    assert len(read_records(job.run.path)) == len(kept) + 8 == meta.trials_done
    assert [s["state"] for s in meta.sessions] == ["failed", "done"]
    assert [p for p in temp.iterdir() if p.name.startswith("asight-builds-")] == []


def test_ctrl_c_in_cli_cancels_within_2s(tmp_path, small_batches):
    """Ctrl-C reaches the CLI (the job runs in its own session); the CLI cancels the job, exits 130."""
    import subprocess
    import sys
    root = FIX.parent
    proc = subprocess.Popen([sys.executable, "-m", "asight_lsp", "tune", str(FIX / "matmul64.py"), "--trials", "48",
                             "--work-dir", str(tmp_path)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(root)})
    lines = []
    for line in proc.stdout:
        lines.append(line)
        if re.match(r"\s+\d+(/\d+)? trials?\b", line):    # a progress line: "  8/48 trials  best so far ..."
            break
    assert any(line.startswith("tuning ") for line in lines), lines
    started = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    elapsed = time.monotonic() - started
    assert proc.returncode == 130, (out, err)
    assert elapsed < 2.0, elapsed
    assert "cancelling" in out and "state    cancelled" in out, out
    run_dir = next((tmp_path / "runs").iterdir())
    meta = json.loads((run_dir / "run.json").read_text())
    assert meta["state"] == "cancelled" and meta["trials_done"] == len(read_records(run_dir)) >= 8
    assert group_members(meta["pid"]) == []
