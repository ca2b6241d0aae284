"""``asight.searchSpace/1``: the honeycomb of a run's candidates with its contour background.

Everything the webview, the HTML report and the PNG draw is in the payload: cells (axial and
plane coordinates, hex corners, category, colour, candidates), category boundaries, the colour
scale, the best candidate, per-candidate columns and the contour lines with their direction.
"""
from __future__ import annotations

import time

import numpy as np

from ..analysis import contour as ct
from ..analysis import counters as cn
from ..analysis import honeycomb as hc
from ..analysis.vectors import feature_matrix, standardise
from ..store.record import Measurement
from .context import RunData, best_candidate, clean, run_info

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
    parts = [name for flag, name in ((("t" in kinds), "threads"), (("p" in kinds), "parallel"), (("v" in kinds), "vector"),
                                     (unroll, "unroll")) if flag]
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
    lat, cats, trials = table.latency_us[idx], table.sketch[idx], table.trials[idx]
    several = len(data.tasks or []) > 1 or len(data.meta.tasks or []) > 1
    stats = _cell_stats(table, idx, lay, lat, cats, (data.meta.target, data.on_device), several, data.counters)
    _counters_why(stats["origin"], (data.meta.extra or {}).get("counters"), data.notes)
    cells = [_cell(c, lay, stats, lat, trials) for c in range(len(lay.cells_qr))]
    boundaries = [hc.shared_edge(lay.cells_xy[a], lay.cells_xy[b], lay.size)
                  for a, b in hc.adjacent_pairs(lay.cells_qr) if stats["cell_cat"][a] != stats["cell_cat"][b]]
    timings["cells_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    contour = _contour(lay, stats, lat, None if several else _measured_log2(data.meta.measured))
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
        "color_scale": stats["scale"], "best": _best(lay, lat, cats, idx, data),
        "candidates": {"trial": trials.tolist(), "cell": lay.cell_of.tolist(), "x": column(lay.xy[:, 0]),
                       "y": column(lay.xy[:, 1]), "pca_x": column(lay.pca_xy[:, 0]),
                       "pca_y": column(lay.pca_xy[:, 1]), "latency_us": column(lat, 3), "category": cats.tolist(),
                       "cluster": lay.labels.tolist()},
        "failed_trials": table.trials[~table.valid].tolist(),
        "contour": clean(contour, 4), "timings": {k: round(v, 4) for k, v in timings.items()},
    }


def _cell_stats(table, idx: np.ndarray, lay, lat: np.ndarray, cats: np.ndarray, target: tuple, several_tasks: bool,
                counters: list | None = None) -> dict:
    """Per cell: count, mean and min latency, colour, majority category and strategy, contour gains.
    ``target``: (the run's target, whether it runs on a GPU)."""
    m = len(lay.cells_qr)
    count = np.bincount(lay.cell_of, minlength=m)
    mean_lat = np.bincount(lay.cell_of, weights=lat, minlength=m) / np.maximum(count, 1)
    min_lat = np.full(m, np.inf)
    np.minimum.at(min_lat, lay.cell_of, lat)
    t, scale = _scale(mean_lat)
    cell_cat, cat_share = _majority(cats, lay.cell_of, m, len(table.sketches))
    out = {"count": count, "mean_lat": mean_lat, "min_lat": min_lat, "scale": scale, "colors": color_for(t),
           "cell_cat": cell_cat, "cat_share": cat_share, "strategies": None}
    strat_labels = [_strategy(table.loops[i]) for i in idx] if any(table.loops[i] for i in idx) else None
    if strat_labels:
        names = sorted(set(strat_labels))
        cell_strat, _ = _majority(np.array([names.index(s) for s in strat_labels]), lay.cell_of, m, len(names))
        out["strategies"] = [names[int(s)] for s in cell_strat]
    gains, out["gain_cats"], out["origin"] = _gains(table, idx, target, counters)
    out["gains"] = gains
    out["per_cell"] = {k: ct.cell_means(v, lay.cell_of, m) for k, v in gains.items()}
    out["z"], out["winner"] = ct.z_and_winner(out["per_cell"])
    speedup = ct.measured_speedup(table, idx, several_tasks)
    out["speed_cell"] = ct.cell_means(speedup, lay.cell_of, m) if speedup is not None else None
    members = np.argsort(lay.cell_of, kind="stable")
    out["members"], out["bounds"] = members, np.searchsorted(lay.cell_of[members], np.arange(m + 1))
    return out


