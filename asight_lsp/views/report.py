"""One self-contained HTML report of a run, drawn from the payloads.

No remote content: styles, SVG and the one small script are inline, guarded by a Content Security
Policy with a per-report nonce (``default-src 'none'``).  Every name that comes from a user file
(function, block and buffer names, paths, labels, the trace) is HTML-escaped; the payloads are
embedded as JSON with ``<``, ``>`` and ``&`` escaped so they cannot close their script element.
The script only reads that JSON and writes with ``textContent``.
"""
from __future__ import annotations

import html
import json
import secrets
from typing import Any

from ..analysis.measurement import how_text
from .searchspace import COLOR_STOPS
from ..analysis.attribution import SLOWER_RATIO
from .text import measurement_text, ratio_text, slowed_lines

E = html.escape  # every piece of text below goes through this

CSS = """
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,sans-serif;margin:0;color:#1d1d1f;background:#fafafa}
header{background:#23252b;color:#f4f4f4;padding:14px 24px}
header h1{font-size:19px;margin:0 0 4px}
header .meta{opacity:.85;font-size:13px}
main{padding:8px 24px 40px;max-width:1280px}
section{background:#fff;border:1px solid #e3e3e3;border-radius:8px;padding:12px 18px;margin:16px 0}
h2{font-size:16px;margin:4px 0 10px}
h3{font-size:14px;margin:12px 0 6px}
table{border-collapse:collapse;font-size:13px}
td,th{padding:3px 8px;border-bottom:1px solid #eee;text-align:left;vertical-align:top}
th{background:#f4f4f6}
code,pre{font:12px/1.4 ui-monospace,SFMono-Regular,Menlo,monospace}
pre{background:#f6f6f8;padding:10px;overflow:auto;max-height:420px;border-radius:6px}
.note{color:#6b6b6b;font-size:12px}
.change.slower,.slowed li{color:#b3261e}
.row{display:flex;gap:18px;flex-wrap:wrap;align-items:flex-start}
#cellinfo{min-width:260px;max-width:360px;font-size:13px}
svg text{font-family:system-ui,sans-serif}
.cell{cursor:pointer}
.cell:hover{stroke:#1e6fd9;stroke-width:2}
.num{text-align:right;font-variant-numeric:tabular-nums}
.good{color:#116b2f}
.strategy{min-width:190px}
.strategy table{margin-top:4px}
"""

SCRIPT = """
(function(){
  var data = JSON.parse(document.getElementById('asight-data').textContent);
  var space = data.searchSpace; if (!space || !space.cells) return;
  var cats = {}; (space.categories||[]).forEach(function(c){cats[c.id]=c.label;});
  var box = document.getElementById('cellinfo');
  function line(label, value){
    var p=document.createElement('div'); var b=document.createElement('b'); b.textContent=label+': ';
    p.appendChild(b); p.appendChild(document.createTextNode(value)); box.appendChild(p);
  }
  document.querySelectorAll('.cell').forEach(function(el){
    el.addEventListener('click', function(){
      var c = space.cells[+el.getAttribute('data-cell')]; if (!c) return;
      box.textContent='';
      line('cell', c.id+' ('+c.q+', '+c.r+')'); line('candidates', c.count);
      line('mean latency', c.mean_latency_us.toFixed(1)+' us'); line('fastest', c.min_latency_us.toFixed(1)+' us (trial '+c.best_trial+')');
      line('category', (cats[c.category]||c.category)+' ('+Math.round(c.category_share*100)+'%)');
      if (c.strategy) line('strategy mix', c.strategy);
      if (c.gains) Object.keys(c.gains).forEach(function(k){ if (c.gains[k]!==null) line('gain '+k, c.gains[k].toFixed(2)+' (log2)'); });
      if (c.winner) line('winning metric', c.winner);
      line('trials', c.trials.slice(0,60).join(', ')+(c.trials.length>60?' ...':''));
    });
  });
})();
"""


def _json_for_script(value: Any) -> str:
    return json.dumps(value, separators=(",", ":")).replace("<", "\\u003c").replace(">", "\\u003e") \
        .replace("&", "\\u0026")


