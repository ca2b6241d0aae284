/**
 * The model path in the editor (docs/models.md): the task a Relax code view shows (asked with a
 * quick pick, the task under the cursor first), its call sites selected in the source, and the
 * export of the tuned model (`asight.exportModel`, with progress, the library path, the applied-
 * records check and the load snippet).
 */
import * as vscode from "vscode";
import { callSiteRanges, modelRows, refusalActions, taskAtLine, taskPickItems, type ModelPayload } from "../shared/model";
import * as P from "../shared/protocol";
import { selectCalls } from "./panels";
import { errorText, type ServerManager } from "./server";

/** The run a view argument names (else the function's newest run). */
export async function runOf(server: ServerManager, args: P.ViewArgs): Promise<P.RunSummary | undefined> {
  const res = await server.request<{ runs?: P.RunSummary[] }>(P.REQ_RUNS, args.uri ? { uri: args.uri, function: args.function } : {});
  const runs = (res?.runs ?? []).filter((r) => r.id);
  return args.run ? runs.find((r) => r.id === args.run) : runs[0];
}

/**
 * `args` with the task to show: unchanged for a TIR run or when a task is named; for a Relax run
 * of several tasks a quick pick (the task whose call is under the cursor first). `null` = cancelled.
 */
export async function withTask<A extends P.ViewArgs>(server: ServerManager, args: A): Promise<A | null> {
  if (args.task || !args.uri) return args;
  const run = await runOf(server, args);
  const tasks = run?.kind === "relax" ? run.tasks ?? [] : [];
  if (tasks.length === 0) return args;
  if (tasks.length === 1) return { ...args, run: run!.id, task: tasks[0] };
  const model = await server.request<ModelPayload>(P.REQ_MODEL, { uri: args.uri, function: args.function, run: run!.id })
    .catch(() => undefined);
  const rows = modelRows(P.isUnavailable(model) ? undefined : model);
  const editor = vscode.window.activeTextEditor;
  const cursor = editor?.document.uri.toString() === args.uri ? taskAtLine(rows, editor.selection.active.line) : undefined;
  const pick = await vscode.window.showQuickPick(taskPickItems(tasks, rows, cursor),
    { title: `ASight: which kernel of ${run!.function ?? "the model"} (run ${run!.id})?` });
  return pick ? { ...args, run: run!.id, task: pick.task } : null;
}

/** After a task's code opened: select the bindings it came from in the source (one selection per call). */
export async function selectCallSites(payload: unknown, uri: string | undefined): Promise<void> {
  const p = (payload ?? {}) as { task?: unknown; callSites?: unknown };
  const ranges = callSiteRanges(p.callSites);
  if (!uri || typeof p.task !== "string" || ranges.length === 0) return;
  await selectCalls(uri, undefined, ranges);
  void vscode.window.setStatusBarMessage(
    `ASight: ${p.task}: ${ranges.length} call site${ranges.length === 1 ? "" : "s"} selected (lines ${ranges.map((r) => r.line + 1).join(", ")})`, 10000);
}

export interface ExportData {
  library?: string;
  load?: string;
  check?: { ok?: boolean };
  status?: string;
  applied?: { missing?: string[] };
}

/** Run the same export again with `asight export`'s flags (`tuneMissing`, `allowUntuned`), through the server. */
export type ExportAgain = (extra: { tuneMissing?: number; allowUntuned?: boolean }) => Promise<P.CommandResult>;

/** Run an export (palette or code action) under a progress notification and show its outcome; a refusal
 * (kernels without records) offers to tune them or to export anyway, which run the export again. */
export async function exportWithProgress(label: string, run: () => Promise<P.CommandResult>,
  again?: ExportAgain, title?: string, done?: string): Promise<P.CommandResult | undefined> {
  let result: P.CommandResult;
  try {
    result = await vscode.window.withProgress({ location: vscode.ProgressLocation.Notification,
      title: title ?? `ASight: exporting ${label}: build with the run's records, reload, compare with the untuned build…` }, run);
  } catch (err) {
    void vscode.window.showErrorMessage(errorText(err));
    return undefined;
  }
  void announceExport(label, result, again, done);
  return result;
}

async function announceExport(label: string, result: P.CommandResult, again?: ExportAgain, done?: string): Promise<void> {
  const data = (result.data ?? {}) as ExportData;
  const actions = again ? refusalActions(data) : undefined;
  if (actions) {
    const pick = await vscode.window.showWarningMessage(`ASight: ${result.message ?? "export refused"}`,
      actions.tune.label, actions.anyway.label);
    const chosen = pick === actions.tune.label ? actions.tune : pick === actions.anyway.label ? actions.anyway : undefined;
    if (chosen) await exportWithProgress(label, () => again!(chosen.args), undefined, chosen.progress, chosen.done);
    return;
  }
  const text = `ASight: ${done ? `${done}: ` : ""}${result.message ?? "exported"}`;
  const show = result.status === "ok" ? vscode.window.showInformationMessage : vscode.window.showWarningMessage;
  const buttons = data.library && data.status !== "refused" ? ["Open Load Snippet", "Copy Library Path"] : [];
  const pick = await show(text, ...buttons);
  if (pick === "Open Load Snippet" && data.load) {
    const doc = await vscode.workspace.openTextDocument({ language: "python", content: `${data.load}\n` });
    await vscode.window.showTextDocument(doc, { preview: true, viewColumn: vscode.ViewColumn.Beside });
  } else if (pick === "Copy Library Path" && data.library) {
    await vscode.env.clipboard.writeText(data.library);
  }
}
