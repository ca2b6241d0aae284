"""Contour background of the honeycomb: gain over the untuned program per hardware-metric category.

This CPU has no performance counters (docs/tvm.md §7), so the categories are modelled from
MetaSchedule's per-store features of each candidate and of the untuned program (the baseline
rows the worker extracts), and each says so in its ``source``:

* ``memory``      — cache lines touched, summed over stores and buffers: baseline / candidate;
* ``compute``     — SIMD lanes in use: each store's vector length (capped at the target's lanes for
  32-bit floats) weighted by its float ops, candidate / baseline;
* ``parallelism`` — threads in use: each store's parallel extent capped at the target's cores,
  weighted by float ops, candidate / baseline.

Gains are log2 ratios (1 = twice as good).  Per cell: mean per category; ``z`` = the max over the
categories and ``winner`` = which one.  The measured end-to-end speedup (baseline_us / latency) is
reported next to them, not folded into ``z``: it is the sum of all effects, not a resource.
Contour lines of ``z`` are traced on a grid interpolated (linearly) from the cell centres and
masked outside the honeycomb (farther than one hex size from every cell); each line is oriented so
that higher ``z`` lies on its left, and carries ticks pointing uphill.

The categories are a *model*, so ``agreement`` checks it against what was measured before the
picture draws it: the Spearman rank correlation, over the run's candidates, between the modelled
gain (``z`` of each candidate) and the measured speed (−latency), and, where the run has a measured
speed-up, whether the model's gain at the best candidate contradicts it (claims ≥ 2× more).  A
model that agrees is drawn; a weak or untested one is drawn faded with the figures; one that
disagrees is not drawn at all, and the legend says why (docs/analytics.md, "Contour").
"""
from __future__ import annotations

import math

import numpy as np

from . import featurelayout as fl
from .candidates import CandidateTable

AVX512_CPUS = ("skylake-avx512", "cascadelake", "cooperlake", "icelake", "tigerlake", "sapphirerapids",
               "znver4", "znver5", "rocketlake", "alderlake-avx512", "graniterapids")
CATEGORIES = [
    {"id": "memory", "label": "memory traffic",
     "source": "model: MetaSchedule PerStoreFeature — cache lines touched (sum over stores and buffers), "
               "untuned program / candidate"},
    {"id": "compute", "label": "vector compute",
     "source": "model: MetaSchedule PerStoreFeature — vector length per store (capped at {lanes} fp32 lanes), "
               "weighted by float ops, candidate / untuned"},
    {"id": "parallelism", "label": "parallelism",
     "source": "model: MetaSchedule PerStoreFeature — parallel extent per store (capped at {cores} cores), "
               "weighted by float ops, candidate / untuned"},
]
GPU_WORDS = {   # the same features read on a GPU run (no counters): what they are there
    "compute": "model: MetaSchedule PerStoreFeature — vector length per store (vectorized loads and stores, capped "
               "at 4 fp32 lanes: 128-bit accesses), weighted by float ops, candidate / untuned",
    "parallelism": "model: MetaSchedule PerStoreFeature — threads launched per store (blockIdx × threadIdx "
                   "extents), weighted by float ops, candidate / untuned (one thread)",
}
GPU_LANES = 4      # fp32 lanes of a GPU's widest (128-bit) load or store
MEASURED = {"id": "speedup", "label": "measured speedup",
            "source": "measured: run.json baseline_us / the record's mean run_secs (MetaSchedule runner)"}


def simd_lanes(target: dict | str | None) -> int:
    """fp32 lanes of the target's vector unit: 16 (AVX-512), 8 (AVX2 and most x86-64-v3), 4 otherwise."""
    mcpu = ""
    if isinstance(target, dict):
        mcpu = str(target.get("mcpu") or "")
    elif isinstance(target, str):
        mcpu = target
    if any(name in mcpu for name in AVX512_CPUS):
        return 16
    if mcpu and mcpu not in ("generic", "x86-64"):
        return 8
    return 4


def _threads(rows: np.ndarray) -> np.ndarray:
    """Threads launched per store row: the product of its blockIdx and threadIdx extents (≥ 1)."""
    names = ("blockIdx_x_len", "blockIdx_y_len", "blockIdx_z_len", "threadIdx_x_len", "threadIdx_y_len",
             "threadIdx_z_len")
    raw = fl.unslog(rows[:, [fl.INDEX[n] for n in names]])
    return np.prod(np.maximum(raw, 1.0), axis=1)