def _fmt_us(value) -> str:
    if value is None:
        return "-"
    return f"{value / 1e3:.3f} ms" if value >= 1000 else f"{value:.1f} µs"


# --------------------------------------------------------------------------- honeycomb


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


def honeycomb_svg(space: dict, width: int = 760) -> str:
    """The honeycomb with boundaries, contour lines (uphill ticks) and the best candidate."""
    cells = space["cells"]
    frame = _Frame([pt for c in cells for pt in c["corners"]], width)
    cats = {c["id"]: c["label"] for c in space["categories"]}
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
    for b in space["boundaries"]:
        (x1, y1), (x2, y2) = frame(b[0], b[1]), frame(b[2], b[3])
        out.append(f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#1b1b1b" stroke-width="2.4"/>')
    size_px = space["hex"]["size"] * frame.k
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


def _scale_svg(space: dict) -> str:
    lo, mid, hi = space["color_scale"]["domain_us"]
    stops = "".join(f'<stop offset="{i * 50}%" stop-color="{c}"/>' for i, c in enumerate(COLOR_STOPS))
    return (f'<svg xmlns="http://www.w3.org/2000/svg" width="300" height="34" role="img" aria-label="latency scale">'
            f'<defs><linearGradient id="lat">{stops}</linearGradient></defs>'
            f'<rect x="0" y="0" width="300" height="12" fill="url(#lat)"/>'
            f'<text x="0" y="28" font-size="11">{E(_fmt_us(lo))} (fast)</text>'
            f'<text x="150" y="28" font-size="11" text-anchor="middle">{E(_fmt_us(mid))}</text>'
            f'<text x="300" y="28" font-size="11" text-anchor="end">{E(_fmt_us(hi))} (slow)</text></svg>')


def _search_section(space: dict | None) -> str:
    if not space or space.get("status") != "ok":
        return _unavailable("Search space", space)
    cats = "".join(f"<li>{E(c['label'])} — {c['count']} candidates</li>" for c in space["categories"])
    contour = space["contour"]
    metrics = "".join(f"<li><b>{E(c['label'])}</b>: {E(c['source'])}</li>" for c in contour.get("categories", []))
    measured = contour.get("measured") or {}
    if measured.get("available"):
        metrics += f"<li><b>{E(measured['label'])}</b> (per cell, not in z): {E(measured['source'])}</li>"
    note = E(contour.get("note", "")) if not contour.get("lines") else ""
    return f"""<section id="search-space"><h2>Search space</h2>
<p class="note">{E(space['features']['source'])}; {E(space['reduction']['method'].upper())} to 2-D
(explained variance {', '.join(f'{v:.0%}' for v in space['reduction']['explained_variance'])});
KMeans k = {space['clustering']['k']} — {E(space['clustering']['criterion'])};
{len(space['cells'])} hex cells of at most {space['hex']['capacity']} candidates, grown from each cluster centre,
nearest candidates first. Thick lines separate cells of different categories. Click a cell for its candidates.</p>
<div class="row"><div>{honeycomb_svg(space)}<div>{_scale_svg(space)}</div></div>
<div id="cellinfo"><b>Best:</b> trial {space['best']['trial']}, {E(_fmt_us(space['best']['latency_us']))}
<h3>Categories (sketch of origin)</h3><ul>{cats}</ul>
<h3>Contour: {E(contour['metric'])}</h3><p class="note">{E(contour['unit'])}. {E(contour['direction'])}. {note}</p>
<ul>{metrics}</ul></div></div></section>"""


# --------------------------------------------------------------------------- loop view, stage graph


def _bars(items: list[dict]) -> str:
    rows = []
    for d in items[:6]:
        w = max(1, int(d["share"] * 120))
        rows.append(f'<tr><td><code>{E(str(d["value"]))}</code></td><td><svg width="124" height="10">'
                    f'<rect width="{w}" height="10" fill="#f08c3a"/></svg></td>'
                    f'<td class="num">{d["share"] * 100:.0f}%</td></tr>')
    return "<table>" + "".join(rows) + "</table>" if rows else "-"


def _loop_section(view: dict | None) -> str:
    if not view or view.get("status") != "ok":
        return _unavailable("Loop view", view)
    parts = [f'<section id="loop-view"><h2>Loop view — {E(view["function"])}</h2>'
             '<p class="note">Share of candidates per strategy, per stage (source block).</p>']
    for st in view["stages"]:
        kinds = f" [{E(st['iter_kinds'])}]" if st.get("iter_kinds") else ""
        parts.append(f"<h3>{E(st['block'])}{kinds}</h3><div class=\"row\">")
        groups = [(f"tile {var}", dist) for var, dist in st["strategies"]["tile"].items()]
        groups += [(name.replace("_", "-"), st["strategies"][name])
                   for name in ("vectorize", "parallel", "unroll", "cache", "compute_at")]
        for head, dist in groups:
            parts.append(f'<div class="strategy"><b>{E(head)}</b>{_bars(dist)}</div>')
        parts.append("</div>")
        if st["loop_share"]:
            parts.append('<p class="note">share of loops: ' + E(", ".join(
                f"{k.replace('_', ' ')} {v * 100:.0f}%" for k, v in st["loop_share"].items())) + "</p>")
        if st.get("best") and st["best"].get("headline"):
            parts.append(f'<p>best schedule: <b>{E(st["best"]["headline"])}</b></p>')
    parts.append("</section>")
    return "\n".join(parts)


def stage_graph_svg(graph: dict) -> str:
    nodes = graph["nodes"]
    pos = {n["id"]: (30 + n["layer"] * 230, 30 + n["row"] * 74) for n in nodes}
    width = max(x for x, _ in pos.values()) + 180
    height = max(y for _, y in pos.values()) + 70
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" role="img" '
           f'aria-label="stage graph"><defs><marker id="arrow" viewBox="0 0 8 8" refX="8" refY="4" '
           f'markerWidth="7" markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#555"/></marker></defs>']
    for e in graph["edges"]:
        (x1, y1), (x2, y2) = pos[e["source"]], pos[e["target"]]
        x1, y1, x2, y2 = x1 + 140, y1 + 18, x2, y2 + 18
        label = e["buffer"] + (f" {e['shape']}" if e.get("shape") else "")
        out.append(f'<line x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#555" stroke-width="1.3" '
                   f'marker-end="url(#arrow)"/><text x="{x1 + (x2 - x1) * 0.5:.1f}" y="{y1 + (y2 - y1) * 0.5 - 6:.1f}" '
                   f'font-size="10" text-anchor="middle" fill="#333">{E(label)}</text>')
    for n in nodes:
        x, y = pos[n["id"]]
        block = n.get("kind") in ("block", "binding")
        fill, stroke = ("#fff4e5", "#f08c3a") if block else ("#eef3fb", "#7a95c7")
        sub = n.get("schedule") or (n.get("iter_kinds") and f"[{n['iter_kinds']}]") or ""
        out.append(f'<rect x="{x}" y="{y}" width="140" height="38" rx="{6 if block else 18}" fill="{fill}" '
                   f'stroke="{stroke}"/><text x="{x + 70}" y="{y + 16}" font-size="12" text-anchor="middle">'
                   f'{E(str(n.get("label", n["id"])))}</text><text x="{x + 70}" y="{y + 30}" font-size="9" '
                   f'text-anchor="middle" fill="#555">{E(str(sub))[:60]}</text>')
    out.append("</svg>")
    return "\n".join(out)


