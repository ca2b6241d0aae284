/**
 * Webview panels (search space, loop view, stage graph, hotspots): one per kind, drawn by the
 * webview bundle from the server's payloads, restored after a reload by a WebviewPanelSerializer,
 * refreshed when a run they show updates.
 */
import * as crypto from "node:crypto";
import * as path from "node:path";
import * as vscode from "vscode";
import {
  parseWebviewMessage, PANEL_KINDS, PANEL_TITLES, VIEW_TYPES, type HostMessage, type PanelKind, type PanelState,
  type WebviewMessage,
} from "../shared/messages";
import { newerMeasurement } from "../shared/measurement";
import * as P from "../shared/protocol";
import { makeNonce, panelHtml } from "./html";
import { cleanArgs, restoreState } from "./panelState";
import { errorText, workspaceFolder, type ServerManager } from "./server";

/** The custom request that draws each panel. */
export const PANEL_REQUESTS: Record<PanelKind, string> = {
  searchSpace: P.REQ_SEARCH_SPACE,
  loopView: P.REQ_LOOP_VIEW,
  stageGraph: P.REQ_STAGE_GRAPH,
  hotspots: P.REQ_HOTSPOTS,
  model: P.REQ_MODEL,
};

/** What the host does for a webview's requests (open schedules, diffs). */
export interface PanelActions {
  openCandidate(run: string, trial: number): Promise<void>;
  /** The candidate's scheduled code beside its source; ``args`` are the panel's (uri, function). */
  showCandidateCode(run: string, trial: number, args: P.ViewArgs): Promise<void>;
  compareCandidates(run: string, a: number, b: number): Promise<void>;
  /** One task's scheduled code (Model panel): ``args`` are the panel's (uri, function, run). */
  showTaskCode(task: string, args: P.ViewArgs): Promise<void>;
}

const REFRESH_MS = 2000;
/** After this long a loading panel shows the seconds waited and a Cancel button. */
const SLOW_MS = 3000;

class Panel {
  last: HostMessage | undefined;
  private timer: NodeJS.Timeout | undefined;
  private lastFetch = 0;
  private fetching: Promise<void> | undefined;
  private cancel: vscode.CancellationTokenSource | undefined;

  constructor(readonly manager: PanelManager, readonly panel: vscode.WebviewPanel, public state: PanelState) {}

  post(msg: HostMessage): void {
    this.last = msg;
    void this.panel.webview.postMessage(msg);
  }

  /** Fetch and draw the payload (one fetch at a time). */
  refresh(payload?: unknown): Promise<void> {
    if (payload !== undefined) {
      this.show(payload, undefined);
      void this.fetchRuns(payload);
      return Promise.resolve();
    }
    this.fetching ??= this.fetch().finally(() => { this.fetching = undefined; });
    return this.fetching;
  }

  /** Refresh at most every REFRESH_MS while a run updates; `now` refreshes at once (a run ended). */
  scheduleRefresh(now: boolean): void {
    if (this.timer) clearTimeout(this.timer);
    const wait = now ? 0 : Math.max(0, REFRESH_MS - (Date.now() - this.lastFetch));
    this.timer = setTimeout(() => { this.timer = undefined; void this.refresh(); }, wait);
  }

  private async fetch(): Promise<void> {
    this.lastFetch = Date.now();
    const { kind, args } = this.state;
    const what = `Loading ${PANEL_TITLES[kind].toLowerCase()}…`;
    if (!this.last || this.last.type !== "show") this.post({ type: "loading", message: what });
    const started = Date.now();
    const cancel = (this.cancel = new vscode.CancellationTokenSource());
    // Long work (hotspots' first profile and graphs, a model's first profile): say how long, offer Cancel.
    const ticker = setInterval(() => {
      const elapsedS = Math.round((Date.now() - started) / 1000);
      if (Date.now() - started >= SLOW_MS) void this.panel.webview.postMessage({ type: "loading", message: what, elapsedS });
    }, 1000);
    try {
      const payload = await this.manager.server.request(PANEL_REQUESTS[kind], args, cancel.token);
      await this.show(payload, await this.manager.runsFor(args));
    } catch (err) {
      const message = cancel.token.isCancellationRequested
        ? `ASight: ${PANEL_TITLES[kind]}: cancelled after ${Math.round((Date.now() - started) / 1000)} s (Refresh starts again)`
        : `ASight: ${PANEL_TITLES[kind]}: ${errorText(err)}`;
      this.post({ type: "error", message });
    } finally {
      clearInterval(ticker);
      cancel.dispose();
      if (this.cancel === cancel) this.cancel = undefined;
    }
  }

