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
from .glossary import TERMS, linked_by
from ..analysis.attribution import SLOWER_RATIO
from .report_svg import _fmt_us, _scale_svg, category_numbers, honeycomb_svg, label_ink, stage_graph_svg  # noqa: F401
from .text import best_trial_text, gpu_unmeasured, measurement_text, ratio_text, slowed_lines

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
.cell-label{font-weight:600;pointer-events:none}
section svg{max-width:100%;height:auto}
.scroll-x{overflow-x:auto}
section svg.sg{max-width:100%;min-width:720px}
.plot{flex:1 1 480px;min-width:0}
.row>.strategy{flex:0 1 auto;min-width:0;overflow-x:auto}
dl.glossary dt{font-weight:600;margin-top:6px}
dl.glossary dd{margin:0 0 0 18px}
@media (prefers-color-scheme: dark){
body{color:#d4d4d4;background:#1e1e1e}
section{background:#252526;border-color:#3c3c3c}
td,th{border-bottom-color:#3c3c3c}
th{background:#2d2d30}
pre{background:#1b1b1c}
.note{color:#a0a0a0}
.good{color:#89d185}
svg text{fill:#d4d4d4}
svg text.cell-label.dark-ink{fill:#000}
svg .sg-muted{fill:#a0a0a0}
svg .sg-edge{stroke:#a0a0a0}
svg .sg-block{fill:#3a2d1c}
svg .sg-io{fill:#1f2a3a}
}
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
      line('mean latency', c.mean_latency_us.toFixed(1)+' µs'); line('fastest', c.min_latency_us.toFixed(1)+' µs (trial '+c.best_trial+')');
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


# --------------------------------------------------------------------------- honeycomb


def _search_section(space: dict | None) -> str:
    if not space or space.get("status") != "ok":
        return _unavailable("Search space", space)
    numbers = category_numbers(space)
    cats = "".join(f"<li value=\"{numbers[c['id']]}\">{E(c['label'])} — {c['count']} candidate{'s' if c['count'] != 1 else ''}</li>"
                   for c in space["categories"] if c["id"] in numbers)
    contour = space["contour"]
    metrics = _legend_items(contour)
    measured = contour.get("measured") or {}
    if measured.get("available"):
        metrics += f"<li><b>{E(measured['label'])}</b> (per cell, not in z): {E(measured['source'])}</li>"
    note = E(contour.get("note", "")) if not contour.get("lines") and not contour.get("legend") else ""
    return f"""<section id="search-space"><h2>Search space</h2>
<p>Each hexagon holds up to {space['hex']['capacity']} candidates whose schedules look alike (similar candidates
share or neighbour a cell); its colour is their mean latency, darker = slower, and its number is their category
(see Categories). Thick lines separate cells of different categories; the blue dot is the best candidate.
Click a cell for its candidates.</p>
<p class="note">How the cells are placed: {E(space['features']['source'])}; {E(space['reduction']['method'].upper())} to 2-D
(explained variance {', '.join(f'{v:.0%}' for v in space['reduction']['explained_variance'])});
KMeans k = {space['clustering']['k']} — {E(space['clustering']['criterion'])}; {len(space['cells'])} cells grown
from each cluster centre, nearest candidates first.</p>
<div class="row"><div class="plot">{honeycomb_svg(space)}<div>{_scale_svg(space)}</div></div>
<div id="cellinfo"><b>Best:</b> trial {space['best']['trial']}, {E(_fmt_us(space['best']['latency_us']))}
<h3>Categories (the design space each candidate came from)</h3><ol>{cats}</ol>
<h3>Contour: {E(contour['metric'])}</h3><p class="note">{E(contour['unit'])}. {E(contour['direction'])}. {note}</p>
<ul>{metrics}</ul></div></div></section>"""


def _legend_items(contour: dict) -> str:
    """The contour's legend as the panel and the PNG have it (``searchspace.legend_lines``: its agreement
    with latency, the ⚠ of a group that goes against speed), else its groups."""
    legend = contour.get("legend")
    if legend:
        return "".join(f"<li>{E(line)}</li>" for line in legend)
    return "".join(f"<li><b>{E(c['label'])}</b>: {E(c['source'])}</li>" for c in contour.get("categories", []))


# --------------------------------------------------------------------------- loop view, stage graph


def _bars(items: list[dict]) -> str:
    """Top values of one strategy: share of candidates (bar, %) and their median latency (n)."""
    rows = []
    for d in items[:6]:
        w = max(1, int(d["share"] * 120))
        med = (f'<td class="num" title="median latency of the {d["measured"]} candidates using this value">'
               f'{E(_fmt_us(d["median_us"]))} <span class="note">n={d["measured"]}</span></td>'
               if d.get("median_us") is not None else ('<td class="num note">no latency</td>' if "median_us" in d else ""))
        rows.append(f'<tr><td><code>{E(str(d["value"]))}</code></td><td><svg width="124" height="10">'
                    f'<rect width="{w}" height="10" fill="#f08c3a"/></svg></td>'
                    f'<td class="num">{d["share"] * 100:.0f}%</td>{med}</tr>')
    return "<table>" + "".join(rows) + "</table>" if rows else "-"


SHARE_WORDS = {"serial": "plain (serial)", "under_unroll_pragma": "under an unroll hint", "split": "source loops tiled"}


def _loop_section(view: dict | None) -> str:
    if not view or view.get("status") != "ok":
        return _unavailable("Loop view", view)
    parts = [f'<section id="loop-view"><h2>Loop view — {E(view["function"])}</h2>'
             '<p class="note">Per stage (source block) and strategy: each value, the share of candidates that used '
             'it, and the median latency of those candidates (n = how many).</p>']
    for st in view["stages"]:
        kinds = (f" <span class=\"note\" title=\"S = spatial loop, R = reduction loop\">[{E(st['iter_kinds'])}]</span>"
                 if st.get("iter_kinds") else "")
        parts.append(f"<h3>{E(st['block'])}{kinds}</h3><div class=\"row\">")
        groups = [(f"tile {var}", dist) for var, dist in st["strategies"]["tile"].items()]
        groups += [(name.replace("_", "-"), st["strategies"][name])
                   for name in ("vectorize", "parallel", "unroll", "cache", "compute_at") if name in st["strategies"]]
        for head, dist in groups:
            parts.append(f'<div class="strategy"><b>{E(head)}</b>{_bars(dist)}</div>')
        parts.append("</div>")
        if st["loop_share"]:
            parts.append('<p class="note">share of loops: ' + E(", ".join(
                f"{SHARE_WORDS.get(k, k.replace('_', ' '))} {v * 100:.0f}%" for k, v in st["loop_share"].items())) + "</p>")
        if st.get("best") and st["best"].get("headline"):
            which = best_trial_text(st["best"])
            parts.append(f'<p>best schedule{E(f" ({which})" if which else "")}: <b>{E(st["best"]["headline"])}</b></p>')
    parts.append(_gpu_part(view.get("gpu")))
    parts.append("</section>")
    return "\n".join(parts)




def _gpu_part(gpu: dict | None) -> str:
    """What the best GPU schedule did (``analysis/gpu_words.py``), one line each; '' for a CPU run."""
    if not gpu:
        return ""
    items = "".join(f"<li>{E(line)}</li>" for line in gpu["lines"])
    return f'<div class="gpu"><h3>GPU — best candidate (trial {gpu["trial"]})</h3><ul>{items}</ul></div>'


def _graph_section(graph: dict | None) -> str:
    if not graph or graph.get("status") != "ok":
        return _unavailable("Stage graph", graph)
    return (f'<section id="stage-graph"><h2>Stage graph — {E(graph["function"])}</h2>'
            f'<p class="note">Boxes are the program\'s stages (blocks); arrows are the buffers one stage writes and the '
            f'next reads. Under each name: what the best schedule did to it, then its measured cost (latency · share '
            f'of the program; the bar is the share), or "no measurement" when the run was not profiled.'
            f'</p><div class="scroll-x">{stage_graph_svg(graph)}</div></section>')


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
            f'at least {p["settings"]["min_group"]} candidates on each side.</p><div class="scroll-x"><table><tr><th>#</th>'
            f'<th>principle</th><th>effect</th><th>95% CI</th><th>n</th><th>search constraint</th></tr>{rows}'
            f'</table></div></section>')


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
                        f"<td>{E(lines)}</td><td>{E(linked_by(e.get('match')))}</td></tr>")
        parts.append(f"<h3>{E(str(part.get('name')))}</h3><table><tr><th>#</th><th>source</th><th>latency</th>"
                     f"<th>share</th><th>untuned → tuned</th><th>lines</th>"
                     f"<th title=\"{E(TERMS['linked by'])}\">linked by</th></tr>{''.join(rows)}</table>")
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


def _glossary_section() -> str:
    """The terms the report keeps, in plain words (docs/glossary.md has the long form)."""
    items = "".join(f"<dt>{E(term)}</dt><dd>{E(text)}</dd>" for term, text in TERMS.items())
    return f'<section id="glossary"><h2>Glossary</h2><dl class="glossary">{items}</dl></section>'


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


def _tuning_source(run: dict) -> str:
    """How the in-tuning figure was taken: the run's own words (an adopted run's is the machine that
    tuned it, not this one's loaded cores)."""
    source = run.get("tuning_source") or ""
    if source and "kept for reference" not in source:
        return f"{source}; not the headline"
    return "MetaSchedule's runner, builders loading the cores; not the headline"


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
            + (f"<br>fastest seen while tuning: {E(_fmt_us(run['tuning_best_us']))} ({E(_tuning_source(run))})"
               if run.get("tuning_best_us") else "")
            + (f"<br><span class=\"note\">{E(why)}</span>" if (why := gpu_unmeasured(run.get("target", ""), measurement))
               else ""))
    notes = "".join(f"<li>{E(n)}</li>" for n in dict.fromkeys(
        n for p in payloads.values() if p for n in p.get("notes", [])))     # each view carries the run's notes
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
{_glossary_section()}
</main>
<script type="application/json" id="asight-data" nonce="{nonce}">{_json_for_script(data)}</script>
<script nonce="{nonce}">{SCRIPT}</script>
</body></html>
"""
