"""Design principles: sampled decisions whose value range goes with lower latency.

For every decision column (one tile factor of one loop of one block, a categorical choice, a
compute location, the sketch) and every one-sided range of its values (``<= t``, ``>= t``), every
single value when a column has at most 8, or category (``= v``), the candidates inside the range
are compared with those outside:

* effect = median latency inside / median latency outside - 1 (negative = faster);
* a two-sided Mann-Whitney U test per range, Benjamini-Hochberg over *all* ranges tested
  (false discovery rate 5 %), so a run of pure noise yields no principle;
* a percentile bootstrap (seeded) 95 % confidence interval of the effect, which must exclude 0;
* both sides need at least ``max(8, 5 % of the candidates)`` candidates, the run at least 20.

Per column the range with the strongest evidence (smallest p) is kept; principles are ranked
by effect.  A random forest on the same columns (log latency) gives each column an importance
as a second opinion.  Each principle is also a search constraint, e.g.
``{"block": "matmul", "inst": "SamplePerfectTile", "loop": 2, "index": 1, "max": 4}``.

When nothing survives the correction, up to two *tentative* ranges (p < 0.05 on their own,
bootstrap interval below zero) are returned apart, never as principles: a run of 30 candidates
rarely proves anything over a few hundred ranges, and a guided re-tune may still steer by them
as long as it says so.  The ``closest`` ranges (faster ones with the smallest p, one per decision)
come with a rough estimate of how many more trials would settle them (``trials_to_settle``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from .candidates import CandidateTable
from .vectors import DecisionColumn, decision_columns

MIN_RUN = 20
MIN_GROUP_ABS = 8
MIN_GROUP_FRAC = 0.05
FDR = 0.05
MIN_EFFECT = 0.05
BOOTSTRAP = 1000
BOOTSTRAP_SAMPLE = 1500  # per side; a larger run is subsampled for the interval (wider, so conservative)
MAX_THRESHOLDS = 16
MAX_EQUALITY = 8
MAX_TENTATIVE = 2
MAX_CLOSEST = 3
POWER = 0.8
MW_EFFICIENCY = 3 / math.pi   # Mann-Whitney vs t-test, asymptotic relative efficiency for normal data
UNROLL_KEYS = ("meta_schedule.unroll_explicit", "meta_schedule.unroll_implicit")


@dataclass
class Range:
    column: DecisionColumn
    op: str                 # "max" (<=), "min" (>=), "in" (=)
    value: float
    mask: np.ndarray


def _ranges(col: DecisionColumn, ok: np.ndarray, min_group: int) -> list[Range]:
    vals = col.values
    present = ok & np.isfinite(vals)
    n = int(present.sum())
    if n < 2 * min_group:
        return []
    uniq = np.unique(vals[present])
    if len(uniq) < 2:
        return []
    out = []
    if col.kind == "categorical":
        for u in uniq:
            mask = present & (vals == u)
            if min_group <= mask.sum() <= n - min_group:
                out.append(Range(col, "in", float(u), mask))
        return out
    if len(uniq) <= MAX_EQUALITY:  # few values (unroll steps, tile factors): each value on its own too
        for u in uniq:
            mask = present & (vals == u)
            if min_group <= mask.sum() <= n - min_group:
                out.append(Range(col, "in", float(u), mask))
    if len(uniq) > MAX_THRESHOLDS + 1:  # thin out: quantiles of the values
        uniq = np.unique(np.quantile(vals[present], np.linspace(0, 1, MAX_THRESHOLDS + 1), method="nearest"))
    for u in uniq[:-1]:
        mask = present & (vals <= u)
        if min_group <= mask.sum() <= n - min_group:
            out.append(Range(col, "max", float(u), mask))
    for u in uniq[1:]:
        mask = present & (vals >= u)
        if min_group <= mask.sum() <= n - min_group:
            out.append(Range(col, "min", float(u), mask))
    return out


def benjamini_hochberg(pvalues: np.ndarray, q: float = FDR) -> np.ndarray:
    """Mask of the discoveries at false discovery rate ``q``."""
    p = np.asarray(pvalues, dtype=np.float64)
    m = len(p)
    if m == 0:
        return np.zeros(0, dtype=bool)
    order = np.argsort(p)
    passed = p[order] <= q * (np.arange(1, m + 1) / m)
    keep = np.zeros(m, dtype=bool)
    if passed.any():
        keep[order[: int(np.max(np.flatnonzero(passed))) + 1]] = True
    return keep


def bootstrap_effect(inside: np.ndarray, outside: np.ndarray, rng: np.random.Generator,
                     rounds: int = BOOTSTRAP) -> tuple[float, float]:
    """95 % percentile interval of median(inside)/median(outside) - 1."""
    a = inside[rng.integers(0, len(inside), (rounds, len(inside)))]
    b = outside[rng.integers(0, len(outside), (rounds, len(outside)))]
    ratios = np.median(a, axis=1) / np.median(b, axis=1) - 1.0
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return float(lo), float(hi)


def _subsample(values: np.ndarray, limit: int, rng: np.random.Generator) -> np.ndarray:
    return values if len(values) <= limit else rng.choice(values, limit, replace=False)


def mine(table: CandidateTable, seed: int = 0, columns: list[DecisionColumn] | None = None) -> dict:
    """Principles of a run (see module doc): ``{"principles", "tested", "model", "reason", ...}``."""
    from scipy.stats import mannwhitneyu
    ok = table.valid
    n = int(ok.sum())
    min_group = max(MIN_GROUP_ABS, int(np.ceil(MIN_GROUP_FRAC * n)))
    settings = {"min_candidates": MIN_RUN, "min_group": min_group, "fdr": FDR, "min_effect": MIN_EFFECT,
                "bootstrap": BOOTSTRAP, "test": "Mann-Whitney U (two-sided), Benjamini-Hochberg"}
    if n < MIN_RUN:
        return {"principles": [], "tentative": [], "closest": [], "tested": 0, "n": n, "settings": settings,
                "model": None,
                "reason": f"only {n} measured candidates; at least {MIN_RUN} are needed"}
    cols = columns if columns is not None else decision_columns(table)
    lat = table.latency_us
    ranges = [r for col in cols for r in _ranges(col, ok, min_group)]
    if not ranges:
        return {"principles": [], "tentative": [], "closest": [], "tested": 0, "n": n, "settings": settings,
                "model": _forest(cols, lat, ok, seed),
                "reason": "no decision varies enough between candidates to compare"}
    effects, pvals = [], []
    for r in ranges:
        inside, outside = lat[r.mask], lat[ok & ~r.mask & np.isfinite(r.column.values)]
        effects.append(np.median(inside) / np.median(outside) - 1.0)
        pvals.append(mannwhitneyu(inside, outside, alternative="two-sided").pvalue)
    effects, pvals = np.asarray(effects), np.asarray(pvals)
    discovered = benjamini_hochberg(pvals)
    rng = np.random.default_rng(seed)
    model = _forest(cols, lat, ok, seed)
    importance = {item["key"]: item["importance"] for item in (model or {}).get("importances", [])}

    def confirmed(selected: np.ndarray) -> list[dict]:
        chosen = _best_per_column(ranges, effects, pvals, selected & (effects <= -MIN_EFFECT))
        return _distinct([p for i in chosen if (p := _confirm(ranges[i], effects[i], pvals[i], lat, ok, rng,
                                                              importance)) is not None])

    found = _ranked(confirmed(discovered))
    # Tentative: faster ranges that pass the test on their own (p < 0.05) but not the FDR
    # correction over every range tested.  Never shown as principles; a guided re-tune of a
    # short run may steer by them, saying so (guidance.plan_guidance).
    tentative = [] if found else _ranked(confirmed(~discovered & (pvals < FDR)))[:MAX_TENTATIVE]
    for p in tentative:
        p["tentative"] = True
    reason = None if found else "no decision range goes with a clearly lower latency (after the FDR correction)"
    closest = [] if found else closest_ranges(ranges, effects, pvals, lat, ok)
    return {"principles": found, "tentative": tentative, "closest": closest, "tested": len(ranges), "n": n,
            "settings": settings, "model": model, "reason": reason}


def closest_ranges(ranges: list[Range], effects: np.ndarray, pvals: np.ndarray, lat: np.ndarray, ok: np.ndarray,
                   limit: int = MAX_CLOSEST) -> list[dict]:
    """The faster ranges nearest to significance (smallest p, one per decision, distinct candidate
    sets), each with its BH-adjusted p and ``trials_to_settle`` (see ``trials_to_settle``)."""
    adjusted = bh_adjusted(pvals)
    order = [i for i in np.argsort(pvals, kind="stable") if effects[i] <= -MIN_EFFECT]
    out, keys, masks = [], set(), set()
    for i in order:
        r = ranges[i]
        mask_key = np.packbits(r.mask).tobytes()
        if r.column.key in keys or mask_key in masks:
            continue
        keys.add(r.column.key)
        masks.add(mask_key)
        others = ok & ~r.mask & np.isfinite(r.column.values)
        item = _principle(r, float(effects[i]), (float("nan"), float("nan")), float(pvals[i]), int(r.mask.sum()),
                          int((ok & np.isfinite(r.column.values)).sum()), lat, None)
        item.pop("ci95")
        item["p_adjusted"] = float(f"{adjusted[i]:.3g}")
        item["settle"] = trials_to_settle(np.log(lat[r.mask]), np.log(lat[others]), len(ranges))
        out.append(item)
        if len(out) >= limit:
            break
    return out


def bh_adjusted(pvalues: np.ndarray) -> np.ndarray:
    """Benjamini-Hochberg adjusted p-values (q-values): a range is a discovery at FDR q iff its value ≤ q."""
    p = np.asarray(pvalues, dtype=np.float64)
    m = len(p)
    if m == 0:
        return p
    order = np.argsort(p)
    scaled = p[order] * m / np.arange(1, m + 1)
    q = np.minimum.accumulate(scaled[::-1])[::-1]
    out = np.empty(m)
    out[order] = np.minimum(q, 1.0)
    return out


def trials_to_settle(inside: np.ndarray, outside: np.ndarray, tested: int, fdr: float = FDR,
                     power: float = POWER) -> dict:
    """A rough estimate of how many measured candidates the run would need for this range to pass
    the FDR correction with probability ``power``, if its effect stays as observed.

    Effect size: Cohen's d of log latency inside vs outside.  Sample size of a two-sided two-sample
    test at level ``fdr / tested`` (what Benjamini-Hochberg asks of a single discovery among
    ``tested`` ranges) with the observed inside/outside ratio, divided by Mann-Whitney's efficiency
    (3/π).  It assumes new trials fall inside the range in the same share and are independent —
    MetaSchedule's evolutionary search is not, so treat the figure as an order of magnitude.
    """
    n_in, n_out = len(inside), len(outside)
    note = ("it assumes the observed effect and spread hold and new trials fall in the range as often "
            "as so far; the evolutionary search makes neither certain")
    pooled = math.sqrt(((n_in - 1) * np.var(inside, ddof=1) + (n_out - 1) * np.var(outside, ddof=1))
                       / max(n_in + n_out - 2, 1)) if n_in > 1 and n_out > 1 else 0.0
    d = abs(float(np.mean(inside) - np.mean(outside))) / pooled if pooled > 0 else 0.0
    if d < 1e-3:
        return {"effect_size_d": round(d, 3), "candidates_needed": None, "more_trials": None,
                "method": "two-sample power, Cohen's d of log latency", "note": "no measurable effect: no estimate"}
    alpha = fdr / max(tested, 1)
    z = NormalDist().inv_cdf(1 - alpha / 2) + NormalDist().inv_cdf(power)
    share = n_in / (n_in + n_out)
    k = (1 - share) / share                                   # outside per inside
    need_in = (z ** 2) * (1 + 1 / k) / d ** 2 / MW_EFFICIENCY
    needed = int(math.ceil(need_in / share))
    return {"effect_size_d": round(d, 3), "alpha": float(f"{alpha:.3g}"), "power": power,
            "candidates_needed": needed, "more_trials": max(0, needed - (n_in + n_out)),
            "method": "two-sample power at level FDR / ranges tested, Cohen's d of log latency, "
                      "Mann-Whitney efficiency 3/π", "note": note}


def _best_per_column(ranges: list[Range], effects: np.ndarray, pvals: np.ndarray, selected: np.ndarray) -> list[int]:
    """Index of the selected range with the lowest p-value (then effect) of each decision column."""
    best: dict[str, int] = {}
    for i in np.flatnonzero(selected):
        key = ranges[i].column.key
        j = best.get(key)
        if j is None or (pvals[i], effects[i]) < (pvals[j], effects[j]):
            best[key] = int(i)
    return list(best.values())


def _confirm(r: Range, effect: float, pvalue: float, lat: np.ndarray, ok: np.ndarray, rng: np.random.Generator,
             importance: dict) -> dict | None:
    """The principle of range ``r`` if its bootstrap 95 % interval of the effect lies below zero."""
    others = ok & ~r.mask & np.isfinite(r.column.values)
    lo, hi = bootstrap_effect(_subsample(lat[r.mask], BOOTSTRAP_SAMPLE, rng),
                              _subsample(lat[others], BOOTSTRAP_SAMPLE, rng), rng)
    if hi >= 0:
        return None
    item = _principle(r, float(effect), (lo, hi), float(pvalue), int(r.mask.sum()),
                      int((ok & np.isfinite(r.column.values)).sum()), lat, importance.get(r.column.key))
    item["_mask"] = np.packbits(r.mask).tobytes()
    return item


def _ranked(found: list[dict]) -> list[dict]:
    found.sort(key=lambda p: (p["effect"], -p["n_in"]))
    for rank, p in enumerate(found, 1):
        p["rank"] = rank
    return found


def _distinct(found: list[dict]) -> list[dict]:
    """One principle per candidate set: of ranges selecting the same candidates (the outer and inner
    factor of a 2-way split), keep the innermost factor, an upper bound before a lower one."""
    chosen: dict[bytes, dict] = {}
    for p in found:
        key = p.pop("_mask")
        rank = (-(p["index"] if p["index"] is not None else -1), p["op"] != "max", p["key"])
        if key not in chosen or rank < chosen[key][0]:
            chosen[key] = (rank, p)
    return [p for _, p in chosen.values()]


def _forest(cols: list[DecisionColumn], lat: np.ndarray, ok: np.ndarray, seed: int) -> dict | None:
    """Random-forest importances of the decision columns for log latency (a ranking aid)."""
    from sklearn.ensemble import RandomForestRegressor
    if not cols or ok.sum() < MIN_RUN:
        return None
    X = np.stack([np.nan_to_num(c.values[ok], nan=-1.0) for c in cols], axis=1)
    y = np.log(lat[ok])
    forest = RandomForestRegressor(n_estimators=60, max_depth=8, min_samples_leaf=3, random_state=seed,
                                   oob_score=True, max_samples=min(len(y), 4000) if len(y) > 4000 else None,
                                   n_jobs=1).fit(X, y)
    ranked = sorted(zip(cols, forest.feature_importances_), key=lambda kv: -kv[1])
    return {"kind": "random_forest", "target": "log latency", "trees": 60, "oob_r2": round(float(forest.oob_score_), 4),
            "importances": [{"key": c.key, "importance": round(float(v), 4)} for c, v in ranked[:15]]}


def _fmt(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def describe(col: DecisionColumn, op: str, value: float, iter_kinds: str | None = None) -> tuple[str, str]:
    """(decision text, range text) for people."""
    shown = col.categories[int(value)] if col.kind == "categorical" and col.categories else value
    rng_text = {"max": f"≤ {_fmt(value)}", "min": f"≥ {_fmt(value)}", "in": f"= {shown}"}[op]
    if col.inst == "Sketch":
        return "sketch", rng_text
    if col.inst in ("SamplePerfectTile", "SamplePartitionedTile") and col.index is not None:
        k, last = col.index, (col.n_factors or 1) - 1
        level = "innermost" if k == last else "outermost" if k == 0 else f"level {k + 1} of {last + 1}"
        var = col.loop_var or f"loop {col.loop}"
        kind = ""
        if iter_kinds and col.loop is not None and col.loop < len(iter_kinds):
            kind = " reduction" if iter_kinds[col.loop] == "R" else " spatial"
        return f"{level}{kind} tile of {var}", rng_text
    if col.inst == "SampleCategorical":
        what = "auto-unroll max step" if col.annotation in UNROLL_KEYS else f"choice for {col.annotation}"
        return what, rng_text
    if col.inst == "SampleComputeLocation":
        names = {-1: "root", -2: "inline"}
        if op == "in":
            rng_text = f"= {names.get(int(shown), f'loop #{shown}') if isinstance(shown, (int, float)) else shown}"
        return "compute location", rng_text
    return col.inst, rng_text


def constraint(col: DecisionColumn, op: str, value: float) -> dict:
    """The principle as a machine-readable search constraint."""
    if col.inst == "Sketch":
        return {"sketch": col.categories[int(value)] if col.categories else int(value)}
    out: dict = {"block": col.block, "inst": col.inst}
    if col.loop is not None:
        out["loop"] = col.loop
    if col.index is not None:
        out["index"] = col.index
        out["n"] = col.n_factors
    if col.annotation:
        out["annotation"] = col.annotation
    if col.kind == "categorical":
        out["in"] = [col.categories[int(value)] if col.categories else value]
    elif op == "in":
        out["in"] = [int(value) if float(value).is_integer() else value]
    else:
        out[op] = int(value) if float(value).is_integer() else value
    return out


def _principle(r: Range, effect: float, ci: tuple[float, float], p: float, n_in: int, n_total: int,
               lat: np.ndarray, importance: float | None) -> dict:
    col = r.column
    return {"block": col.block, "inst": col.inst, "key": col.key, "loop": col.loop, "loop_var": col.loop_var,
            "index": col.index, "annotation": col.annotation, "op": r.op,
            "value": int(r.value) if float(r.value).is_integer() else r.value,
            "effect": round(effect, 4), "ci95": [round(ci[0], 4), round(ci[1], 4)], "p_value": float(f"{p:.3g}"),
            "n_in": n_in, "n_out": n_total - n_in, "n": n_total,
            "median_in_us": round(float(np.median(lat[r.mask])), 3), "importance": importance,
            "constraint": constraint(col, r.op, r.value)}