def _gains(table, idx: np.ndarray, target: tuple, counters: list | None) -> tuple[dict, list, dict]:
    """Per-candidate gains per category: measured counters (``analysis/counters.py``: DRAM / SM / GPU)
    where the run has them, else the model (``analysis/contour.candidate_gains``), and which it is."""
    if counters:
        cands, baseline, tool = cn.by_candidate(counters)
        measured = {int(t) for t in table.trials[table.valid]}      # a failed build's counters are no reference
        cands = {t: m for t, m in cands.items() if t in measured}
        gains, used = cn.group_gains(cands, baseline, table.trials[idx])
        if any(np.isfinite(v).any() for v in gains.values()):
            _, against, lacking = cn.reference(cands, baseline)
            profiled = int(np.isfinite(np.stack(list(gains.values()))).any(axis=0).sum())
            cats = cn.categories(used, tool, against, lacking)
            return {c["id"]: gains[c["id"]] for c in cats}, cats, {
                "origin": "measured", "label": f"measured ({_tool_name(tool)})", "tool": tool, "against": against,
                "profiled": profiled, "candidates": int(len(idx))}
    gains, cats = ct.candidate_gains(table, idx, *target)
    why = ("the run has no counters.jsonl" if counters is None else "the run's counters.jsonl is empty" if not counters
           else _unmatched(counters, table))
    return gains, cats, {"origin": "model", "label": "model (MetaSchedule features)", "why": why}


def _unmatched(counters: list, table) -> str:
    """Why counters gave no gain: no line names a measured candidate, or none of their metrics is one
    the contour groups (DRAM / SM / GPU percentages, rates, stalls)."""
    measured = {int(t) for t in table.trials[table.valid]}
    if not any(e["candidate"] in measured for e in counters):
        return "no counters match the run's measured candidates"
    return ("none of counters.jsonl's metrics is one the contour uses (Nsight Compute dram__/sm__/smsp__/l1tex__/"
            "gpu__/lts__ percentages, hit rates or stalls)")


def _counters_why(origin: dict, tried: dict | None, notes: list) -> None:
    """A model contour of a run whose tuning job tried to collect counters says why it has none; one
    whose counters file could not be read says that, not that it has none."""
    unread = next((n for n in notes if n.startswith("counters not used: ")), None)
    if origin.get("origin") == "model" and unread:
        origin["why"] = unread
    if origin.get("origin") == "model" and tried and tried.get("status") != "ok" and tried.get("message"):
        origin["why"] = f"{origin['why']} (the tuning job's counters: {tried['message']})"
        origin["asked"] = True      # counters were asked for: the legend says why the contour is the model


def _tool_name(tool: str) -> str:
    """``Nsight Compute`` from ``ncu (Nsight Compute 2025.3)``."""
    if "(" in tool and ")" in tool:
        inner = tool[tool.index("(") + 1:tool.rindex(")")]
        return " ".join(w for w in inner.split() if not w[:1].isdigit()) or tool
    return tool or "counters"


def _cell(c: int, lay, s: dict, lat: np.ndarray, trials: np.ndarray) -> dict:
    """One hex cell of the payload."""
    mine = s["members"][s["bounds"][c]:s["bounds"][c + 1]]
    best_local = mine[np.argmin(lat[mine])]
    x, y = lay.cells_xy[c]
    cell = {"id": c, "q": int(lay.cells_qr[c, 0]), "r": int(lay.cells_qr[c, 1]), "x": round(float(x), 4),
            "y": round(float(y), 4), "cluster": int(lay.cells_cluster[c]), "category": int(s["cell_cat"][c]),
            "category_share": round(float(s["cat_share"][c]), 3), "count": int(s["count"][c]),
            "mean_latency_us": round(float(s["mean_lat"][c]), 3), "min_latency_us": round(float(s["min_lat"][c]), 3),
            "color": s["colors"][c], "best_trial": int(trials[best_local]), "trials": trials[mine].tolist(),
            "corners": np.round(hc.hex_corners(x, y, lay.size), 4).tolist()}
    if s["strategies"]:
        cell["strategy"] = s["strategies"][c]
    if s["per_cell"]:
        cell["gains"] = {k: (None if np.isnan(v[c]) else round(float(v[c]), 4)) for k, v in s["per_cell"].items()}
        cell["z"] = None if np.isnan(s["z"][c]) else round(float(s["z"][c]), 4)
        cell["winner"] = s["winner"][c]
    if s["speed_cell"] is not None:
        cell["speedup_log2"] = None if np.isnan(s["speed_cell"][c]) else round(float(s["speed_cell"][c]), 4)
    return cell


def _best(lay, lat: np.ndarray, cats: np.ndarray, idx: np.ndarray, data: RunData) -> dict:
    """The run's best candidate (``best_candidate``: the one its measurement chose by re-measurement
    for the workload shown, else the fastest while tuning), among the drawn ones (``idx``).
    ``latency_us`` is its in-tuning latency, as the cells' colours are; ``measured_us`` its re-measured one."""
    index, entry = best_candidate(data)
    bi = int(np.flatnonzero(idx == index)[0])
    cell = int(lay.cell_of[bi])
    out = {"trial": int(data.table.trials[index]), "cell": cell, "latency_us": round(float(lat[bi]), 3),
           "x": round(float(lay.cells_xy[cell, 0]), 4), "y": round(float(lay.cells_xy[cell, 1]), 4),
           "category": int(cats[bi]), "chosen_by": "re-measurement" if entry else "fastest while tuning"}
    measured = data.meta.measured
    if entry and measured and len(measured.chosen or []) == 1 and measured.tuned:
        out["measured_us"] = round(float(measured.tuned_us), 3)      # the run's headline
    elif entry and isinstance(entry.get("measured_us"), (int, float)):
        out["measured_us"] = round(float(entry["measured_us"]), 3)                   # one task's
    return out