  /** The webview's Cancel: stop waiting (the server is told: $/cancelRequest). */
  stopFetching(): void {
    this.cancel?.cancel();
  }

  private async fetchRuns(payload: unknown): Promise<void> {
    const runs = await this.manager.runsFor(this.state.args);
    if (runs) this.show(payload, runs);
  }

  private async show(payload: unknown, runs: P.RunSummary[] | undefined): Promise<void> {
    const { kind, args } = this.state;
    let extra: unknown;
    if (kind === "searchSpace" && !P.isUnavailable(payload)) {
      extra = await this.manager.server.request(P.REQ_PRINCIPLES, args).catch(() => undefined);
    }
    const prev = this.last?.type === "show" ? this.last : undefined;
    const measurementChange = this.manager.noteMeasurement(kind, payload);
    this.post({ type: "show", kind, args, payload, runs: runs ?? prev?.runs, extra, ...(measurementChange ? { measurementChange } : {}) });
    this.panel.title = panelTitle(kind, args);
  }

  /**
   * Does the run show a newer measurement than this panel (a Re-measure, `asight profile --replace`
   * in a terminal, a tune that ended)? Then redraw with the line "a newer measurement … exists" and
   * its Refresh (the panel's numbers never change silently, and never silently stay old). `run`: the
   * run's summary when the caller has it (a runUpdated notification), else asked of the server.
   */
  async checkNewer(run?: P.RunSummary): Promise<void> {
    const shown = this.last?.type === "show" ? this.last : undefined;
    if (!shown || this.fetching) return;
    const id = this.shownRun() ?? this.state.args.run;
    const current = run ?? (await this.manager.runsFor(this.state.args))?.find((r) => !id || r.id === id);
    const newer = newerMeasurement(shown.payload, current);
    if ((newer?.taken ?? null) === (shown.newer?.taken ?? null)) return;
    const { newer: _old, ...rest } = shown;
    this.post(newer ? { ...rest, newer } : rest);
  }

  /** The run id of the payload on show (a panel opened without one shows the newest run). */
  shownRun(): string | undefined {
    const run = this.last?.type === "show" ? (this.last.payload as { run?: unknown } | null)?.run : undefined;
    if (typeof run === "string") return run;                       // Hotspots name the run by its id
    const id = (run as { id?: unknown } | null | undefined)?.id;
    return typeof id === "string" ? id : undefined;
  }

  dispose(): void {
    if (this.timer) clearTimeout(this.timer);
  }
}

export function panelTitle(kind: PanelKind, args: P.ViewArgs): string {
  return `ASight ${PANEL_TITLES[kind]}` + (args.function ? `: ${args.function}` : args.run ? `: ${args.run}` : "") +
    (args.task && kind !== "model" ? ` · ${args.task}` : "");
}

export class PanelManager implements vscode.Disposable {
  private readonly panels = new Map<PanelKind, Panel>();
  /** Per panel kind and run, the measurement it last showed (kept when the panel is closed). */
  private readonly shownMeasurement = new Map<string, string>();
  /** Per panel kind and run, the last change of measurement it showed ({from, to} ids). */
  private readonly changes = new Map<string, { from: string; to: string }>();
  private readonly disposables: vscode.Disposable[] = [];

  constructor(readonly context: vscode.ExtensionContext, readonly server: ServerManager, private readonly actions: PanelActions) {
    for (const kind of PANEL_KINDS) {
      this.disposables.push(vscode.window.registerWebviewPanelSerializer(VIEW_TYPES[kind], {
        deserializeWebviewPanel: async (panel, state: unknown) => {
          const restored = restoreState(kind, state);
          this.adopt(panel, restored);
          await this.server.ensureStarted();
          void this.panels.get(kind)?.refresh();
        },
      }));
    }
  }

  private get root(): vscode.Uri {
    return vscode.Uri.joinPath(this.context.extensionUri, "out", "webview");
  }

