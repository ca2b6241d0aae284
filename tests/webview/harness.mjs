// A test page for the ASight webviews: the extension's own panel shell (out/test/html.js, CSP with
// a nonce) served from 127.0.0.1 with the webview bundle, in headless Chromium; a fake
// `acquireVsCodeApi` records what the webview posts; payloads arrive as window messages, as in VS Code.
// Used by tests/webview/render.mjs and bench/webview.mjs.
import { createServer } from "node:http";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import * as path from "node:path";
import { randomBytes } from "node:crypto";

export const repo = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..", "..");
export const ext = path.join(repo, "vscode-extension");
const require = createRequire(path.join(ext, "package.json"));
const { chromium } = require("playwright-core");
const { panelHtml } = require(path.join(ext, "out", "test", "html.js"));

export function fixture(name) {
  return JSON.parse(readFileSync(path.join(ext, "test", "fixtures", `${name}.json`), "utf8"));
}

/** Start the page server and Chromium; returns {open(kind, payload, opts) -> {page, facts}, close()}. */
export async function startHarness() {
  // ---- a tiny server: /panel/<kind>.html and the webview bundle
  const server = createServer((req, res) => {
    const url = new URL(req.url, "http://127.0.0.1");
    const m = /^\/panel\/(\w+)\.html$/.exec(url.pathname);
    if (m) {
      const origin = `http://127.0.0.1:${server.address().port}`;
      const nonce = randomBytes(16).toString("base64");
      res.writeHead(200, { "content-type": "text/html; charset=utf-8" });
      res.end(panelHtml({ cspSource: origin, nonce, scriptUri: `${origin}/webview/main.js`, styleUri: `${origin}/webview/main.css`,
        kind: m[1], title: m[1] }));
      return;
    }
    if (url.pathname === "/favicon.ico") { res.writeHead(204); res.end(); return; }
    const file = { "/webview/main.js": "main.js", "/webview/main.css": "main.css" }[url.pathname];
    if (!file) { res.writeHead(404); res.end(); return; }
    res.writeHead(200, { "content-type": file.endsWith(".js") ? "text/javascript" : "text/css" });
    res.end(readFileSync(path.join(ext, "out", "webview", file)));
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const base = `http://127.0.0.1:${server.address().port}`;
  
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
      "--disable-sync", "--no-first-run", "--disable-quic"] });
  
  /** Open a panel of `kind`, send it `show` with the payload, return the page once drawn. */
  async function open(kind, payload, { extra, state, theme, runs, args, viewport, newer } = {}) {
    const page = await browser.newPage({ viewport: viewport ?? { width: 1280, height: 860 } });
    const facts = { consoleErrors: [], pageErrors: [], dialogs: 0, requests: [] };
    page.on("console", (m) => { if (m.type() === "error") facts.consoleErrors.push(m.text()); });
    page.on("pageerror", (e) => facts.pageErrors.push(String(e)));
    page.on("dialog", (d) => { facts.dialogs++; void d.dismiss(); });
    page.on("request", (r) => facts.requests.push(new URL(r.url()).pathname));
    await page.addInitScript(({ state, theme }) => {
      window.__posted = []; window.__state = state ?? undefined; window.__violations = [];
      window.acquireVsCodeApi = () => ({ postMessage: (m) => window.__posted.push(m), getState: () => window.__state,
        setState: (s) => { window.__state = s; } });
      document.addEventListener("securitypolicyviolation", (e) => window.__violations.push(`${e.violatedDirective} ${e.blockedURI}`));
      if (theme) document.addEventListener("DOMContentLoaded", () => {
        for (const [k, v] of Object.entries(theme)) document.documentElement.style.setProperty(k, v);
      });
    }, { state, theme });
    await page.goto(`${base}/panel/${kind}.html`);
    await page.waitForFunction(() => window.__posted.some((m) => m.type === "ready"));
    const t0 = Date.now();
    await page.evaluate((msg) => window.postMessage(msg, "*"),
      { type: "show", kind, args: args ?? { uri: "file:///ws/fixtures/matmul_bias_relu.py", function: "MatmulBiasRelu.main" },
        payload, extra, runs, ...(newer ? { newer } : {}) });
    await page.waitForFunction(() => document.body.dataset.rendered);
    facts.renderMs = Number(await page.evaluate(() => document.body.dataset.renderMs));
    facts.wallMs = Date.now() - t0;
    return { page, facts };
  }
  return { open, browser, close: async () => { await browser.close(); server.close(); } };
}
