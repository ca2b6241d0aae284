/**
 * Search-space panel: the honeycomb of a run's candidates (cell colour = mean latency, thick lines
 * between categories, best candidate marked) over the contour lines of the hardware-metric gain,
 * a legend saying where each number comes from, hover details, and a cell's candidate list with
 * open / compare actions.
 */
import { formatLatency } from "../shared/format";
import type { ShowMessage } from "../shared/messages";
import type { Category, Cell, PrinciplesPayload, SearchSpacePayload } from "../shared/views";
import { header, notes, pct } from "./common";
import { arr, h, mount, num, obj, s, safeColor, str } from "./dom";
import { post } from "./host";
import { closestRanges, nextStep } from "./nextSteps";
import { glossary } from "./glossary";
import { categoryNumbers, labelSpot } from "./layout";

/** Categorical colours (for "colour by category"), readable on light and dark themes. */
export const CATEGORY_COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1",
  "#ff9da7", "#9c755f", "#bab0ac"];

export interface CandidateRow {
  trial: number;
  latencyUs: number | null;
  category: number | null;
}

/** Index of the candidate columns by trial. */
export class Candidates {
  private readonly byTrial = new Map<number, number>();
  constructor(private readonly cols: NonNullable<SearchSpacePayload["candidates"]>) {
    arr<number>(cols.trial).forEach((t, i) => this.byTrial.set(t, i));
  }
  row(trial: number): CandidateRow {
    const i = this.byTrial.get(trial);
    const lat = i === undefined ? null : num(arr(this.cols.latency_us)[i]);
    const cat = i === undefined ? null : num(arr(this.cols.category)[i]);
    return { trial, latencyUs: lat, category: cat };
  }
  /** The cell's candidates, fastest first. */
  rows(trials: number[]): CandidateRow[] {
    return trials.map((t) => this.row(t)).sort((a, b) => (a.latencyUs ?? Infinity) - (b.latencyUs ?? Infinity));
  }
}

export const plural = (n: number, word: string) => `${n} ${word}${n === 1 ? "" : "s"}`;

const fmt = (v: number) => (Math.round(v * 1000) / 1000).toString();

export function cellPoints(cell: Cell, size: number): string {
  const corners = arr<[number, number]>(cell.corners);
  if (corners.length >= 3) return corners.map(([x, y]) => `${fmt(x)},${fmt(y)}`).join(" ");
  const pts: string[] = [];
  for (let i = 0; i < 6; i++) {
    const a = (Math.PI / 180) * (60 * i - 30);
    pts.push(`${fmt(cell.x + size * Math.cos(a))},${fmt(cell.y + size * Math.sin(a))}`);
  }
  return pts.join(" ");
}

/** [minX, minY, width, height] around every cell (plus a margin). */
export function bounds(cells: Cell[], size: number): [number, number, number, number] {
  let x0 = Infinity, y0 = Infinity, x1 = -Infinity, y1 = -Infinity;
  for (const c of cells) {
    x0 = Math.min(x0, c.x - size); x1 = Math.max(x1, c.x + size);
    y0 = Math.min(y0, c.y - size); y1 = Math.max(y1, c.y + size);
  }
  if (!Number.isFinite(x0)) return [0, 0, 1, 1];
  const m = size * 0.6;
  return [x0 - m, y0 - m, x1 - x0 + 2 * m, y1 - y0 + 2 * m];
}

function categoryLabel(cats: Map<number, Category>, id: number | null | undefined): string {
  if (id === null || id === undefined) return "—";
  return str(cats.get(id)?.label, `category ${id}`);
}

export function categoryColor(id: number | null | undefined): string {
  return CATEGORY_COLORS[(id ?? 0) % CATEGORY_COLORS.length];
}

