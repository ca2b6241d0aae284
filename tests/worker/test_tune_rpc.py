"""Measurement through TVM's RPC tracker on loopback: one tracker and two servers started by the test."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from asight_lsp.errors import AsightError
from asight_lsp.services.tuning import TuneRequest, start_tune
from asight_lsp.store.runs import read_records

pytestmark = [pytest.mark.tvm, pytest.mark.slow]

FIX = Path(__file__).resolve().parents[2] / "fixtures"
KEY = "asight-test"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.3)
    pytest.fail(f"timed out waiting for {what}")


def servers_registered(port: int) -> int:
    out = subprocess.run([sys.executable, "-m", "tvm.exec.query_rpc_tracker", "--host", "127.0.0.1",
                          "--port", str(port)], capture_output=True, text=True, timeout=60).stdout
    return sum(1 for line in out.splitlines() if f"server:{KEY}" in line)


@pytest.fixture
def tracker(tmp_path):
    """``HOST:PORT:KEY`` of a live tracker with two servers; all three are stopped afterwards."""
    port = free_port()
    procs, logs = [], []

    def start(name: str, *args: str) -> None:
        log = tmp_path / f"{name}.log"
        logs.append(log)
        procs.append(subprocess.Popen([sys.executable, "-m", *args], stdout=log.open("w"),
                                      stderr=subprocess.STDOUT, start_new_session=True, env=os.environ.copy()))

    try:
        start("tracker", "tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(port),
              "--port-end", str(port + 1))
        wait_for(lambda: "bind to" in logs[0].read_text(), 60, "the tracker")
        for i in range(2):
            start(f"server{i}", "tvm.exec.rpc_server", "--tracker", f"127.0.0.1:{port}", "--key", KEY,
                  "--host", "127.0.0.1", "--port", str(free_port()), "--port-end", "65000")
        wait_for(lambda: servers_registered(port) == 2, 90, "two RPC servers")
        yield f"127.0.0.1:{port}:{KEY}", logs
    finally:
        for proc in procs:
            if proc.poll() is None:
                os.killpg(proc.pid, 15)
        for proc in procs:
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, 9)
                proc.wait(10)


def test_tune_through_rpc_tracker(tmp_path, tracker):
    rpc, logs = tracker
    job = start_tune(TuneRequest(file=str(FIX / "matmul64.py"), trials=8, rpc=rpc, store_root=str(tmp_path / "s")))
    meta = job.wait(400)
    assert meta.state == "done", meta.error
    assert meta.rpc == rpc and meta.trials_done == 8 == len(read_records(job.run.path))
    assert meta.baseline_us > 0 and 0 < meta.best_us < meta.baseline_us
    loads = [log.read_text().count("load_module") for log in logs[1:]]
    assert sum(loads) >= 9, loads          # 8 trials + the baseline ran on the RPC servers
    assert all(n > 0 for n in loads), loads   # and both servers took work


def test_unreachable_tracker_is_a_clear_error_before_a_run_is_made(tmp_path):
    """Probe 4, F6: the job's own check left a failed run behind (which the code view then showed)."""
    with pytest.raises(AsightError, match="^cannot reach the RPC tracker at 127.0.0.1:[0-9]+: Connection refused$"):
        start_tune(TuneRequest(file=str(FIX / "matmul64.py"), trials=8, rpc=f"127.0.0.1:{free_port()}:nokey",
                               store_root=str(tmp_path)))
    assert not (tmp_path / "runs").exists()
