"""The one timing harness (TVM side): programs timed in interleaved rounds, with the machine's load.

Every latency ASight reports as a headline comes from here (docs/measurement.md):

* each program is warmed up and calibrated, then timed in *repeats* of ``k`` calls run back to
  back (``time_evaluator(number=k, repeat=1)``: the mean per call), with ``k`` large enough for a
  repeat of ``REPEAT_S`` and never below ``MIN_CALLS`` (a slow program is not a single noisy call);
* programs take turns within each round (A B, then B A, ...), so a load spike hits all of them;
* at least ``MIN_ROUNDS`` rounds, more while the time budget lasts (``MAX_ROUNDS`` at most); a
  round's cost is the wall time of one untimed repeat of each program (what a timer does but does
  not time, a cold flush, counts);
* ``/proc/stat`` and ``/proc/loadavg`` are read around the rounds: how much CPU other processes
  used and how much the hypervisor stole while measuring.
"""
from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

REPEAT_S = 0.02
MIN_CALLS = 2
MIN_ROUNDS = 5
MAX_ROUNDS = 40
BUDGET_S = float(os.environ.get("ASIGHT_MEASURE_BUDGET_S", "1.5"))
HARNESS = ("interleaved rounds: programs take turns (order alternating each round); a repeat = k calls "
           "timed together (tvm time_evaluator number=k), the per-call mean; k >= 2 and a repeat >= 20 ms")


@dataclass
class Program:
    """One program to time: ``timer(k)`` returns a callable that runs k calls and gives the mean
    seconds per call."""
    label: str
    timer: Callable[[int], Callable[[], float]]


COLD = "cache_flush_cpu_non_first_arg"     # TVM's CPU cache flush of every argument but the first
COLD_CALLS = 20    # at most this many cold calls a repeat: each is timed alone, and its flush (not timed,
                   # but in the round's wall time the budget counts) can cost more than a small kernel's call


def evaluator_timer(time_evaluator, name: str, device, args: list, cold: bool = False) -> Callable[[int], Callable[[], float]]:
    """A ``Program.timer`` over a TVM ``time_evaluator`` (a runtime module's or a Relax VM's).
    ``cold``: each of the k calls (at most ``COLD_CALLS``) is timed alone after its arguments but the
    first were flushed from the CPU caches (the flush is not timed); the repeat's figure is their mean."""
    def make(calls: int):
        if cold:
            evaluate = time_evaluator(name, device, number=1, repeat=min(calls, COLD_CALLS), min_repeat_ms=0,
                                      f_preproc=COLD)
            return lambda: float(np.mean(evaluate(*args).results))
        evaluate = time_evaluator(name, device, number=calls, repeat=1, min_repeat_ms=0)
        return lambda: float(evaluate(*args).results[0])
    return make


def time_rounds(programs: list[Program], budget_s: float | None = None, min_rounds: int = MIN_ROUNDS,
                max_rounds: int = MAX_ROUNDS) -> dict:
    """Time ``programs`` in interleaved rounds; per program the per-call mean of every repeat (µs).

    Returns ``{"samples_us": {label: [...]}, "calls_per_repeat": {label: k}, "rounds", "seconds",
    "load": {...}, "threads", "method"}``.  All lists have one entry per round.
    """
    budget_s = BUDGET_S if budget_s is None else budget_s
    watch = LoadWatch()
    per_call = {p.label: _calibrate(p) for p in programs}
    calls = {label: max(MIN_CALLS, math.ceil(REPEAT_S / max(t, 1e-9))) for label, t in per_call.items()}
    timers = {p.label: p.timer(calls[p.label]) for p in programs}
    round_s = sum(_wall_s(timers[p.label]) for p in programs)
    rounds = int(np.clip(budget_s / max(round_s, 1e-9), min_rounds, max_rounds))
    samples: dict[str, list[float]] = {p.label: [] for p in programs}
    started = time.perf_counter()
    for r in range(rounds):
        order = programs if r % 2 == 0 else list(reversed(programs))
        for program in order:
            samples[program.label].append(timers[program.label]() * 1e6)
    return {"samples_us": samples, "calls_per_repeat": calls, "rounds": rounds,
            "seconds": time.perf_counter() - started, "load": watch.stop(),
            "threads": int(os.environ.get("TVM_NUM_THREADS") or os.cpu_count() or 1), "method": HARNESS}


def _wall_s(timer: Callable[[], float]) -> float:
    """Wall seconds of one repeat, run once untimed before the rounds: what a round costs, the work a
    timer does but does not time included (a cold repeat's flushes cost about as much as its calls, so a
    round estimated from the timed calls alone ran twice the budget)."""
    started = time.perf_counter()
    timer()
    return time.perf_counter() - started


def _calibrate(program: Program) -> float:
    """Seconds per call after a warm-up (median of three single calls)."""
    once = program.timer(1)
    once()
    return float(np.median([once() for _ in range(3)]))


QUIET_WINDOW_S = 0.01   # quiesce: a window in which this process used under QUIET_SHARE of a core
QUIET_SHARE = 0.2
QUIET_MAX_S = 2.0


def quiesce(max_s: float = QUIET_MAX_S) -> float:
    """Sleep until this process's worker threads have stopped spinning; returns the seconds waited.

    A runtime's thread pool spins a while after each call before it sleeps: TVM's ~110 ms at a full
    core, onnxruntime's ~35 ms (2-core znver5 VM).  Timing another runtime in that while shares the
    cores with the spinning threads: onnxruntime timed right after TVM ran up to 2x its time, which
    flattered TVM (docs/measurement.md, "Two runtimes in one process").  The main thread sleeps, so
    any CPU the process uses meanwhile is the pools'; it waits for a window without it (at most
    ``max_s``)."""
    started = time.perf_counter()
    while time.perf_counter() - started < max_s:
        before = _own_cpu_s()
        time.sleep(QUIET_WINDOW_S)
        if _own_cpu_s() - before < QUIET_WINDOW_S * QUIET_SHARE:
            break
    return time.perf_counter() - started


class LoadWatch:
    """CPU used by other processes and stolen by the hypervisor between creation and ``stop``."""

    def __init__(self):
        self.start_stat, self.start_own, self.start_wall = _proc_stat(), _own_cpu_s(), time.monotonic()
        self.loadavg_start = _loadavg()

    def stop(self) -> dict:
        stat, own, wall = _proc_stat(), _own_cpu_s(), time.monotonic() - self.start_wall
        out = {"loadavg": [self.loadavg_start, _loadavg()], "seconds": wall, "other_cores": None, "steal": None,
               "source": "/proc/stat deltas over the measurement minus this process's own CPU time"}
        if stat is None or self.start_stat is None or wall <= 0:
            return out
        delta = [b - a for a, b in zip(self.start_stat, stat)]
        hz = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
        total = sum(delta)
        idle = delta[3] + (delta[4] if len(delta) > 4 else 0)
        busy_s = (total - idle) / hz
        out["other_cores"] = max(busy_s - (own - self.start_own), 0.0) / wall
        out["steal"] = (delta[7] / total) if len(delta) > 7 and total else 0.0
        return out


def _proc_stat() -> list[int] | None:
    try:
        with open("/proc/stat") as stream:
            fields = stream.readline().split()
        return [int(x) for x in fields[1:9]]
    except (OSError, ValueError):
        return None


def _own_cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def _loadavg() -> float | None:
    try:
        with open("/proc/loadavg") as stream:
            return float(stream.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None
