/**
 * Shapes of the view payloads the panels draw (`asight_lsp/views/`: searchSpace, loopView,
 * stageGraph, principles; `asight hotspots --json`: hotspots). Every field is optional on purpose:
 * the webviews read payloads defensively and show what is there.
 */
import type { LspRange } from "./lsp";
import type { FailureGroup } from "./protocol";

/** `run` block every view payload carries. */
export interface ViewRun {
  id?: string;
  file?: string;
  function?: string;
  state?: string;
  target?: string;
  trials?: number;
  measured?: number;
  failed?: number;
  baseline_us?: number | null; // the measurement record's untuned median
  best_us?: number | null; // its tuned median
  speedup?: number | null;
  verdict?: string | null;
  headline?: string; // the one line every place shows for the run
  tuning_best_us?: number | null; // fastest seen while tuning (MetaSchedule's runner), not the headline
  measured_by?: string | null;
  noisy?: boolean;
  failures?: FailureGroup[]; // failed candidates by reason, largest first
}

export interface ViewBase {
  schema?: string;
  status?: string;
  message?: string;
  run?: ViewRun;
  notes?: string[];
}

// ------------------------------------------------------------------------- asight.searchSpace/1

export interface Cell {
  id: number;
  q?: number;
  r?: number;
  x: number;
  y: number;
  cluster?: number;
  category?: number;
  category_share?: number;
  count?: number;
  mean_latency_us?: number;
  min_latency_us?: number;
  color?: string;
  best_trial?: number;
  trials?: number[];
  corners?: [number, number][];
  strategy?: string;
  gains?: Record<string, number | null>;
  z?: number | null;
  winner?: string | null;
  speedup_log2?: number | null;
}

export interface Category {
  id: number;
  label?: string;
  tags?: string[];
  count?: number;
}

export interface ContourLine {
  level: number;
  points: [number, number][];
  /** `[x, y, dx, dy]`: a unit vector pointing uphill. */
  ticks?: [number, number, number, number][];
}

export interface MetricCategory {
  id: string;
  label?: string;
  source?: string;
}

/** How far the contour's model goes with the measured latencies (analysis/contour.agreement). */
export interface ContourAgreement {
  verdict?: "agrees" | "weak" | "untested" | "disagrees" | string;
  draw?: "full" | "faded" | "none" | string;
  rho?: number | null;
  n?: number;
  p?: number | null;
  per_category?: Record<string, { rho?: number | null; n?: number; p?: number | null }>;
  model_best_log2?: number | null;
  measured_log2?: number | null;
  contradiction?: boolean;
  method?: string;
  message?: string;
}

export interface Contour {
  agreement?: ContourAgreement;
  draw?: "full" | "faded" | "none" | string;
  /** The legend as plain lines, the same as the PNG's. */
  legend?: string[];
  smoothing?: string;
  metric?: string;
  unit?: string;
  categories?: MetricCategory[];
  direction?: string;
  measured?: { id?: string; label?: string; source?: string; available?: boolean };
  levels?: number[];
  lines?: ContourLine[];
  note?: string;
}

export interface SearchSpacePayload extends ViewBase {
  features?: { source?: string; dims?: number; dims_used?: number };
  reduction?: Record<string, unknown>;
  clustering?: Record<string, unknown>;
  hex?: { size?: number; orientation?: string; capacity?: number; growth?: string };
  category_by?: string;
  categories?: Category[];
  cells?: Cell[];
  /** Segments `[x1, y1, x2, y2]` between cells of different categories. */
  boundaries?: number[][];
  color_scale?: { stops?: string[]; domain_us?: number[]; scale?: string; meaning?: string };
  best?: { trial?: number; cell?: number; latency_us?: number; x?: number; y?: number; category?: number };
  /** Columns, one entry per measured candidate. */
  candidates?: { trial?: number[]; cell?: number[]; x?: number[]; y?: number[]; latency_us?: (number | null)[];
    category?: number[]; cluster?: number[] };
  failed_trials?: number[];
  contour?: Contour;
}

// ------------------------------------------------------------------------- asight.loopView/1

export interface ValueCount {
  value: string | number;
  count: number;
  share: number;
  /** Median latency of the candidates using this value (absent in tile_factors). */
  median_us?: number | null;
  /** How many candidates with a latency the median is over. */
  measured?: number;
}

export interface Stage {
  block: string;
  id?: string | null;
  candidates?: number;
  iter_kinds?: string | null;
  /** tile: per loop var; tile_factors: per loop var, per tile level; others: one distribution. */
  strategies?: Record<string, ValueCount[] | Record<string, ValueCount[] | ValueCount[][]>>;
  loop_share?: Record<string, number>;
  mean_loops?: number;
  /** The run's best schedule: the record its measurement chose (chosen_by "re-measurement"), else the fastest
   *  while tuning; fastest_trial: the fastest while tuning when that is another trial. */
  best?: { headline?: string; steps?: string[]; trial?: number; chosen_by?: string; fastest_trial?: number } | null;
  range?: LspRange | null;
}