def _measured_log2(measured: Measurement | None) -> float | None:
    """log2 of the run's re-measured speed-up (untuned / tuned), when it has one."""
    estimate = measured.speedup_estimate if measured else None
    return float(np.log2(estimate)) if estimate and estimate > 0 else None


def _contour(lay, s: dict, lat: np.ndarray, measured_log2: float | None) -> dict:
    """The contour layer: the model's lines only as far as the model agrees with the measured
    latencies (``analysis.contour.agreement``), and the legend text every client shows.  With
    measured counters the layer is theirs (``origin: measured``), tested against latency the same way."""
    origin = s["origin"]
    measured = origin["origin"] == "measured"
    groups = " / ".join(c["label"] for c in s["gain_cats"]) or "DRAM / SM / GPU"     # the groups drawn, not all three
    metric = (f"{origin['label']} gain: per cell, the max over {groups} of the mean log2 gain of the "
              f"counters against {origin['against']} ({origin['profiled']} of {origin['candidates']} candidates "
              "profiled; cells without counters have none)" if measured else
              "modelled gain over the untuned program: per cell, the max over hardware-metric "
              "categories of the mean log2 gain (a model from MetaSchedule's features, not a measurement)")
    contour = {"metric": metric, "origin": origin,
               "unit": "log2 gain (1 = 2x better than untuned)" if not measured else
                       f"log2 gain (1 = 2x the counters of {origin['against']})", "categories": s["gain_cats"],
               "direction": "each line runs with higher z on its left; ticks point uphill (toward higher gain)",
               "measured": dict(ct.MEASURED, available=s["speed_cell"] is not None), "levels": [], "lines": []}
    if not s["per_cell"]:
        contour["note"] = "no feature vectors or no baseline features: no modelled hardware metrics"
        contour["legend"] = legend_lines(contour)
        return contour
    best = int(np.argmin(lat))
    contour["agreement"] = ct.agreement(s["gains"], lat, best, None if measured else measured_log2)
    if measured:
        contour["agreement"]["message"] = cn.agreement_message(contour["agreement"], origin["label"])
        contour["agreement"]["method"] = ("Spearman rank correlation between each profiled candidate's measured "
                                          f"counter gain (max over {groups}) and its speed (−latency)")
    contour["draw"] = contour["agreement"]["draw"]
    if contour["draw"] != "none":
        smooth = ct.neighbour_smooth(s["z"], hc.adjacent_pairs(lay.cells_qr), s["count"])
        contour.update(ct.contour_lines(lay.cells_xy, smooth, lay.size))
        contour["smoothing"] = "lines follow each cell's z averaged with its neighbours' (weighted by candidates)"
    contour["legend"] = legend_lines(contour)
    return contour


def measured(contour: dict) -> bool:
    return (contour.get("origin") or {}).get("origin") == "measured"


AGAINST_RHO = -0.3     # a measured group this anti-correlated with speed is said in the legend


def against_speed(contour: dict, agreement: dict | None) -> list[str]:
    """A measured group that goes against speed still wins the cells where its gain is the largest
    (the rule merges by the largest): said, so the overall agreement does not hide it."""
    if not measured(contour):
        return []
    per = (agreement or {}).get("per_category") or {}
    out = []
    for cat in contour.get("categories") or []:
        rho = (per.get(cat["id"]) or {}).get("rho")
        if rho is not None and rho <= AGAINST_RHO:
            out.append(f"⚠ {cat['label']} goes against speed (ρ = {rho:+.2f}): where its gain is the largest, "
                       "the contour follows a counter that predicts slowness")
    return out


def legend_lines(contour: dict) -> list[str]:
    """The contour legend as plain lines, the same in the PNG, the panel and the report."""
    lines = []
    agreement = contour.get("agreement")
    if agreement:
        lines.append(("⚠ " if agreement["verdict"] != "agrees" else "") + agreement["message"])
    if contour.get("levels"):
        levels = contour["levels"]
        span = f"{2 ** levels[0]:.2g}× … {2 ** levels[-1]:.2g}×"
        what = (f"a group's counters {span} the reference's, measured" if measured(contour)
                else f"{span} the untuned program, by the model")
        lines.append(f"lines: {contour['metric']}; levels {levels[0]:g} … {levels[-1]:g} ({what}); ticks point uphill")
        lines += against_speed(contour, agreement)
    for cat in contour.get("categories") or []:
        per = ((agreement or {}).get("per_category") or {}).get(cat["id"]) or {}
        rho = f" (ρ = {per['rho']:+.2f}, n = {per['n']})" if per.get("rho") is not None else ""
        lines.append(f"{cat['label']}{rho}: {cat['source']}")
    if contour.get("note"):
        lines.append(contour["note"])
    origin = contour.get("origin") or {}
    if origin.get("asked"):
        lines.append(f"not measured: {origin['why']}; the contour is the {origin['label']}")
    return lines