def _graph_section(graph: dict | None) -> str:
    if not graph or graph.get("status") != "ok":
        return _unavailable("Stage graph", graph)
    return (f'<section id="stage-graph"><h2>Stage graph — {E(graph["function"])}</h2>'
            f'<p class="note">Blocks as nodes, buffers as edges; a block shows what the best schedule did to it.'
            f'</p>{stage_graph_svg(graph)}</section>')


# --------------------------------------------------------------------------- principles, hotspots, best


def _principles_section(p: dict | None) -> str:
    if not p or p.get("status") != "ok":
        return _unavailable("Design principles", p)
    if not p["principles"]:
        return (f'<section id="principles"><h2>Design principles</h2><p>None: {E(p.get("reason") or "")}'
                f' ({p["tested"]} ranges tested over {p["n"]} candidates).</p></section>')
    rows = "".join(
        f"<tr><td>{q['rank']}</td><td>{E(q['text'])}</td><td class='num good'>{q['effect'] * 100:+.0f}%</td>"
        f"<td class='num'>{q['ci95'][0] * 100:+.0f}% .. {q['ci95'][1] * 100:+.0f}%</td><td class='num'>{q['n_in']}"
        f" / {q['n']}</td><td><code>{E(json.dumps(q['constraint']))}</code></td></tr>" for q in p["principles"])
    return (f'<section id="principles"><h2>Design principles</h2><p class="note">{E(p["meaning"])}. '
            f'{p["tested"]} ranges tested; {E(p["settings"]["test"])}, FDR {p["settings"]["fdr"]:.0%}; '
            f'at least {p["settings"]["min_group"]} candidates on each side.</p><table><tr><th>#</th>'
            f'<th>principle</th><th>effect</th><th>95% CI</th><th>n</th><th>search constraint</th></tr>{rows}'
            f'</table></section>')


