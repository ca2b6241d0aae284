/**
 * Messages between the extension host and the webview panels (hexeditor-style: every message a
 * typed interface, both sides import this module). Dependency-free.
 */
import type { MeasurementStamp, RunSummary, ViewArgs } from "./protocol";

/** The panels the extension shows. */
export const PANEL_KINDS = ["searchSpace", "loopView", "stageGraph", "hotspots", "model"] as const;
export type PanelKind = (typeof PANEL_KINDS)[number];

/** VS Code webview view types (one per panel kind; also the serializer ids). */
export const VIEW_TYPES: Record<PanelKind, string> = {
  searchSpace: "asight.searchSpace",
  loopView: "asight.loopView",
  stageGraph: "asight.stageGraph",
  hotspots: "asight.hotspots",
  model: "asight.model",
};

export const PANEL_TITLES: Record<PanelKind, string> = {
  searchSpace: "Search space",
  loopView: "Loop view",
  stageGraph: "Stage graph",
  hotspots: "Hotspots",
  model: "Model",
};

/** The views a Model panel row opens for its task (`openTaskView`). */
export const TASK_VIEWS = ["searchSpace", "loopView", "code"] as const;
export type TaskView = (typeof TASK_VIEWS)[number];

/** What a panel keeps across reloads (`vscode.setState`, and the serializer's state). */
export interface PanelState {
  kind: PanelKind;
  args: ViewArgs;
  /** Selected honeycomb cell, if any. */
  cell?: number | null;
}

// ------------------------------------------------------------------------- host -> webview

/** A payload to draw (the server's JSON, exactly as received). */
export interface ShowMessage {
  type: "show";
  kind: PanelKind;
  args: ViewArgs;
  payload: unknown;
  /** Runs of the same function, newest first, for the run picker. */
  runs?: RunSummary[];
  /** A second payload some panels draw next to the first (e.g. principles with the search space). */
  extra?: unknown;
  /** The payload's measurement differs from the one this panel kind last showed for the run (ids). */
  measurementChange?: { from: string; to: string };
  /** The run now shows a newer measurement than this payload (the panel offers Refresh). */
  newer?: MeasurementStamp;
}

export interface LoadingMessage {
  type: "loading";
  message: string;
  /** Seconds since the request started (long work: the panel shows it with a Cancel button). */
  elapsedS?: number;
}

export interface ErrorMessage {
  type: "error";
  message: string;
}

export type HostMessage = ShowMessage | LoadingMessage | ErrorMessage;

// ------------------------------------------------------------------------- webview -> host

/** The webview has loaded and wants its payload. */
export interface ReadyMessage { type: "ready" }
/** Fetch the payload again. */
export interface RefreshMessage { type: "refresh" }
/** Open one candidate's schedule (trace, scheduled TVMScript when the server has it) in an editor. */
export interface OpenCandidateMessage { type: "openCandidate"; run: string; trial: number }
/** Show one candidate's scheduled code beside the source, linked line by line (`asight/code`). */
export interface ShowCandidateCodeMessage { type: "showCandidateCode"; run: string; trial: number }
/** Show two candidates' schedules as a diff. */
export interface CompareCandidatesMessage { type: "compareCandidates"; run: string; trials: [number, number] }
/** Jump to a source range (0-based LSP range). */
export interface RevealSourceMessage {
  type: "revealSource";
  uri?: string;
  file?: string;
  line: number;
  character?: number;
  endLine?: number;
}
/** Show another run of the same function. */
export interface SelectRunMessage { type: "selectRun"; run: string }
/** Open another panel for the same run. */
export interface OpenPanelMessage { type: "openPanel"; kind: PanelKind }
/** Remember the panel's UI state (selected cell). */
export interface StateMessage { type: "state"; cell: number | null }
/** Select every call site of a task in the editor (one selection per call; 0-based inclusive lines). */
export interface RevealCallsMessage {
  type: "revealCalls";
  uri?: string;
  file?: string;
  ranges: { line: number; endLine: number }[];
}
/** Show one task of a Relax run in this panel (the per-task selector). */
export interface SelectTaskMessage { type: "selectTask"; task: string }
/** Open a task's search space, loop view or scheduled code (Model panel buttons). */
export interface OpenTaskViewMessage { type: "openTaskView"; view: TaskView; task: string }
/** Show the whole run again instead of one task (the model's stage graph after a kernel's). */
export interface ClearTaskMessage { type: "clearTask" }
/** Stop waiting for the panel's payload (long work: hotspots, a first profile). */
export interface CancelMessage { type: "cancel" }

