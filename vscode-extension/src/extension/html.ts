/**
 * The HTML shell of every panel: a strict Content-Security-Policy (nothing but the extension's own
 * script and stylesheet, each with a fresh nonce; no inline code, no remote content) and an empty
 * root the webview script fills with DOM nodes. Pure, so the webview tests use the very same shell.
 */
import type { PanelKind } from "../shared/messages";

export interface ShellOptions {
  /** `webview.cspSource` (the origin local resources are served from). */
  cspSource: string;
  nonce: string;
  scriptUri: string;
  styleUri: string;
  kind: PanelKind;
  title: string;
}

const ESCAPES: Record<string, string> = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };

/** Escape text for HTML text and attribute values. */
export function escapeHtml(text: string): string {
  return String(text).replace(/[&<>"']/g, (c) => ESCAPES[c]);
}

/** The policy: default none; script only by nonce; styles from the extension (nonce'd link); images only local/data. */
export function contentSecurityPolicy(cspSource: string, nonce: string): string {
  return [
    "default-src 'none'",
    `img-src ${cspSource} data:`,
    `style-src ${cspSource} 'nonce-${nonce}'`,
    `font-src ${cspSource}`,
    `script-src 'nonce-${nonce}'`,
    "connect-src 'none'",
    "frame-src 'none'",
    "form-action 'none'",
    "base-uri 'none'",
  ].join("; ");
}

export function panelHtml(o: ShellOptions): string {
  const csp = contentSecurityPolicy(o.cspSource, o.nonce);
  return `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="UTF-8">
<meta http-equiv="Content-Security-Policy" content="${escapeHtml(csp)}">
<meta name="viewport" content="width=device-width, initial-scale=1.0">
<link rel="stylesheet" nonce="${escapeHtml(o.nonce)}" href="${escapeHtml(o.styleUri)}">
<title>${escapeHtml(o.title)}</title>
</head>
<body data-kind="${escapeHtml(o.kind)}">
<div id="app" role="main"><p class="status">Loading…</p></div>
<script nonce="${escapeHtml(o.nonce)}" src="${escapeHtml(o.scriptUri)}"></script>
</body>
</html>`;
}

/** A fresh nonce (base64 of 16 random bytes) from a `randomBytes`-like source. */
export function makeNonce(randomBytes: (n: number) => Uint8Array): string {
  const bytes = randomBytes(16);
  let s = "";
  for (const b of bytes) s += String.fromCharCode(b);
  return btoa(s);
}
