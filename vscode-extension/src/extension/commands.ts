/**
 * Palette commands (category "ASight") and the middleware that gives the server's own commands
 * (run from code lenses) the same window behaviour: progress for Tune, panels for the show-commands.
 *
 * The palette uses its own ids (`asight.ui.*`): vscode-languageclient registers the server's
 * command ids (`asight.tune`, ...) itself while the server runs, so contributing them as well would
 * clash and leave the palette entries dead whenever the server is down.
 */
import { execFile } from "node:child_process";
import * as os from "node:os";
import * as path from "node:path";
import * as vscode from "vscode";
import type { ExecuteCommandSignature, Middleware } from "vscode-languageclient/node";
import { formatLatency } from "../shared/format";
import type { PanelKind } from "../shared/messages";
import * as P from "../shared/protocol";
import { pickFunction as pickFunctionAt, type FunctionRef } from "./functions";
import type { CodePayload } from "../shared/codeLinks";
import type { CodeViews } from "./codeView";
import type { PanelManager } from "./panels";
import type { ScheduleDocuments } from "./schedules";
import { currentSettings, errorText, workspaceFolder, type ServerManager } from "./server";
import { resolvePath } from "./settings";
import { spaceChoices } from "./spaces";
import { exportWithProgress, selectCallSites, withTask } from "./models";
import { compareMarkdown, profileText } from "./texts";
import { CANCEL_COMMAND, type TuningUi } from "./tuning";

export const UI_COMMANDS = {
  tune: "asight.ui.tune",
  profile: "asight.ui.profile",
  cancel: CANCEL_COMMAND,
  showSearchSpace: "asight.ui.showSearchSpace",
  showLoopView: "asight.ui.showLoopView",
  showStageGraph: "asight.ui.showStageGraph",
  showHotspots: "asight.ui.showHotspots",
  compareRuns: "asight.ui.compareRuns",
  retuneWithPrinciples: "asight.ui.retuneWithPrinciples",
  applyBestSchedule: "asight.ui.applyBestSchedule",
  openReport: "asight.ui.openReport",
  restartServer: "asight.ui.restartServer",
  showOutput: "asight.ui.showOutput",
  showCode: "asight.ui.showCode",
  compareCandidates: "asight.ui.compareCandidates",
  tuneWithSpace: "asight.ui.tuneWithSpace",
  showModel: "asight.ui.showModel",
  exportModel: "asight.ui.exportModel",
} as const;

export interface Parts {
  server: ServerManager;
  tuning: TuningUi;
  panels: PanelManager;
  schedules: ScheduleDocuments;
  codeViews: CodeViews;
}

const argsOf = (fn: FunctionRef) => ({ uri: fn.uri.toString(), function: fn.id });

/** The middleware hooks for server commands (code lenses go through here). */
export function commandMiddleware(get: () => Parts): Middleware {
  const executeCommand = async (command: string, args: unknown[], next: ExecuteCommandSignature) => {
    const parts = get();
    const arg = (args[0] ?? {}) as P.ViewArgs & P.TuneArgs;
    switch (command) {
      case P.CMD_TUNE:
        return parts.tuning.tune(arg.function ?? arg.space ?? "", async () => (await next(command, args)) as P.CommandResult);
      case P.CMD_SHOW_SEARCH_SPACE:
        return parts.panels.show("searchSpace", arg, await next(command, args));
      case P.CMD_SHOW_LOOP_VIEW:
        return parts.panels.show("loopView", arg, await next(command, args));
      case P.CMD_PROFILE:
        return profileWithProgress(arg.function ?? "", () => next(command, args) as Promise<P.CommandResult>, parts, arg);
      case P.CMD_SHOW_CODE:
        return showCode(parts, arg, (a) => next(command, [a]) as Promise<CodePayload | undefined>);
      case P.CMD_SHOW_MODEL:
        return parts.panels.show("model", arg, await next(command, args));
      case P.CMD_EXPORT_MODEL:
        return exportWithProgress(arg.function ?? "the model", () => next(command, args) as Promise<P.CommandResult>,
          (extra) => next(command, [{ ...arg, ...extra }]) as Promise<P.CommandResult>);
      case P.CMD_APPLY_BEST_SCHEDULE:
        return announceApplied((await next(command, args)) as Record<string, unknown>);
      default:
        return next(command, args);
    }
  };
  return { executeCommand };
}

