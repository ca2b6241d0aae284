"""The default schedule as one more candidate (pure): no task of a tuned model ends slower than what
TVM gives it untuned (issue 21: the ``mean`` task went from 9 µs untuned to 3.9 ms tuned).

The re-measurement (``worker/remeasure.choose_best``) times a task's top trials and its default
(unscheduled) kernel in the same interleaved rounds.  A default measured faster than every trial
wins: the task's record is left out of the tuned build, which then runs the default schedule for it.
A default slower than ``MARGIN`` x the best trial's in-tuning latency in one call is not timed in
rounds (an untuned convolution takes 0.1-1 s a call); its one-call time is kept.
"""
from __future__ import annotations

MARGIN = 3.0


def worth_timing(default_once_us: float | None, best_tuning_us: float) -> bool:
    """Whether the default schedule joins the rounds (not clearly slower in one call)."""
    return default_once_us is not None and default_once_us <= MARGIN * best_tuning_us


def default_wins(default_us: float | None, best_measured_us: float | None) -> bool:
    """The default schedule is kept when it re-measured faster than the best trial."""
    return default_us is not None and best_measured_us is not None and default_us < best_measured_us


def split(chosen: list[dict]) -> tuple[list[dict], list[dict]]:
    """(entries whose record the tuned build applies, entries whose default schedule won)."""
    return [c for c in chosen if not c.get("default_wins")], [c for c in chosen if c.get("default_wins")]