def _program_metrics(rows: np.ndarray, owner: np.ndarray, n: int, lanes: int, cores: int,
                     gpu: bool = False) -> np.ndarray:
    """Per program (rows grouped by ``owner``): cache lines touched, flop-weighted vector lanes and
    flop-weighted threads (on a GPU: threads launched, not capped at cores), as an ``(n, 3)`` array
    (NaN for a program without rows)."""
    cols = [*fl.BUFFER_LINES, *fl.FLOAT_OPS, fl.INDEX["vec_num"], fl.INDEX["vec_len"], fl.INDEX["parallel_num"],
            fl.INDEX["parallel_prod"]]
    raw = fl.unslog(rows[:, cols])
    nb, nf = len(fl.BUFFER_LINES), len(fl.FLOAT_OPS)
    lines = raw[:, :nb].sum(axis=1)
    flops = raw[:, nb:nb + nf].sum(axis=1)
    vec_num, vec_len, par_num, par_prod = (raw[:, nb + nf + k] for k in range(4))
    total = np.bincount(owner, weights=flops, minlength=n)
    flops = np.where(total[owner] > 0, flops, 1.0)  # a program with no float op: plain mean over stores
    total = np.bincount(owner, weights=flops, minlength=n)
    vec = np.clip(np.where(vec_num > 0, vec_len, 1.0), 1, lanes)
    par = _threads(rows) if gpu else np.clip(np.where(par_num > 0, par_prod, 1.0), 1, cores)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = np.stack([np.bincount(owner, weights=lines, minlength=n),
                        np.bincount(owner, weights=flops * vec, minlength=n) / total,
                        np.bincount(owner, weights=flops * par, minlength=n) / total], axis=1)
    out[np.bincount(owner, minlength=n) == 0] = np.nan
    return out


def _stack(rows_list: list) -> tuple[np.ndarray, np.ndarray]:
    present = [(k, r) for k, r in enumerate(rows_list) if r is not None and len(r)]
    if not present:
        return np.zeros((0, fl.LENGTH), dtype=np.float32), np.zeros(0, dtype=np.int64)
    rows = np.concatenate([r for _, r in present])
    owner = np.concatenate([np.full(len(r), k, dtype=np.int64) for k, r in present])
    return rows, owner


def candidate_gains(table: CandidateTable, idx: np.ndarray, target=None, gpu: bool = False) -> tuple[dict, list[dict]]:
    """log2 gains per category for candidates ``idx``: ``{category: (len(idx),) array}`` (NaN = unknown)
    and the categories that could be computed (with their sources).  ``gpu``: the run's target runs on
    a GPU (``engine.targets.runs_on_device``, decided by the caller)."""
    lanes = GPU_LANES if gpu else simd_lanes(target)
    cores = max(1, int(table.num_cores or 1))
    workloads = sorted(w for w, r in table.baseline_rows.items() if r is not None)
    gains = {c["id"]: np.full(len(idx), np.nan) for c in CATEGORIES}
    if workloads and len(idx):
        brows, bowner = _stack([table.baseline_rows[w] for w in workloads])
        base = _program_metrics(brows, bowner, len(workloads), lanes, cores, gpu)
        slot = {w: k for k, w in enumerate(workloads)}
        ref_index = np.array([slot.get(int(table.workload[i]), -1) for i in idx])
        rows, owner = _stack([table.rows[i] if ref_index[k] >= 0 else None for k, i in enumerate(idx)])
        cand = _program_metrics(rows, owner, len(idx), lanes, cores, gpu)
        ref = np.where(ref_index[:, None] >= 0, base[np.maximum(ref_index, 0)], np.nan)
        with np.errstate(invalid="ignore", divide="ignore"):
            gains["memory"] = np.log2(ref[:, 0] / cand[:, 0])
            gains["compute"] = np.log2(cand[:, 1] / ref[:, 1])
            gains["parallelism"] = np.log2(cand[:, 2] / ref[:, 2])
        for key in gains:
            gains[key][~np.isfinite(gains[key])] = np.nan
    cats = [dict(c, source=(GPU_WORDS.get(c["id"]) if gpu else None) or c["source"].format(lanes=lanes, cores=cores))
            for c in CATEGORIES if np.isfinite(gains[c["id"]]).any()]
    return {c["id"]: gains[c["id"]] for c in cats}, cats


