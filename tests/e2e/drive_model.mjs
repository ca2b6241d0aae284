// Drive a real VS Code (code-server) on an imported, tuned model (tests/e2e/conftest.py
// model_code_server): open tiny_relax.py; the "Model" lens opens the Model panel; read its rows;
// click a task of two calls and read the editor's selections (one per call); "ASight: Export Tuned
// Model" from the palette writes the library; a row's "Search space" opens that task alone, with a
// task selector. Prints one JSON line of facts at the end (also on failure, with "error").
import { createRequire } from "node:module";
import * as path from "node:path";

const repo = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..", "..");
const require = createRequire(path.join(repo, "vscode-extension", "package.json"));
const { chromium } = require("playwright-core");

const BASE = process.env.CS_URL;
const FOLDER = process.env.CS_FOLDER;
const SHOTS = process.env.SHOT_DIR || ".";
const t0 = Date.now();
const facts = { steps: {}, pageErrors: [] };
const step = (name, extra = {}) => {
  facts.steps[name] = { t: +((Date.now() - t0) / 1000).toFixed(1), ...extra };
  console.error(`${facts.steps[name].t}s ${name} ${JSON.stringify(extra)}`);
};

const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--disable-sync", "--no-first-run", "--disable-quic"] });
const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
page.on("pageerror", (e) => facts.pageErrors.push(String(e).slice(0, 300)));
const shot = (name) => page.screenshot({ path: path.join(SHOTS, `e2e-model-${name}.png`) });

async function palette(title) {
  await page.keyboard.press("F1");
  await page.locator(".quick-input-widget input").waitFor();
  await page.keyboard.type(title);
  const label = title.replace(/^>?\s*/, "");
  const row = page.locator(".quick-input-list .monaco-list-row")
    .filter({ has: page.locator(".label-name", { hasText: new RegExp(`^${label.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`) }) });
  await row.first().waitFor({ timeout: 20000 });
  await row.first().click();
}

/** Lines of the source editor covered by a selection (Monaco's .selected-text overlays). */
async function selectedLines() {
  const handle = await page.waitForFunction(() => {
    for (const ed of document.querySelectorAll(".monaco-editor")) {
      if (!ed.querySelector(".view-lines")?.textContent.includes("R.dataflow")) continue;
      const tops = new Set();
      for (const d of ed.querySelectorAll(".view-overlays .selected-text")) tops.add(d.parentElement.style.top);
      const lines = [...ed.querySelectorAll(".view-lines .view-line")].filter((l) => tops.has(l.style.top))
        .sort((a, b) => parseFloat(a.style.top) - parseFloat(b.style.top))
        .map((l) => l.textContent.replace(/\u00a0/g, " ").trim());
      const cursors = ed.querySelectorAll(".cursors-layer .cursor").length;
      if (lines.length) return { lines, cursors };
    }
    return false;
  }, null, { timeout: 30000 });
  return handle.jsonValue();
}

