/**
 * ASight for VS Code: starts the language server when a TVMScript file is open, wires the palette
 * commands, tuning progress and the panels.
 */
import * as vscode from "vscode";
import * as P from "../shared/protocol";
import { CodeViews } from "./codeView";
import { commandMiddleware, registerCommands, type Parts } from "./commands";
import { isTvmScript } from "./detect";
import { PanelManager } from "./panels";
import { ScheduleDocuments } from "./schedules";
import { currentSettings, ServerManager, ServerState } from "./server";
import { needsRestart } from "./settings";
import { TuningUi } from "./tuning";

let parts: Parts | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel("ASight", { log: true });
  const server = new ServerManager(output, commandMiddleware(() => parts!));
  const schedules = new ScheduleDocuments(server);
  const codeViews = new CodeViews(server);
  const panels = new PanelManager(context, server, {
    openCandidate: (run, trial) => schedules.open(run, trial),
    showCandidateCode: (run, trial, args) => codeViews.showCandidate(run, trial, args),
    compareCandidates: (run, a, b) => schedules.compare(run, a, b),
    showTaskCode: async (task, args) => { await vscode.commands.executeCommand(P.CMD_SHOW_CODE, { ...args, task }); },
  });
  const tuning = new TuningUi(server, (kind, run) => void panels.show(kind, { run: run.id, function: run.function }));
  parts = { server, tuning, panels, schedules, codeViews };
  context.subscriptions.push(output, server, schedules, panels, tuning, codeViews);
  registerCommands(context, parts);

  server.onDidStartClient((client) => {
    context.subscriptions.push(client.onNotification(P.NOTIFY_RUN_UPDATED, (msg: P.RunUpdated) => {
      if (msg.event !== "profiled") tuning.onRunUpdated(msg); // not a tuning event: no second "tuned" message
      panels.onRunUpdated(msg);
    }));
    panels.refreshAll();
  });
  server.onDidChangeState((state) => {
    if (state === ServerState.Errored || state === ServerState.Stopped) tuning.serverStopped("the language server stopped");
    void vscode.commands.executeCommand("setContext", "asight.serverRunning", state === ServerState.Running);
  });

  let settings = currentSettings();
  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration((e) => {
    if (!e.affectsConfiguration("asight")) return;
    const next = currentSettings();
    const restart = needsRestart(settings, next);
    settings = next;
    if (restart && server.state !== ServerState.Stopped) void server.restart();
    else void server.sendConfiguration(next);
  }));
  context.subscriptions.push(vscode.workspace.onDidGrantWorkspaceTrust(() => void server.grantTrust(currentSettings())));

  // Start the server when a TVMScript document shows up (now or later).
  const consider = (doc: vscode.TextDocument) => {
    if (doc.languageId === "python" && doc.uri.scheme === "file" && server.state === ServerState.Stopped && isTvmScript(doc.getText())) {
      void server.ensureStarted();
    }
  };
  context.subscriptions.push(vscode.workspace.onDidOpenTextDocument(consider));
  vscode.workspace.textDocuments.forEach(consider);
}

export async function deactivate(): Promise<void> {
  await parts?.server.stop();
  parts = undefined;
}
