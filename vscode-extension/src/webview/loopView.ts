/** Loop-view panel: per stage (block), how often each scheduling strategy appears among the candidates. */
import type { ShowMessage } from "../shared/messages";
import type { LoopViewPayload, Stage, ValueCount } from "../shared/views";
import { bar, header, notes, pct, sourceLink } from "./common";
import { arr, h, mount, num, obj, str } from "./dom";

const STRATEGY_TITLES: Record<string, string> = {
  tile: "Tile split shapes", vectorize: "Vectorize length", parallel: "Parallel extent", unroll: "Unroll (max steps)",
  cache: "Cache", compute_at: "Compute-at location",
};

function valueLabel(v: unknown): string {
  return str(v) || "—";
}

function distribution(list: ValueCount[]): HTMLElement {
  return h("div", { class: "dist" }, ...list.map((vc) =>
    bar(valueLabel(vc.value), num(vc.share) ?? 0, `${vc.count ?? 0} · ${pct(vc.share)}`)));
}

function strategySection(key: string, value: unknown): HTMLElement | null {
  if (key === "tile_factors") return null; // the split shapes say it; factors per level are in the tooltip data
  const title = STRATEGY_TITLES[key] ?? key;
  if (Array.isArray(value)) {
    return h("div", { class: "strategy", "data-strategy": key }, h("h4", {}, title), distribution(value as ValueCount[]));
  }
  const perLoop = obj(value);
  const names = Object.keys(perLoop);
  if (!names.length) return null;
  return h("div", { class: "strategy", "data-strategy": key }, h("h4", {}, title),
    ...names.map((loop) => h("div", { class: "per-loop" }, h("div", { class: "loop-name" }, `loop ${loop}`),
      distribution(arr<ValueCount>(perLoop[loop])))));
}

function stageCard(stage: Stage, msg: ShowMessage): HTMLElement {
  const shares = obj(stage.loop_share);
  const shareRows = Object.entries(shares).filter(([, v]) => typeof v === "number")
    .map(([k, v]) => bar(k.replace(/_/g, " "), v as number, pct(v as number)));
  return h("section", { class: "stage", "data-block": str(stage.block) },
    h("h2", {}, sourceLink(str(stage.block, "?"), stage.range, msg),
      h("span", { class: "dim" }, ` ${str(stage.iter_kinds)} · ${stage.candidates ?? 0} candidates` +
        (num(stage.mean_loops) !== null ? ` · ${stage.mean_loops!.toFixed(1)} loops on average` : ""))),
    stage.best?.headline ? h("p", { class: "best-schedule" }, `best schedule: ${str(stage.best.headline)}`) : null,
    stage.best?.steps?.length ? h("details", {}, h("summary", {}, "steps of the best schedule"),
      h("ol", {}, ...arr<string>(stage.best.steps).map((x) => h("li", {}, str(x))))) : null,
    shareRows.length ? h("div", { class: "strategy", "data-strategy": "loop_share" }, h("h4", {}, "Share of loops"), ...shareRows) : null,
    h("div", { class: "strategies" }, ...Object.entries(obj(stage.strategies)).map(([k, v]) => strategySection(k, v))));
}

export function renderLoopView(root: HTMLElement, msg: ShowMessage): void {
  const p = msg.payload as LoopViewPayload;
  const stages = arr<Stage>(p.stages).filter((x) => x && typeof x === "object");
  const sources = obj(p.sources);
  mount(root, h("div", { class: "loop-view" }, header("loopView", msg),
    p.scheduled_loops_available === false ? h("p", { class: "hint" },
      "Scheduled loop nests are not extracted for this run: vectorize/parallel/unroll come from the traces' annotations.") : null,
    ...stages.map((st) => stageCard(st, msg)),
    Object.keys(sources).length ? h("section", { class: "sources" }, h("h3", {}, "Where the numbers come from"),
      h("ul", {}, ...Object.entries(sources).map(([k, v]) => h("li", {}, h("strong", {}, k), `: ${str(v)}`)))) : null,
    notes(p)));
}