export type WebviewMessage = ReadyMessage | RefreshMessage | OpenCandidateMessage | ShowCandidateCodeMessage |
  CompareCandidatesMessage | RevealSourceMessage | SelectRunMessage | OpenPanelMessage | StateMessage |
  RevealCallsMessage | SelectTaskMessage | OpenTaskViewMessage | CancelMessage | ClearTaskMessage;

const isInt = (v: unknown): v is number => typeof v === "number" && Number.isInteger(v) && v >= 0;
const isStr = (v: unknown): v is string => typeof v === "string" && v.length > 0 && v.length < 4096;

/**
 * Validate a message from a webview before acting on it (the webview draws names from user files;
 * the host trusts nothing it sends).
 */
export function parseWebviewMessage(raw: unknown): WebviewMessage | null {
  if (typeof raw !== "object" || raw === null) return null;
  const m = raw as Record<string, unknown>;
  switch (m.type) {
    case "ready":
    case "refresh":
    case "cancel":
    case "clearTask":
      return { type: m.type };
    case "openCandidate":
    case "showCandidateCode":
      return isStr(m.run) && isInt(m.trial) ? { type: m.type, run: m.run, trial: m.trial } : null;
    case "compareCandidates": {
      const t = m.trials;
      return isStr(m.run) && Array.isArray(t) && t.length === 2 && isInt(t[0]) && isInt(t[1])
        ? { type: "compareCandidates", run: m.run, trials: [t[0], t[1]] } : null;
    }
    case "revealSource":
      if (!isInt(m.line) || (!isStr(m.uri) && !isStr(m.file))) return null;
      return {
        type: "revealSource", line: m.line,
        ...(isStr(m.uri) ? { uri: m.uri } : {}), ...(isStr(m.file) ? { file: m.file } : {}),
        ...(isInt(m.character) ? { character: m.character } : {}), ...(isInt(m.endLine) ? { endLine: m.endLine } : {}),
      };
    case "selectRun":
      return isStr(m.run) ? { type: "selectRun", run: m.run } : null;
    case "openPanel":
      return (PANEL_KINDS as readonly unknown[]).includes(m.kind) ? { type: "openPanel", kind: m.kind as PanelKind } : null;
    case "state":
      return m.cell === null || isInt(m.cell) ? { type: "state", cell: m.cell as number | null } : null;
    case "revealCalls":
      return parseRevealCalls(m);
    case "selectTask":
      return isStr(m.task) ? { type: "selectTask", task: m.task } : null;
    case "openTaskView":
      return isStr(m.task) && (TASK_VIEWS as readonly unknown[]).includes(m.view)
        ? { type: "openTaskView", view: m.view as TaskView, task: m.task } : null;
    default:
      return null;
  }
}

const MAX_CALLS = 1000;

function parseRevealCalls(m: Record<string, unknown>): RevealCallsMessage | null {
  const ranges = m.ranges;
  if (!Array.isArray(ranges) || ranges.length === 0 || ranges.length > MAX_CALLS) return null;
  if (!isStr(m.uri) && !isStr(m.file)) return null;
  const out: { line: number; endLine: number }[] = [];
  for (const r of ranges as unknown[]) {
    const o = (r ?? {}) as Record<string, unknown>;
    if (!isInt(o.line) || !isInt(o.endLine) || o.endLine < o.line) return null;
    out.push({ line: o.line, endLine: o.endLine });
  }
  return { type: "revealCalls", ranges: out, ...(isStr(m.uri) ? { uri: m.uri } : {}), ...(isStr(m.file) ? { file: m.file } : {}) };
}
