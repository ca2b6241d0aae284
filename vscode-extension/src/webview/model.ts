/**
 * The Model panel (`asight.model/1`): per task of a tuned Relax model, its calls, untuned and tuned
 * time, share, trials and failures. Clicking a task selects all its call sites in the editor (one
 * selection per call); a call selects its own lines; each row opens the task's search space, loop
 * view and scheduled code. Also the task selector the per-task panels (search space, loop view)
 * get for a run of several tasks.
 */
import { formatLatency, formatSpeedup, tableLatency } from "../shared/format";
import type { ShowMessage, TaskView } from "../shared/messages";
import { callLabel, callRanges, modelRows, taskChoices, type ModelPayload, type ModelRow } from "../shared/model";
import { header, measurementLine, notes, pct, runOf } from "./common";
import { h, mount, str } from "./dom";
import { post } from "./host";

const VIEW_BUTTONS: [TaskView, string][] = [["searchSpace", "Search space"], ["loopView", "Loop view"], ["code", "Code"]];

/** Where the call sites live: the panel's document, else the run's file. */
function target(msg: ShowMessage): { uri?: string; file?: string } {
  if (msg.args.uri) return { uri: msg.args.uri };
  const file = str(runOf(msg.payload).file);
  return file ? { file } : {};
}

function revealCalls(msg: ShowMessage, ranges: { line: number; endLine: number }[]): void {
  const where = target(msg);
  if (ranges.length && (where.uri || where.file)) post({ type: "revealCalls", ranges, ...where });
}

type Fmt = (us: number | null | undefined) => string;

function taskCell(row: ModelRow, msg: ShowMessage, fmt: Fmt): HTMLElement {
  const name = h("button", { type: "button", class: "link task", "data-task": row.task,
    title: `Select the ${row.ranges.length} call site(s) of ${row.task} in the editor` }, row.task);
  name.addEventListener("click", () => revealCalls(msg, row.ranges));
  const calls = row.calls.map((c) => {
    const b = h("button", { type: "button", class: "link call", "data-call": String(c.call ?? "") },
      `${callLabel(c)}${typeof c.tunedUs === "number" ? ` · ${fmt(c.tunedUs)}` : ""}`);
    b.addEventListener("click", () => revealCalls(msg, callRanges([c])));
    return h("li", {}, b);
  });
  return h("td", { class: "task-cell" }, name, calls.length ? h("ul", { class: "calls" }, ...calls) : null);
}

function viewButtons(row: ModelRow): HTMLElement {
  const buttons = VIEW_BUTTONS.map(([view, label]) => {
    const b = h("button", { type: "button", class: "secondary", "data-view": view, title: `${label} of ${row.task} alone` }, label);
    b.addEventListener("click", () => post({ type: "openTaskView", view, task: row.task }));
    return b;
  });
  return h("td", { class: "task-views" }, ...buttons);
}

function tableRow(row: ModelRow, msg: ShowMessage, fmt: Fmt): HTMLElement {
  const n = (v: number | null) => (v === null ? "–" : String(v));
  // `data-label` names each value when a narrow panel lays the row out as a card (style.css).
  const cell = (label: string, text: string) => h("td", { "data-label": label }, text);
  return h("tr", { class: row.slower ? "task-row slower" : "task-row", "data-task": row.task },
    taskCell(row, msg, fmt), cell("calls", String(row.calls.length)), cell("untuned", fmt(row.untunedUs)),
    cell("tuned", fmt(row.tunedUs)), cell("share", pct(row.share)), cell("trials", n(row.trials)),
    cell("failures", n(row.failed)), flagCell(row), viewButtons(row));
}

/** The row's verdict, and under it what the tuning levers did for the task (twins, kept default, packed weights, next batch). */
function flagCell(row: ModelRow): HTMLElement {
  const flag = row.slower ? "SLOWER than untuned" : row.trials === 0 ? "untuned (no trial)" : "";
  const levers = row.levers.length ? h("ul", { class: "levers hint" }, ...row.levers.map((x) => h("li", {}, x))) : null;
  return h("td", { class: row.slower ? "flag slower" : "flag dim", "data-label": flag || levers ? "notes" : "" }, flag, levers);
}

function headline(p: ModelPayload): string {
  const hl = p.headline ?? {};
  const sp = hl.speedup ?? null;
  const ratio = sp === null ? "" : sp >= 1 ? ` (${formatSpeedup(sp)} faster)` : ` (${formatSpeedup(1 / sp)} slower)`;
  return `${str(p.function)}: untuned ${formatLatency(hl.untunedUs)} → tuned ${formatLatency(hl.tunedUs)} end to end${ratio}`;
}

/** The headline's build: the deployable one (what `asight export` writes), or a warning when it would differ. */
function buildLine(p: ModelPayload): HTMLElement | null {
  const build = p.headline?.build;
  if (!build || typeof build.text !== "string") return null;
  return h("p", { class: build.stale ? "build flag slower" : "build hint" }, `${build.stale ? "⚠ " : ""}build: ${build.text}`);
}

export function renderModel(root: HTMLElement, msg: ShowMessage): void {
  const p = msg.payload as ModelPayload;
  const rows = modelRows(p);
  // One unit for the whole table (per-call times included), chosen by its largest value.
  const fmt = tableLatency(rows.flatMap((r) => [r.untunedUs, r.tunedUs, ...r.calls.map((c) => c.tunedUs ?? null)]));
  const cols = ["task", "calls", "untuned", "tuned", "share", "trials", "failures", "", "views"];
  const table = h("table", { class: "candidates model" },
    h("thead", {}, h("tr", {}, ...cols.map((c) => h("th", {}, c)))),
    h("tbody", {}, ...rows.map((r) => tableRow(r, msg, fmt))));
  const untimed = (p.notTimed ?? []).filter((t) => typeof t === "string");
  mount(root, h("div", { class: "model-panel" }, header("model", msg), h("p", { class: "headline" }, headline(p)),
    measurementLine(msg), buildLine(p), table, untimed.length ? h("p", { class: "hint" }, `not timed as kernels (VM builtins or folded): ${untimed.join(", ")}`) : null,
    notes({ notes: p.notes })));
}

/**
 * Add a task selector to a per-task panel's header (search space, loop view) when its run has
 * several tasks: choosing one re-fetches the panel for that task alone.
 */
export function addTaskSelector(root: HTMLElement, msg: ShowMessage): void {
  const choices = taskChoices(runOf(msg.payload) as { task?: unknown; tasks?: unknown });
  const actions = root.querySelector("header .actions");
  if (!choices || !actions) return;
  const current = choices.current ?? msg.args.task ?? "";
  const select = h("select", { "aria-label": "Task", class: "task-select", title: "A Relax run is shown one task (kernel) at a time" },
    ...choices.tasks.map((t) => h("option", { value: t, selected: t === current }, t)));
  select.addEventListener("change", () => post({ type: "selectTask", task: select.value }));
  actions.prepend(h("label", { class: "task-label" }, "task ", select));
}
