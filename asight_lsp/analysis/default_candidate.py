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


NOTHING_TO_TUNE = "nothing to tune"   # an entry's ``default``: kept without a trial (``untried_entry``)


def nothing_to_tune(flops: float | None, decisions: int | None) -> bool:
    """A kernel whose design space offers the search nothing to try: it only moves data (no arithmetic:
    a transpose, a concatenate, a reshape that copies) or its sketches sample no decision (one schedule
    each, and the search runs out at once).  ``decisions``: the sampling decisions of all its sketches."""
    return flops == 0 or decisions == 0


def untried_entry(task: str, workload_hash: str, default_us: float, harness: dict) -> dict:
    """A model task kept on its default schedule without a trial (``nothing_to_tune``), as a measured
    candidate: the record ``choose_best`` gives a task whose default won, so a build, an export and the
    views treat it as kept on purpose, never as missing (SqueezeNet's concatenates and transposes were
    never tried at 24 trials, and ``--tune-missing`` found their space exhausted)."""
    return {"task": task, "workload": None, "workload_hash": workload_hash, "trial": None, "tuning_us": None,
            "measured_us": None, "candidates": [], "default_us": default_us, "default_wins": True,
            "default": NOTHING_TO_TUNE, "harness": harness}


# --------------------------------------------------------------------------- GPU: DLight is the default

DLIGHT_KEPT = "DLight's default kept"


def _us(value: float) -> str:
    return f"{value / 1000:.3f} ms" if value >= 1000 else f"{value:.1f} µs"


def baseline_medians(record: dict) -> tuple[float | None, float | None]:
    """(baseline median µs, tuned median µs) of a measurement record (None where absent)."""
    return (record.get("untuned") or {}).get("median_us"), (record.get("tuned") or {}).get("median_us")


def baseline_wins(record: dict) -> bool:
    """A GPU run keeps DLight's default schedule when it measured faster than the tuned program in the
    same interleaved rounds: the rule a model's task follows against its default (``default_wins``)."""
    base, tuned = baseline_medians(record)
    return default_wins(base, tuned)


def kept_text(record: dict) -> str | None:
    """``DLight's default kept: tuned 31.2 µs vs DLight 25.0 µs`` when the baseline won, else None."""
    if not baseline_wins(record):
        return None
    base, tuned = baseline_medians(record)
    return f"{DLIGHT_KEPT}: tuned {_us(tuned)} vs DLight {_us(base)}"


def keep_baseline(record: dict) -> dict:
    """The GPU measurement record with the tuned records that lost to DLight moved from ``chosen`` to
    ``defaults`` (as a model's default-schedule winners are): nothing that builds the run's result
    (``asight code``, the export, a model build) applies them. A record whose tuned side won, or
    that has no tuned side, is returned unchanged. The record is judged as a whole (a module's
    PrimFuncs are timed summed)."""
    if not baseline_wins(record):
        return record
    base, tuned = baseline_medians(record)
    lost = [{**c, "default_us": base, "measured_us": tuned, "default_wins": True, "default": "dlight"}
            for c in record.get("chosen") or []]
    return {**record, "chosen": [], "defaults": list(record.get("defaults") or []) + lost,
            "kept": {"program": "dlight", "text": kept_text(record)}}


def dlight_kept(record: dict | None) -> dict | None:
    """The ``kept`` entry of a record whose DLight baseline won (``keep_baseline``), else None."""
    kept = (record or {}).get("kept") or {}
    return kept if kept.get("program") == "dlight" else None
