"""PNG rendering of the payloads with matplotlib (Agg, no display), drawn only from the payload."""
from __future__ import annotations

import os

import numpy as np


def _plt():
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    return plt


def render_search_space(payload: dict, out: str | os.PathLike, dpi: int = 130) -> str:
    """Draw the honeycomb (cells coloured by mean latency, category boundaries, best candidate) over
    the contour lines (with uphill ticks) into ``out``; returns the path."""
    plt = _plt()
    from matplotlib.collections import LineCollection, PolyCollection
    from matplotlib.colors import LinearSegmentedColormap, LogNorm
    if payload.get("status") != "ok":
        raise ValueError(payload.get("message") or "the payload is not ok")
    cells = payload["cells"]
    corners = np.asarray([pt for c in cells for pt in c["corners"]])
    w, h = np.ptp(corners, axis=0) if len(corners) else (1.0, 1.0)
    legend = _contour_legend_text(payload.get("contour") or {})
    height = float(np.clip(7.5 * h / max(w, 1e-9), 4.5, 11.0))
    fig, ax = plt.subplots(figsize=(9.5, height + 0.22 * len(legend)))
    polys = [c["corners"] for c in cells]
    ax.add_collection(PolyCollection(polys, facecolors=[c["color"] for c in cells], edgecolors="#ffffff",
                                     linewidths=0.4, zorder=1))
    if payload["boundaries"]:
        segs = [[(b[0], b[1]), (b[2], b[3])] for b in payload["boundaries"]]
        ax.add_collection(LineCollection(segs, colors="#1b1b1b", linewidths=1.8, zorder=3))
    _draw_contours(ax, payload["contour"], payload["hex"]["size"])
    best = payload["best"]
    ax.plot([best["x"]], [best["y"]], marker="*", markersize=16, color="#1e6fd9", markeredgecolor="white",
            zorder=5, label=f"best: trial {best['trial']} ({best['latency_us']:.1f} µs)")
    _label_categories(ax, payload)
    scale = payload["color_scale"]
    lo, _, hi = scale["domain_us"]
    cmap = LinearSegmentedColormap.from_list("asight", scale["stops"])
    sm = plt.cm.ScalarMappable(norm=LogNorm(vmin=lo, vmax=max(hi, lo * 1.0001)), cmap=cmap)
    fig.colorbar(sm, ax=ax, shrink=0.8, label="mean latency per cell (µs, log) — darker = slower")
    ax.autoscale_view()
    ax.set_aspect("equal")
    ax.set_xticks([])
    ax.set_yticks([])
    run = payload["run"]
    ax.set_title(f"{run['function']} — {run['measured']} candidates, {len(cells)} cells, "
                 f"k={payload['clustering']['k']} ({payload['reduction']['method'].upper()})", fontsize=11)
    ax.legend(loc="lower right", fontsize=8, framealpha=0.85)
    fig.tight_layout(rect=(0, 0.22 * len(legend) / (height + 0.22 * len(legend)), 1, 0.98))
    if legend:
        fig.text(0.01, 0.01, "\n".join(legend), fontsize=7, va="bottom", ha="left", wrap=True,
                 color="#8a1c1c" if (payload["contour"].get("agreement") or {}).get("verdict") == "disagrees"
                 else "#222222")
    fig.savefig(out, dpi=dpi)
    plt.close(fig)
    return str(out)


def _contour_legend_text(contour: dict, width: int = 150) -> list[str]:
    """The contour legend of the payload (``views.searchspace.legend_lines``), wrapped for the figure."""
    import textwrap
    out = []
    for line in contour.get("legend") or []:
        out.extend(textwrap.wrap(line, width, subsequent_indent="    ") or [""])
    return out


def _draw_contours(ax, contour: dict, size: float) -> None:
    from matplotlib.collections import LineCollection
    lines = contour.get("lines") or []
    if not lines or contour.get("draw") == "none":
        return
    alpha = 0.35 if contour.get("draw") == "faded" else 1.0
    levels = sorted({ln["level"] for ln in lines})
    lo, hi = levels[0], levels[-1]
    for ln in lines:
        shade = 0.25 + 0.6 * ((ln["level"] - lo) / (hi - lo) if hi > lo else 1.0)
        color = (0.05, 0.25 + 0.4 * shade, 0.35 + 0.5 * shade)
        pts = np.asarray(ln["points"])
        ax.add_collection(LineCollection([pts], colors=[color], linewidths=1.1, linestyles="--", zorder=2,
                                         alpha=alpha))
        ticks = np.asarray(ln.get("ticks") or [])
        if len(ticks):
            ax.quiver(ticks[:, 0], ticks[:, 1], ticks[:, 2], ticks[:, 3], color=[color], angles="xy",
                      scale_units="xy", scale=1.0 / (0.45 * size), width=0.003, zorder=2, alpha=alpha)
        mid = pts[len(pts) // 2]
        ax.text(mid[0], mid[1], f"{ln['level']:g}", fontsize=7, color=color, zorder=4, alpha=alpha,
                bbox={"boxstyle": "round,pad=0.1", "fc": "white", "ec": "none", "alpha": 0.7})


def _label_categories(ax, payload: dict) -> None:
    cats = {c["id"]: c for c in payload["categories"]}
    by_cat: dict[int, list] = {}
    for cell in payload["cells"]:
        by_cat.setdefault(cell["category"], []).append((cell["x"], cell["y"], cell["count"]))
    for cat, pts in by_cat.items():
        arr = np.asarray(pts, dtype=float)
        x, y = np.average(arr[:, 0], weights=arr[:, 2]), np.average(arr[:, 1], weights=arr[:, 2])
        label = cats.get(cat, {}).get("label", str(cat))
        ax.text(x, y, label[:40], fontsize=8, ha="center", va="center", zorder=6,
                bbox={"boxstyle": "round,pad=0.2", "fc": "white", "ec": "#333333", "alpha": 0.8})
