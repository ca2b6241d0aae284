"""Measured hardware counters (Nsight Compute) as contour categories and plain words (pure).

A run's ``counters.jsonl`` (``store/counters.py``) holds, per profiled program, the tool's metrics by
their own names.  Each metric falls in one group by its unit prefix, as Nsight Compute's
"Speed of Light" sections read them:

* ``DRAM`` — ``dram__*`` (device memory);
* ``SM``   — ``sm__*``, ``smsp__*``, ``l1tex__*`` (the multiprocessors: pipes, warps, L1);
* ``GPU``  — ``gpu__*``, ``lts__*`` (the whole device: duration, L2).

``launch__*`` metrics (registers a thread, shared memory a block, occupancy limits) describe the
launch, not how well it used the hardware: they are words, not gains.  A metric is a gain when
its direction is known: percentages of peak and hit rates (higher is better), stall shares and
durations (lower is better).  The gain of one metric is log2(candidate / reference) (inverted for
lower-is-better); a group's gain is the mean over its metrics; ``reference`` is the baseline's line
when the file has one, else the median over the profiled candidates (said in every label).  Per
honeycomb cell and group the gains are averaged, and the contour's z is the largest group
(``analysis/contour.z_and_winner``), as for the model.
"""
from __future__ import annotations

import math

import numpy as np

GROUPS = [{"id": "dram", "label": "DRAM"}, {"id": "sm", "label": "SM"}, {"id": "gpu", "label": "GPU"}]
PREFIXES = {"dram": "dram", "sm": "sm", "smsp": "sm", "l1tex": "sm", "gpu": "gpu", "lts": "gpu"}
OCCUPANCY = "sm__warps_active.avg.pct_of_peak_sustained_active"
REGISTERS = "launch__registers_per_thread"
SHARED = "launch__shared_mem_per_block_static"
DRAM_PEAK = "dram__throughput.avg.pct_of_peak_sustained_elapsed"
SM_PEAK = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
LIMITER_METRICS = (SM_PEAK, DRAM_PEAK)       # what ``limiter`` needs
VIEW_METRICS = (REGISTERS, SHARED, OCCUPANCY) + LIMITER_METRICS     # what the GPU views say (gpu_words)
BOUND_PCT = 60.0     # a unit at or above this share of its peak limits the kernel
LOW_OCCUPANCY = 25.0


def metric_group(name: str) -> str | None:
    """``dram`` / ``sm`` / ``gpu`` for a metric name, None for launch descriptors and unknown units."""
    return PREFIXES.get(name.split("__", 1)[0]) if "__" in name else None


def direction(name: str) -> int:
    """+1 higher is better, -1 lower is better, 0 not a gain (a count, a size, a limit)."""
    lowered = name.lower()
    if "time_duration" in lowered or "cycles_elapsed" in lowered:
        return 0      # the kernel's duration is its latency: testing it against latency would be circular
    if "stall" in lowered:
        return -1
    if "pct" in lowered or "hit_rate" in lowered:
        return 1
    return 0


def by_candidate(entries: list[dict]) -> tuple[dict, dict | None, str]:
    """``({trial: metrics}, baseline metrics or None, tool)`` (a later line for a trial wins)."""
    cands, baseline, tools = {}, None, []
    for entry in entries:
        tools.append(entry.get("tool") or "")
        if entry["candidate"] == "baseline":
            baseline = entry["metrics"]
        else:
            cands[int(entry["candidate"])] = entry["metrics"]
    tool = max(set(tools), key=tools.count) if tools else ""
    return cands, baseline, tool


MEDIAN = "the median profiled candidate"
BASELINE = "the baseline's counters"


def reference(cands: dict, baseline: dict | None) -> tuple[dict, str, set]:
    """The metrics gains are taken against, what they are, and the gain metrics taken against the
    median profiled candidate although the file has a baseline line (it lacks them: taking a baseline
    timed alone would make the whole contour the model, one with DRAM alone would drop SM and GPU)."""
    names = sorted({k for m in cands.values() for k in m})
    median = {k: float(np.median([m[k] for m in cands.values() if k in m])) for k in names}
    if not baseline:
        return median, f"{MEDIAN} (no baseline counters in the file)", set()
    gains = {k for k in names if metric_group(k) and direction(k)}
    lacking = {k for k in gains if k not in baseline}
    if not lacking:
        return baseline, BASELINE, set()
    if lacking == gains:          # the baseline gives none of them: the contour is the median's
        return median, f"{MEDIAN} (the baseline's line has none of the metrics the contour uses)", set()
    return {**median, **baseline}, f"{BASELINE} ({MEDIAN} for the metrics its line lacks)", lacking


def metric_gain(value: float, ref: float, sign: int) -> float:
    if sign == 0 or not (value > 0 and ref > 0):
        return math.nan
    return sign * math.log2(value / ref)


