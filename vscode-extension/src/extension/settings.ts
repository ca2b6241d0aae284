/**
 * The extension's settings (section `asight`) and what they turn into: the server's command line
 * and its `initializationOptions` (keys from the shared protocol). Pure: no `vscode` import.
 */
import * as path from "node:path";
import * as P from "../shared/protocol";

export interface Settings {
  /** Interpreter that runs `python -I -m asight_lsp serve --stdio` (empty: `python3`). */
  pythonPath: string;
  /** Interpreter of the TVM worker and tuning jobs (empty: the server's own). */
  workerPythonPath: string;
  /** Default tuning target (empty: host CPU). */
  target: string;
  /** Default trial budget of Tune. */
  trials: number;
  /** Where runs are stored (empty: `<workspace>/.asight`); relative paths are resolved in the workspace. */
  workDir: string;
  /** Server features to switch off (protocol FEATURES). */
  disabledFeatures: string[];
  /** Debounce of TVM diagnostics while typing. */
  diagnosticsDelayMs: number;
  /** Extra environment variables for the server. */
  serverEnv: Record<string, string>;
  /** GPU: seconds of Nsight Compute counters after each tuning (0: none; docs/gpu.md). */
  countersBudgetSeconds: number;
  /** Time budget of Tune in minutes (0: the trial budget alone); when set it replaces `trials`. */
  tuneMinutes: number;
}

export const DEFAULTS: Settings = {
  pythonPath: "", workerPythonPath: "", target: "", trials: 64, workDir: "", disabledFeatures: [],
  diagnosticsDelayMs: 300, serverEnv: {}, countersBudgetSeconds: 0, tuneMinutes: 0,
};

/** Read settings through a `get(key)` accessor (VS Code's `WorkspaceConfiguration.get`), with defaults and type checks. */
export function readSettings(get: (key: string) => unknown): Settings {
  const str = (k: keyof Settings) => { const v = get(k); return typeof v === "string" ? v.trim() : DEFAULTS[k] as string; };
  const num = (k: keyof Settings) => {
    const v = get(k);
    return typeof v === "number" && Number.isFinite(v) && v >= 0 ? Math.floor(v) : DEFAULTS[k] as number;
  };
  const features = get("disabledFeatures");
  const env = get("serverEnv");
  return {
    pythonPath: str("pythonPath"), workerPythonPath: str("workerPythonPath"), target: str("target"),
    trials: Math.max(1, num("trials")), workDir: str("workDir"),
    disabledFeatures: Array.isArray(features) ? features.filter((f): f is string => typeof f === "string") : [],
    diagnosticsDelayMs: num("diagnosticsDelayMs"),
    serverEnv: env && typeof env === "object" && !Array.isArray(env)
      ? Object.fromEntries(Object.entries(env as Record<string, unknown>).filter(([, v]) => typeof v === "string")) as Record<string, string>
      : {},
    countersBudgetSeconds: num("countersBudgetSeconds"),
    tuneMinutes: minutes(get("tuneMinutes")),
  };
}

/** A time budget in minutes (fractions kept: 0.5 is 30 s); anything else is 0 (off). */
function minutes(v: unknown): number {
  return typeof v === "number" && Number.isFinite(v) && v > 0 ? v : 0;
}

/** Substitute `${workspaceFolder}` and `~`, and resolve a relative path against the workspace. */
export function resolvePath(value: string, workspace: string | undefined, home?: string): string {
  if (!value) return value;
  let v = value.replace(/\$\{workspaceFolder\}/g, workspace ?? "");
  if (home && (v === "~" || v.startsWith("~/"))) v = path.join(home, v.slice(1));
  if (!path.isAbsolute(v) && workspace && (v.includes("/") || v.includes(path.sep) || v.startsWith("."))) {
    v = path.resolve(workspace, v);
  }
  return v;
}

export interface ServerCommand {
  command: string;
  args: string[];
  env: Record<string, string>;
}

/** The command line of the language server: `-I` (isolated), so that nothing in the workspace, its cwd, is
 * imported by the server (a `msgpack.py` beside the user's files) and no `PYTHON*` variable steers it;
 * asight_lsp must be installed in that interpreter (docs/sandbox.md, import path). */
export function serverCommand(s: Settings, workspace: string | undefined, home?: string): ServerCommand {
  const python = resolvePath(s.pythonPath, workspace, home) || "python3";
  return { command: python, args: ["-I", "-m", "asight_lsp", "serve", "--stdio"], env: { ...s.serverEnv } };
}

/** `initializationOptions` (and the `asight` configuration the server is told about later). */
export function initializationOptions(s: Settings, trusted: boolean, workspace: string | undefined,
  home?: string): Record<string, unknown> {
  const store = s.workDir ? resolvePath(s.workDir, workspace, home) : "";
  const storeRoot = store && workspace && !path.isAbsolute(store) ? path.resolve(workspace, store) : store;
  return {
    [P.OPT_TRUSTED]: trusted,
    [P.OPT_STORE_ROOT]: storeRoot || null,
    [P.OPT_WORKER_PYTHON]: resolvePath(s.workerPythonPath, workspace, home) || null,
    [P.OPT_TARGET]: s.target || null,
    [P.OPT_TRIALS]: s.trials,
    [P.OPT_DISABLED_FEATURES]: s.disabledFeatures,
    [P.OPT_DIAGNOSTICS_DELAY_MS]: s.diagnosticsDelayMs,
    [P.OPT_COUNTERS_BUDGET]: s.countersBudgetSeconds || null,
    [P.OPT_TUNE_MINUTES]: s.tuneMinutes || null,
  };
}

/** Does a settings change need a server restart (interpreter, environment, or features registered at start)? */
export function needsRestart(a: Settings, b: Settings): boolean {
  return a.pythonPath !== b.pythonPath || JSON.stringify(a.serverEnv) !== JSON.stringify(b.serverEnv) ||
    JSON.stringify(a.disabledFeatures) !== JSON.stringify(b.disabledFeatures);
}
