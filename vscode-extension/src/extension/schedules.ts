/**
 * Candidate schedules as read-only editor documents (`asight-schedule:/<run>/trial-<n>.py`) and
 * diffs of two of them. The trace comes straight from the run's MetaSchedule database (TVM-free,
 * see traceText.ts); the store root comes from the server (`asight/status`).
 */
import * as fs from "node:fs/promises";
import * as path from "node:path";
import * as vscode from "vscode";
import type { ServerManager } from "./server";
import { DB_RECORDS, findRecord, scheduleText } from "./records";

export const SCHEME = "asight-schedule";
export function scheduleUri(run: string, trial: number): vscode.Uri {
  return vscode.Uri.from({ scheme: SCHEME, path: `/${run}/trial-${trial}.py` });
}

export class ScheduleDocuments implements vscode.TextDocumentContentProvider, vscode.Disposable {
  private readonly registration: vscode.Disposable;

  constructor(private readonly server: ServerManager) {
    this.registration = vscode.workspace.registerTextDocumentContentProvider(SCHEME, this);
  }

  async provideTextDocumentContent(uri: vscode.Uri): Promise<string> {
    const m = /^\/([^/]+)\/trial-(\d+)\.py$/.exec(uri.path);
    if (!m) return `# not an ASight candidate: ${uri.toString()}`;
    const [run, trial] = [m[1], Number(m[2])];
    const root = (await this.server.status()).storeRoot;
    if (!root) return "# the ASight server did not say where runs are stored";
    const file = path.join(root, "runs", run, DB_RECORDS);
    let text: string;
    try {
      text = await fs.readFile(file, "utf8");
    } catch (err) {
      return `# cannot read ${file}: ${(err as Error).message}`;
    }
    const rec = findRecord(text, trial);
    return rec ? scheduleText(run, rec) : `# run ${run} has no trial ${trial} in ${file}`;
  }

  async open(run: string, trial: number): Promise<void> {
    const doc = await vscode.workspace.openTextDocument(scheduleUri(run, trial));
    await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.Active, preview: true });
  }

  async compare(run: string, a: number, b: number): Promise<void> {
    await vscode.commands.executeCommand("vscode.diff", scheduleUri(run, a), scheduleUri(run, b),
      `ASight: trial ${a} ↔ trial ${b} (${run})`);
  }

  dispose(): void {
    this.registration.dispose();
  }
}
