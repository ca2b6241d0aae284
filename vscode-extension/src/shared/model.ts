/**
 * The Model panel's data (pure, dependency-free): rows of the `asight.model/1` payload (one per
 * task of a tuned Relax model, each call with its own bindings and lines), the ranges a click
 * selects, and the task choices of the per-task panels. Both the webview and the host use it.
 */

/** One kernel call of a task: its bindings and `lines` = [first, last] (0-based, inclusive). */
export interface ModelCall {
  call?: number;
  bindings?: string[];
  lines?: number[] | null;
  tunedUs?: number | null;
  untunedUs?: number | null;
  /** The call's own line ranges ([first, last], 0-based) when another kernel's bindings sit inside `lines`. */
  ranges?: number[][] | null;
}

export interface ModelTask {
  task?: string;
  calls?: ModelCall[];
  tunedUs?: number | null;
  untunedUs?: number | null;
  share?: number | null;
  trials?: number | null;
  failed?: number | null;
  slower?: boolean; // the server's verdict (views/model.py): trials > 0 and ≥ 1.2× the untuned calls
  tuned?: boolean;
  recordUs?: number | null;
  // issue 21 (views/model.py): twins/siblings and transfers, the budget's outlook, a kept default schedule
  twins?: { op?: string; twins?: string[]; siblings?: string[]; transfers?: unknown[]; bestGain?: number | null; adopted?: number };
  nextTrials?: { batch?: number; trials?: number; share?: number | null; expectedSavingUs?: number; expectedSavingShare?: number | null };
  defaultKept?: { defaultUs?: number | null; bestTrialUs?: number | null; nothingToTune?: boolean }; // issue 38: kept without a trial
  fromLibrary?: { libraryUs?: number | null; measuredUs?: number | null }; // issue 41: its first trial was the schedule library's
  weightsPacked?: boolean; // the layout lever: the build packed this kernel's weights into its schedule's layout
  levers?: string[]; // what the tuning levers did for the task, a phrase each (views/model.lever_notes)
}

export interface ModelPayload {
  schema?: string;
  status?: string;
  message?: string;
  run?: { id?: string; file?: string; function?: string; headline?: string } | null;
  function?: string;
  headline?: { untunedUs?: number | null; tunedUs?: number | null; speedup?: number | null;
    /** Which build the headline measured (deployable = weights bound, as exported); stale when an export would differ. */
    build?: { deployable?: boolean; stale?: boolean; text?: string } | null };
  tasks?: ModelTask[];
  kernelUs?: number | null;
  notTimed?: string[];
  notes?: string[];
  twinGroups?: string[][]; // issue 21: tasks with the same main computation
  leversRefused?: string[]; // issue 38: each lever TVM refused, one line (also in `notes`, which the panel shows)
  compareOnnx?: Record<string, unknown>; // `asight model --compare-onnx` (CLI only)
}

/** A source range to select: 0-based lines, inclusive. */
export interface CallRange {
  line: number;
  endLine: number;
}

export interface ModelRow {
  task: string;
  calls: ModelCall[];
  ranges: CallRange[];
  tunedUs: number | null;
  untunedUs: number | null;
  share: number | null;
  trials: number | null;
  failed: number | null;
  slower: boolean;
  levers: string[];
}

const num = (v: unknown): number | null => (typeof v === "number" && Number.isFinite(v) ? v : null);
const line = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v) && v >= 0;

/** Slower than untuned: the server decides (views/model.py: trials > 0 and ≥ 1.2× the untuned calls);
 * a payload without the field is never flagged. */
export function isSlower(flag: unknown): boolean {
  return flag === true;
}

/** The lines of one call (null when the payload has none). */
export function callRange(call: ModelCall): CallRange | null {
  const l = Array.isArray(call.lines) ? call.lines : [];
  if (!line(l[0])) return null;
  return { line: l[0], endLine: line(l[1]) && l[1] >= l[0] ? l[1] : l[0] };
}

/** The ranges of one call: its own `ranges` (another kernel's bindings left out) when the payload
 * has them, else its `lines`. */
export function ownRanges(call: ModelCall): CallRange[] {
  const own = Array.isArray(call.ranges) ? call.ranges.filter((r) => Array.isArray(r) && line(r[0]) && line(r[1]) && r[1] >= r[0]) : [];
  if (own.length) return own.map((r) => ({ line: r[0], endLine: r[1] }));
  const r = callRange(call);
  return r ? [r] : [];
}

/** Each call's own ranges, in source order, without duplicates. */
export function callRanges(calls: readonly ModelCall[]): CallRange[] {
  const seen = new Set<string>();
  const out: CallRange[] = [];
  for (const r of calls.flatMap(ownRanges)) {
    if (seen.has(`${r.line}:${r.endLine}`)) continue;
    seen.add(`${r.line}:${r.endLine}`);
    out.push(r);
  }
  return out.sort((a, b) => a.line - b.line);
}