def measured_speedup(table: CandidateTable, idx: np.ndarray, several_tasks: bool = False) -> np.ndarray | None:
    """log2(baseline_us / latency) per candidate, or None without a baseline or for a run of several
    tasks (its baseline is the whole program's, not one task's)."""
    if not table.baseline_us or several_tasks or len(np.unique(table.workload)) > 1:
        return None
    return np.log2(table.baseline_us / table.latency_us[idx])


# Agreement thresholds (docs/analytics.md): the model is drawn as a picture of the run only when its
# ranking of the candidates goes with the measured one.
AGREE_RHO = 0.4          # ρ at or above this (and p < 0.05) = agrees
DISAGREE_RHO = 0.1       # ρ at or below this = disagrees
MIN_AGREEMENT_N = 8      # fewer candidates: untested, drawn faded
CONTRADICTION_LOG2 = 1.0  # model gain at the best candidate − measured log2 speed-up > this = contradicts


def ranks(values: np.ndarray) -> np.ndarray:
    """Ranks 1..n with ties averaged (as scipy.stats.rankdata's default)."""
    values = np.asarray(values, dtype=np.float64)
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return ((ends - counts + 1 + ends) / 2.0)[inverse.ravel()]


def spearman(a: np.ndarray, b: np.ndarray) -> tuple[float | None, int, float | None]:
    """(ρ, n, two-sided p) over the pairs where both are finite; ρ None when undefined (n < 3 or a
    constant side).  p from the normal approximation ρ·√(n−1) (n ≥ 8 here; exact tables would need
    scipy.stats, a 3 s import)."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    ok = np.isfinite(a) & np.isfinite(b)
    n = int(ok.sum())
    if n < 3:
        return None, n, None
    ra, rb = ranks(a[ok]), ranks(b[ok])
    ra, rb = ra - ra.mean(), rb - rb.mean()
    denom = math.sqrt(float((ra ** 2).sum() * (rb ** 2).sum()))
    if denom == 0:
        return None, n, None
    rho = float((ra * rb).sum() / denom)
    p = math.erfc(abs(rho) * math.sqrt(n - 1) / math.sqrt(2))
    return rho, n, p


def candidate_z(gains: dict[str, np.ndarray]) -> np.ndarray:
    """Per candidate: max over categories of the modelled log2 gain (NaN where none is known)."""
    if not gains:
        return np.array([])
    stack = np.stack(list(gains.values()))
    with np.errstate(all="ignore"):
        z = np.where(np.isfinite(stack), stack, -np.inf).max(axis=0)
    return np.where(np.isfinite(z), z, np.nan)


def agreement(gains: dict[str, np.ndarray], latency_us: np.ndarray, best: int | None = None,
              measured_log2: float | None = None) -> dict:
    """How far the modelled gains go with the measured latencies of the same candidates.

    ``best``: index (into ``latency_us``) of the run's best candidate; ``measured_log2``: the run's
    measured log2 speed-up over the untuned program (the re-measured record), when it has one.
    Returns ``{verdict: agrees|weak|untested|disagrees, draw: full|faded|none, rho, n, p,
    per_category: {id: {rho, n, p}}, model_best_log2, measured_log2, contradiction, message}``.
    """
    speed = -np.log(np.asarray(latency_us, dtype=np.float64))
    z = candidate_z(gains)
    rho, n, p = spearman(z, speed) if len(z) else (None, 0, None)
    per = {}
    for key, values in gains.items():
        r, k, q = spearman(values, speed)
        per[key] = {"rho": _r(r), "n": k, "p": _p(q)}
    model_best = float(z[best]) if best is not None and len(z) and np.isfinite(z[best]) else None
    contradiction = (model_best is not None and measured_log2 is not None
                     and model_best - measured_log2 > CONTRADICTION_LOG2)
    verdict = _verdict(rho, n, p, contradiction)
    out = {"verdict": verdict, "draw": {"agrees": "full", "disagrees": "none"}.get(verdict, "faded"),
           "rho": _r(rho), "n": n, "p": _p(p), "per_category": per,
           "model_best_log2": _r(model_best), "measured_log2": _r(measured_log2), "contradiction": contradiction,
           "method": "Spearman rank correlation between each candidate's modelled gain (max over categories) and "
                     "its measured speed (−latency) over the run's measured candidates; p: normal approximation"}
    out["message"] = _agreement_message(out)
    return out


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None or not math.isfinite(value) else round(float(value), digits)


def _p(value: float | None) -> float | None:
    return None if value is None or not math.isfinite(value) else float(f"{value:.2g}")


def _verdict(rho: float | None, n: int, p: float | None, contradiction: bool) -> str:
    if contradiction:
        return "disagrees"
    if rho is None or n < MIN_AGREEMENT_N:
        return "untested"
    if rho <= DISAGREE_RHO:
        return "disagrees"
    if rho >= AGREE_RHO and p is not None and p < 0.05:
        return "agrees"
    return "weak"


def _agreement_message(a: dict) -> str:
    rho = "n/a" if a["rho"] is None else f"{a['rho']:+.2f}"
    stat = f"rank correlation with the measured speed ρ = {rho} over n = {a['n']} candidates"
    if a["contradiction"]:
        return (f"The model contradicts the measurement: it gives the best candidate a gain of "
                f"{2 ** a['model_best_log2']:.1f}× over the untuned program, measured {2 ** a['measured_log2']:.2f}× "
                f"({stat}). Its contours are not drawn.")
    if a["verdict"] == "disagrees":
        return f"The model does not rank the candidates as the measurement does ({stat}). Its contours are not drawn."
    if a["verdict"] == "untested":
        return f"Too few measured candidates to test the model ({stat}); contours drawn faded."
    if a["verdict"] == "weak":
        return f"The model goes only weakly with the measurement ({stat}); contours drawn faded."
    return f"The model agrees with the measurement ({stat})."


def cell_means(values: np.ndarray, cell_of: np.ndarray, n_cells: int) -> np.ndarray:
    """Mean of ``values`` per cell, ignoring NaN (NaN for a cell with no finite value)."""
    ok = np.isfinite(values)
    sums = np.bincount(cell_of[ok], weights=values[ok], minlength=n_cells)
    counts = np.bincount(cell_of[ok], minlength=n_cells)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def z_and_winner(per_cell: dict[str, np.ndarray]) -> tuple[np.ndarray, list[str | None]]:
    """Max over categories per cell, and the category that gave it."""
    if not per_cell:
        return np.array([]), []
    names = list(per_cell)
    stack = np.stack([per_cell[k] for k in names])
    filled = np.where(np.isfinite(stack), stack, -np.inf)
    best = filled.argmax(axis=0)
    z = filled.max(axis=0)
    z = np.where(np.isfinite(z), z, np.nan)
    return z, [names[b] if np.isfinite(v) else None for b, v in zip(best, z)]


def neighbour_smooth(z: np.ndarray, pairs: list[tuple[int, int]], weight: np.ndarray | None = None) -> np.ndarray:
    """Each cell's value averaged with its edge neighbours' (weighted by candidate counts; NaN
    ignored).  Contours of the raw per-cell means of a few candidates each wind around every cell
    (the "tangle" of small and Relax runs); the lines follow this smoothed field, the cells keep
    their own values."""
    z = np.asarray(z, dtype=np.float64)
    w = np.ones_like(z) if weight is None else np.asarray(weight, dtype=np.float64)
    ok = np.isfinite(z)
    wz = np.where(ok, z * w, 0.0)
    ww = np.where(ok, w, 0.0)
    sums, weights = wz.copy(), ww.copy()
    if pairs:
        a, b = np.asarray(pairs).T
        np.add.at(sums, a, wz[b])
        np.add.at(sums, b, wz[a])
        np.add.at(weights, a, ww[b])
        np.add.at(weights, b, ww[a])
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(weights > 0, sums / weights, np.nan)


def nice_levels(lo: float, hi: float, count: int = 4) -> list[float]:
    """Round contour levels strictly inside (lo, hi)."""
    if not (np.isfinite(lo) and np.isfinite(hi)) or hi - lo < 1e-9:
        return []
    raw = (hi - lo) / count
    mag = 10 ** math.floor(math.log10(raw))
    step = min((s * mag for s in (1, 2, 2.5, 5, 10) if s * mag >= raw), default=raw)
    first = math.floor(lo / step + 1) * step
    levels = []
    value = first
    while value < hi - 1e-9 and len(levels) < 4 * count:
        levels.append(round(value, 10))
        value += step
    return levels


def contour_lines(xy: np.ndarray, z: np.ndarray, size: float, levels: list[float] | None = None,
                  resolution: int = 90) -> dict:
    """Contour polylines of z (given at cell centres ``xy``) with their uphill direction.

    Returns ``{"levels", "lines": [{"level", "points", "ticks": [[x, y, dx, dy]]}], "grid"}``;
    ``points`` run with higher z on the left; ticks are unit vectors pointing uphill.
    """
    ok = np.isfinite(z)
    if ok.sum() < 4 or np.ptp(z[ok]) < 1e-9:
        return {"levels": [], "lines": []}
    from scipy.interpolate import LinearNDInterpolator
    from scipy.spatial import QhullError
    pts, vals = xy[ok], z[ok]
    lo, hi = pts.min(axis=0) - size, pts.max(axis=0) + size
    gx = np.linspace(lo[0], hi[0], resolution)
    gy = np.linspace(lo[1], hi[1], resolution)
    try:
        interp = LinearNDInterpolator(pts, vals)
    except (QhullError, ValueError):
        return {"levels": [], "lines": []}
    GX, GY = np.meshgrid(gx, gy)
    Z = interp(GX, GY)
    from scipy.spatial import cKDTree
    dist, _ = cKDTree(xy).query(np.stack([GX.ravel(), GY.ravel()], axis=1))
    Z[(dist > size).reshape(Z.shape)] = np.nan  # only over the honeycomb, not across empty space
    levels = levels if levels is not None else nice_levels(float(vals.min()), float(vals.max()))
    import contourpy
    gen = contourpy.contour_generator(gx, gy, np.ma.masked_invalid(Z), line_type="Separate")
    lines = []
    for level in levels:
        for line in gen.lines(level):
            if len(line) < 2:
                continue
            line = _orient(line, interp)
            lines.append({"level": float(level), "points": np.round(line, 4).tolist(),
                          "ticks": _ticks(line, size)})
    return {"levels": [float(v) for v in levels], "lines": lines}


def _left_normals(line: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mids = (line[1:] + line[:-1]) / 2.0
    d = line[1:] - line[:-1]
    norm = np.linalg.norm(d, axis=1, keepdims=True)
    norm[norm == 0] = 1.0
    d = d / norm
    return mids, np.stack([-d[:, 1], d[:, 0]], axis=1)


def _orient(line: np.ndarray, interp) -> np.ndarray:
    """Reverse the line if higher z lies on its right."""
    mids, normals = _left_normals(line)
    eps = max(float(np.ptp(line, axis=0).max()), 1e-6) * 0.01 + 1e-6
    left = interp(mids + normals * eps)
    right = interp(mids - normals * eps)
    diff = np.nan_to_num(left - right)
    return line[::-1] if diff.sum() < 0 else line


def _ticks(line: np.ndarray, size: float, every: float | None = None) -> list[list[float]]:
    """Uphill ticks (unit normals to the left) about every 2 hex sizes along the line."""
    every = every or 2.0 * size
    mids, normals = _left_normals(line)
    seg = np.linalg.norm(line[1:] - line[:-1], axis=1)
    travelled = np.cumsum(seg) - seg / 2.0
    ticks, next_at = [], every / 2.0
    for m, nrm, t in zip(mids, normals, travelled):
        if t >= next_at:
            ticks.append([round(float(m[0]), 4), round(float(m[1]), 4), round(float(nrm[0]), 4),
                          round(float(nrm[1]), 4)])
            next_at = t + every
    if not ticks and len(mids):
        k = len(mids) // 2
        ticks.append([round(float(mids[k][0]), 4), round(float(mids[k][1]), 4), round(float(normals[k][0]), 4),
                      round(float(normals[k][1]), 4)])
    return ticks