/** Black or white, whichever reads better on a `#rrggbb` fill (WCAG relative luminance). */
export function labelInk(fill: string): string {
  const m = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(fill.length === 4
    ? `#${fill[1]}${fill[1]}${fill[2]}${fill[2]}${fill[3]}${fill[3]}` : fill);
  if (!m) return "#000000";
  const lin = (h: string) => { const c = parseInt(h, 16) / 255; return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4; };
  const lum = 0.2126 * lin(m[1]) + 0.7152 * lin(m[2]) + 0.0722 * lin(m[3]);
  return lum > 0.22 ? "#000000" : "#ffffff";
}

/** Cells smaller than this on screen (px, hexagon radius) carry no number: the key and tooltip say it. */
const MIN_LABEL_PX = 8;

export function renderSearchSpace(root: HTMLElement, msg: ShowMessage, selected: number | null,
  onSelect: (cell: number | null) => void): void {
  const p = msg.payload as SearchSpacePayload;
  const cells = arr<Cell>(p.cells).filter((c) => num(c?.x) !== null && num(c?.y) !== null);
  const size = num(p.hex?.size) ?? 1;
  const cats = new Map(arr<Category>(p.categories).filter((c) => (num(c.count) ?? 1) > 0).map((c) => [c.id, c]));
  const numbers = categoryNumbers([...cats.keys()]);
  const cands = new Candidates(obj(p.candidates) as NonNullable<SearchSpacePayload["candidates"]>);
  const byId = new Map(cells.map((c) => [c.id, c]));
  const runId = str(p.run?.id);

  // ---- the plot
  const [bx, by, bw, bh] = bounds(cells, size);
  const svg = s("svg", { class: "honeycomb", viewBox: `${fmt(bx)} ${fmt(by)} ${fmt(bw)} ${fmt(bh)}`, role: "img",
    "aria-label": `Honeycomb of ${cells.length} cells`, "data-aspect": fmt(bh / bw) });
  const cellLayer = s("g", { class: "cells" });
  const polygons: SVGPolygonElement[] = [];
  for (const c of cells) {
    const poly = s("polygon", {
      class: "cell", points: cellPoints(c, size), fill: safeColor(c.color), "data-cell": c.id, tabindex: 0, role: "button",
      "aria-label": `cell ${c.id}: ${c.count ?? 0} candidates, mean ${formatLatency(c.mean_latency_us)}`,
    });
    polygons.push(poly);
    cellLayer.appendChild(poly);
  }
  svg.appendChild(cellLayer);
  const labelLayer = s("g", { class: "cell-labels", "aria-hidden": "true" });
  const labels: SVGTextElement[] = cells.map((c) => s("text", { class: "cell-label", x: fmt(c.x), y: fmt(c.y),
    "font-size": fmt(size * 0.55), "text-anchor": "middle", dy: "0.35em", "data-cell": c.id,
    fill: labelInk(safeColor(c.color)) }, String(numbers.get(c.category ?? -1) ?? "")));
  labels.forEach((t) => labelLayer.appendChild(t));
  svg.appendChild(labelLayer);
  const segs = arr<number[]>(p.boundaries).filter((b) => b.length === 4 && b.every((v) => Number.isFinite(v)));
  if (segs.length) {
    svg.appendChild(s("path", { class: "boundary", d: segs.map((b) => `M${fmt(b[0])} ${fmt(b[1])}L${fmt(b[2])} ${fmt(b[3])}`).join("") }));
  }
  svg.appendChild(contourLayer(p, size, cells.map((c) => [c.x, c.y])));
  const best = p.best;
  if (best && num(best.x) !== null && num(best.y) !== null) {
    svg.appendChild(s("circle", { class: "best", cx: fmt(best.x!), cy: fmt(best.y!), r: fmt(size * 0.32) },
      s("title", {}, `best: trial ${best.trial} · ${formatLatency(best.latency_us)}`)));
  }
  const tooltip = h("div", { class: "tooltip", role: "tooltip", hidden: true });
  const plot = h("div", { class: "plot" }, svg, tooltip);

  // ---- side: legend, selection, principles
  const selection = h("section", { class: "selection", "aria-live": "polite" });
  const colourBy = h("select", { "aria-label": "Colour cells by" },
    h("option", { value: "latency" }, "latency"), h("option", { value: "category" }, "category"));
  const legendEl = legend(p, cats, numbers);
  const paint = () => {
    const byCategory = colourBy.value === "category";
    polygons.forEach((poly, i) => {
      const fill = byCategory ? categoryColor(cells[i].category) : safeColor(cells[i].color);
      poly.setAttribute("fill", fill);
      labels[i].setAttribute("fill", labelInk(fill));
    });
    legendEl.dataset.mode = colourBy.value;
    legendEl.querySelector<HTMLElement>(".latency-legend")!.hidden = byCategory;
  };
  colourBy.addEventListener("change", paint);
  const side = h("aside", { class: "side" },
    h("label", { class: "colour-by" }, "Colour by ", colourBy),
    legendEl, selection, principles(msg.extra));

  mount(root, h("div", { class: "search-space" }, header("searchSpace", msg),
    h("div", { class: "body" }, plot, side), notes(p),
    glossary(["candidate", "honeycomb cell", "category", "sketch", "contour", "design principle", "median latency"])));
  paintSwatches(root);
  paint();
  watchLabelSize(svg, bw, bh, size);

  // ---- interaction (one set of delegated listeners)
  const cellOf = (t: EventTarget | null) => {
    const el = t instanceof Element ? t.closest(".cell") : null;
    return el ? byId.get(Number(el.getAttribute("data-cell"))) : undefined;
  };
  svg.addEventListener("mousemove", (e) => {
    const c = cellOf(e.target);
    if (!c) { tooltip.hidden = true; return; }
    mount(tooltip, ...tooltipLines(c, cats, cands));
    const box = plot.getBoundingClientRect();
    tooltip.style.left = `${Math.min(e.clientX - box.left + 14, box.width - 260)}px`;
    tooltip.style.top = `${e.clientY - box.top + 14}px`;
    tooltip.hidden = false;
  });
  svg.addEventListener("mouseleave", () => { tooltip.hidden = true; });
  const select = (c: Cell | undefined) => {
    for (const poly of polygons) poly.classList.toggle("selected", c !== undefined && poly.getAttribute("data-cell") === String(c.id));
    mount(selection, ...(c ? cellDetails(c, cats, cands, runId) : [h("p", { class: "hint" }, "Click a cell to list its candidates.")]));
    onSelect(c ? c.id : null);
  };
  svg.addEventListener("click", (e) => { const c = cellOf(e.target); if (c) select(c); });
  svg.addEventListener("keydown", (e) => {
    if (e.key === "Enter" || e.key === " ") { const c = cellOf(e.target); if (c) { e.preventDefault(); select(c); } }
  });
  select(selected !== null ? byId.get(selected) : undefined);
}