/** The table rows, slowest task (largest tuned time) first, as the server orders them. */
export function modelRows(payload: ModelPayload | null | undefined): ModelRow[] {
  const tasks = Array.isArray(payload?.tasks) ? payload!.tasks : [];
  return tasks.filter((t) => typeof t?.task === "string" && t.task.length > 0).map((t) => {
    const calls = Array.isArray(t.calls) ? t.calls.filter((c) => c && typeof c === "object") : [];
    const tunedUs = num(t.tunedUs);
    const untunedUs = num(t.untunedUs);
    return {
      task: t.task!, calls, ranges: callRanges(calls), tunedUs, untunedUs, share: num(t.share),
      trials: num(t.trials), failed: num(t.failed), slower: isSlower(t.slower),
      levers: Array.isArray(t.levers) ? t.levers.filter((x): x is string => typeof x === "string" && x.length > 0) : [],
    };
  });
}

/** `lv8, lv10, lv11, lv12 · lines 21–25` (1-based lines, as editors show them). */
export function callLabel(call: ModelCall): string {
  const r = callRange(call);
  const names = Array.isArray(call.bindings) ? call.bindings.filter((b) => typeof b === "string") : [];
  const where = r ? (r.endLine > r.line ? `lines ${r.line + 1}–${r.endLine + 1}` : `line ${r.line + 1}`) : "lines ?";
  return `#${typeof call.call === "number" ? call.call : "?"} ${names.join(", ")} · ${where}`;
}

/**
 * The task choices of a per-task panel (search space, loop view, code): the run's tasks, the
 * current one first-class. `null` when the run is not a model of several tasks (no selector).
 */
export function taskChoices(run: { task?: unknown; tasks?: unknown } | null | undefined): { tasks: string[]; current: string | null } | null {
  const tasks = Array.isArray(run?.tasks) ? (run!.tasks as unknown[]).filter((t): t is string => typeof t === "string" && t.length > 0) : [];
  if (tasks.length < 2) return null;
  const current = typeof run?.task === "string" && tasks.includes(run.task) ? run.task : null;
  return { tasks, current };
}

/** The task whose call covers `line` (0-based), if any: the task "under the cursor". */
export function taskAtLine(rows: readonly ModelRow[], line: number): string | undefined {
  return rows.find((r) => r.ranges.some((c) => c.line <= line && line <= c.endLine))?.task;
}

/** An `asight.code/1` payload's `callSites` ({lines: 1-based TVM span lines}) as 0-based ranges. */
export function callSiteRanges(sites: unknown): CallRange[] {
  const out: CallRange[] = [];
  for (const site of Array.isArray(sites) ? sites : []) {
    const lines = Array.isArray((site as { lines?: unknown })?.lines)
      ? ((site as { lines: unknown[] }).lines).filter((l): l is number => typeof l === "number" && Number.isInteger(l) && l >= 1) : [];
    if (lines.length) out.push({ line: Math.min(...lines) - 1, endLine: Math.max(...lines) - 1 });
  }
  return out.sort((a, b) => a.line - b.line);
}

/** Quick-pick items for a Relax run's tasks: the model's rows (share, calls) when known, the one under the cursor first. */
export function taskPickItems(tasks: readonly string[], rows: readonly ModelRow[], atCursor?: string):
  { label: string; description: string; task: string }[] {
  const byName = new Map(rows.map((r) => [r.task, r]));
  const names = rows.length ? [...rows.map((r) => r.task), ...tasks.filter((t) => !byName.has(t))] : [...tasks];
  const ordered = atCursor && names.includes(atCursor) ? [atCursor, ...names.filter((n) => n !== atCursor)] : names;
  return ordered.map((task) => {
    const r = byName.get(task);
    const parts = [task === atCursor ? "at the cursor" : "",
      r ? `${r.calls.length} call${r.calls.length === 1 ? "" : "s"}` : "", r && r.share !== null ? `${(r.share * 100).toFixed(0)} % of kernel time` : "",
      r?.trials === 0 ? "no trial" : ""];
    return { label: task, description: parts.filter(Boolean).join(" · "), task };
  });
}

/** Trials `Tune the missing kernels` asks for: a few batches per kernel (at least 8 in all). */
export const TRIALS_PER_MISSING = 4;

export interface ExportAction { label: string; args: { tuneMissing?: number; allowUntuned?: boolean }; progress: string; done: string }

/**
 * What a refused export offers (`asight export` refuses kernels the run has no record for): tune
 * them (`--tune-missing N`) or export anyway (`--allow-untuned`), each the same export run again
 * through the server. Undefined when the export was not refused for missing kernels.
 */
export function refusalActions(data: { status?: string; applied?: { missing?: string[] } } | undefined):
  { tune: ExportAction; anyway: ExportAction } | undefined {
  const missing = Array.isArray(data?.applied?.missing) ? data!.applied!.missing!.filter((m) => typeof m === "string") : [];
  if (data?.status !== "refused" || missing.length === 0) return undefined;
  const trials = Math.max(8, TRIALS_PER_MISSING * missing.length);
  const kernels = `${missing.length} kernel${missing.length === 1 ? "" : "s"}`;
  return {
    tune: { label: `Tune the missing kernels (${trials} trials)`, args: { tuneMissing: trials },
      progress: `ASight: tuning the ${kernels} without a record (${trials} trials), then exporting…`,
      done: `tuned the ${kernels} without a record (${trials} trials)` },
    anyway: { label: "Export anyway (untuned kernels)", args: { allowUntuned: true },
      progress: `ASight: exporting with ${kernels} on TVM's default schedule…`,
      done: `exported with ${kernels} untuned (${missing.join(", ")})` },
  };
}
