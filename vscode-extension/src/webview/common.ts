/** Pieces every panel shares: the header (run, picker, actions), notes, messages. */
import { formatLatency, formatSpeedup } from "../shared/format";
import { PANEL_KINDS, PANEL_TITLES, type PanelKind, type ShowMessage } from "../shared/messages";
import type { RunSummary } from "../shared/protocol";
import { newerText } from "../shared/measurement";
import type { ViewBase, ViewRun } from "../shared/views";
import type { LspRange } from "../shared/lsp";
import { arr, h, obj, str } from "./dom";
import { post } from "./host";

export function runOf(payload: unknown): ViewRun {
  return obj(obj(payload).run) as ViewRun;
}

/** `MatmulBiasRelu.main · run mbr128 · best 0.12 ms · 23× vs untuned · 40 trials` */
export function runLine(run: ViewRun): string {
  const parts = [str(run.function), run.id ? `run ${str(run.id)}` : ""];
  if (run.headline) {
    parts.push(str(run.headline)); // the run's measurement record, as every other place shows it
  } else {
    if (run.best_us) parts.push(`best ${formatLatency(run.best_us)}`);
    const sp = formatSpeedup(run.speedup);
    if (sp) parts.push(`${sp} vs untuned`);
  }
  if (typeof run.trials === "number") parts.push(`${run.measured ?? run.trials} measured of ${run.trials} trials`);
  if (run.state && run.state !== "done") parts.push(str(run.state));
  return parts.filter(Boolean).join(" · ");
}

/** Header: title, run line, run picker, refresh and links to the other panels. */
export function header(kind: PanelKind, msg: ShowMessage): HTMLElement {
  const run = runOf(msg.payload);
  const picker = runPicker(msg.runs ?? [], str(run.id) || msg.args.run);
  const links = PANEL_KINDS.filter((k) => k !== kind).map((k) =>
    h("button", { type: "button", class: "link", "data-panel": k, title: `Open the ${PANEL_TITLES[k].toLowerCase()} of this run` },
      PANEL_TITLES[k]));
  links.forEach((b) => b.addEventListener("click", () => post({ type: "openPanel", kind: b.dataset.panel as PanelKind })));
  const refresh = h("button", { type: "button", class: "secondary", title: "Fetch the payload again" }, "Refresh");
  refresh.addEventListener("click", () => post({ type: "refresh" }));
  return h("header", { class: "header" },
    h("div", { class: "title-row" }, h("h1", {}, PANEL_TITLES[kind]), h("span", { class: "run-line" }, runLine(run))),
    h("div", { class: "actions" }, picker, refresh, ...links), newerLine(msg));
}

/** "A newer measurement (when, by, load) of this run exists … [Refresh]": the panel shows an older one. */
function newerLine(msg: ShowMessage): HTMLElement | null {
  if (!msg.newer) return null;
  const refresh = h("button", { type: "button", class: "primary refresh-newer" }, "Refresh");
  refresh.addEventListener("click", () => post({ type: "refresh" }));
  return h("p", { class: "newer", role: "status", "data-taken": String(msg.newer.taken) }, `${newerText(msg.newer)} `, refresh);
}

function runPicker(runs: RunSummary[], current: string | undefined): HTMLElement | null {
  if (runs.length < 2) return null;
  const select = h("select", { "aria-label": "Run", title: "Show another run of this function" },
    ...runs.map((r) => h("option", { value: str(r.id), selected: r.id === current },
      `${str(r.id)} · ${formatLatency(r.bestUs)} · ${r.trialsDone ?? 0} trials${r.stale ? " · stale" : ""}`)));
  select.addEventListener("change", () => post({ type: "selectRun", run: select.value }));
  return select;
}

export function notes(payload: ViewBase): HTMLElement | null {
  const list = arr<string>(payload.notes).filter((n) => typeof n === "string");
  return list.length ? h("ul", { class: "notes" }, ...list.map((n) => h("li", {}, n))) : null;
}

/** A payload with `status: "unavailable"` (no run yet, builder missing...). */
export function unavailable(kind: PanelKind, msg: ShowMessage): HTMLElement {
  const p = obj(msg.payload);
  return h("div", { class: "unavailable" }, header(kind, msg),
    h("p", { class: "message", role: "status" }, str(p.message, "Nothing to show yet.")));
}

/** A button that reveals a source range (0-based LSP) in the editor. */
export function sourceLink(label: string, range: LspRange | null | undefined, msg: ShowMessage, line?: number | null): HTMLElement {
  const start = range?.start?.line ?? line;
  if (typeof start !== "number") return h("span", {}, label);
  const b = h("button", { type: "button", class: "link source", title: `Go to line ${start + 1}` }, label);
  b.addEventListener("click", () => reveal(msg, range, start));
  return b;
}

/** Ask the host to show a source line (of the panel's document, else of the run's file). */
export function reveal(msg: ShowMessage, range: LspRange | null | undefined, line: number): void {
  const file = str(runOf(msg.payload).file) || undefined;
  post({
    type: "revealSource", line, character: range?.start?.character ?? 0, endLine: range?.end?.line,
    ...(msg.args.uri ? { uri: msg.args.uri } : file ? { file } : {}),
  });
}

export function pct(share: number | null | undefined): string {
  return typeof share === "number" && Number.isFinite(share) ? `${(share * 100).toFixed(share < 0.1 ? 1 : 0)} %` : "";
}

/** A horizontal bar (share 0..1) with a label, a count and optionally a last column (a latency). */
export function bar(label: string, share: number, detail: string, extra?: HTMLElement | null): HTMLElement {
  const fill = h("span", { class: "fill" });
  fill.style.width = `${Math.max(0, Math.min(1, share)) * 100}%`;
  return h("div", { class: extra ? "bar-row with-extra" : "bar-row" }, h("span", { class: "bar-label", title: label }, label),
    h("span", { class: "bar" }, fill), h("span", { class: "bar-detail" }, detail), extra ?? null);
}

/** Which measurement a payload shows (`measurement` of `views/measured.py`): when, by whom, under
 * which load; whether per-call times and the headline are one measurement; kept ones not shown;
 * and, when the panel showed another measurement of this run before, that it changed. */
export function measurementLine(msg: ShowMessage): HTMLElement | null {
  const m = obj(obj(msg.payload).measurement);
  const text = str(m.text);
  if (!text) return null;
  const busy = obj(m.perCall).busy === true || obj(m.headline).busy === true;
  const change = msg.measurementChange;
  return h("div", { class: busy ? "measured busy" : "measured", "data-measurement": str(m.id) },
    h("p", { class: "hint" }, text, busy ? " The machine was busy: these figures are noisy." : ""),
    change ? h("p", { class: "hint changed", role: "status", "data-from": change.from, "data-to": change.to },
      `A new measurement (${idTime(change.to)}) is shown; this panel showed the one of ${idTime(change.from)} before.`) : null);
}

/** `09:33:17 UTC` of a measurement id (`20261126-093317-744`: views/measured.py), else the id itself. */
export function idTime(id: string): string {
  const m = /^\d{8}-(\d\d)(\d\d)(\d\d)/.exec(id);
  return m ? `${m[1]}:${m[2]}:${m[3]} UTC` : id;
}
