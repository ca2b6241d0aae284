"""The timing harness: interleaved rounds, repeats of several calls, and the load it saw."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from asight_lsp.worker import harness

pytestmark = pytest.mark.tvm


def _sleeper(seconds: float, log: list, label: str):
    """A program that takes ``seconds`` per call (sleeping: it uses no CPU of its own)."""
    def make(calls: int):
        def run():
            log.append((label, calls))
            start = time.perf_counter()
            for _ in range(calls):
                time.sleep(seconds)
            return (time.perf_counter() - start) / calls
        return run
    return make


def test_rounds_interleave_and_repeats_hold_several_calls():
    log: list = []
    programs = [harness.Program("a", _sleeper(0.004, log, "a")), harness.Program("b", _sleeper(0.001, log, "b"))]
    raw = harness.time_rounds(programs, budget_s=0.0)
    assert raw["rounds"] == harness.MIN_ROUNDS and len(raw["samples_us"]["a"]) == harness.MIN_ROUNDS
    calls = raw["calls_per_repeat"]
    assert calls["a"] >= harness.MIN_CALLS and calls["b"] >= harness.MIN_CALLS
    assert calls["b"] * 0.001 >= harness.REPEAT_S * 0.9          # a repeat lasts at least ~20 ms
    timed = [label for label, k in log if k == calls[label]]      # after the calibration's single calls
    assert timed[:4] == ["a", "b", "b", "a"]                       # order alternates every round
    assert 3500 < sorted(raw["samples_us"]["a"])[2] < 20000


def test_other_processes_on_the_cores_are_seen():
    spinners = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(2)]
    try:
        time.sleep(0.3)
        log: list = []
        raw = harness.time_rounds([harness.Program("x", _sleeper(0.01, log, "x"))], budget_s=1.0)
    finally:
        for proc in spinners:
            proc.kill()
            proc.wait()
    load = raw["load"]
    assert load["other_cores"] > 0.5 and load["seconds"] > 0.5
    assert len(load["loadavg"]) == 2