def group_gains(cands: dict, baseline: dict | None, trials: np.ndarray) -> tuple[dict, dict]:
    """Per group, the log2 gain of each trial in ``trials`` (NaN: not profiled) and what was used:
    ``({group: array}, {group: [metric names]})``."""
    ref, _, _ = reference(cands, baseline)
    used: dict = {g["id"]: set() for g in GROUPS}
    gains = {g["id"]: np.full(len(trials), np.nan) for g in GROUPS}
    for k, trial in enumerate(trials):
        metrics = cands.get(int(trial))
        if not metrics:
            continue
        per: dict = {g["id"]: [] for g in GROUPS}
        for name, value in metrics.items():
            group, sign = metric_group(name), direction(name)
            gain = metric_gain(value, ref.get(name, math.nan), sign) if group else math.nan
            if math.isfinite(gain):
                per[group].append(gain)
                used[group].add(name)
        for group, values in per.items():
            if values:
                gains[group][k] = float(np.mean(values))
    return gains, {g: sorted(v) for g, v in used.items()}


def categories(used: dict, tool: str, against: str, lacking: set | None = None) -> list[dict]:
    """The contour's measured categories (those with at least one metric), each with its source: its
    metrics under the reference each was taken against (``lacking``: against the median)."""
    out = []
    for g in GROUPS:
        names = used.get(g["id"]) or []
        if names:
            out.append({"id": g["id"], "label": g["label"], "origin": "measured",
                        "source": f"measured: {tool or 'counters'} — mean log2 gain of "
                                  f"{_gain_sources(names, against, lacking or set())}"})
    return out


def _gain_sources(names: list[str], against: str, lacking: set) -> str:
    """``a, b against the baseline's counters; of c against the median profiled candidate (…)``."""
    own = [n for n in names if n not in lacking]
    other = [n for n in names if n in lacking]
    if not other:
        return f"{', '.join(own)} against {BASELINE if lacking else against}"
    tail = f"{', '.join(other)} against {MEDIAN} (the baseline's line lacks {'them' if len(other) > 1 else 'it'})"
    return f"{', '.join(own)} against {BASELINE}; of {tail}" if own else tail


def agreement_message(agreement: dict, label: str) -> str:
    """The measured contour's agreement with latency in words (``analysis/contour.agreement``'s figures)."""
    per = ", ".join(f"{g['label']} {agreement['per_category'][g['id']]['rho']:+.2f}" for g in GROUPS
                    if (agreement.get("per_category") or {}).get(g["id"], {}).get("rho") is not None)
    rho = "n/a" if agreement.get("rho") is None else f"{agreement['rho']:+.2f}"
    head = {"agrees": "agree with", "weak": "go only weakly with", "untested": "cannot yet be tested against",
            "disagrees": "do not go with"}.get(agreement.get("verdict"), "are compared with")
    tail = {"weak": "; contours drawn faded", "untested": "; contours drawn faded",
            "disagrees": "; contours not drawn"}.get(agreement.get("verdict"), "")
    return (f"The {label} counters {head} the latencies: Spearman ρ = {rho} over n = {agreement.get('n', 0)} "
            f"profiled candidates" + (f" (per group: {per})" if per else "") + tail + ".")


def limiter(metrics: dict) -> dict | None:
    """What limits a kernel, from its counters, in plain words (None without the throughput metrics).

    ``{kind: memory-bound|compute-bound|latency-bound, text, short, occupancy_pct, registers, dram_pct, sm_pct}``
    — e.g. "latency-bound: 6 % of warp slots busy, 128 registers a thread (DRAM 1 %, SM 26 % of peak)";
    ``short`` for an inlay hint: "latency-bound, occupancy 6 %", "memory-bound, DRAM 85 % of peak".
    """
    dram, sm = metrics.get(DRAM_PEAK), metrics.get(SM_PEAK)
    if dram is None or sm is None:
        return None
    occ, regs = metrics.get(OCCUPANCY), metrics.get(REGISTERS)
    peaks = f"DRAM {dram:.0f} %, SM {sm:.0f} % of peak"
    if max(dram, sm) >= BOUND_PCT:
        kind = "memory-bound" if dram >= sm else "compute-bound"
        text = f"{kind}: {peaks}"
        short = f"{kind}, DRAM {dram:.0f} % of peak" if dram >= sm else f"{kind}, SM {sm:.0f} % of peak"
    else:
        kind = "latency-bound"
        parts = []
        if occ is not None:
            parts.append(f"{occ:.0f} % of warp slots busy")
        if regs is not None:
            parts.append(f"{regs:.0f} registers a thread")
        text = f"{kind}: {', '.join(parts)} ({peaks})" if parts else f"{kind}: {peaks}"
        if occ is not None and occ < LOW_OCCUPANCY:
            text += "; too few warps in flight to hide memory and pipeline latency"
        short = f"{kind}, occupancy {occ:.0f} %" if occ is not None else kind
    return {"kind": kind, "text": text, "short": short, "occupancy_pct": occ, "registers": regs, "dram_pct": dram,
            "sm_pct": sm, "shared_bytes": metrics.get(SHARED)}


def lacking(entries: list[dict]) -> list[str]:
    """The metrics the GPU views use (``VIEW_METRICS``) that no line of a counters file has."""
    have = {name for entry in entries for name in entry.get("metrics") or {}}
    return [name for name in VIEW_METRICS if name not in have]