function tooltipLines(c: Cell, cats: Map<number, Category>, cands: Candidates): Node[] {
  const rows = cands.rows(arr<number>(c.trials));
  const out: Node[] = [
    h("div", { class: "tt-title" }, `${plural(c.count ?? rows.length, "candidate")} · mean ${formatLatency(c.mean_latency_us)} · min ${formatLatency(c.min_latency_us)}`),
    h("div", {}, `category: ${categoryLabel(cats, c.category)}` + (c.category_share !== undefined ? ` (${pct(c.category_share)} of the cell)` : "")),
  ];
  if (c.strategy) out.push(h("div", {}, `strategy: ${c.strategy}`));
  if (c.winner && num(c.z) !== null) out.push(h("div", {}, `z = ${c.z!.toFixed(2)} (${c.winner})`));
  const list = h("ul", { class: "tt-list" }, ...rows.slice(0, 6).map((r) =>
    h("li", {}, `trial ${r.trial}: ${formatLatency(r.latencyUs)} · ${categoryLabel(cats, r.category)}`)));
  out.push(list);
  if (rows.length > 6) out.push(h("div", { class: "hint" }, `… ${rows.length - 6} more (click the cell)`));
  return out;
}

function cellDetails(c: Cell, cats: Map<number, Category>, cands: Candidates, runId: string): Node[] {
  const rows = cands.rows(arr<number>(c.trials));
  const checked = new Set<number>();
  const compare = h("button", { type: "button", disabled: true, title: "Tick two candidates to compare their schedules" },
    "Compare 2 selected");
  compare.addEventListener("click", () => {
    const [a, b] = [...checked];
    if (a !== undefined && b !== undefined) post({ type: "compareCandidates", run: runId, trials: [a, b] });
  });
  const body = h("tbody", {});
  for (const r of rows) {
    const box = h("input", { type: "checkbox", "aria-label": `select trial ${r.trial} for comparison` });
    box.addEventListener("change", () => {
      if (box.checked) checked.add(r.trial); else checked.delete(r.trial);
      compare.disabled = checked.size !== 2;
    });
    const open = h("button", { type: "button", class: "link", title: "Open this candidate's schedule in an editor" }, "open");
    open.addEventListener("click", () => post({ type: "openCandidate", run: runId, trial: r.trial }));
    const code = h("button", { type: "button", class: "link",
      title: "Show this candidate's scheduled code beside the source, linked line by line" }, "code");
    code.addEventListener("click", () => post({ type: "showCandidateCode", run: runId, trial: r.trial }));
    body.appendChild(h("tr", { "data-trial": r.trial }, h("td", {}, box), h("td", { class: "num" }, String(r.trial)),
      h("td", { class: "num" }, formatLatency(r.latencyUs)), h("td", {}, categoryLabel(cats, r.category)),
      h("td", {}, open, " ", code)));
  }
  return [
    h("h2", {}, `Cell ${c.id}`),
    h("p", {}, `${plural(rows.length, "candidate")} · mean ${formatLatency(c.mean_latency_us)} · min ${formatLatency(c.min_latency_us)}`),
    h("p", {}, `category: ${categoryLabel(cats, c.category)}` + (c.strategy ? ` · ${c.strategy}` : "")),
    h("table", { class: "candidates" },
      h("thead", {}, h("tr", {}, h("th", {}, ""), h("th", {}, "trial"), h("th", {}, "latency"), h("th", {}, "category"), h("th", {}, ""))),
      body),
    compare,
  ];
}

