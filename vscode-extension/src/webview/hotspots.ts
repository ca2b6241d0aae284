/** Hotspot list: source blocks / bindings ranked by their share of the tuned latency; click jumps to the source. */
import { tableLatency } from "../shared/format";
import type { ShowMessage } from "../shared/messages";
import type { HotspotEntry, HotspotPart, HotspotsPayload } from "../shared/views";
import { bar, header, measurementLine, notes, pct, sourceLink } from "./common";
import { arr, h, mount, num, str } from "./dom";
import { glossary, linkedBy, TERMS } from "./glossary";

type Fmt = (us: number | null | undefined) => string;

function entryRow(e: HotspotEntry, msg: ShowMessage, formatLatency: Fmt): HTMLElement {
  const share = num(e.share) ?? 0;
  const line = arr<number>(e.lines)[0];
  const row = bar("", share, `${formatLatency(e.us)} · ${pct(share)}`);
  // The block's name is the row's label: `lines` are 1-based (TVM spans); `range` is an LSP range.
  row.firstElementChild!.replaceWith(h("span", { class: "bar-label" },
    sourceLink(str(e.name, str(e.id, "?")), e.range, msg, typeof line === "number" ? line - 1 : null)));
  const about = [
    e.split && e.split !== "whole" ? h("span", { title: TERMS["split (hotspots)"] },
      `time shared with ${arr<string>(e.shared_with).join(", ") || "other blocks"}, split by ${str(e.split)}`) : null,
    e.match ? h("span", { class: "linked-by", title: TERMS["linked by"] }, `linked by ${linkedBy(str(e.match))}`) : null,
  ].filter((x): x is HTMLSpanElement => x !== null);
  return h("li", { class: "hotspot", "data-name": str(e.name) }, row,
    about.length ? h("div", { class: "hint about" }, ...about.flatMap((x, i) => (i ? [" · ", x] : [x]))) : null);
}

function part(pt: HotspotPart, msg: ShowMessage): HTMLElement {
  const entries = arr<HotspotEntry>(pt.entries).slice().sort((a, b) => (num(b.us) ?? 0) - (num(a.us) ?? 0));
  const un = arr<{ name?: string; us?: number }>(pt.unattributed);
  // One unit for the whole list (the part's total included), chosen by its largest value.
  const formatLatency = tableLatency([num(pt.whole_us), ...entries.map((e) => num(e.us)), ...un.map((u) => num(u.us))]);
  return h("section", { class: "part" },
    h("h2", {}, str(pt.function, str(pt.name)), num(pt.whole_us) !== null ? h("span", { class: "dim" }, ` · ${formatLatency(pt.whole_us)} in all`) : null),
    h("ol", { class: "hotspots" }, ...entries.map((e) => entryRow(e, msg, formatLatency))),
    un.length ? h("p", { class: "hint" }, `not attributed to a source block: ${un.map((u) => `${str(u.name)} ${formatLatency(u.us)}`).join(", ")}`) : null,
    pt.split_rule ? h("p", { class: "hint" }, str(pt.split_rule)) : null);
}

export function renderHotspots(root: HTMLElement, msg: ShowMessage): void {
  const p = msg.payload as HotspotsPayload;
  // `asight hotspots --json` names the run by id; the header wants the run block of the other views.
  if (typeof p.run === "string") msg = { ...msg, payload: { ...p, run: { id: p.run, function: p.function, file: p.file } } };
  mount(root, h("div", { class: "hotspots-panel" }, header("hotspots", msg), measurementLine(msg),
    ...arr<HotspotPart>(p.parts).map((pt) => part(pt, msg)), notes({ notes: p.notes }),
    glossary(["share", "linked by", "split (hotspots)", "stage"])));
}
