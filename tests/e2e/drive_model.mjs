// Drive a real VS Code (code-server) on an imported, tuned model (tests/e2e/conftest.py
// model_code_server): open tiny_relax.py; the "Model" lens opens the Model panel; read its rows;
// click a task of two calls and read the editor's selections (one per call); "ASight: Export Tuned
// Model" from the palette writes the library; a row's "Search space" opens that task alone, with a
// task selector. Prints one JSON line of facts at the end (also on failure, with "error").
import { openSession } from "./session.mjs";

const { page, facts, step, shot, palette, finish, gotoWorkspace } = await openSession({ height: 1000, shotPrefix: "e2e-model-", paletteShot: null });

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

let failure = null;
try {
  await gotoWorkspace();
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
  failure = err;
}
await finish(failure);
