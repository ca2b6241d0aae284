"""Two contenders timed in the same interleaved rounds (pure): the ratio a deployment engineer asks
for ("the tuned model against onnxruntime"), with its interval.

The ratio is the median of per-round ratios (each round times both, in alternating order, so a load
change hits both alike), and its 95 % interval a bootstrap of that median over rounds.
"""
from __future__ import annotations

import numpy as np

BOOTSTRAP = 2000


def ratio_interval(a_us: list[float], b_us: list[float], seed: int = 0) -> dict:
    """``a / b`` per round: median, bootstrap 95 % CI, rounds; > 1 means a is slower."""
    a, b = np.asarray(a_us, dtype=float), np.asarray(b_us, dtype=float)
    if a.size == 0 or a.size != b.size or np.any(b <= 0):
        raise ValueError("ratio_interval needs the same number (> 0) of rounds on both sides, all positive")
    r = a / b
    rng = np.random.default_rng(seed)
    boots = np.median(rng.choice(r, (BOOTSTRAP, r.size)), axis=1)
    return {"ratio": float(np.median(r)), "ci95": [float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))],
            "rounds": int(r.size), "method": "median of per-round ratios, bootstrap 95% CI of the median"}


def summary(name_a: str, name_b: str, a_us: list[float], b_us: list[float]) -> dict:
    """Both sides' medians and p25-p75, the ratio and a one-line verdict."""
    ratio = ratio_interval(a_us, b_us)
    lo, hi = ratio["ci95"]
    if hi < 1:
        verdict = f"{name_a} is faster: {1 / ratio['ratio']:.2f}x {name_b}'s speed (95% CI {1 / hi:.2f}-{1 / lo:.2f})"
    elif lo > 1:
        verdict = f"{name_a} is slower: {1 / ratio['ratio']:.2f}x {name_b}'s speed (95% CI {1 / hi:.2f}-{1 / lo:.2f})"
    else:
        verdict = f"no clear difference: {name_a} / {name_b} = {ratio['ratio']:.2f} (95% CI {lo:.2f}-{hi:.2f})"
    side = lambda v: {"median_us": float(np.median(v)), "p25_us": float(np.percentile(v, 25)),  # noqa: E731
                      "p75_us": float(np.percentile(v, 75))}
    return {name_a: side(a_us), name_b: side(b_us), "ratio": ratio, "verdict": verdict}