def _hotspots_section(hot: dict | None, error: str | None) -> str:
    if hot is None:
        return "" if error is None else (f'<section id="hotspots"><h2>Hotspots</h2><p class="note">'
                                         f'not available: {E(error)}</p></section>')
    parts = ['<section id="hotspots"><h2>Hotspots</h2>']
    for part in hot.get("parts", []):
        rows = []
        for e in part.get("entries", []):
            rng = e.get("range")
            lines = f"{rng['start']['line'] + 1}-{rng['end']['line'] + 1}" if rng else "-"
            share = f"{e['share'] * 100:.1f}%" if e.get("share") is not None else "-"
            rows.append(f"<tr><td>{e.get('rank', '')}</td><td>{E(str(e.get('name')))}</td>"
                        f"<td class='num'>{E(_fmt_us(e.get('us')))}</td><td class='num'>{share}</td>"
                        f"{_before_after_cell(e.get('change'))}"
                        f"<td>{E(lines)}</td><td>{E(str(e.get('match') or '-'))}</td></tr>")
        parts.append(f"<h3>{E(str(part.get('name')))}</h3><table><tr><th>#</th><th>source</th><th>latency</th>"
                     f"<th>share</th><th>untuned → tuned</th><th>lines</th><th>match</th></tr>{''.join(rows)}</table>")
        parts.append(_slowed_list(part.get("changes") or []))
    parts.append("</section>")
    return "\n".join(parts)


def _before_after_cell(change: dict | None) -> str:
    """Per-block before → after: the profile's figure of the block in the untuned and the tuned program."""
    if not change or change.get("before_us") is None:
        return "<td>-</td>"
    ratio = ratio_text(change.get("ratio"))
    flag = " slower" if change.get("slower") else ""
    return (f"<td class='change{flag}'>{E(_fmt_us(change['before_us']))} → {E(_fmt_us(change.get('after_us')))}"
            f"{(' (' + E(ratio) + ')') if ratio else ''}</td>")


def _slowed_list(changes: list[dict]) -> str:
    """The blocks tuning made slower (≥ ``SLOWER_RATIO``), with what the best schedule did to them."""
    items = slowed_lines(changes, {c["name"]: c.get("schedule") for c in changes})
    if not items:
        return ""
    return ('<ul class="slowed">' + "".join(f"<li>{E(item)}</li>" for item in items) + "</ul>"
            f'<p class="note">Per-block figures: each block\'s share of its program\'s measured latency (rdtsc '
            f'around stages); flagged at ≥ {SLOWER_RATIO:g}× the untuned figure.</p>')


