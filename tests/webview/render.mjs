// Render the ASight panels from payload fixtures in headless Chromium and report DOM facts as JSON.
//   node tests/webview/render.mjs OUT_DIR          (prints {"cases": {...}} on stdout)
// The page setup (panel shell with its CSP, fake VS Code API) is in harness.mjs.
import { mkdirSync } from "node:fs";
import * as path from "node:path";
import { fixture, repo, startHarness } from "./harness.mjs";

const outDir = path.resolve(process.argv[2] || path.join(repo, "test-artifacts", "webview"));
mkdirSync(outDir, { recursive: true });
const { open, close } = await startHarness();

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
  facts.selectedOutline = await page.evaluate(() => getComputedStyle(document.querySelector("polygon.cell.selected")).outlineStyle);
  facts.firstRow = await page.innerText(".selection table.candidates tbody tr >> nth=0");
  const boxes = page.locator(".selection table.candidates tbody input[type=checkbox]");
  await boxes.nth(0).check();
  facts.compareDisabledAfterOne = await page.locator(".selection button", { hasText: "Compare" }).isDisabled();
  await boxes.nth(1).check();
  await page.locator(".selection button", { hasText: "Compare" }).click();
  await page.locator(".selection button.link", { hasText: "open" }).first().click();
  await page.locator(".selection button.link", { hasText: "code" }).nth(1).click();
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

await close();
process.stdout.write(JSON.stringify({ cases }) + "\n");
