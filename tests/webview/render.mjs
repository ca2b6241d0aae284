// Render the ASight panels from payload fixtures in headless Chromium and report DOM facts as JSON.
//   node tests/webview/render.mjs OUT_DIR          (prints {"cases": {...}} on stdout)
// The page is the extension's own panel shell (out/test/html.js: CSP with a nonce) served from
// 127.0.0.1 with the webview bundle (out/webview/main.js + main.css); `acquireVsCodeApi` is a fake
// that records what the webview posts, and payloads arrive as window messages, as in VS Code.
import { createServer } from "node:http";
import { readFileSync, mkdirSync } from "node:fs";
import { createRequire } from "node:module";
import * as path from "node:path";
import { randomBytes } from "node:crypto";

const repo = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..", "..");
const ext = path.join(repo, "vscode-extension");
const require = createRequire(path.join(ext, "package.json"));
const { chromium } = require("playwright-core");
const { panelHtml } = require(path.join(ext, "out", "test", "html.js"));
const outDir = path.resolve(process.argv[2] || path.join(repo, "test-artifacts", "webview"));
mkdirSync(outDir, { recursive: true });
const fixture = (name) => JSON.parse(readFileSync(path.join(ext, "test", "fixtures", `${name}.json`), "utf8"));

// ---- a tiny server: /panel/<kind>.html and the webview bundle
const nonces = {};
const server = createServer((req, res) => {
  const url = new URL(req.url, "http://127.0.0.1");
  const m = /^\/panel\/(\w+)\.html$/.exec(url.pathname);
  if (m) {
    const origin = `http://127.0.0.1:${server.address().port}`;
    const nonce = randomBytes(16).toString("base64");
    nonces[m[1]] = nonce;
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
async function open(kind, payload, { extra, state, theme, runs, args } = {}) {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
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
      payload, extra, runs });
  await page.waitForFunction(() => document.body.dataset.rendered);
  facts.renderMs = Number(await page.evaluate(() => document.body.dataset.renderMs));
  facts.wallMs = Date.now() - t0;
  return { page, facts };
}

async function common(page, facts) {
  return Object.assign(facts, await page.evaluate(() => ({
    pwned: window.__pwned ?? null,
    violations: window.__violations,
    handlerAttrs: document.querySelectorAll("[onerror],[onload],[onclick]").length,
    imgs: document.querySelectorAll("img").length,
    scripts: document.querySelectorAll("script").length,
    text: document.body.innerText,
    state: window.__state ?? null,
    posted: window.__posted,
  })));
}

const cases = {};
async function run(name, fn) {
  try { cases[name] = await fn(); } catch (err) { cases[name] = { error: String(err && err.stack || err) }; }
}

// ---- search space: cells, legend, contours, hover, click, open, compare
await run("searchSpace", async () => {
  const payload = fixture("searchSpace");
  const runs = [{ id: "mbr128", bestUs: 115.5, trialsDone: 40 }, { id: "older", bestUs: 300, trialsDone: 8 }];
  const { page, facts } = await open("searchSpace", payload, { extra: fixture("principles"), runs });
  Object.assign(facts, await page.evaluate(() => ({
    cells: document.querySelectorAll("svg.honeycomb polygon.cell").length,
    contourLines: document.querySelectorAll("svg.honeycomb polyline.contour").length,
    boundary: !!document.querySelector("svg.honeycomb path.boundary"),
    best: !!document.querySelector("svg.honeycomb circle.best"),
    legend: document.querySelector(".legend")?.innerText ?? "",
    categories: document.querySelectorAll(".legend .categories li").length,
    principles: document.querySelectorAll(".principles li").length,
    runOptions: document.querySelectorAll("header select option").length,
    fills: [...document.querySelectorAll("polygon.cell")].slice(0, 3).map((p) => p.getAttribute("fill")),
  })));
  // hover the cell with the most candidates
  const big = payload.cells.reduce((a, c) => (c.count > a.count ? c : a));
  facts.bigCell = { id: big.id, count: big.count };
  await page.hover(`polygon.cell[data-cell="${big.id}"]`);
  await page.waitForSelector(".tooltip:not([hidden])");
  facts.tooltip = await page.innerText(".tooltip");
  await page.screenshot({ path: path.join(outDir, "search-space-hover.png") });
  await page.click(`polygon.cell[data-cell="${big.id}"]`);
  facts.rows = await page.locator(".selection table.candidates tbody tr").count();
  facts.selectedCells = await page.locator("polygon.cell.selected").count();
  facts.firstRow = await page.innerText(".selection table.candidates tbody tr >> nth=0");
  const boxes = page.locator(".selection table.candidates tbody input[type=checkbox]");
  await boxes.nth(0).check();
  facts.compareDisabledAfterOne = await page.locator(".selection button", { hasText: "Compare" }).isDisabled();
  await boxes.nth(1).check();
  await page.locator(".selection button", { hasText: "Compare" }).click();
  await page.locator(".selection button.link", { hasText: "open" }).first().click();
  await page.selectOption("header select", "older");
  await page.selectOption(".colour-by select", "category");
  facts.fillsByCategory = await page.evaluate(() =>
    [...document.querySelectorAll("polygon.cell")].slice(0, 3).map((p) => p.getAttribute("fill")));
  await page.screenshot({ path: path.join(outDir, "search-space.png"), fullPage: true });
  await common(page, facts);
  await page.close();
  return facts;
});

// ---- hostile names everywhere: nothing executes, names show as text
for (const kind of ["searchSpace", "loopView", "stageGraph", "hotspots"]) {
  await run(`${kind}.hostile`, async () => {
    const extra = kind === "searchSpace" ? fixture("principles.hostile") : undefined;
    const { page, facts } = await open(kind, fixture(`${kind}.hostile`), { extra });
    if (kind === "searchSpace") {
      const cell = fixture(`${kind}.hostile`).cells[0];
      await page.hover(`polygon.cell[data-cell="${cell.id}"]`);
      await page.click(`polygon.cell[data-cell="${cell.id}"]`);
      facts.tooltip = await page.innerText(".tooltip");
    }
    await page.waitForTimeout(200); // let any injected handler fire (none should)
    await common(page, facts);
    await page.screenshot({ path: path.join(outDir, `${kind}-hostile.png`), fullPage: true });
    await page.close();
    return facts;
  });
}

// ---- loop view
await run("loopView", async () => {
  const { page, facts } = await open("loopView", fixture("loopView"));
  Object.assign(facts, await page.evaluate(() => ({
    stages: [...document.querySelectorAll("section.stage")].map((s) => s.getAttribute("data-block")),
    bars: document.querySelectorAll("section.stage .bar-row").length,
    strategies: [...new Set([...document.querySelectorAll("section.stage .strategy")].map((s) => s.getAttribute("data-strategy")))],
    widths: [...document.querySelectorAll("section.stage .bar .fill")].slice(0, 3).map((f) => f.style.width),
  })));
  await page.locator("section.stage h2 button.source").first().click();
  await page.screenshot({ path: path.join(outDir, "loop-view.png"), fullPage: true });
  await common(page, facts);
  await page.close();
  return facts;
});

// ---- stage graph
await run("stageGraph", async () => {
  const { page, facts } = await open("stageGraph", fixture("stageGraph"));
  Object.assign(facts, await page.evaluate(() => ({
    nodes: document.querySelectorAll("svg.stage-graph g.node").length,
    blocks: [...document.querySelectorAll("svg.stage-graph g.node.block .node-label")].map((t) => t.textContent),
    edges: document.querySelectorAll("svg.stage-graph g.edge").length,
  })));
  await page.locator("svg.stage-graph g.node.block").first().click();
  await page.screenshot({ path: path.join(outDir, "stage-graph.png"), fullPage: true });
  await common(page, facts);
  await page.close();
  return facts;
});

// ---- hotspots
await run("hotspots", async () => {
  const { page, facts } = await open("hotspots", fixture("hotspots"));
  facts.entries = await page.locator("li.hotspot").evaluateAll((els) => els.map((e) => e.getAttribute("data-name")));
  await page.locator("li.hotspot button.source").first().click();
  await page.screenshot({ path: path.join(outDir, "hotspots.png"), fullPage: true });
  await common(page, facts);
  await page.close();
  return facts;
});

// ---- no run yet
await run("unavailable", async () => {
  const { page, facts } = await open("searchSpace", fixture("unavailable"));
  await common(page, facts);
  await page.close();
  return facts;
});

// ---- theme variables and restored state
await run("themedRestored", async () => {
  const payload = fixture("searchSpace");
  const cell = payload.cells[2].id;
  const { page, facts } = await open("searchSpace", payload, {
    state: { kind: "searchSpace", args: {}, cell },
    theme: { "--vscode-editor-background": "rgb(30, 30, 30)", "--vscode-foreground": "rgb(204, 204, 204)" },
  });
  Object.assign(facts, await page.evaluate(() => ({
    background: getComputedStyle(document.body).backgroundColor,
    color: getComputedStyle(document.body).color,
    selected: [...document.querySelectorAll("polygon.cell.selected")].map((p) => Number(p.getAttribute("data-cell"))),
    rows: document.querySelectorAll(".selection table.candidates tbody tr").length,
  })));
  facts.restoredCell = cell;
  await page.screenshot({ path: path.join(outDir, "search-space-dark.png") });
  await common(page, facts);
  await page.close();
  return facts;
});

await browser.close();
server.close();
process.stdout.write(JSON.stringify({ cases }) + "\n");
