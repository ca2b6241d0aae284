/** Which TVMScript function a palette command acts on: the one at the cursor, the only one, or a pick. */
import * as vscode from "vscode";

export interface FunctionRef {
  uri: vscode.Uri;
  /** Stable function id (`Module.func` inside an IRModule class, else `func`). */
  id: string;
  range: vscode.Range;
}

/** Functions of a document, from the server's document symbols. */
export async function documentFunctions(uri: vscode.Uri): Promise<FunctionRef[]> {
  const symbols = await vscode.commands.executeCommand<vscode.DocumentSymbol[] | undefined>(
    "vscode.executeDocumentSymbolProvider", uri);
  const out: FunctionRef[] = [];
  const walk = (nodes: vscode.DocumentSymbol[], prefix: string) => {
    for (const s of nodes ?? []) {
      if (s.kind === vscode.SymbolKind.Function) out.push({ uri, id: prefix + s.name, range: s.range });
      else if (s.kind === vscode.SymbolKind.Module) walk(s.children, `${s.name}.`);
    }
  };
  walk(symbols ?? [], "");
  return out;
}

/** The active TVMScript editor's function at the cursor (or the only one, or one the user picks). */
export async function pickFunction(title: string): Promise<FunctionRef | undefined> {
  const editor = vscode.window.activeTextEditor;
  if (!editor || editor.document.languageId !== "python") {
    void vscode.window.showWarningMessage("ASight: open a TVMScript (Python) file first.");
    return undefined;
  }
  const fns = await documentFunctions(editor.document.uri);
  if (fns.length === 0) {
    void vscode.window.showWarningMessage("ASight: no TVMScript function in this file.");
    return undefined;
  }
  const here = fns.filter((f) => f.range.contains(editor.selection.active));
  if (here.length > 0) return here[here.length - 1];
  if (fns.length === 1) return fns[0];
  const pick = await vscode.window.showQuickPick(fns.map((f) => ({ label: f.id, fn: f })), { title });
  return pick?.fn;
}