function contourLayer(p: SearchSpacePayload, size: number, centres: number[][]): SVGGElement {
  const draw = str(p.contour?.draw, "full");
  // A model that disagrees with the measurement is not drawn; a weak or untested one is drawn faded.
  const g = s("g", { class: `contours${draw === "faded" ? " faded" : ""}`, "aria-hidden": "true", "data-draw": draw });
  if (draw === "none") return g;
  const levels = arr<number>(p.contour?.levels);
  const lo = Math.min(...levels), hi = Math.max(...levels);
  const longest = new Map<number, { pts: number[][]; len: number }>(); // one label per level, on its longest line
  for (const raw of arr(p.contour?.lines)) {
    const line = obj(raw);
    const pts = arr<number[]>(line.points).filter((q) => q.length >= 2 && Number.isFinite(q[0]) && Number.isFinite(q[1]));
    if (pts.length < 2) continue;
    const level = num(line.level) ?? 0;
    const t = hi > lo ? (level - lo) / (hi - lo) : 0.5;
    const cls = `contour level-${Math.round(t * 4)}`;
    g.appendChild(s("polyline", { class: cls, points: pts.map((q) => `${fmt(q[0])},${fmt(q[1])}`).join(" "), "data-level": level }));
    const ticks = arr<number[]>(line.ticks).filter((k) => k.length === 4 && k.every(Number.isFinite));
    if (ticks.length) {
      const len = size * 0.3;
      g.appendChild(s("path", { class: `tick ${cls}`,
        d: ticks.map((k) => `M${fmt(k[0])} ${fmt(k[1])}l${fmt(k[2] * len)} ${fmt(k[3] * len)}`).join("") }));
    }
    let len = 0;
    for (let i = 1; i < pts.length; i++) len += Math.hypot(pts[i][0] - pts[i - 1][0], pts[i][1] - pts[i - 1][1]);
    if (len > (longest.get(level)?.len ?? size)) longest.set(level, { pts, len });
  }
  for (const [level, { pts }] of longest) {
    const spot = labelSpot(pts, centres);   // between cells, never on a cell's number
    g.appendChild(s("text", { class: "contour-label", x: fmt(spot[0]), y: fmt(spot[1]), "font-size": fmt(size * 0.32),
      "text-anchor": "middle", dy: "0.35em" },
      level.toFixed(2).replace(/0$/, "")));
  }
  return g;
}