export interface LoopViewPayload extends ViewBase {
  function?: string;
  stages?: Stage[];
  sources?: Record<string, string>;
  scheduled_loops_available?: boolean;
  /** A GPU run: what the best candidate's schedule did (analysis/gpu_words.py); absent/null on a CPU. */
  gpu?: GpuBlock | null;
}

/** `gpu` of the loop view (analysis/gpu_words.gpu_words + `trial`). */
export interface GpuBlock {
  trial?: number;
  axes?: Record<string, number>;
  binding?: string;
  threads_per_block?: number;
  blocks?: number;
  shared?: string[];
  local?: string[];
  registers?: number | null;
  occupancy_pct?: number | null;
  shared_bytes?: number | null;
  limiter?: { kind?: string; text?: string; short?: string } | null;
  lines?: string[];
  /** With counters: each launch figure or the limiting factor they lack, with the metrics it needs. */
  not_measured?: string[];
  sources?: Record<string, string>;
  /** DLight's default schedule beat the tuned record: the run keeps it (this block is the best tuned). */
  kept?: string;
}

// ------------------------------------------------------------------------- asight.stageGraph/1

/** A stage's measured cost (analysis/stagegraph.py stage_costs): us/share null = no measurement. */
export interface StageCost {
  us?: number | null;
  share?: number | null;
  source?: string;
  /** Relax: the kernel call that runs the binding, and the other bindings fused into it. */
  kernel?: string;
  shared_with?: string[];
}

export interface GraphNode {
  id: string;
  kind?: string; // block | io | binding
  role?: string; // input | output
  label?: string;
  iter_kinds?: string;
  flops?: number;
  bytes?: number;
  line?: number;
  layer: number;
  row: number;
  schedule?: string;
  cost?: StageCost;
  /** A Relax model's stage graph (level "model"): one node per kernel call of a task. */
  task?: string;
  call?: number;
  calls?: number;
  trials?: number | null;
  weights_only?: boolean;
  bindings?: string[];
}

export interface GraphEdge {
  source: string;
  target: string;
  buffer?: string;
  shape?: number[] | null;
  dtype?: string | null;
  scope?: string | null;
}

export interface StageGraphPayload extends ViewBase {
  function?: string;
  kind?: string;
  nodes?: GraphNode[];
  edges?: GraphEdge[];
  layout?: string;
  source?: string;
  /** "model" (kernel calls of a Relax model), "kernel" (one task's blocks) or absent (a function's blocks). */
  level?: string;
  task?: string;
  summary?: string;
  kernelCost?: string;
}

// ------------------------------------------------------------------------- asight.principles/1

export interface Principle {
  rank?: number;
  block?: string | null;
  decision?: string;
  range?: string;
  effect?: number;
  ci95?: [number, number];
  n_in?: number;
  n?: number;
  text?: string;
  importance?: number;
  p_value?: number;
  p_adjusted?: number; // closest ranges: Benjamini-Hochberg adjusted p
  /** Closest ranges: a rough power estimate of the measured candidates that would settle it. */
  settle?: { effect_size_d?: number; candidates_needed?: number | null; more_trials?: number | null;
    alpha?: number; power?: number; method?: string; note?: string };
  /** What to do with it and the command that does it (views/principles.next_step). */
  next_step?: { kind?: string; text?: string; cli?: string; cli_alone?: string;
    command?: { command?: string; args?: Record<string, unknown> } };
}

export interface PrinciplesPayload extends ViewBase {
  principles?: Principle[];
  /** Faster ranges not significant after the FDR correction; only a guided re-tune uses them. */
  tentative?: Principle[];
  /** When nothing is significant: the faster ranges with the smallest p, with their estimates. */
  closest?: Principle[];
  reason?: string | null;
  meaning?: string;
}

// ------------------------------------------------------------------------- asight.hotspots/1

export interface HotspotEntry {
  id?: string;
  name?: string;
  us?: number;
  share?: number | null;
  lines?: number[] | null;
  range?: LspRange | null;
  source_id?: string;
  split?: string | null;
  shared_with?: string[];
  transformed?: unknown[];
  match?: string | null;
}

export interface HotspotPart {
  name?: string;
  function?: string;
  whole_us?: number | null;
  total_us?: number | null;
  entries?: HotspotEntry[];
  unattributed?: { name?: string; us?: number }[];
  split_rule?: string;
}

export interface HotspotsPayload extends Omit<ViewBase, "run"> {
  file?: string;
  function?: string;
  run?: string | ViewRun;
  kind?: string;
  parts?: HotspotPart[];
}
