/**
 * The code view: a function's generated code (scheduled TVMScript, lowered TIR, LLVM IR, assembly)
 * as a read-only `asight-code:` document beside the source, linked both ways like Compiler
 * Explorer. Each linked source line and the generated lines from it share a colour band; the cursor
 * (or a hover) on a line of either editor highlights its peers in the other; generated lines show
 * their source block's measured latency share as after-text, and the header of a block the trace
 * derived from a source block its derivation ("← sum — rfactor partial, init"); the hover names it
 * too. Two candidates compare in `vscode.diff`.
 */
import * as vscode from "vscode";
import { ACTIVE_COLOUR, BAND_COLOURS, codePath, derivationMarks, diffSummary, generatedHover, LinkIndex, shareLabel,
  type CodeDiffPayload, type CodePayload } from "../shared/codeLinks";
import * as P from "../shared/protocol";
import type { ServerManager } from "./server";

export const CODE_SCHEME = "asight-code";

export interface CodeArgs {
  uri: string;
  function?: string;
  run?: string;
  candidate?: number;
  level?: P.CodeLevel;
  task?: string; // a Relax run's kernel (docs/models.md)
  serial?: boolean; // drop the schedule's Parallel instructions (assembly of parallel loops has no line info)
}

interface View {
  payload: CodePayload;
  index: LinkIndex;
  source: string; // the source document's URI
}

const lines = (numbers: number[]) => numbers.map((n) => new vscode.Range(n, 0, n, 0));

export class CodeViews implements vscode.TextDocumentContentProvider, vscode.HoverProvider, vscode.Disposable {
  private readonly views = new Map<string, View>();
  private readonly texts = new Map<string, string>();
  private readonly changed = new vscode.EventEmitter<vscode.Uri>();
  readonly onDidChange = this.changed.event;
  private readonly bands = BAND_COLOURS.map((c) =>
    vscode.window.createTextEditorDecorationType({ backgroundColor: c, isWholeLine: true }));
  private readonly active = vscode.window.createTextEditorDecorationType({
    backgroundColor: ACTIVE_COLOUR, isWholeLine: true, overviewRulerColor: ACTIVE_COLOUR,
    overviewRulerLane: vscode.OverviewRulerLane.Center });
  private readonly share = vscode.window.createTextEditorDecorationType({
    after: { color: new vscode.ThemeColor("editorCodeLens.foreground"), margin: "0 0 0 2em" } });
  private readonly disposables: vscode.Disposable[] = [];

  constructor(private readonly server: ServerManager) {
    this.disposables.push(
      vscode.workspace.registerTextDocumentContentProvider(CODE_SCHEME, this),
      vscode.languages.registerHoverProvider([{ scheme: CODE_SCHEME }, { scheme: "file", language: "python" }], this),
      vscode.window.onDidChangeVisibleTextEditors(() => this.decorateAll()),
      vscode.window.onDidChangeTextEditorSelection((e) => this.follow(e.textEditor, e.selections[0].active.line)),
      vscode.workspace.onDidChangeTextDocument((e) => this.sourceEdited(e)),
    );
  }

  provideTextDocumentContent(uri: vscode.Uri): string {
    return this.texts.get(uri.toString()) ?? this.views.get(uri.toString())?.payload.text
      ?? "# this ASight code view is gone; open it again (ASight: Show Scheduled Code)";
  }

  /** Ask the server for the code (`asight/code`) and open it beside the source. */
  async show(args: CodeArgs): Promise<CodePayload | undefined> {
    const payload = await this.server.request<CodePayload>(P.REQ_CODE, args);
    return this.open(payload, args.uri);
  }

  /**
   * One candidate of a run (the search-space panel's "code"): the panel knows the run, and the
   * source file when it was opened from an editor; otherwise the run's summary names the file.
   */
  async showCandidate(run: string, trial: number, args: { uri?: string; function?: string }): Promise<void> {
    let { uri, function: fn } = args;
    if (!uri || !fn) {
      const res = await this.server.request<{ runs?: P.RunSummary[] }>(P.REQ_RUNS, {});
      const summary = res?.runs?.find((r) => r.id === run);
      if (!summary?.file) {
        void vscode.window.showWarningMessage(`ASight: run ${run} does not say which file it tuned`);
        return;
      }
      uri = uri ?? vscode.Uri.file(summary.file).toString();
      fn = fn ?? summary.function;
    }
    await this.show({ uri, function: fn, run, candidate: trial });
  }