/**
 * The scheduled code (lens or palette): a Relax run shows one task's kernel (asked for with a
 * quick pick), opened beside the source with the bindings it came from selected.
 */
async function showCode<A extends P.ViewArgs>(parts: Parts, args: A,
  fetch: (a: object) => Promise<CodePayload | undefined>): Promise<CodePayload | undefined> {
  const withKernel = await withTask(parts.server, args);
  if (!withKernel) return undefined;
  const payload = await parts.codeViews.open(await fetch(withKernel), args.uri ?? "");
  await selectCallSites(payload, args.uri);
  return payload;
}

async function profileWithProgress(label: string, run: () => Promise<P.CommandResult>, parts: Parts, args: P.ViewArgs) {
  try {
    const result = await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `ASight: profiling ${label} (baseline and tuned)…` },
      run);
    const pick = await vscode.window.showInformationMessage(`ASight: ${label}: ${profileText(result)}`, "Show Hotspots");
    if (pick) await parts.panels.show("hotspots", args);
    return result;
  } catch (err) {
    void vscode.window.showErrorMessage(errorText(err));
    return undefined;
  }
}

function announceApplied(result: Record<string, unknown> | undefined) {
  if (!result) return result;
  const latency = typeof result.latencyUs === "number" ? ` (${formatLatency(result.latencyUs)})` : "";
  if (result.applied === false) void vscode.window.showWarningMessage("ASight: the best schedule was not applied.");
  else void vscode.window.showInformationMessage(`ASight: applied the best schedule of run ${String(result.run)}${latency}.`);
  return result;
}

export function registerCommands(context: vscode.ExtensionContext, parts: Parts): void {
  const { server, tuning, panels } = parts;
  // Function pickers read the server's document symbols: start it first.
  const pickFunction = async (title: string) => { await server.ensureStarted(); return pickFunctionAt(title); };
  const reg = (id: string, fn: (...a: unknown[]) => unknown) =>
    context.subscriptions.push(vscode.commands.registerCommand(id, async (...a: unknown[]) => {
      try { return await fn(...a); } catch (err) { void vscode.window.showErrorMessage(`ASight: ${errorText(err)}`); }
    }));

  reg(UI_COMMANDS.tune, async () => {
    const fn = await pickFunction("ASight: tune which function?");
    if (!fn) return;
    const s = currentSettings();
    const args: P.TuneArgs = { ...argsOf(fn), trials: s.trials, ...(s.target ? { target: s.target } : {}) };
    await tuning.tune(fn.id, () => server.executeCommand<P.CommandResult>(P.CMD_TUNE, args));
  });
  reg(UI_COMMANDS.profile, async () => {
    const fn = await pickFunction("ASight: profile which function?");
    if (fn) await profileWithProgress(fn.id, () => server.executeCommand<P.CommandResult>(P.CMD_PROFILE, argsOf(fn)), parts, argsOf(fn));
  });
  reg(UI_COMMANDS.cancel, () => tuning.cancel());
  const showPanel = (kind: PanelKind) => async () => {
    const fn = await pickFunction(`ASight: which function?`);
    if (fn) await panels.show(kind, argsOf(fn));
  };
  reg(UI_COMMANDS.showSearchSpace, showPanel("searchSpace"));
  reg(UI_COMMANDS.showLoopView, showPanel("loopView"));
  // A model's "More…" lens (no palette entry: it needs the lens's items).
  reg(P.CLIENT_CMD_MORE, (arg: unknown) => moreActions(arg, panels));
  reg(UI_COMMANDS.showStageGraph, showPanel("stageGraph"));
  reg(UI_COMMANDS.showHotspots, showPanel("hotspots"));
  reg(UI_COMMANDS.compareRuns, () => compareRuns(server));
  reg(UI_COMMANDS.retuneWithPrinciples, () => retuneWithPrinciples(server, tuning));
  reg(UI_COMMANDS.tuneWithSpace, () => tuneWithSpace(server, tuning));
  reg(UI_COMMANDS.applyBestSchedule, async () => {
    const fn = await pickFunction("ASight: apply the best schedule of which function?");
    if (!fn) return;
    const mode = await vscode.window.showQuickPick([
      { label: "Insert a schedule function", description: "the best trace as Python; the source stays as it is", mode: "trace" },
      { label: "Replace with the scheduled TVMScript", description: "the function as TVM scheduled it", mode: "script" },
    ], { title: "ASight: apply the best schedule as…" });
    if (!mode) return;
    announceApplied(await server.executeCommand(P.CMD_APPLY_BEST_SCHEDULE, { ...argsOf(fn), mode: mode.mode }));
  });
  reg(UI_COMMANDS.openReport, () => openReport(server));
  reg(UI_COMMANDS.showCode, async () => {
    const fn = await pickFunction("ASight: generated code of which function?");
    if (!fn) return;
    const level = await vscode.window.showQuickPick(LEVEL_ITEMS, { title: "ASight: which code?" });
    if (!level) return;
    const args = { ...argsOf(fn), level: level.level, ...(level.serial ? { serial: true } : {}) };
    await showCode(parts, args, (a) => server.request<CodePayload>(P.REQ_CODE, a));
  });
  reg(UI_COMMANDS.compareCandidates, async () => {
    const fn = await pickFunction("ASight: compare candidates of which function?");
    if (fn) await compareCandidates(server, parts.codeViews, argsOf(fn));
  });
  reg(UI_COMMANDS.showModel, async () => {
    const fn = await pickFunction("ASight: the model of which Relax function?");
    if (fn) await panels.show("model", argsOf(fn));
  });
  reg(UI_COMMANDS.exportModel, async () => {
    const fn = await pickFunction("ASight: export which tuned model?");
    if (fn) await exportWithProgress(fn.id, () => server.executeCommand<P.CommandResult>(P.CMD_EXPORT_MODEL, argsOf(fn)),
      (extra) => server.executeCommand<P.CommandResult>(P.CMD_EXPORT_MODEL, { ...argsOf(fn), ...extra }));
  });
  reg(UI_COMMANDS.restartServer, () => server.restart());
  reg(UI_COMMANDS.showOutput, () => server.output.show());
}

