/**
 * What the extension knows about tuning runs, from `asight/runUpdated` notifications and command
 * results: the live runs, their progress text, and promises that settle when a run ends. Pure (no
 * `vscode` import), so the status-bar and progress texts are unit-tested.
 */
import { formatLatency, formatSpeedup } from "../shared/format";
import type { RunSummary, RunUpdated } from "../shared/protocol";

export const LIVE_STATES = new Set(["queued", "running"]);

export interface TrackedRun {
  run: RunSummary;
  uri: string | null;
  finished: boolean;
}

type Listener = (t: TrackedRun) => void;

export class RunTracker {
  private readonly runs = new Map<string, TrackedRun>();
  private readonly listeners = new Set<Listener>();
  private readonly waiters = new Map<string, Array<(t: TrackedRun) => void>>();

  /** Take one notification (or a command result's run); returns the tracked run. */
  update(msg: RunUpdated): TrackedRun | undefined {
    const run = msg.run;
    if (!run?.id) return undefined;
    const old = this.runs.get(run.id);
    const finished = msg.event === "finished" || (!!run.state && !LIVE_STATES.has(run.state));
    // A late "progress" never overrides a run that already finished.
    if (old?.finished && !finished) return old;
    const tracked: TrackedRun = { run: { ...old?.run, ...run }, uri: msg.uri ?? old?.uri ?? null, finished };
    this.runs.set(run.id, tracked);
    for (const l of this.listeners) l(tracked);
    if (finished) {
      for (const resolve of this.waiters.get(run.id) ?? []) resolve(tracked);
      this.waiters.delete(run.id);
    }
    return tracked;
  }

  get(id: string): TrackedRun | undefined {
    return this.runs.get(id);
  }

  /** Runs still tuning, oldest first. */
  live(): TrackedRun[] {
    return [...this.runs.values()].filter((t) => !t.finished);
  }

  onUpdate(listener: Listener): { dispose(): void } {
    this.listeners.add(listener);
    return { dispose: () => this.listeners.delete(listener) };
  }

  /** Settles when the run finishes (at once if it already has). */
  finished(id: string): Promise<TrackedRun> {
    const t = this.runs.get(id);
    if (t?.finished) return Promise.resolve(t);
    return new Promise((resolve) => {
      const list = this.waiters.get(id) ?? [];
      list.push(resolve);
      this.waiters.set(id, list);
    });
  }

  /** The server went away: every live run ends as far as this window can tell. */
  abandonAll(reason: string): void {
    for (const t of this.live()) this.update({ event: "finished", uri: t.uri, run: { ...t.run, state: "failed", error: reason } });
  }
}

/** `12/64 trials · best 0.20 ms` */
export function progressText(run: RunSummary): string {
  const done = run.trialsDone ?? 0;
  const total = run.trialsRequested ?? "?";
  return `${done}/${total} trials` + (run.bestUs ? ` · best ${formatLatency(run.bestUs)}` : "");
}

/** Percentage (0..100) of the trial budget done. */
export function progressPercent(run: RunSummary): number {
  const total = run.trialsRequested ?? 0;
  return total > 0 ? Math.min(100, (100 * (run.trialsDone ?? 0)) / total) : 0;
}

/** Status-bar text and tooltip while runs are live; undefined when none is. */
export function statusBarText(live: TrackedRun[]): { text: string; tooltip: string } | undefined {
  if (live.length === 0) return undefined;
  if (live.length === 1) {
    const r = live[0].run;
    return {
      text: `$(sync~spin) ASight ${r.function ?? ""}: ${progressText(r)}`.replace(/\s+:/, ":"),
      tooltip: `ASight is tuning ${r.function ?? "a function"} (run ${r.id}). Click to cancel.`,
    };
  }
  const best = live.map((t) => t.run.bestUs).filter((v): v is number => typeof v === "number");
  const done = live.reduce((s, t) => s + (t.run.trialsDone ?? 0), 0);
  const total = live.reduce((s, t) => s + (t.run.trialsRequested ?? 0), 0);
  return {
    text: `$(sync~spin) ASight: ${live.length} runs · ${done}/${total} trials` +
      (best.length ? ` · best ${formatLatency(Math.min(...best))}` : ""),
    tooltip: `ASight is tuning ${live.map((t) => t.run.function).join(", ")}. Click to cancel.`,
  };
}

/** The message shown when a run ends, and whether it is an error. */
export function resultText(run: RunSummary): { text: string; level: "info" | "warning" | "error" } {
  const fn = run.function ?? "the function";
  // The server's headline is the one line every place shows for a run (its measurement record).
  const parts = run.headline ? [run.headline] : [formatLatency(run.bestUs)];
  const speedup = run.headline ? "" : formatSpeedup(run.speedup);
  if (speedup) parts.push(`${speedup} vs untuned`);
  parts.push(`${run.trialsDone ?? 0} trials`);
  switch (run.state) {
    case "done":
      return { text: `ASight: tuned ${fn}: ${parts.join(" · ")}`, level: "info" };
    case "cancelled":
      return { text: `ASight: tuning of ${fn} cancelled; ${run.trialsDone ?? 0} measured trials kept` +
        (run.bestUs ? ` (best ${formatLatency(run.bestUs)})` : ""), level: "warning" };
    default:
      return { text: `ASight: tuning of ${fn} failed${run.error ? `: ${run.error}` : ""}`, level: "error" };
  }
}