/**
 * The honeycomb is sized by CSS alone (style.css: as wide as its plot, height from its viewBox's
 * aspect, at most the window's height), so drawing it costs one layout; a ResizeObserver only hides
 * the cell numbers when the panel makes the cells too small to hold them.
 */
function watchLabelSize(svg: SVGSVGElement, bw: number, bh: number, size: number): void {
  if (typeof ResizeObserver === "undefined") return;
  new ResizeObserver((entries) => {
    const box = entries[entries.length - 1].contentRect;
    const scale = Math.min(box.width / bw, box.height / bh);
    svg.classList.toggle("no-labels", size * scale < MIN_LABEL_PX);
  }).observe(svg);
}

/** The cell-colour part of the legend: the latency scale (latency mode) and the numbered category
 * key (numbers as on the cells; swatches = the category colours, shown in category mode). */
function colourLegend(p: SearchSpacePayload, cats: Map<number, Category>, numbers: Map<number, number>): HTMLElement {
  const scale = obj(p.color_scale);
  const stops = arr<string>(scale.stops).map((c) => safeColor(c));
  const domain = arr<number>(scale.domain_us);
  const grad = s("svg", { class: "gradient", viewBox: "0 0 100 10", preserveAspectRatio: "none", "aria-hidden": "true" },
    s("defs", {}, s("linearGradient", { id: "latency-gradient" },
      ...stops.map((c, i) => s("stop", { offset: `${stops.length > 1 ? (100 * i) / (stops.length - 1) : 0}%`, "stop-color": c })))),
    s("rect", { x: 0, y: 0, width: 100, height: 10, fill: "url(#latency-gradient)" }));
  return h("div", { class: "colour-legend" },
    h("div", { class: "latency-legend" },
      h("div", { class: "scale" }, grad, h("div", { class: "scale-labels" }, ...domain.map((d) => h("span", {}, formatLatency(d))))),
      h("p", { class: "hint" }, str(scale.meaning, "cell colour = mean latency; darker = slower") +
        (scale.scale ? ` (${str(scale.scale)} scale)` : ""))),
    h("p", { class: "hint category-mode-hint" }, "cell colour = the cell's category (the most common one among its candidates)"),
    h("h3", {}, "Categories", h("span", { class: "dim" }, " (the number on each cell)")),
    p.category_by ? h("p", { class: "hint" }, str(p.category_by)) : null,
    h("ol", { class: "categories" }, ...[...cats.values()].map((c) => h("li", { "data-category": c.id },
      h("span", { class: "key-number" }, String(numbers.get(c.id) ?? "?")),
      h("span", { class: "swatch", "data-category": c.id }), `${str(c.label, `category ${c.id}`)} (${plural(c.count ?? 0, "candidate")})`))),
    h("p", { class: "hint" }, "Thick lines separate cells of different categories; ○ marks the best candidate."));
}

function legend(p: SearchSpacePayload, cats: Map<number, Category>, numbers: Map<number, number>): HTMLElement {
  const contour = obj(p.contour);
  const metricCats = arr<Record<string, unknown>>(contour.categories);
  const measured = obj(contour.measured);
  return h("section", { class: "legend" },
    h("h2", {}, "Legend"),
    colourLegend(p, cats, numbers),
    ...contourLegend(contour, metricCats, measured),
  );
}

/** The contour part of the legend: whether the model agrees with the measurement (and so how the
 * lines are drawn), what the lines are, their levels, and each category's source and agreement. */