/** Pick runs of the function at the cursor (or of the whole store). */
async function pickRuns(server: ServerManager, many: boolean, title: string): Promise<P.RunSummary[] | undefined> {
  const editor = vscode.window.activeTextEditor;
  const params = editor?.document.languageId === "python" ? { uri: editor.document.uri.toString() } : {};
  const res = await server.request<P.RunsPayload>(P.REQ_RUNS, params);
  const runs = (res?.runs ?? []).filter((r) => r.id);
  const notes = res?.notes ?? [];
  if (runs.length === 0) {
    if (notes.length) void vscode.window.showWarningMessage(`ASight: no run shown: ${notes[0]}`);
    else void vscode.window.showInformationMessage("ASight: no runs yet. Tune a function first.");
    return undefined;
  }
  if (notes.length) void vscode.window.showWarningMessage(`ASight: ${notes[0]}${notes.length > 1 ? ` (and ${notes.length - 1} more)` : ""}`);
  const items = runs.map((r) => ({
    label: `${r.function ?? "?"} · ${formatLatency(r.bestUs)}`,
    description: `${r.trialsDone ?? 0} trials · ${r.state ?? ""}${r.stale ? " · stale" : ""}`,
    detail: r.id, run: r,
  }));
  if (!many) {
    const one = await vscode.window.showQuickPick(items, { title });
    return one ? [one.run] : undefined;
  }
  const picked = await vscode.window.showQuickPick(items, { title, canPickMany: true });
  return picked?.map((p) => p.run);
}

async function compareRuns(server: ServerManager): Promise<void> {
  const runs = await pickRuns(server, true, "ASight: pick two runs to compare");
  if (!runs) return;
  if (runs.length !== 2) {
    void vscode.window.showWarningMessage("ASight: pick exactly two runs to compare.");
    return;
  }
  const payload = await server.executeCommand<Record<string, unknown>>(P.CMD_COMPARE_RUNS, { runs: runs.map((r) => r.id) });
  const doc = await vscode.workspace.openTextDocument({ language: "markdown", content: compareMarkdown(payload) });
  await vscode.window.showTextDocument(doc, { preview: true });
}

