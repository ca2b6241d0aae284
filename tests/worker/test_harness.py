"""The timing harness: interleaved rounds, repeats of several calls, and the load it saw."""
from __future__ import annotations

import subprocess
import sys
import threading
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
    assert timed[:2] == ["a", "b"]                                 # one untimed repeat each: a round's cost
    assert timed[2:6] == ["a", "b", "b", "a"]                      # order alternates every round
    assert len(timed) == 2 + 2 * harness.MIN_ROUNDS
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


def _flusher(timed_s: float, untimed_s: float):
    """A program whose calls take ``timed_s`` each as timed, after ``untimed_s`` of work it does not
    time (as a cold timer's flush before each call)."""
    def make(calls: int):
        def run():
            for _ in range(calls):
                time.sleep(untimed_s)
            time.sleep(timed_s * calls)
            return timed_s
        return run
    return make


def test_the_budget_counts_what_a_timer_does_but_does_not_time():
    raw = harness.time_rounds([harness.Program("cold", _flusher(0.002, 0.004))], budget_s=0.6)
    # 10 calls a repeat (20 ms timed) cost ~60 ms a round: ~10 rounds fit 0.6 s, not 30
    assert raw["calls_per_repeat"]["cold"] == 10
    assert harness.MIN_ROUNDS <= raw["rounds"] <= 12
    assert raw["seconds"] < 0.6 * 1.6


def _spinner(seconds: float) -> threading.Thread:
    """A thread that keeps one core busy for ``seconds``, as a runtime's pool does after a call."""
    def spin(until: float = time.perf_counter() + seconds):
        while time.perf_counter() < until:
            pass
    thread = threading.Thread(target=spin)
    thread.start()
    return thread


def test_quiesce_waits_until_the_process_threads_stop_spinning():
    """A runtime's pool spins after a call (TVM ~110 ms here): the next block waits for it to stop."""
    stop = time.perf_counter() + 0.3
    spinner = _spinner(0.3)
    waited = harness.quiesce()
    after = time.perf_counter()
    spinner.join()
    assert waited >= 0.25 and after >= stop - 0.02          # it waited for the spinning thread, not a fixed pause
    before = time.process_time()
    time.sleep(0.05)
    assert time.process_time() - before < 0.02                           # and the process is quiet afterwards
    assert harness.quiesce() < 0.1                            # a quiet process: one short window


def test_quiesce_gives_up_at_its_cap(monkeypatch):
    """A pool that never stops (its CPU time grows with the clock): quiesce stops waiting at its cap.
    The spinning is simulated: a real spinner thread gets too little CPU on a loaded machine to look busy."""
    monkeypatch.setattr(harness, "_own_cpu_s", time.perf_counter)
    waited = harness.quiesce(max_s=0.2)
    assert 0.2 <= waited < 0.4