def _best_section(best: dict | None) -> str:
    if not best:
        return ""
    steps = "".join(f"<li><b>{E(block)}</b>: {E('; '.join(lines))}</li>" for block, lines in best["steps"].items()
                    if lines)
    return (f'<section id="best-schedule"><h2>Best schedule — trial {best["trial"]}, '
            f'{E(_fmt_us(best["latency_us"]))}</h2><ul>{steps}</ul><h3>Trace</h3><pre>{E(best["trace"])}</pre>'
            f'</section>')


def _unavailable(title: str, payload: dict | None) -> str:
    why = (payload or {}).get("message") or "not computed"
    return f'<section><h2>{E(title)}</h2><p class="note">not available: {E(why)}</p></section>'


def _guided_section(g: dict | None) -> str:
    """Which principles steered a guided run, and how it compares with plain MetaSchedule."""
    if not g:
        return ""
    items = "".join(f"<li>{E(p['text'])}</li>" for p in g["principles"])
    rows = "".join(f"<tr><td>{E(r['arm'])}</td><td>{r['trials']}</td><td>{E(_fmt_us(r['best_us']))}</td></tr>"
                   for r in g["rows"])
    verdict = (f"<p>Guided is {g['guided_faster'] * 100:+.1f}% faster than plain MetaSchedule at "
               f"{g['budget']} trials.</p>" if g.get("guided_faster") is not None else
               f'<p class="note">{E(g.get("note") or "")}</p>')
    return (f'<section id="guided"><h2>Guided re-tune — by run {E(g["guided_by"])}</h2>'
            f"<p>Principles that steered the search:</p><ul>{items}</ul>"
            f"<table><tr><th>arm</th><th>trials</th><th>best</th></tr>{rows}</table>{verdict}</section>")


def report_html(payloads: dict, best: dict | None = None, hotspots: dict | None = None,
                hotspots_error: str | None = None, title: str | None = None, guided: dict | None = None,
                measurement: dict | None = None) -> str:
    """The report page.  ``payloads``: searchSpace, loopView, stageGraph, principles (any may be None);
    ``measurement``: the run's measurement record, the figures the header states."""
    nonce = secrets.token_urlsafe(18)
    space = payloads.get("searchSpace")
    run = next((p["run"] for p in payloads.values() if p and p.get("run")), {})
    title = title or f"ASight report — {run.get('function', '')}"
    csp = (f"default-src 'none'; img-src data:; style-src 'nonce-{nonce}'; script-src 'nonce-{nonce}'; "
           f"base-uri 'none'; form-action 'none'")
    meta = (f"run {E(str(run.get('id', '')))} · {E(str(run.get('file', '')))} · target {E(str(run.get('target', '')))}"
            f" · {run.get('measured', 0)} measured / {run.get('trials', 0)} trials<br>"
            f"<span class=\"headline\">{E(measurement_text(measurement))}</span>"
            + (f"<br><span class=\"how\">measured {E(how_text(measurement))}</span>" if (measurement or {}).get("untuned")
               else "")
            + (f"<br>fastest seen while tuning: {E(_fmt_us(run['tuning_best_us']))} (MetaSchedule's runner, "
               "builders loading the cores; not the headline)" if run.get("tuning_best_us") else ""))
    notes = "".join(f"<li>{E(n)}</li>" for p in payloads.values() if p for n in p.get("notes", []))
    data = {k: v for k, v in payloads.items() if v is not None}
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{E(title)}</title>
<style nonce="{nonce}">{CSS}</style></head>
<body><header><h1>{E(title)}</h1><div class="meta">{meta}</div></header><main>
{f'<ul class="note">{notes}</ul>' if notes else ''}
{_hotspots_section(hotspots, hotspots_error)}
{_search_section(space)}
{_loop_section(payloads.get("loopView"))}
{_graph_section(payloads.get("stageGraph"))}
{_principles_section(payloads.get("principles"))}
{_guided_section(guided)}
{_best_section(best)}
</main>
<script type="application/json" id="asight-data" nonce="{nonce}">{_json_for_script(data)}</script>
<script nonce="{nonce}">{SCRIPT}</script>
</body></html>
"""
