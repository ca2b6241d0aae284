/**
 * Failed candidates of the run, grouped by reason (`run.failures` of every view payload, from
 * asight_lsp/analysis/failures.py): count, stage (build / run), the reason line and the log file
 * that holds every full message. Drawn below any panel whose run had failures; nothing otherwise.
 */
import type { FailureGroup } from "../shared/protocol";
import { arr, h, num, obj, str } from "./dom";

const SHOWN = 6;

function row(g: FailureGroup): HTMLElement {
  return h("li", { class: "failure", "data-stage": str(g.stage) },
    h("span", { class: "count" }, `${num(g.count) ?? 0} ×`), " ",
    h("span", { class: "stage" }, str(g.stage, "build")), ": ",
    h("code", { class: "reason" }, str(g.reason, "(no message)")));
}

/** The failures section of a payload's run, or null when none failed (or the payload has no run). */
export function failuresSection(payload: unknown): HTMLElement | null {
  const run = obj(obj(payload).run);
  const groups = arr<FailureGroup>(run.failures).filter((g) => g && typeof g === "object");
  const shortfall = str(run.shortfall);
  if (!groups.length) {
    return shortfall ? h("section", { class: "failures", role: "note" }, h("p", { class: "shortfall" }, shortfall)) : null;
  }
  const total = groups.reduce((n, g) => n + (num(g.count) ?? 0), 0);
  const rest = groups.slice(SHOWN).reduce((n, g) => n + (num(g.count) ?? 0), 0);
  const log = groups.map((g) => str(g.log)).find((l) => l);
  return h("section", { class: "failures", role: "note" },
    h("h2", {}, `Failed candidates: ${total}`),
    shortfall ? h("p", { class: "shortfall" }, shortfall) : null,
    h("p", { class: "hint" }, "MetaSchedule could not build or run these candidates; grouped by the error's own line " +
      "(numbers and addresses masked)."),
    h("ul", {}, ...groups.slice(0, SHOWN).map(row)),
    rest ? h("p", { class: "hint" }, `${rest} more in ${groups.length - SHOWN} other reason(s)`) : null,
    log ? h("p", { class: "hint log" }, "Full messages: ", h("code", {}, log)) : null);
}

/** Append the failures section (if any) to a drawn panel. */
export function appendFailures(root: HTMLElement, payload: unknown): void {
  const section = failuresSection(payload);
  if (section) (root.firstElementChild ?? root).appendChild(section);
}