const LEVEL_ITEMS: { label: string; description: string; level: P.CodeLevel; serial?: boolean }[] = [
  { label: "Scheduled TVMScript", description: "the best (or chosen) candidate's trace applied", level: "scheduled" },
  { label: "Lowered TIR", description: "after the default TIR lowering pipeline", level: "lowered" },
  { label: "LLVM IR", description: "the host module, with debug lines", level: "llvm" },
  { label: "Assembly", description: "the host module (parallel loop bodies carry no line info)", level: "asm" },
  { label: "Assembly, serial variant", description: "Parallel dropped, so every loop body is linked", level: "asm", serial: true },
  { label: "CUDA source", description: "a GPU run's kernels, lines linked by the buffer they store", level: "cuda" },
  { label: "PTX", description: "a GPU run's kernels as PTX (needs nvcc or NVRTC), linked through the CUDA lines", level: "ptx" },
];

/** Two runs picked: their best records; one run: two trials of it (empty = its best). */
async function compareCandidates(server: ServerManager, views: CodeViews, fn: { uri: string; function: string }): Promise<void> {
  const runs = await pickRuns(server, true, "ASight: pick one run (two of its trials) or two runs (their best)");
  if (!runs || runs.length === 0 || runs.length > 2 || !runs[0].id) {
    if (runs && runs.length > 2) void vscode.window.showWarningMessage("ASight: pick one or two runs.");
    return;
  }
  if (runs.length === 2) {
    await views.compare({ ...fn, a: { run: runs[0].id! }, b: { run: runs[1].id! } });
    return;
  }
  const trial = async (prompt: string) => {
    const text = await vscode.window.showInputBox({ prompt, placeHolder: "empty = the best record",
      validateInput: (v) => (v === "" || /^\d+$/.test(v) ? undefined : "a trial index (0, 1, …) or empty") });
    return text === undefined ? null : text === "" ? undefined : Number(text);
  };
  const a = await trial("ASight: first candidate (trial index)");
  if (a === null) return;
  const b = await trial("ASight: second candidate (trial index)");
  if (b === null) return;
  await views.compare({ ...fn, a: { run: runs[0].id, candidate: a }, b: { run: runs[0].id, candidate: b } });
}

/** A new run steered by the design principles of a finished run (`asight tune --guided-by`). */
async function retuneWithPrinciples(server: ServerManager, tuning: TuningUi): Promise<void> {
  const runs = await pickRuns(server, false, "ASight: re-tune with the design principles of which run?");
  const run = runs?.[0];
  if (!run?.id || !run.file || !run.function) return;
  const s = currentSettings();
  const args: P.TuneArgs = { uri: vscode.Uri.file(run.file).toString(), function: run.function, guidedBy: run.id,
    trials: Math.max(8, Math.floor((run.trialsDone ?? s.trials) / 2)), ...(s.target ? { target: s.target } : {}) };
  await tuning.tune(run.function, () => server.executeCommand<P.CommandResult>(P.CMD_TUNE, args));
}

