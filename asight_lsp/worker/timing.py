"""The timing harness of the worker: random inputs, per-call latency statistics, output checks."""
from __future__ import annotations

import numpy as np

SOURCE_TIME = "tvm time_evaluator, {calls} single calls (number=1)"


def random_arrays(specs: list[tuple[tuple, str]], seed: int) -> list[np.ndarray]:
    """Random inputs: floats in [-1, 1), small non-negative ints (safe as indices), random bools."""
    rng = np.random.default_rng(seed)
    out = []
    for shape, dtype in specs:
        dtype = str(dtype)
        if dtype.startswith("float") or dtype.startswith("bfloat"):
            out.append((rng.random(shape) * 2 - 1).astype(dtype))
        elif dtype == "bool":
            out.append(rng.random(shape) < 0.5)
        else:
            out.append(rng.integers(0, 2, size=shape).astype(dtype))
    return out


def stats(seconds: list[float], source: str, number: int | None = None) -> dict:
    """Median and spread (µs) of per-repeat times."""
    us = np.asarray(seconds, dtype=float) * 1e6
    p25, p75 = np.percentile(us, [25, 75])
    median = float(np.median(us))
    return {"median_us": median, "mean_us": float(us.mean()), "std_us": float(us.std()),
            "min_us": float(us.min()), "max_us": float(us.max()), "p25_us": float(p25), "p75_us": float(p75),
            "cv": float(us.std() / us.mean()) if us.mean() else 0.0, "repeats": int(len(us)),
            "number": number, "source": source}


def time_function(timer_for, args, repeats: int, budget_ms: float) -> dict:
    """Median and spread of single-call times (µs).

    Each repeat is one call (``number=1``): on this shared 2-vCPU VM a call that gets preempted
    is an outlier the median ignores, while a mean over many calls would absorb it.  The number
    of calls is ``repeats`` at least, more when they fit in ``budget_ms`` (at most 2000).
    """
    probe = timer_for(1, 3)(*args).results
    estimate = max(float(np.median(probe)), 1e-7)
    calls = int(np.clip(budget_ms / 1e3 / estimate, repeats, 2000))
    result = timer_for(1, calls)(*args)
    return stats(list(result.results), SOURCE_TIME.format(calls=calls), number=1)


def compare_outputs(names: list[str], reference: list[np.ndarray], candidate: list[np.ndarray],
                    rtol: float, atol: float) -> dict:
    """allclose per buffer (the tuned program against the untuned one on the same inputs)."""
    buffers, ok = [], True
    for name, ref, got in zip(names, reference, candidate):
        ref64, got64 = ref.astype(np.float64), got.astype(np.float64)
        scale = max(1.0, float(np.max(np.abs(ref64)))) if ref64.size else 1.0
        diff = np.abs(ref64 - got64)
        close = np.isclose(got64, ref64, rtol=rtol, atol=atol * scale, equal_nan=True)
        entry = {"name": name, "ok": bool(close.all()), "max_abs_err": float(diff.max()) if diff.size else 0.0,
                 "max_rel_err": float((diff / np.maximum(np.abs(ref64), 1e-30)).max()) if diff.size else 0.0,
                 "mismatched": int((~close).sum()), "elements": int(close.size)}
        ok &= entry["ok"]
        buffers.append(entry)
    return {"ok": ok, "rtol": rtol, "atol": atol, "atol_scaled_by": "max(1, max|reference|)",
            "buffers": buffers, "source": "numpy.isclose on random inputs (same inputs for both programs)"}
