"""The headline of a GPU run (pure): tuned vs DLight's default schedule, with a vendor library as a
third line, and which program the run keeps.

On a GPU the untuned TIR cannot run (nothing is bound to threads), so the baseline is what a TVM
user gets without tuning: DLight's default GPU schedule (``worker/baseline.py``).  The measurement
record keeps its usual keys (``untuned`` = that baseline, ``tuned``, ``speedup`` with its interval,
``verdict``); ``baseline`` names it and ``vendor`` holds the vendor library's time when PyTorch with
CUDA was there (cuBLAS / cuDNN).  When tuning loses to the baseline, the run says so and keeps the
baseline as its result: what is exported never gets slower than TVM's default.
"""
from __future__ import annotations

from . import default_candidate as defaults_rule


def _us(value: float | None) -> str:
    if value is None:
        return "n/a"
    return f"{value / 1000:.3f} ms" if value >= 1000 else f"{value:.1f} µs"


def kept(record: dict) -> str:
    """``tuned`` unless the baseline measured faster (``default_candidate.baseline_wins``: the faster
    median of the same interleaved rounds is kept, as a model's task keeps its default schedule)."""
    return "baseline" if defaults_rule.baseline_wins(record) else "tuned"


def headline(record: dict) -> dict | None:
    """``{lines, kept, baseline, vendor_ratio}`` of a GPU measurement record (None without one)."""
    base, tuned = (record.get("untuned") or {}).get("median_us"), (record.get("tuned") or {}).get("median_us")
    if base is None:
        return None
    name = (record.get("baseline") or {}).get("label") or "the baseline"
    lines = []
    if tuned is not None:
        speed = record.get("speedup") or {}
        ci = speed.get("ci") or [None, None]
        interval = f" (95 % CI {ci[0]:.2f}×–{ci[1]:.2f}×)" if None not in ci else ""
        ratio = base / tuned
        word = {"faster": "faster than", "slower": "SLOWER than", "same": "no measurable difference from"}.get(
            record.get("verdict"), "vs")
        lines.append(f"tuned {_us(tuned)} vs {name} {_us(base)}: {ratio:.2f}× — {word} {name}{interval}")
    else:
        lines.append(f"{name} {_us(base)} (nothing tuned to compare)")
    vendor = record.get("vendor") or {}
    vendor_ratio = None
    if vendor.get("median_us"):
        best = tuned if tuned is not None and kept(record) == "tuned" else base
        vendor_ratio = vendor["median_us"] / best
        lines.append(f"{vendor.get('label', 'vendor library')} {_us(vendor['median_us'])}: the run's result runs at "
                     f"{vendor_ratio:.2f}× the vendor library's speed")
    elif vendor.get("note"):
        lines.append(f"vendor library: {vendor['note']}")
    if tuned is not None and kept(record) == "baseline":
        lines.append(defaults_rule.kept_text(record) + f" (tuning lost to {name}: the run keeps it as its result; "
                     "asight code shows it and nothing applies the tuned record)")
    return {"lines": lines, "kept": kept(record) if tuned is not None else "baseline", "baseline": name,
            "vendor_ratio": vendor_ratio}
