/** The few LSP base types the shared modules need (no dependency on vscode-languageclient). */
export interface LspPosition {
  line: number;
  character: number;
}

export interface LspRange {
  start: LspPosition;
  end: LspPosition;
}
