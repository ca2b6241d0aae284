"""``asight.searchSpace/1``: the honeycomb of a run's candidates with its contour background.

Everything the webview, the HTML report and the PNG draw is in the payload: cells (axial and
plane coordinates, hex corners, category, colour, candidates), category boundaries, the colour
scale, the best candidate, per-candidate columns and the contour lines with their direction.
"""
from __future__ import annotations

import time

import numpy as np

from ..analysis import contour as ct
from ..analysis import honeycomb as hc
from ..analysis.vectors import feature_matrix, standardise
from .context import RunData, clean, run_info

SCHEMA = "asight.searchSpace/1"
# Three-colour sequential scale, light = fast, dark = slow.
COLOR_STOPS = ["#fff1b8", "#f08c3a", "#5c1408"]


def column(values: np.ndarray, digits: int = 4) -> list:
    """A numpy column as a JSON list (rounded, NaN -> None)."""
    arr = np.asarray(values, dtype=np.float64)
    out = np.round(arr, digits).tolist()
    if np.isnan(arr).any():
        out = [None if x != x else x for x in out]
    return out


def _hex_to_rgb(color: str) -> np.ndarray:
    return np.array([int(color[i:i + 2], 16) for i in (1, 3, 5)], dtype=np.float64)


def color_for(t: np.ndarray) -> list[str]:
    """Colours of positions ``t`` in [0, 1] on the three-stop scale (0 = fast/light, 1 = slow/dark)."""
    stops = [_hex_to_rgb(c) for c in COLOR_STOPS]
    t = np.clip(np.nan_to_num(np.asarray(t, dtype=np.float64), nan=0.5), 0, 1)
    out = []
    for v in t:
        a, b, f = (stops[0], stops[1], v * 2) if v <= 0.5 else (stops[1], stops[2], v * 2 - 1)
        rgb = np.round(a + (b - a) * f).astype(int)
        out.append("#%02x%02x%02x" % tuple(rgb))
    return out