  /** Show a panel (creating it), drawing `payload` if given, else fetching it. */
  async show(kind: PanelKind, args: P.ViewArgs, payload?: unknown): Promise<void> {
    let p = this.panels.get(kind);
    const state: PanelState = { kind, args: cleanArgs(args), cell: null };
    if (p) {
      p.state = state;
      p.panel.reveal(undefined, false);
    } else {
      const panel = vscode.window.createWebviewPanel(VIEW_TYPES[kind], panelTitle(kind, args),
        { viewColumn: vscode.ViewColumn.Beside, preserveFocus: false }, this.webviewOptions());
      p = this.adopt(panel, state);
    }
    await p.refresh(payload);
  }

  private webviewOptions(): vscode.WebviewPanelOptions & vscode.WebviewOptions {
    return { enableScripts: true, retainContextWhenHidden: false, localResourceRoots: [this.root], enableCommandUris: false };
  }

  private adopt(panel: vscode.WebviewPanel, state: PanelState): Panel {
    const p = new Panel(this, panel, state);
    this.panels.set(state.kind, p);
    panel.webview.options = { enableScripts: true, localResourceRoots: [this.root], enableCommandUris: false };
    panel.iconPath = vscode.Uri.joinPath(this.context.extensionUri, "media", "icon.svg");
    panel.webview.html = panelHtml({
      cspSource: panel.webview.cspSource,
      nonce: makeNonce((n) => crypto.randomBytes(n)),
      scriptUri: panel.webview.asWebviewUri(vscode.Uri.joinPath(this.root, "main.js")).toString(),
      styleUri: panel.webview.asWebviewUri(vscode.Uri.joinPath(this.root, "main.css")).toString(),
      kind: state.kind,
      title: PANEL_TITLES[state.kind],
    });
    const sub = panel.webview.onDidReceiveMessage((raw) => {
      const msg = parseWebviewMessage(raw);
      if (msg) void this.handle(p, msg);
    });
    // Coming back to a panel: say so when its run shows a newer measurement now (made elsewhere: a terminal).
    const seen = panel.onDidChangeViewState((e) => { if (e.webviewPanel.visible) void p.checkNewer(); });
    panel.onDidDispose(() => {
      seen.dispose();
      sub.dispose();
      p.dispose();
      if (this.panels.get(state.kind) === p) this.panels.delete(state.kind);
    });
    return p;
  }

  private async handle(p: Panel, msg: WebviewMessage): Promise<void> {
    try {
      switch (msg.type) {
        case "ready":
          if (p.last) p.post(p.last);
          return;
        case "refresh":
          return await p.refresh();
        case "cancel":
          return p.stopFetching();
        case "clearTask": {
          const { task: _dropped, ...rest } = p.state.args;
          p.state = { ...p.state, args: rest, cell: null };
          return await p.refresh();
        }
        case "selectRun":
          p.state = { ...p.state, args: { ...p.state.args, run: msg.run } };
          return await p.refresh();
        case "openPanel":
          return await this.show(msg.kind, p.state.args);
        case "openCandidate":
          return await this.actions.openCandidate(msg.run, msg.trial);
        case "showCandidateCode":
          return await this.actions.showCandidateCode(msg.run, msg.trial, p.state.args);
        case "compareCandidates":
          return await this.actions.compareCandidates(msg.run, msg.trials[0], msg.trials[1]);
        case "revealSource":
          return await revealSource(msg.uri, msg.file, msg.line, msg.character ?? 0, msg.endLine);
        case "state":
          p.state = { ...p.state, cell: msg.cell };
          return;
        case "selectTask":
          p.state = { ...p.state, args: { ...p.state.args, task: msg.task }, cell: null };
          return await p.refresh();
        case "revealCalls":
          return await selectCalls(msg.uri, msg.file, msg.ranges);
        case "openTaskView": {
          const args = { ...p.state.args, run: p.state.args.run ?? p.shownRun() };
          if (msg.view === "code") return await this.actions.showTaskCode(msg.task, args);
          return await this.show(msg.view, { ...args, task: msg.task });
        }
      }
    } catch (err) {
      void vscode.window.showErrorMessage(`ASight: ${errorText(err)}`);
    }
  }

