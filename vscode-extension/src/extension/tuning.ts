/**
 * Tuning in the window: a cancellable progress notification per run (cancel is forwarded to the
 * server as `asight.cancel`), a status-bar item while any run is live (click: cancel), and a
 * message with the result when the run ends.
 */
import * as vscode from "vscode";
import * as P from "../shared/protocol";
import { progressPercent, progressText, resultText, RunTracker, statusBarText } from "./runTracker";
import { errorText, type ServerManager } from "./server";

export const CANCEL_COMMAND = "asight.ui.cancel";

export class TuningUi implements vscode.Disposable {
  readonly tracker = new RunTracker();
  private readonly item: vscode.StatusBarItem;
  private readonly disposables: vscode.Disposable[] = [];
  /** Runs that already have a progress notification in this window. */
  private readonly shown = new Set<string>();
  /** Fires when a run ends (panels refresh). */
  private readonly endEmitter = new vscode.EventEmitter<P.RunSummary>();
  readonly onDidEndRun = this.endEmitter.event;

  constructor(private readonly server: ServerManager, private readonly open: (kind: "searchSpace", run: P.RunSummary) => void) {
    this.item = vscode.window.createStatusBarItem("asight.tuning", vscode.StatusBarAlignment.Left, 10);
    this.item.name = "ASight tuning";
    this.item.command = CANCEL_COMMAND;
    this.disposables.push(this.item, this.endEmitter, this.tracker.onUpdate((t) => {
      this.refreshStatusBar();
      if (t.finished) this.endEmitter.fire(t.run);
    }));
  }

  /** Feed one `asight/runUpdated`; a run started elsewhere (a code lens, another window) gets a notification too. */
  onRunUpdated(msg: P.RunUpdated): void {
    const t = this.tracker.update(msg);
    if (t && !t.finished && !this.shown.has(t.run.id!)) void this.follow(t.run.id!, t.run);
  }

  private refreshStatusBar(): void {
    const s = statusBarText(this.tracker.live());
    if (!s) { this.item.hide(); return; }
    this.item.text = s.text;
    this.item.tooltip = s.tooltip;
    this.item.show();
  }

  /**
   * Start tuning through `start` (the server's `asight.tune`, which answers as soon as the job
   * runs) and follow the run until it ends.
   */
  async tune(label: string, start: () => Promise<P.CommandResult | undefined>): Promise<P.CommandResult | undefined> {
    let result: P.CommandResult | undefined;
    try {
      result = await vscode.window.withProgress(
        { location: vscode.ProgressLocation.Window, title: `ASight: starting to tune ${label}` },
        () => start());
    } catch (err) {
      void vscode.window.showErrorMessage(errorText(err));
      return undefined;
    }
    const run = result?.run;
    if (!run?.id) {
      if (result?.message) void vscode.window.showWarningMessage(result.message);
      return result;
    }
    this.tracker.update({ event: result?.status === "started" ? "started" : "finished", run });
    if (!this.shown.has(run.id)) void this.follow(run.id, run);
    return result;
  }

  /** A cancellable notification that follows one run until it ends. */
  private follow(id: string, run: P.RunSummary): Thenable<void> {
    this.shown.add(id);
    return vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: `ASight: tuning ${run.function ?? id}`, cancellable: true },
      async (progress, token) => {
        let percent = 0;
        const report = (r: P.RunSummary) => {
          const p = progressPercent(r);
          progress.report({ message: progressText(r), increment: Math.max(0, p - percent) });
          percent = Math.max(percent, p);
        };
        report(this.tracker.get(id)?.run ?? run);
        const sub = this.tracker.onUpdate((t) => { if (t.run.id === id && !t.finished) report(t.run); });
        token.onCancellationRequested(() => { void this.cancel(id); });
        try {
          const end = await this.tracker.finished(id);
          this.announce(end.run);
        } finally {
          sub.dispose();
          this.shown.delete(id);
        }
      });
  }

  private announce(run: P.RunSummary): void {
    const { text, level } = resultText(run);
    const buttons = run.state === "done" || (run.trialsDone ?? 0) > 0 ? ["Show Search Space"] : [];
    const show = level === "info" ? vscode.window.showInformationMessage
      : level === "warning" ? vscode.window.showWarningMessage : vscode.window.showErrorMessage;
    void show(text, ...buttons).then((pick) => { if (pick) this.open("searchSpace", run); });
  }

  /** Cancel one run, or every live run when `id` is undefined (asks which when several). */
  async cancel(id?: string): Promise<void> {
    let target = id;
    if (!target) {
      const live = this.tracker.live();
      if (live.length > 1) {
        const pick = await vscode.window.showQuickPick(
          [{ label: "All runs", id: undefined as string | undefined },
            ...live.map((t) => ({ label: t.run.function ?? t.run.id!, description: progressText(t.run), id: t.run.id }))],
          { title: "ASight: cancel which run?" });
        if (!pick) return;
        target = pick.id;
      } else {
        target = live[0]?.run.id;
      }
    }
    try {
      await this.server.executeCommand(P.CMD_CANCEL, target ? { run: target } : {});
    } catch (err) {
      void vscode.window.showErrorMessage(`ASight: cancel failed: ${errorText(err)}`);
    }
  }

  /** The server went away: close the notifications of its runs. */
  serverStopped(reason: string): void {
    this.tracker.abandonAll(reason);
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
  }
}