function contourLegend(contour: Record<string, unknown>, metricCats: Record<string, unknown>[],
  measured: Record<string, unknown>): (HTMLElement | null)[] {
  const agreement = obj(contour.agreement);
  const verdict = str(agreement.verdict);
  const perCat = obj(agreement.per_category);
  const levels = arr<number>(contour.levels);
  const times = (v: number) => `${Math.pow(2, v).toPrecision(2).replace(/\.0+$/, "")}×`;
  const origin = obj(contour.origin);
  const byWhat = str(origin.origin) === "measured" ? "measured" : "by the model";
  return [
    h("h3", {}, "Contours"),
    str(origin.label) ? h("p", { class: "hint origin", "data-origin": str(origin.origin) }, `contour: ${str(origin.label)}` +
      (str(origin.origin) === "measured" && num(origin.profiled) !== null
        ? ` (${num(origin.profiled)} of ${num(origin.candidates) ?? "?"} candidates profiled; gains against ${str(origin.against)})` : "") +
      (origin.asked ? `; not measured: ${str(origin.why)}` : "")) : null,
    agreement.message ? h("p", { class: `agreement ${verdict}`, "data-verdict": verdict,
      role: verdict === "agrees" ? null : "alert" }, `${verdict === "agrees" ? "" : "⚠ "}${str(agreement.message)}`) : null,
    h("p", { class: "hint" }, str(contour.metric)),
    contour.unit ? h("p", { class: "hint" }, `unit: ${str(contour.unit)}`) : null,
    contour.direction && levels.length ? h("p", { class: "hint" }, str(contour.direction)) : null,
    levels.length ? h("p", { class: "hint levels" }, `levels: ${levels.join(", ")} (= ${levels.map(times).join(", ")} ${byWhat}; ` +
      "dashed: lower levels, solid: the highest; short ticks point uphill)") : null,
    contour.note ? h("p", { class: "hint" }, str(contour.note)) : null,
    metricCats.length ? h("ul", { class: "sources" }, ...metricCats.map((m) => {
      const a = obj(perCat[str(m.id)]);
      const rho = num(a.rho);
      return h("li", {}, h("strong", {}, str(m.label, str(m.id))),
        rho !== null ? ` (ρ = ${rho >= 0 ? "+" : ""}${rho.toFixed(2)}, n = ${num(a.n) ?? 0})` : "", `: ${str(m.source)}`);
    })) : null,
    measured.label ? h("p", { class: "hint" }, `${str(measured.label)}: ${str(measured.source)}` +
      (measured.available === false ? " (not available for this run)" : "")) : null,
  ];
}

/** Next steps without repeats (same sentence and command), in order. */
export function uniqueSteps(steps: unknown[]): unknown[] {
  const seen = new Set<string>();
  return steps.filter((st) => {
    const o = obj(st);
    const key = `${str(o.text)}|${str(o.cli)}`;
    if (!o.text || seen.has(key)) return false;
    seen.add(key);
    return true;
  });
}

function principles(extra: unknown): HTMLElement | null {
  const p = obj(extra) as PrinciplesPayload;
  if (p.schema !== "asight.principles/1") return null;
  const list = arr(p.principles).map(obj);
  return h("section", { class: "principles" }, h("h2", {}, "Design principles"),
    list.length ? h("ol", {}, ...list.map((x) => h("li", {}, str(x.text, `${str(x.decision)} ${str(x.range)}`))))
      : h("p", { class: "hint" }, str(p.reason ?? p.message, "No principle has enough evidence yet.")),
    // The step is the same for every principle of the run (re-tune steered by them): shown once.
    ...uniqueSteps(list.map((x) => x.next_step)).map(nextStep),
    list.length ? null : closestRanges(p),
    p.meaning ? h("p", { class: "hint" }, str(p.meaning)) : null);
}

/** Swatch colours for the category list (set through CSSOM, allowed by the CSP). */
export function paintSwatches(root: HTMLElement): void {
  root.querySelectorAll<HTMLElement>(".swatch[data-category]").forEach((el) => {
    el.style.background = CATEGORY_COLORS[Number(el.dataset.category) % CATEGORY_COLORS.length];
  });
}
