/**
 * Plain words for the terms the panels keep: a short in-panel glossary (a closed <details>) and the
 * words for how a hotspot was linked to its source. The same entries as asight_lsp/views/glossary.py
 * (the HTML report) and docs/glossary.md; tests/webview checks the panels show exactly those.
 */
import { h } from "./dom";

export const TERMS: Record<string, string> = {
  "candidate": "one schedule MetaSchedule generated and measured while tuning (a trial).",
  "category": "the design space (sketch) a candidate came from; the number on a honeycomb cell is its category.",
  "sketch": "a design space: the fixed part of a schedule (which blocks are tiled, cached, fused) before the sampled numbers (tile sizes, unroll steps) are filled in.",
  "honeycomb cell": "a hexagon holding a few candidates with similar features; colour = their mean latency (or their category).",
  "stage": "a block of the program (a loop nest that computes one buffer).",
  "S / R (iterators)": "S = spatial loop (each iteration writes its own output), R = reduction loop (iterations add into the same output); SSR = two spatial loops and one reduction.",
  "tile split": "a loop cut into nested loops of the given extents, outermost first (4×1×4×8 = 128).",
  "vectorize length": "how many elements one vector instruction handles in the innermost loop (CPU SIMD lanes; on a GPU a vector load or store, e.g. float4); 0 = not vectorized.",
  "parallel extent": "how many iterations run on separate CPU threads (a GPU schedule binds threads instead: see thread binding); 0 = single-threaded.",
  "unroll (max steps)": "the compiler may unroll loops under this one up to this many steps; 0 = no unrolling.",
  "compute-at": "where a block is computed: at the root (on its own) or inside a loop of another block (fused with it), or inlined into its consumer.",
  "cache read / write": "a copy of a buffer in a faster scope (local, shared) that a block reads from or writes to.",
  "median latency": "the middle of the measured latencies: half the candidates are faster, half slower.",
  "share": "a block's part of the whole program's time, from a per-stage profile.",
  "linked by": "how a measured block was tied to a source block: same dataflow (the blocks' reads, writes and operations line up as a graph), similar block, or name only.",
  "split (hotspots)": "when one measured stage runs several source blocks, its time is divided between them by their share of the floating-point work (flops) or given whole.",
  "contour": "lines of equal gain drawn over the honeycomb: measured hardware counters (a GPU run's, against its baseline's or the median profiled candidate's) where the run has them, else a model of the gain over the untuned program; the legend says which.",
  "design principle": "a range of one scheduling decision whose candidates were measurably faster (effect, 95 % confidence interval, number of candidates).",
  "FDR": "false discovery rate: of the principles reported, at most this share are expected to be flukes.",
  "model fit (OOB R²)": "how much of the latency spread a random forest of the decisions explains, on candidates it did not train on; 1 = all, 0 = no better than the mean, below 0 = worse.",
};

export const LINKED_BY: Record<string, string> = {
  "graph": "same dataflow",
  "graph+names": "same dataflow; names chose among look-alikes",
  "graph-relaxed": "similar dataflow",
  "label": "similar block (the whole dataflow did not match)",
  "name": "name only",
  "lineage": "made from it by the schedule (the trace says so)",
  "unmatched": "not linked",
};

/** `graph` -> `same dataflow`; unknown kinds as they are. */
export function linkedBy(kind: string | null | undefined): string {
  return LINKED_BY[kind ?? "unmatched"] ?? kind ?? "not linked";
}

/** The panel's glossary: the given terms, each with its plain-words meaning. */
export function glossary(terms: string[]): HTMLElement {
  const known = terms.filter((t) => t in TERMS);
  return h("details", { class: "glossary" }, h("summary", {}, "Terms used here"),
    h("dl", {}, ...known.flatMap((t) => [h("dt", {}, t), h("dd", {}, TERMS[t])])));
}
