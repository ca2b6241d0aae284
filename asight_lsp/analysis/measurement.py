"""Statistics of a latency measurement and the words the product uses for it (pure; docs/measurement.md).

The worker's harness times programs in interleaved rounds and returns, per program, the mean
per-call time of every repeat (a repeat = several calls timed together).  From those samples:

* ``summary``: median and spread of one program;
* ``paired_speedup``: untuned / tuned as the ratio of the medians, with a bootstrap confidence
  interval that resamples *rounds* (an untuned repeat and the tuned repeat next to it stay
  together, so a load spike that hit both is resampled as one);
* ``verdict``: ``faster`` / ``slower`` / ``same`` (the interval contains 1);
* ``load_verdict``: whether other work competed for the cores while measuring.
"""
from __future__ import annotations

SCHEMA = "asight.measurement/1"
CONFIDENCE = 0.95
RESAMPLES = 2000
BUSY_OTHER_CORES = 0.25       # other processes used more than a quarter of a core on average
BUSY_STEAL = 0.05             # or the hypervisor took more than 5 % of the time
FASTER, SLOWER, SAME = "faster", "slower", "same"


def summary(samples_us: list[float]) -> dict:
    """Median, quartiles and spread of per-call times (µs), one value per repeat."""
    import numpy as np   # the language server imports this module for its texts only: numpy on first use
    us = np.asarray(samples_us, dtype=float)
    p25, median, p75 = np.percentile(us, [25, 50, 75])
    return {"median_us": float(median), "p25_us": float(p25), "p75_us": float(p75), "min_us": float(us.min()),
            "max_us": float(us.max()), "repeats": int(us.size),
            "spread": float((p75 - p25) / median) if median else 0.0}


