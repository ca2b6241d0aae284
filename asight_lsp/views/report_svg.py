"""The report's pictures as inline SVG (pure): the honeycomb with numbered cells and its latency
scale, and the stage graph with routed edges and per-stage cost; ``_fmt_us`` formats their µs."""
from __future__ import annotations

import html

from ..analysis.stagegraph import route_edge
from .searchspace import COLOR_STOPS

E = html.escape
SG_W, SG_H, SG_COL, SG_ROW = 150, 50, 240, 80   # node box, column and row pitch of the report's stage graph


class _Frame:
    """Maps plane coordinates to SVG pixels (y up -> y down)."""

    def __init__(self, points: list, width: int, pad: int = 16):
        xs = [p[0] for p in points] or [0.0]
        ys = [p[1] for p in points] or [0.0]
        self.x0, self.y1 = min(xs), max(ys)
        span = max(max(xs) - self.x0, self.y1 - min(ys), 1e-9)
        self.k = (width - 2 * pad) / span
        self.pad = pad
        self.width = width
        self.height = int((self.y1 - min(ys)) * self.k + 2 * pad)

    def __call__(self, x: float, y: float) -> tuple[float, float]:
        return round((x - self.x0) * self.k + self.pad, 2), round((self.y1 - y) * self.k + self.pad, 2)


def _fmt_us(value) -> str:
    if value is None:
        return "-"
    return f"{value / 1e3:.3f} ms" if value >= 1000 else f"{value:.1f} µs"


