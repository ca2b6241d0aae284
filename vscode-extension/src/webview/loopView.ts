/**
 * Loop-view panel: per stage (block), how often each scheduling strategy appears among the candidates,
 * and the median latency of the candidates using each value (the fastest value of a strategy is marked).
 */
import { formatLatency } from "../shared/format";
import type { ShowMessage } from "../shared/messages";
import type { LoopViewPayload, Stage, ValueCount } from "../shared/views";
import { bar, header, notes, pct, sourceLink } from "./common";
import { arr, h, mount, num, obj, str } from "./dom";
import { glossary, TERMS } from "./glossary";
import { gpuSection } from "./gpuBlock";

const STRATEGY_TITLES: Record<string, string> = {
  tile: "Tile split shapes", vectorize: "Vectorize length", parallel: "Parallel extent", unroll: "Unroll (max steps)",
  cache: "Cache", compute_at: "Compute-at location",
};

/** Plain names of the loop-share rows (payload keys). */
const SHARE_LABELS: Record<string, string> = {
  parallel: "parallel loops", vectorized: "vectorized loops", unrolled: "unrolled loops", serial: "plain (serial) loops",
  under_unroll_pragma: "under an unroll hint", split: "source loops tiled",
};

/** `axis n` for a loop the source (or the kernel) names; `loop 2` for one known only by position. */
export function axisLabel(name: string): string {
  const pos = /^loop(\d+)$/.exec(name);
  return pos ? `loop ${pos[1]}` : `axis ${name}`;
}

function valueLabel(v: unknown): string {
  return str(v) || "—";
}

/** A median over fewer candidates than this is shown but never called the fastest. */
export const MIN_FOR_FASTEST = 3;

/** The value with the lowest median latency among those with at least MIN_FOR_FASTEST candidates,
 * when at least two values qualify (else null); "other" (the values past the top ones, pooled) is
 * never a value one could choose, so never the fastest. */
export function fastestValue(list: ValueCount[]): ValueCount | null {
  const timed = list.filter((vc) => vc.value !== "other" && num(vc.median_us) !== null &&
    (vc.measured ?? vc.count ?? 0) >= MIN_FOR_FASTEST);
  if (timed.length < 2) return null;
  return timed.reduce((a, b) => (b.median_us! < a.median_us! ? b : a));
}

/** `median 0.61 ms (n=8)`: the latency column of one value. */
export function medianText(vc: ValueCount): string {
  const med = num(vc.median_us);
  return med === null ? "no latency" : `median ${formatLatency(med)} (n=${vc.measured ?? vc.count ?? 0})`;
}

function distribution(list: ValueCount[]): HTMLElement {
  const fastest = fastestValue(list);
  const withLatency = list.some((vc) => vc.median_us !== undefined);
  return h("div", { class: "dist" }, ...list.map((vc) =>
    bar(valueLabel(vc.value), num(vc.share) ?? 0, `${vc.count ?? 0} · ${pct(vc.share)}`,
      withLatency ? h("span", { class: vc === fastest ? "median fastest" : "median",
        title: vc === fastest ? "the fastest value of this strategy (lowest median latency of the candidates using it)"
          : "median latency of the candidates using this value" },
      medianText(vc) + (vc === fastest ? " ★" : "")) : null)));
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
    ...names.map((loop) => h("div", { class: "per-loop" }, h("div", { class: "loop-name" }, axisLabel(loop)),
      distribution(arr<ValueCount>(perLoop[loop])))));
}

/** ` (trial 7, chosen by re-measurement; trial 36 was the fastest while tuning)`, as `asight loops` says it. */
function bestWhich(best: NonNullable<Stage["best"]>): string {
  if (num(best.trial) === null) return "";
  let text = `trial ${best.trial}, ${best.chosen_by === "re-measurement" ? "chosen by re-measurement" : "the fastest while tuning"}`;
  if (num(best.fastest_trial) !== null) text += `; trial ${best.fastest_trial} was the fastest while tuning`;
  return ` (${text})`;
}

function stageCard(stage: Stage, msg: ShowMessage): HTMLElement {
  const shares = obj(stage.loop_share);
  const shareRows = Object.entries(shares).filter(([, v]) => typeof v === "number")
    .map(([k, v]) => bar(SHARE_LABELS[k] ?? k.replace(/_/g, " "), v as number, pct(v as number)));
  return h("section", { class: "stage", "data-block": str(stage.block) },
    h("h2", {}, sourceLink(str(stage.block, "?"), stage.range, msg),
      h("span", { class: "dim", title: TERMS["S / R (iterators)"] }, ` ${str(stage.iter_kinds)} · ${stage.candidates ?? 0} candidates` +
        (num(stage.mean_loops) !== null ? ` · ${stage.mean_loops!.toFixed(1)} loops on average` : ""))),
    stage.best?.headline ? h("p", { class: "best-schedule" }, `best schedule${bestWhich(stage.best)}: ${str(stage.best.headline)}`) : null,
    stage.best?.steps?.length ? h("details", {}, h("summary", {}, "steps of the best schedule"),
      h("ol", {}, ...arr<string>(stage.best.steps).map((x) => h("li", {}, str(x))))) : null,
    shareRows.length ? h("div", { class: "strategy", "data-strategy": "loop_share" }, h("h4", { title: "over all candidates: the share of this block's loops of each kind" }, "Share of loops"), ...shareRows) : null,
    h("p", { class: "hint" }, "Each row: a value of the strategy, how many candidates used it (count · share), and the " +
      `median latency of those candidates; ★ marks the fastest value (among values used by at least ${MIN_FOR_FASTEST}).`),
    h("div", { class: "strategies" }, ...Object.entries(obj(stage.strategies)).map(([k, v]) => strategySection(k, v))));
}

export function renderLoopView(root: HTMLElement, msg: ShowMessage): void {
  const p = msg.payload as LoopViewPayload;
  const stages = arr<Stage>(p.stages).filter((x) => x && typeof x === "object");
  const sources = obj(p.sources);
  mount(root, h("div", { class: "loop-view" }, header("loopView", msg),
    p.scheduled_loops_available === false ? h("p", { class: "hint" },
      "Scheduled loop nests are not extracted for this run: vectorize/parallel/unroll come from the traces' annotations.") : null,
    gpuSection(p.gpu),
    ...stages.map((st) => stageCard(st, msg)),
    Object.keys(sources).length ? h("section", { class: "sources" }, h("h3", {}, "Where the numbers come from"),
      h("ul", {}, ...Object.entries(sources).map(([k, v]) => h("li", {}, h("strong", {}, k), `: ${str(v)}`)))) : null,
    notes(p),
    glossary(["stage", "S / R (iterators)", "candidate", "median latency", "tile split", "vectorize length",
      "parallel extent", "unroll (max steps)", "compute-at", "cache read / write", "sketch"])));
}