def paired_speedup(base_us: list[float], tuned_us: list[float], seed: int = 0,
                   confidence: float = CONFIDENCE, resamples: int = RESAMPLES) -> dict:
    """Speed-up of ``tuned`` over ``base`` (> 1 = tuned faster) with a paired bootstrap interval.

    ``base_us[i]`` and ``tuned_us[i]`` were measured in the same round.  The estimate is the ratio
    of the medians; the interval is the percentile interval of that ratio over rounds resampled
    with replacement.
    """
    import numpy as np
    base, tuned = np.asarray(base_us, dtype=float), np.asarray(tuned_us, dtype=float)
    if base.size != tuned.size or base.size == 0:
        raise ValueError("paired samples need the same, non-zero number of rounds")
    estimate = float(np.median(base) / np.median(tuned))
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, base.size, size=(resamples, base.size))
    ratios = np.median(base[picks], axis=1) / np.median(tuned[picks], axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(ratios, [tail, 1 - tail])
    return {"estimate": estimate, "ci": [float(low), float(high)], "confidence": confidence,
            "rounds": int(base.size), "method": f"ratio of medians; {int(confidence * 100)}% percentile interval of "
                                                 f"{resamples} bootstrap resamples of the paired rounds"}


def verdict(speedup: dict) -> str:
    """``faster`` when the whole interval is above 1, ``slower`` when below, else ``same``."""
    low, high = speedup["ci"]
    if low > 1.0:
        return FASTER
    if high < 1.0:
        return SLOWER
    return SAME


def load_verdict(other_cores: float | None, steal: float | None) -> dict:
    """Whether the machine was busy while measuring (``other_cores``: mean cores used by other
    processes; ``steal``: fraction of time the hypervisor took)."""
    reasons = []
    if other_cores is not None and other_cores > BUSY_OTHER_CORES:
        reasons.append(f"other processes used {other_cores:.2f} cores on average")
    if steal is not None and steal > BUSY_STEAL:
        reasons.append(f"the hypervisor took {steal * 100:.0f}% of the time (steal)")
    return {"busy": bool(reasons), "reasons": reasons}


def side_totals(raw: dict, labels: list[str]) -> list[float]:
    """Per round, the sum of the per-call means of ``labels`` (one side of the comparison: several
    PrimFuncs of a module run once each per call of the module)."""
    samples = raw["samples_us"]
    return [sum(samples[label][r] for label in labels) for r in range(raw["rounds"])]


def comparison_record(raw: dict, untuned: list[str], tuned: list[str], by: str, scope: str,
                      taken: float, extra: dict | None = None, seed: int = 0) -> dict:
    """The measurement record of a run (``run.json`` ``measurement``) from the harness's raw result.

    ``scope``: ``function`` (one PrimFunc), ``module`` (every PrimFunc of a module, summed) or
    ``program`` (a Relax program end to end).  Without ``tuned`` labels it records the untuned side.
    """
    load = raw.get("load") or {}
    record = {"schema": SCHEMA, "scope": scope, "by": by, "taken": taken,
              "harness": {"method": raw.get("method"), "rounds": raw["rounds"], "threads": raw.get("threads"),
                          "calls_per_repeat": raw["calls_per_repeat"], "seconds": raw.get("seconds")},
              "load": {**load, **load_verdict(load.get("other_cores"), load.get("steal"))},
              "untuned": summary(side_totals(raw, untuned)),
              "parts": {label: summary(samples) for label, samples in raw["samples_us"].items()}}
    if tuned:
        record["tuned"] = summary(side_totals(raw, tuned))
        record["speedup"] = paired_speedup(side_totals(raw, untuned), side_totals(raw, tuned), seed)
        record["verdict"] = verdict(record["speedup"])
    record.update(extra or {})
    return record


def is_current(record: dict | None, trials: int) -> bool:
    """A record that measured the run as it is (no error, no trial added since)."""
    return bool(record) and not record.get("error") and "untuned" in record and record.get("trials") == trials


def ratio_text(ratio: float) -> str:
    return f"{ratio:.0f}×" if ratio >= 10 else f"{ratio:.2f}×" if ratio < 2 else f"{ratio:.1f}×"


def speedup_text(record: dict) -> str:
    """``41.6× faster (95% CI 40.1–42.9×)``, ``no measurable difference (0.97×, 95% CI 0.91–1.04×)``
    or ``1.28× slower than untuned (95% CI …): keep the untuned build``."""
    s = record.get("speedup") or {}
    if not s:
        return "no speed-up measured"
    low, high = s["ci"]
    ci = f"{int(s.get('confidence', CONFIDENCE) * 100)}% CI"
    kind = record.get("verdict") or verdict(s)
    if kind == FASTER:
        return f"{ratio_text(s['estimate'])} faster ({ci} {ratio_text(low)}–{ratio_text(high)})"
    if kind == SLOWER:
        return (f"{ratio_text(1 / s['estimate'])} slower than untuned ({ci} {ratio_text(1 / high)}–"
                f"{ratio_text(1 / low)} slower): keep the untuned build")
    return f"no measurable difference ({ratio_text(s['estimate'])}, {ci} {ratio_text(low)}–{ratio_text(high)})"


def baseline_word(record: dict) -> str:
    """What the record's untuned side is: ``untuned``, or ``DLight`` on a GPU (worker/baseline.py)."""
    return "DLight" if (record.get("baseline") or {}).get("kind") == "dlight" else "untuned"


def short_speedup(record: dict) -> str:
    """What a lens has room for: ``41× vs untuned``, ``≈ untuned``, ``1.3× slower`` (``vs DLight`` on a GPU)."""
    s = record.get("speedup") or {}
    if not s:
        return ""
    kind = record.get("verdict") or verdict(s)
    base = baseline_word(record)
    if kind == FASTER:
        return f"{ratio_text(s['estimate'])} vs {base}"
    if kind == SLOWER:
        return f"{ratio_text(1 / s['estimate'])} slower than {base}"
    return f"≈ {base} (no measurable difference)"


def how_text(record: dict) -> str:
    """How the record was taken, in one line (for tooltips and the CLI)."""
    h = record.get("harness") or {}
    calls = h.get("calls_per_repeat") or {}
    per = ", ".join(f"{k} {v}" for k, v in calls.items())
    load = record.get("load") or {}
    state = "busy: " + "; ".join(load.get("reasons") or []) if load.get("busy") else "quiet"
    return (f"{h.get('rounds', '?')} interleaved rounds, calls per repeat: {per or '?'}, "
            f"{h.get('threads', '?')} threads, {record.get('by', 'measured')}; machine {state}")


# --------------------------------------------------------------------------- one record per run: which one is shown

NOISIER_MARGIN = BUSY_OTHER_CORES   # a quarter of a core more of other work than the shown one


def load_of(raw_load: dict | None) -> dict:
    """A load reading (``harness.LoadWatch``) with its verdict (``busy``, ``reasons``)."""
    load = dict(raw_load or {})
    return {**load, **load_verdict(load.get("other_cores"), load.get("steal"))}


SPREAD_RATIO, SPREAD_MARGIN = 2.0, 0.10   # per-call spread at least twice the shown one's, and 0.10 more


def spread_of(calls: list[dict]) -> float | None:
    """Median over kernel calls (or stages) of their relative spread (p75 - p25) / median: how much
    one profile's per-call times wobbled.  None when no call has quartiles."""
    import statistics
    rel = [(c["p75_us"] - c["p25_us"]) / c["us"] for c in calls
           if isinstance(c, dict) and c.get("us") and c.get("p25_us") is not None and c.get("p75_us") is not None]
    return statistics.median(rel) if rel else None


def noisier_than(new: dict | None, shown: dict | None) -> str | None:
    """Why a measurement taken under load ``new`` must not replace one taken under ``shown``, or None.

    Only a *busy* new measurement can lose, and only to one that was quieter: not busy at all, or
    busy with at least ``NOISIER_MARGIN`` of a core less of other work, or (both busy alike) whose
    per-call times spread less: ``spread`` at most half the new one's and ``SPREAD_MARGIN`` lower.
    An unknown load (an older profile) never blocks a new one: nothing says it was quieter."""
    if not new or not shown or not new.get("busy"):
        return None
    a, b = new.get("spread"), shown.get("spread")
    if shown.get("busy") and a is not None and b is not None and a >= SPREAD_RATIO * b and a - b >= SPREAD_MARGIN:
        return f"noisier: its per-call times spread {a:.2f} (IQR / median), the shown one's {b:.2f}"
    new_other, old_other = new.get("other_cores"), shown.get("other_cores")
    if not shown.get("busy"):
        return f"measured while busy ({'; '.join(new.get('reasons') or [])}); the shown one was quiet"
    if new_other is not None and old_other is not None and new_other > old_other + NOISIER_MARGIN:
        return (f"noisier: other processes used {new_other:.2f} cores while it ran, {old_other:.2f} while "
                "the shown one ran")
    return None


def when_text(taken: float | None) -> str:
    """``26 Nov 06:21`` (UTC) of a measurement's ``taken`` time, or ``?``."""
    import time as _time
    if not taken:
        return "?"
    return _time.strftime("%d %b %H:%M:%S", _time.gmtime(taken))


def load_text(load: dict | None) -> str:
    """``quiet (other processes 0.10 cores)`` / ``busy (other processes 1.30 cores)`` / ``load unknown``."""
    if not load or (load.get("other_cores") is None and "busy" not in load):
        return "load unknown"
    other = load.get("other_cores")
    return ("busy" if load.get("busy") else "quiet") + (f" (other processes {other:.2f} cores)" if other is not None else "")


def estimate_text(check: dict) -> str:
    """``the estimate while tuning was 15.1 ms; measured 16.3 ms (8 % more)``."""
    off = check["off"]
    how = "as estimated" if abs(off) < 0.005 else f"{abs(off) * 100:.0f} % {'more' if off > 0 else 'less'}"
    def fmt(us: float) -> str:
        return f"{us:.3g} µs" if us < 1000 else f"{us / 1e3:.3g} ms"
    return f"the estimate while tuning was {fmt(check['estimate_us'])}; measured {fmt(check['measured_us'])} ({how})"