try {
  await page.goto(`${BASE}/?folder=${encodeURIComponent(FOLDER)}`);
  await page.locator(".monaco-workbench").waitFor({ timeout: 90000 });
  step("workbench");
  const row = page.locator(".explorer-folders-view .monaco-list-row", { hasText: "tiny_relax.py" });
  await row.waitFor({ timeout: 60000 });
  await row.click();
  await page.locator(".monaco-editor .view-lines", { hasText: "R.dataflow" }).first().waitFor({ timeout: 30000 });
  step("opened");

  // The "Model" lens (the run recorded by the CLI has ended) opens the Model panel.
  const lens = page.locator(".codelens-decoration a", { hasText: /^Model$/ }).first();
  await lens.waitFor({ timeout: 120000 });
  facts.lenses = (await page.locator(".codelens-decoration").first().innerText()).trim();
  step("model lens", { lenses: facts.lenses });
  await lens.click();
  const wv = page.frameLocator("iframe.webview.ready").frameLocator("#active-frame");
  await wv.locator("tr.task-row, .unavailable .message, p.error").first().waitFor({ timeout: 120000 });
  if (!(await wv.locator("tr.task-row").count())) {
    facts.modelMessage = (await wv.locator(".unavailable .message, p.error").first().innerText()).trim();
    throw new Error(`the Model panel shows no rows: ${facts.modelMessage}`);
  }
  facts.headline = (await wv.locator("p.headline").innerText()).trim();
  facts.rows = await wv.locator("tr.task-row").evaluateAll((rows) => rows.map((r) => ({
    task: r.getAttribute("data-task"),
    cells: [...r.querySelectorAll(":scope > td")].slice(1, 8).map((td) => td.textContent.trim()),
    calls: [...r.querySelectorAll("button.call")].map((b) => b.textContent.trim()),
    views: [...r.querySelectorAll("td.task-views button")].map((b) => b.getAttribute("data-view")),
  })));
  step("model panel", { rows: facts.rows.length, headline: facts.headline });
  await shot("panel");

  // Click a task of two calls: both call sites are selected in the editor, each its own lines.
  const twice = facts.rows.find((r) => r.calls.length === 2);
  if (!twice) throw new Error("no task with two calls in the Model panel");
  facts.clickedTask = twice.task;
  await wv.locator(`tr.task-row[data-task="${twice.task}"] button.task`).click();
  const sel = await selectedLines();
  facts.selectedLines = sel.lines;
  facts.cursors = sel.cursors;
  const status = page.locator("#status\\.editor\\.selection");
  facts.selectionStatus = (await status.count()) ? (await status.first().innerText()).trim() : null;
  step("task clicked", { task: twice.task, lines: facts.selectedLines.length, status: facts.selectionStatus });
  await shot("selection");

  // Export from the palette: a progress notification, then the library path and the check.
  await palette("ASight: Export Tuned Model");
  const progress = page.locator(".notification-toast", { hasText: "ASight: exporting" });
  await progress.waitFor({ timeout: 60000 }).then(() => { facts.exportProgress = true; }).catch(() => undefined);
  const done = page.locator(".notification-toast", { hasText: /ASight: wrote|cannot export/ });
  await done.first().waitFor({ timeout: 300000 });
  facts.exportMessage = (await done.first().locator(".notification-list-item-message").innerText()).trim();
  facts.exportButtons = await done.first().locator(".monaco-button, a.monaco-button").allInnerTexts();
  step("exported", { message: facts.exportMessage.slice(0, 200) });
  await shot("exported");

  // A row's "Search space": that task alone, with a task selector naming it.
  const measured = facts.rows.find((r) => r.cells[4] !== "0" && r.cells[4] !== "–") ?? facts.rows[0];
  facts.spaceTask = measured.task;
  await wv.locator(`tr.task-row[data-task="${measured.task}"] button[data-view="searchSpace"]`).click();
  const found = await (async () => {
    const deadline = Date.now() + 150000;
    while (Date.now() < deadline) {
      for (const f of page.frames()) {
        const got = await f.evaluate(() => {
          const s = document.querySelector("select.task-select");
          return s ? { value: s.value, options: [...s.options].map((o) => o.value), title: document.querySelector("h1")?.textContent } : null;
        }).catch(() => null);
        if (got) return got;
      }
      await page.waitForTimeout(500);
    }
    return null;
  })();
  if (!found) throw new Error("no task selector in the search-space panel");
  facts.taskSelector = found;
  step("task selector", found);
  await shot("task-space");

  // "Scheduled code" lens on the Relax file: with the cursor on a call of a measured task, the
  // quick pick offers that task first ("at the cursor"); its kernel opens beside the source and
  // the call's bindings are selected.
  const binding = /#\d+ (\w+)/.exec(measured.calls[0])[1];
  const source = page.locator(".monaco-editor", { has: page.locator(".view-lines", { hasText: "R.dataflow" }) }).first();
  await source.locator(".view-line", { hasText: new RegExp(`^\\s*${binding}:\\sR\\.Tensor`) }).first().click();
  await page.locator(".codelens-decoration a", { hasText: "Scheduled code" }).first().click();
  const first = page.locator(".quick-input-list .monaco-list-row").first();
  await first.waitFor({ timeout: 60000 });
  facts.codePick = (await first.innerText()).replace(/\s+/g, " ").trim();
  facts.codePickTitle = (await page.locator(".quick-input-title").innerText().catch(() => "")).trim();
  step("code task pick", { first: facts.codePick });
  await page.keyboard.press("Enter");
  const codeTab = page.locator(".tabs-container .tab", { hasText: /\.scheduled\.py/ });
  await codeTab.first().waitFor({ timeout: 120000 });
  await page.locator(".monaco-editor .view-lines", { hasText: "T.prim_func" }).first().waitFor({ timeout: 30000 });
  facts.codeTab = (await codeTab.first().innerText()).replace(/\s+/g, "");
  facts.codeSelected = (await selectedLines()).lines;
  step("task code", { tab: facts.codeTab, selected: facts.codeSelected.length });
  await shot("task-code");
} catch (err) {
  facts.error = String(err && err.stack || err).slice(0, 2000);
  await shot("failure").catch(() => undefined);
}
facts.total_s = +((Date.now() - t0) / 1000).toFixed(1);
await browser.close();
process.stdout.write(JSON.stringify(facts) + "\n");