def luminance(color: str) -> float:
    """Relative luminance (sRGB, WCAG) of ``#rrggbb``; lower = darker."""
    c = _hex_to_rgb(color) / 255.0
    c = np.where(c <= 0.03928, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return float(0.2126 * c[0] + 0.7152 * c[1] + 0.0722 * c[2])


def _scale(mean_lat: np.ndarray) -> tuple[np.ndarray, dict]:
    lo, hi = float(np.nanmin(mean_lat)), float(np.nanmax(mean_lat))
    if hi <= lo:
        t = np.zeros_like(mean_lat)
    else:
        t = (np.log(mean_lat) - np.log(lo)) / (np.log(hi) - np.log(lo))
    mid = float(np.exp((np.log(lo) + np.log(hi)) / 2))
    return t, {"stops": COLOR_STOPS, "domain_us": [lo, mid, hi], "scale": "log",
               "meaning": "cell colour = mean latency of its candidates; darker = slower"}


def _strategy(loops: dict) -> str:
    """The strategy mix of one candidate from its scheduled loops (parallel / vector / unroll)."""
    kinds = {k for nest in loops.values() for _, k, _ in nest}
    unroll = any(step for nest in loops.values() for _, _, step in nest)
    parts = [name for flag, name in ((("p" in kinds), "parallel"), (("v" in kinds), "vector"), (unroll, "unroll"))
             if flag]
    return "+".join(parts) or "serial"


def _majority(codes: np.ndarray, cell_of: np.ndarray, m: int, n_codes: int) -> tuple[np.ndarray, np.ndarray]:
    counts = np.zeros((m, max(n_codes, 1)), dtype=np.int64)
    np.add.at(counts, (cell_of, codes), 1)
    top = counts.argmax(axis=1)
    share = counts[np.arange(m), top] / np.maximum(counts.sum(axis=1), 1)
    return top, share


def search_space(data: RunData, seed: int = 0) -> dict:
    """The searchSpace payload of a run (``status: "unavailable"`` without measured candidates)."""
    started = time.perf_counter()
    table = data.table
    idx = np.flatnonzero(table.valid)
    base = {"schema": SCHEMA, "run": run_info(data), "notes": list(data.notes), "seed": seed}
    if len(idx) == 0:
        return {**base, "status": "unavailable", "message": "the run has no measured candidate yet"}
    timings = {}
    X, source = feature_matrix(table, idx)
    Xs = standardise(X)
    timings["features_s"] = time.perf_counter() - started
    t0 = time.perf_counter()
    lay = hc.layout(Xs, seed=seed)
    timings["layout_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    m = len(lay.cells_qr)
    cells_xy = lay.cells_xy
    lat = table.latency_us[idx]
    count = np.bincount(lay.cell_of, minlength=m)
    mean_lat = np.bincount(lay.cell_of, weights=lat, minlength=m) / np.maximum(count, 1)
    min_lat = np.full(m, np.inf)
    np.minimum.at(min_lat, lay.cell_of, lat)
    t, scale = _scale(mean_lat)
    colors = color_for(t)
    cats = table.sketch[idx]
    cell_cat, cat_share = _majority(cats, lay.cell_of, m, len(table.sketches))
    strat_labels = [_strategy(table.loops[i]) for i in idx] if any(table.loops[i] for i in idx) else None
    if strat_labels:
        names = sorted(set(strat_labels))
        strat_codes = np.array([names.index(s) for s in strat_labels])
        cell_strat, _ = _majority(strat_codes, lay.cell_of, m, len(names))
    gains, gain_cats = ct.candidate_gains(table, idx, data.meta.target)
    per_cell = {k: ct.cell_means(v, lay.cell_of, m) for k, v in gains.items()}
    z, winner = ct.z_and_winner(per_cell)
    speedup = ct.measured_speedup(table, idx)
    speed_cell = ct.cell_means(speedup, lay.cell_of, m) if speedup is not None else None
    members = np.argsort(lay.cell_of, kind="stable")
    bounds = np.searchsorted(lay.cell_of[members], np.arange(m + 1))
    trials = table.trials[idx]
    cells = []
    for c in range(m):
        mine = members[bounds[c]:bounds[c + 1]]
        best_local = mine[np.argmin(lat[mine])]
        x, y = cells_xy[c]
        cell = {"id": c, "q": int(lay.cells_qr[c, 0]), "r": int(lay.cells_qr[c, 1]), "x": round(float(x), 4),
                "y": round(float(y), 4), "cluster": int(lay.cells_cluster[c]), "category": int(cell_cat[c]),
                "category_share": round(float(cat_share[c]), 3), "count": int(count[c]),
                "mean_latency_us": round(float(mean_lat[c]), 3), "min_latency_us": round(float(min_lat[c]), 3),
                "color": colors[c], "best_trial": int(trials[best_local]),
                "trials": trials[mine].tolist(),
                "corners": np.round(hc.hex_corners(x, y, lay.size), 4).tolist()}
        if strat_labels:
            cell["strategy"] = names[int(cell_strat[c])]
        if per_cell:
            cell["gains"] = {k: (None if np.isnan(v[c]) else round(float(v[c]), 4)) for k, v in per_cell.items()}
            cell["z"] = None if np.isnan(z[c]) else round(float(z[c]), 4)
            cell["winner"] = winner[c]
        if speed_cell is not None:
            cell["speedup_log2"] = None if np.isnan(speed_cell[c]) else round(float(speed_cell[c]), 4)
        cells.append(cell)
    boundaries = [hc.shared_edge(cells_xy[a], cells_xy[b], lay.size)
                  for a, b in hc.adjacent_pairs(lay.cells_qr) if cell_cat[a] != cell_cat[b]]
    bi = int(np.argmin(lat))
    best = {"trial": int(trials[bi]), "cell": int(lay.cell_of[bi]), "latency_us": round(float(lat[bi]), 3),
            "x": round(float(cells_xy[lay.cell_of[bi], 0]), 4), "y": round(float(cells_xy[lay.cell_of[bi], 1]), 4),
            "category": int(cats[bi])}
    timings["cells_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    contour = {"metric": "z = max over hardware-metric categories of the mean log2 gain over the untuned program",
               "unit": "log2 gain (1 = 2x better than untuned)", "categories": gain_cats,
               "direction": "each line runs with higher z on its left; ticks point uphill (toward higher gain)",
               "measured": dict(ct.MEASURED, available=speedup is not None), "levels": [], "lines": []}
    if per_cell:
        contour.update(ct.contour_lines(cells_xy, z, lay.size))
    else:
        contour["note"] = "no feature vectors or no baseline features: no modelled hardware metrics"
    timings["contour_s"] = time.perf_counter() - t0
    categories = [{"id": s["id"], "label": s["label"], "tags": s["tags"],
                   "count": int((cats == s["id"]).sum())} for s in table.sketches]
    timings["total_s"] = time.perf_counter() - started
    return {
        **base, "status": "ok",
        "features": {"source": source, "dims": int(X.shape[1]), "dims_used": int(Xs.shape[1])},
        "reduction": lay.reduction, "clustering": lay.clustering,
        "hex": {"size": round(lay.size, 6), "orientation": "pointy", "capacity": lay.capacity,
                "growth": "cells grown outward from each cluster centre, nearest points first; "
                          "a cell holds at most `capacity` candidates"},
        "category_by": "sketch (design space of origin: non-sampling instructions before post-processing)",
        "categories": categories, "cells": cells, "boundaries": [[round(v, 4) for v in b] for b in boundaries],
        "color_scale": scale, "best": best,
        "candidates": {"trial": trials.tolist(), "cell": lay.cell_of.tolist(), "x": column(lay.xy[:, 0]),
                       "y": column(lay.xy[:, 1]), "pca_x": column(lay.pca_xy[:, 0]),
                       "pca_y": column(lay.pca_xy[:, 1]), "latency_us": column(lat, 3), "category": cats.tolist(),
                       "cluster": lay.labels.tolist()},
        "failed_trials": table.trials[~table.valid].tolist(),
        "contour": clean(contour, 4), "timings": {k: round(v, 4) for k, v in timings.items()},
    }