def honeycomb_svg(space: dict, width: int = 760) -> str:
    """The honeycomb with boundaries, contour lines (uphill ticks) and the best candidate."""
    cells = space["cells"]
    frame = _Frame([pt for c in cells for pt in c["corners"]], width)
    cats = {c["id"]: c["label"] for c in space["categories"]}
    numbers = category_numbers(space)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{frame.width}" height="{frame.height}" '
           f'viewBox="0 0 {frame.width} {frame.height}" role="img" aria-label="search space honeycomb">',
           '<defs><marker id="tick" viewBox="0 0 6 6" refX="3" refY="3" markerWidth="5" markerHeight="5" '
           'orient="auto"><path d="M0,0 L6,3 L0,6 z" fill="#0b5f7a"/></marker></defs>']
    for c in cells:
        pts = " ".join(f"{x},{y}" for x, y in (frame(*p) for p in c["corners"]))
        title = (f"cell {c['id']}: {c['count']} candidates, mean {c['mean_latency_us']:.1f} µs, "
                 f"{cats.get(c['category'], c['category'])}")
        out.append(f'<polygon class="cell" data-cell="{c["id"]}" points="{pts}" fill="{E(c["color"])}" '
                   f'stroke="#ffffff" stroke-width="0.8"><title>{E(title)}</title></polygon>')
    size_px = space["hex"]["size"] * frame.k
    if size_px >= 8:  # the category number on each cell (the key beside the chart says which is which)
        for c in cells:
            cx = sum(p[0] for p in c["corners"]) / len(c["corners"])
            cy = sum(p[1] for p in c["corners"]) / len(c["corners"])
            x, y = frame(cx, cy)
            ink = label_ink(c["color"])
            out.append(f'<text class="cell-label{" dark-ink" if ink == "#000000" else ""}" x="{x}" y="{y}" '
                       f'font-size="{size_px * 0.55:.1f}" text-anchor="middle" dominant-baseline="central" '
                       f'fill="{ink}">{numbers.get(c["category"], "")}</text>')
    for b in space["boundaries"]:
        (x1, y1), (x2, y2) = frame(b[0], b[1]), frame(b[2], b[3])
        out.append(f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#1b1b1b" stroke-width="2.4"/>')
    for line in space["contour"].get("lines", []):
        pts = " ".join(f"{x},{y}" for x, y in (frame(*p) for p in line["points"]))
        out.append(f'<polyline points="{pts}" fill="none" stroke="#0b5f7a" stroke-width="1.2" '
                   f'stroke-dasharray="4 3" opacity="0.9"><title>z = {line["level"]:g}</title></polyline>')
        for tx, ty, dx, dy in line.get("ticks", []):
            x1, y1 = frame(tx, ty)
            x2, y2 = round(x1 + dx * 0.35 * size_px, 2), round(y1 - dy * 0.35 * size_px, 2)
            out.append(f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#0b5f7a" stroke-width="1.2" '
                       f'marker-end="url(#tick)"/>')
        mx, my = frame(*line["points"][len(line["points"]) // 2])
        out.append(f'<text x="{mx}" y="{my}" font-size="10" fill="#0b5f7a">{line["level"]:g}</text>')
    best = space["best"]
    bx, by = frame(best["x"], best["y"])
    out.append(f'<circle cx="{bx}" cy="{by}" r="7" fill="#1e6fd9" stroke="#fff" stroke-width="2">'
               f'<title>best: trial {best["trial"]}, {best["latency_us"]:.1f} µs</title></circle>')
    out.append("</svg>")
    return "\n".join(out)


def category_numbers(space: dict) -> dict:
    """Category id -> the number shown on its cells and in the key (1, 2, ... over the categories
    that hold candidates, in payload order)."""
    return {c["id"]: i + 1 for i, c in enumerate(c for c in space["categories"] if c.get("count", 1) > 0)}


def label_ink(color: str) -> str:
    """Black or white text, whichever reads better on a ``#rrggbb`` fill (WCAG relative luminance)."""
    try:
        rgb = [int(color[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    except (TypeError, ValueError, IndexError):
        return "#000000"
    lin = [c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4 for c in rgb]
    return "#000000" if 0.2126 * lin[0] + 0.7152 * lin[1] + 0.0722 * lin[2] > 0.22 else "#ffffff"


def _scale_svg(space: dict) -> str:
    lo, mid, hi = space["color_scale"]["domain_us"]
    stops = "".join(f'<stop offset="{i * 50}%" stop-color="{c}"/>' for i, c in enumerate(COLOR_STOPS))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="300" height="34" role="img" aria-label="latency scale">'
            f'<defs><linearGradient id="lat">{stops}</linearGradient></defs>'
            f'<rect x="0" y="0" width="300" height="12" fill="url(#lat)"/>'
            f'<text x="0" y="28" font-size="11">{E(_fmt_us(lo))} (fast)</text>'
            f'<text x="150" y="28" font-size="11" text-anchor="middle">{E(_fmt_us(mid))}</text>'
            f'<text x="300" y="28" font-size="11" text-anchor="end">{E(_fmt_us(hi))} (slow)</text></svg>')


def _cost_text(cost: dict | None) -> str:
    if not cost:
        return ""
    if cost.get("us") is None:
        return "no measurement"
    share = f" · {cost['share'] * 100:.1f}%" if cost.get("share") is not None else ""
    return _fmt_us(cost["us"]) + share


def _ports(graph: dict, key: str, other: str) -> dict:
    """Per edge index: (its position, how many) on one side of its node, ordered by the other end's row."""
    rows = {n["id"]: (n["row"], n["layer"]) for n in graph["nodes"]}
    sides: dict[str, list[int]] = {}
    for i, e in enumerate(graph["edges"]):
        sides.setdefault(e[key], []).append(i)
    out = {}
    for ids in sides.values():
        ids.sort(key=lambda i: rows.get(graph["edges"][i][other], (0, 0)))
        out.update({i: (k, len(ids)) for k, i in enumerate(ids)})
    return out


def stage_graph_svg(graph: dict) -> str:
    """Blocks as boxes (best schedule, measured cost and a share bar), buffers as arrows routed around
    the boxes (``analysis.stagegraph.route_edge``)."""
    nodes = graph["nodes"]
    boxes = {n["id"]: (30 + n["layer"] * SG_COL, 30 + n["row"] * SG_ROW, SG_W, SG_H) for n in nodes}
    layer = {n["id"]: n["layer"] for n in nodes}
    columns: dict[int, list] = {}
    for n in nodes:
        columns.setdefault(n["layer"], []).append(boxes[n["id"]])
    width = max(b[0] for b in boxes.values()) + SG_W + 70
    height = max(b[1] for b in boxes.values()) + SG_H + 40
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0 0 {width} {height}" '
           f'class="sg" role="img" aria-label="stage graph"><defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" '
           f'markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#777"/></marker></defs>']
    outs, ins = _ports(graph, "source", "target"), _ports(graph, "target", "source")
    for i, e in enumerate(graph["edges"]):
        a, b = boxes.get(e["source"]), boxes.get(e["target"])
        if a is None or b is None:
            continue
        (ka, na), (kb, nb) = outs[i], ins[i]
        route = route_edge(a, b, (layer[e["source"]], layer[e["target"]]),
                           (a[1] + a[3] * (ka + 1) / (na + 1), b[1] + b[3] * (kb + 1) / (nb + 1)), columns)
        label = e["buffer"] + (f" {e['shape']}" if e.get("shape") else "")
        lx, ly = route["label"]
        out.append(f'<path class="sg-edge" d="{route["d"]}" fill="none" stroke="#777" stroke-width="1.3" '
                   f'marker-end="url(#arrow)"/><text class="sg-muted" x="{lx:.1f}" y="{ly:.1f}" font-size="10" '
                   f'text-anchor="middle" fill="#333">{E(label)}</text>')
    for n in nodes:
        x, y, w, h = boxes[n["id"]]
        block = n.get("kind") in ("block", "binding")
        fill, stroke = ("#fff4e5", "#f08c3a") if block else ("#eef3fb", "#7a95c7")
        sub = n.get("schedule") or (n.get("iter_kinds") and f"[{n['iter_kinds']}]") or ""
        cost = n.get("cost")
        out.append(f'<rect class="{"sg-block" if block else "sg-io"}" x="{x}" y="{y}" width="{w}" height="{h}" '
                   f'rx="{6 if block else 18}" fill="{fill}" stroke="{stroke}"/>'
                   f'<text x="{x + w / 2}" y="{y + (15 if block else h / 2 + 4)}" font-size="12" text-anchor="middle">'
                   f'{E(str(n.get("label", n["id"])))}</text>'
                   f'<text class="sg-muted" x="{x + w / 2}" y="{y + 29}" font-size="9" text-anchor="middle" fill="#555">'
                   f'{E(str(sub)[:40])}</text>')
        if cost:
            out.append(f'<text class="sg-cost" x="{x + w / 2}" y="{y + 42}" font-size="10" text-anchor="middle" '
                       f'fill="{"#333" if cost.get("us") is not None else "#888"}">{E(_cost_text(cost))}'
                       f'<title>{E(str(cost.get("source", "")))}</title></text>')
            if cost.get("share") is not None:
                out.append(f'<rect x="{x}" y="{y + h - 4}" width="{max(1.0, min(1.0, cost["share"]) * w):.1f}" '
                           f'height="4" fill="#d18616"/>')
    out.append("</svg>")
    return "\n".join(out)