  /** Open a payload the server returned (also from the `asight.showCode` lens). */
  async open(payload: CodePayload | undefined, source: string): Promise<CodePayload | undefined> {
    if (!payload || P.isUnavailable(payload) || typeof payload.text !== "string") {
      void vscode.window.showWarningMessage(`ASight: no code to show: ${payload?.message ?? "the server sent nothing"}`);
      return payload;
    }
    const uri = vscode.Uri.from({ scheme: CODE_SCHEME, path: codePath(payload) });
    this.views.set(uri.toString(), { payload, index: new LinkIndex(payload.links ?? []), source });
    this.changed.fire(uri);
    const doc = await vscode.workspace.openTextDocument(uri);
    await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.Beside, preview: false, preserveFocus: true });
    this.decorateAll();
    if (payload.note) void vscode.window.setStatusBarMessage(`ASight: ${payload.note}`, 8000);
    return payload;
  }

  /** Two candidates side by side (`asight/codeDiff`): scheduled code in `vscode.diff`, decisions in a message. */
  async compare(args: { uri: string; function?: string; a: { run: string; candidate?: number }; b: { run: string; candidate?: number } }) {
    const diff = await this.server.request<CodeDiffPayload>(P.REQ_CODE_DIFF, args);
    if (!diff || P.isUnavailable(diff) || !diff.sides || diff.sides.length !== 2) {
      void vscode.window.showWarningMessage(`ASight: cannot compare: ${diff?.message ?? "no answer"}`);
      return diff;
    }
    const [left, right] = diff.sides.map((side, k) => {
      const uri = vscode.Uri.from({ scheme: CODE_SCHEME, path: `/diff/${k}/${(side.label ?? `side ${k}`).replace(/[^A-Za-z0-9_.-]+/g, "_")}.py` });
      this.texts.set(uri.toString(), side.text ?? "");
      this.changed.fire(uri);
      return uri;
    });
    const summary = diffSummary(diff);
    await vscode.commands.executeCommand("vscode.diff", left, right,
      `ASight: ${diff.sides[0].label} ↔ ${diff.sides[1].label}`);
    void vscode.window.showInformationMessage(`ASight: ${diff.function}: ${summary}`);
    return diff;
  }

  /** Links point at the source as it was: an edit of the source unlinks its views (open them again). */
  private sourceEdited(e: vscode.TextDocumentChangeEvent): void {
    const key = e.document.uri.toString();
    if (e.contentChanges.length === 0) return;
    const stale = [...this.views].filter(([, v]) => v.source === key).map(([uri]) => uri);
    if (stale.length === 0) return;
    stale.forEach((uri) => this.views.delete(uri));
    this.decorateAll(new Set([key, ...stale]));
    void vscode.window.setStatusBarMessage("ASight: the source changed; open the code view again for current links", 6000);
  }

  provideHover(doc: vscode.TextDocument, pos: vscode.Position): vscode.Hover | undefined {
    const editor = vscode.window.visibleTextEditors.find((e) => e.document === doc);
    const text = this.follow(editor, pos.line);
    return text ? new vscode.Hover(text) : undefined;
  }

  /** Highlight the peers of `line` of `editor` in the linked editors; returns a hover text. */
  private follow(editor: vscode.TextEditor | undefined, line: number): string | undefined {
    if (!editor) return undefined;
    const key = editor.document.uri.toString();
    const own = this.views.get(key);
    const pairs = own ? [[key, own] as const] : [...this.views].filter(([, v]) => v.source === key);
    if (pairs.length === 0) return undefined;
    let hover: string | undefined;
    for (const [uri, view] of pairs) {
      const peers = view.index.peers(own ? "generated" : "source", line);
      this.setActive(uri, peers.generated);
      this.setActive(view.source, peers.source);
      if (peers.source.length && !hover) {
        hover = own ? generatedHover(peers.source[0], view.index.link(line))
          : `${peers.generated.length} ${view.payload.level ?? "generated"} line${peers.generated.length === 1 ? "" : "s"}: ${peers.generated.slice(0, 8).map((n) => n + 1).join(", ")}${peers.generated.length > 8 ? ", …" : ""}`;
      }
    }
    return hover;
  }

  private setActive(uri: string, numbers: number[]): void {
    for (const editor of vscode.window.visibleTextEditors) {
      if (editor.document.uri.toString() === uri) editor.setDecorations(this.active, lines(numbers));
    }
  }

  /** Colour bands (and shares) on every visible source or code editor. */
  private decorateAll(clear: Set<string> = new Set()): void {
    for (const editor of vscode.window.visibleTextEditors) {
      const key = editor.document.uri.toString();
      const own = this.views.get(key);
      const views = own ? [own] : [...this.views.values()].filter((v) => v.source === key);
      if (views.length === 0 && !clear.has(key)) continue;
      if (clear.has(key)) editor.setDecorations(this.active, []);
      const perBand: number[][] = BAND_COLOURS.map(() => []);
      const shares: vscode.DecorationOptions[] = [];
      for (const view of views) {
        for (const src of view.index.sourceLines()) {
          const band = view.index.band(src)!;
          if (own) perBand[band].push(...view.index.generatedOf(src));
          else perBand[band].push(src);
        }
        if (own) {
          const marks = derivationMarks(view.payload);
          for (const line of new Set([...view.index.generatedLines(), ...marks.keys()])) {
            const label = `${marks.get(line) ?? ""}${shareLabel(view.index.link(line))}`;
            if (!label || line >= editor.document.lineCount) continue;
            const end = editor.document.lineAt(line).range.end;
            shares.push({ range: new vscode.Range(end, end), renderOptions: { after: { contentText: label } } });
          }
        }
      }
      this.bands.forEach((type, i) => editor.setDecorations(type, lines(perBand[i])));
      editor.setDecorations(this.share, shares);
    }
  }

  dispose(): void {
    this.disposables.forEach((d) => d.dispose());
    [...this.bands, this.active, this.share].forEach((d) => d.dispose());
    this.changed.dispose();
  }
}
