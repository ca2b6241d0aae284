"""Stopping `asight tune` with a real tuning job (docs/tuning.md): SIGTERM or a closed terminal
(SIGHUP) to the CLI ends its job with the records kept; `--detach` leaves the job running and
`--cancel RUN` stops it."""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from asight_lsp.store.runs import Run, RunStore, read_records

pytestmark = [pytest.mark.tvm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures"
ENV = {**os.environ, "PYTHONPATH": str(ROOT), "ASIGHT_TRIALS_PER_ITER": "8"}


def cli(*args: str, cwd: Path, **kwargs) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "asight_lsp", *args], cwd=cwd, env=ENV, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, **kwargs)


def wait_for_progress(proc: subprocess.Popen, timeout: float = 240) -> list[str]:
    seen, deadline = [], time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        seen.append(line)
        if re.match(r"\s+\d+(/\d+)? trials?\b", line):    # a progress line: "  8/400 trials  best so far ..."
            return seen
        assert line or proc.poll() is None, (seen, proc.stderr.read())
    pytest.fail(f"no progress line in time: {seen}")


def job_gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


@pytest.mark.parametrize("name", ["SIGTERM", "SIGHUP"])
def test_a_signal_to_the_cli_ends_its_job(tmp_path, name):
    proc = cli("tune", str(FIX / "matmul64.py"), "--trials", "400", "--work-dir", str(tmp_path), cwd=tmp_path)
    try:
        wait_for_progress(proc)
        [run] = RunStore(tmp_path).all()
        pid = run.load().pid
        proc.send_signal(getattr(signal, name))
        assert proc.wait(30) == 130, proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
    meta = run.load()
    assert meta.state == "cancelled" and meta.error is None
    assert 8 <= meta.trials_done == len(read_records(run.path)) < 400
    deadline = time.monotonic() + 10
    while not job_gone(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert job_gone(pid)


def test_detach_leaves_the_job_running_and_cancel_stops_it(tmp_path):
    proc = cli("tune", str(FIX / "matmul64.py"), "--trials", "400", "--work-dir", str(tmp_path), "--detach",
               "--json", cwd=tmp_path)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    info = json.loads(out)
    assert info["detached"] is True and info["cancel"] == f"asight tune --cancel {info['id']} --work-dir {tmp_path}"
    run = Run(info["run_dir"])
    deadline = time.monotonic() + 240
    while len(read_records(run.path)) < 8:           # the job goes on without the CLI
        assert time.monotonic() < deadline and run.load().state in ("queued", "running"), run.load().error
        time.sleep(0.5)
    stop = subprocess.run([sys.executable, "-m", "asight_lsp", "tune", "--cancel", info["id"], "--work-dir",
                           str(tmp_path)], capture_output=True, text=True, timeout=60, env=ENV)
    assert stop.returncode == 0, stop.stderr
    meta = run.load()
    assert stop.stdout.startswith(f"run {info['id']}: cancelled; {meta.trials_done} records kept")
    assert meta.state == "cancelled" and meta.trials_done >= 8 and job_gone(info["pid"])