  /** Remember the measurement a payload shows; the ids when it differs from the one shown before. */
  noteMeasurement(kind: PanelKind, payload: unknown): { from: string; to: string } | undefined {
    const p = (payload ?? {}) as { run?: unknown; measurement?: { id?: unknown } };
    const run = typeof p.run === "string" ? p.run : (p.run as { id?: unknown } | undefined)?.id;
    const id = p.measurement?.id;
    if (typeof run !== "string" || typeof id !== "string") return undefined;
    const key = `${kind}:${run}`;
    const before = this.shownMeasurement.get(key);
    this.shownMeasurement.set(key, id);
    if (before && before !== id) this.changes.set(key, { from: before, to: id });
    // the line stays while that measurement is shown (a redraw or reopening does not hide that it changed)
    const change = this.changes.get(key);
    return change?.to === id ? change : undefined;
  }

  /** Runs of the panel's function, newest first (for the run picker). */
  async runsFor(args: P.ViewArgs): Promise<P.RunSummary[] | undefined> {
    if (!args.uri) return undefined;
    try {
      const res = await this.server.request<{ runs?: P.RunSummary[] }>(P.REQ_RUNS, { uri: args.uri, function: args.function });
      return Array.isArray(res?.runs) ? res.runs : undefined;
    } catch {
      return undefined;
    }
  }

  /** A run changed: refresh the panels that show it (or follow the function's latest run). */
  onRunUpdated(msg: P.RunUpdated): void {
    const run = msg.run;
    if (!run?.id) return;
    const ended = msg.event === "finished" || msg.event === "profiled";
    for (const p of this.panels.values()) {
      const a = p.state.args;
      const same = a.run ? a.run === run.id : (!a.uri || a.uri === msg.uri) && (!a.function || a.function === run.function);
      if (same) p.scheduleRefresh(ended);
      // a panel pinned to another run of the function (or a task's view) still hears of this run's new measurement
      else if (ended && p.shownRun() === run.id) p.scheduleRefresh(true);
    }
  }

  /** The server (re)started: redraw every open panel. */
  refreshAll(): void {
    for (const p of this.panels.values()) void p.refresh();
  }

  get openKinds(): PanelKind[] {
    return [...this.panels.keys()];
  }

  dispose(): void {
    for (const d of this.disposables) d.dispose();
    for (const p of this.panels.values()) p.panel.dispose();
  }
}

/** The document a panel's message names: its URI, else the run's file (maybe relative to the workspace). */
function sourceUri(uri: string | undefined, file: string | undefined): vscode.Uri {
  const ws = workspaceFolder();
  return uri ? vscode.Uri.parse(uri, true) : vscode.Uri.file(path.isAbsolute(file!) || !ws ? file! : path.join(ws, file!));
}

/** Select every call site of a task (one selection per call, whole lines) and reveal the first. */
export async function selectCalls(uri: string | undefined, file: string | undefined,
  ranges: { line: number; endLine: number }[]): Promise<void> {
  const doc = await vscode.workspace.openTextDocument(sourceUri(uri, file));
  const editor = await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.One, preserveFocus: false });
  editor.selections = callSelections(doc, ranges);
  const first = editor.selections[0].active;
  editor.revealRange(new vscode.Range(first, first), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
}

/**
 * Selections over whole lines (clamped to the document), in the order given; each is reversed
 * (cursor at its start) so the editor scrolls to the binding names, not to the ends of long lines.
 */
export function callSelections(doc: vscode.TextDocument, ranges: { line: number; endLine: number }[]): vscode.Selection[] {
  const last = Math.max(0, doc.lineCount - 1);
  return ranges.map((r) => {
    const start = Math.min(r.line, last);
    const end = Math.min(r.endLine, last);
    return new vscode.Selection(end, doc.lineAt(end).range.end.character, start, doc.lineAt(start).firstNonWhitespaceCharacterIndex);
  });
}

export async function revealSource(uri: string | undefined, file: string | undefined, line: number, character: number,
  endLine?: number): Promise<void> {
  // A run records its file as given to `asight tune` (maybe relative to the workspace).
  const ws = workspaceFolder();
  const target = uri ? vscode.Uri.parse(uri, true)
    : vscode.Uri.file(path.isAbsolute(file!) || !ws ? file! : path.join(ws, file!));
  const doc = await vscode.workspace.openTextDocument(target);
  const start = new vscode.Position(line, character);
  const end = endLine !== undefined ? new vscode.Position(endLine, 0) : start;
  const editor = await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.One, preserveFocus: false });
  editor.selection = new vscode.Selection(start, start);
  editor.revealRange(new vscode.Range(start, end), vscode.TextEditorRevealType.InCenterIfOutsideViewport);
}