/** Tune with a design space function of the active file (`asight tune --space`; docs/spaces.md). */
async function tuneWithSpace(server: ServerManager, tuning: TuningUi): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!editor) {
    void vscode.window.showWarningMessage("ASight: open the file with the design space function first.");
    return;
  }
  await server.ensureStarted();
  const uri = editor.document.uri;
  const lenses = (await vscode.commands.executeCommand<vscode.CodeLens[]>("vscode.executeCodeLensProvider", uri)) ?? [];
  const spaces = spaceChoices(lenses.map((l) => ({ line: l.range.start.line, command: l.command?.command, arguments: l.command?.arguments })));
  if (!spaces.length) {
    void vscode.window.showInformationMessage("ASight: no design space function in this file (a def that takes a schedule and calls sch.sample_*).");
    return;
  }
  const space = spaces.length === 1 ? spaces[0] : await vscode.window.showQuickPick(
    spaces.map((s) => ({ ...s, label: s.name, description: `line ${s.line + 1}` })), { title: "ASight: tune with which design space?" });
  if (!space) return;
  const mode = await vscode.window.showQuickPick([
    { label: `${space.name} alone`, description: "only the schedules this function samples", mode: "alone" as const },
    { label: `${space.name} + default rules`, description: "together with MetaSchedule's own design space", mode: "union" as const },
  ], { title: "ASight: tune with the design space… (runs its code in the tuning job)" });
  if (!mode) return;
  const s = currentSettings();
  const args: P.TuneArgs = { uri: uri.toString(), space: space.name, spaceMode: mode.mode, trials: s.trials,
    ...(s.target ? { target: s.target } : {}) };
  await tuning.tune(space.name, () => server.executeCommand<P.CommandResult>(P.CMD_TUNE, args));
}

/** `asight report FILE --run R -o OUT.html` with the server's interpreter, then open the file. */
async function openReport(server: ServerManager): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!editor || editor.document.uri.scheme !== "file") {
    void vscode.window.showWarningMessage("ASight: open the TVMScript file whose report you want.");
    return;
  }
  const runs = await pickRuns(server, false, "ASight: report of which run?");
  if (!runs?.[0]?.id) return;
  const run = runs[0].id;
  const status = await server.status();
  const out = path.join(status.storeRoot ?? path.join(workspaceFolder() ?? os.tmpdir(), ".asight"), "runs", run, "report.html");
  const python = resolvePath(currentSettings().pythonPath, workspaceFolder(), os.homedir()) || "python3";
  // -I: nothing in the workspace (its cwd) is imported, no PYTHON* variable steers it (docs/sandbox.md)
  const args = ["-I", "-m", "asight_lsp", "report", editor.document.uri.fsPath, "--run", run, "-o", out];
  server.output.info(`report: ${python} ${args.join(" ")}`);
  await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title: "ASight: writing the report…" },
    () => new Promise<void>((resolve, reject) => {
      execFile(python, args, { cwd: workspaceFolder(), timeout: 300_000 }, (err, _stdout, stderr) => {
        if (err) reject(new Error(stderr.trim().split("\n").pop() || err.message)); else resolve();
      });
    }));
  const pick = await vscode.window.showInformationMessage(`ASight: report written to ${out}`, "Open in Browser", "Open as Text");
  if (pick === "Open in Browser") await vscode.env.openExternal(vscode.Uri.file(out));
  if (pick === "Open as Text") await vscode.window.showTextDocument(vscode.Uri.file(out));
}

/** One entry of a "More…" lens (protocol CLIENT_CMD_MORE). */
export interface MoreItem { label: string; detail?: string; command?: string; panel?: PanelKind; argument: P.ViewArgs }

/** The items of a "More…" lens argument that the extension can run (anything else is dropped). */
export function moreItems(arg: unknown): { title: string; items: MoreItem[] } {
  const a = (arg ?? {}) as { title?: unknown; items?: unknown };
  const items = (Array.isArray(a.items) ? a.items : []).filter((i): i is MoreItem => {
    const it = i as Partial<MoreItem> | null;
    return !!it && typeof it.label === "string" && typeof it.argument === "object" && it.argument !== null &&
      ((typeof it.command === "string" && (P.COMMANDS as readonly string[]).includes(it.command)) ||
       (typeof it.panel === "string" && ["stageGraph", "hotspots", "searchSpace", "loopView", "model"].includes(it.panel)));
  });
  return { title: typeof a.title === "string" ? a.title : "ASight", items };
}

async function moreActions(arg: unknown, panels: PanelManager): Promise<void> {
  const { title, items } = moreItems(arg);
  const pick = await vscode.window.showQuickPick(items.map((it) => ({ label: it.label, detail: it.detail, it })), { title });
  if (!pick) return;
  if (pick.it.panel) return panels.show(pick.it.panel, pick.it.argument);
  await vscode.commands.executeCommand(pick.it.command!, pick.it.argument);   // the lens's path (middleware)
}
