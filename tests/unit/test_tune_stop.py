"""Stopping ``asight tune`` (docs/tuning.md): SIGINT, SIGTERM and a closed terminal (SIGHUP) cancel
the job it follows; ``--cancel RUN`` stops a job started elsewhere (``--detach``, another terminal)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from asight_lsp.store.runs import DB_RECORDS, DB_WORKLOADS, RunMeta, RunStore

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": str(ROOT)}

FOLLOW = textwrap.dedent('''
    import json, os, signal, sys, threading
    from asight_lsp.commands.tune import follow

    class Job:                       # what follow() needs of services.jobs.TuneJob
        done, cancelled = False, 0
        def poll_events(self):
            return []
        def cancel(self):
            self.cancelled += 1
            self.done = True
        def wait(self, timeout=None):
            return {"cancelled": self.cancelled}

    signal.signal(signal.SIGINT, signal.default_int_handler)   # as in a terminal (a background job ignores it)
    before = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)]
    threading.Timer(0.3, os.kill, (os.getpid(), getattr(signal, sys.argv[1]))).start()
    result = follow(Job())
    after = [signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)]
    print(json.dumps({**result, "restored": after == before}))
''')


@pytest.mark.parametrize("name", ["SIGINT", "SIGTERM", "SIGHUP"])
def test_a_stop_signal_cancels_the_followed_job_once(name):
    proc = subprocess.run([sys.executable, "-c", FOLLOW, name], capture_output=True, text=True, timeout=60, env=ENV)
    assert proc.returncode == 0, (proc.returncode, proc.stderr)      # the signal did not kill the CLI
    assert json.loads(proc.stdout) == {"cancelled": 1, "restored": True}


def fake_job(tmp_path: Path, run_dir: Path | None = None) -> subprocess.Popen:
    """A process that looks like a tuning job to ``jobs.pid_alive`` (its command line names tune_job)
    and, given ``run_dir``, like that run's own job to ``jobs.runs_job_of`` (the only one cancel signals)."""
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)", "asight_lsp.worker.tune_job",
                             *([str(run_dir)] if run_dir else [])], start_new_session=True, cwd=tmp_path)


def test_cancel_stops_a_job_started_elsewhere_and_keeps_its_records(tmp_path):
    store = RunStore(tmp_path / ".asight")
    run = store.create(RunMeta(id="mm-20260101-000000-0000", file="m.py", function="mm", state="running",
                               pid=None, sessions=[{"started": time.time()}]))
    job = fake_job(tmp_path, run.path.resolve())
    run.update(pid=job.pid)
    mbr = ROOT / "fixtures" / "runs" / "mbr128"
    for name in (DB_RECORDS, DB_WORKLOADS):
        shutil.copy(mbr / name, run.path / name)
    try:
        started = time.monotonic()
        proc = subprocess.run([sys.executable, "-m", "asight_lsp", "tune", "--cancel", "mm-2026", "--work-dir",
                               str(store.root)], capture_output=True, text=True, timeout=60, env=ENV)
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == f"run {run.id}: cancelled; 40 records kept ({run.path})"
        assert job.wait(5) == -signal.SIGTERM and time.monotonic() - started < 30
        meta = run.load()
        assert meta.state == "cancelled" and meta.trials_done == 40 and meta.error is None
        again = subprocess.run([sys.executable, "-m", "asight_lsp", "tune", "--cancel", run.id, "--work-dir",
                                str(store.root)], capture_output=True, text=True, timeout=60, env=ENV)
        assert again.returncode == 0 and "is not tuning (state cancelled): nothing to stop" in again.stdout
    finally:
        if job.poll() is None:
            job.kill()


def test_tune_without_a_file_or_cancel_is_a_usage_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "asight_lsp", "tune"], capture_output=True, text=True, timeout=60,
                          env=ENV, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stderr.strip().splitlines() == [
        "asight: error: the following arguments are required: file (or --cancel RUN)"]
