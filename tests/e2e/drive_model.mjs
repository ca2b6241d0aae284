// Drive a real VS Code (code-server) on an imported, tuned model (tests/e2e/conftest.py
// model_code_server): open tiny_relax.py; its one short lens (its latency: a quick pick); a binding's
// hover; the Model panel (rows, every column visible); a task's calls selected; the model's stage
// graph (kernel calls, no "input R") and a kernel's blocks; Hotspots opened twice (same numbers),
// then after a re-measurement (a new measurement, said so or kept aside); a task's loop view (no
// truncated value, axes named) and search space (task selector); the task's scheduled code (tab
// named after the task); export from the palette; then the same surfaces at 1000×800 and in dark.
// Prints one JSON line of facts at the end (also on failure, with "error").
import * as fs from "node:fs";
import { openSession } from "./session.mjs";

const { page, facts, step, shot, palette, finish, gotoWorkspace } = await openSession({ height: 900, shotPrefix: "e2e-model-", paletteShot: null });
const LIGHT = "Default Light Modern", DARK = "Default Dark Modern";

/** Switch VS Code's colour theme: the user settings file (read when the workbench loads), then, on a loaded
 * workbench that did not follow it (code-server does not apply the file live), as a user does: the palette's
 * "Preferences: Color Theme". Returns the theme the workbench shows ("dark" / "light"). */
async function setTheme(theme) {
  const file = process.env.SETTINGS_FILE;
  const settings = JSON.parse(fs.readFileSync(file, "utf8"));
  settings["workbench.colorTheme"] = theme;
  fs.writeFileSync(file, JSON.stringify(settings, null, 1));
  const dark = theme === DARK;
  const shown = (timeout) => page.waitForFunction((d) => document.querySelector(".monaco-workbench")?.classList.contains(d ? "vs-dark" : "vs"),
    dark, { timeout }).then(() => true).catch(() => false);
  if (await page.locator(".monaco-workbench").count() && !(await shown(3000))) {
    await palette("Preferences: Color Theme");
    const label = theme.replace(/^Default /, "");      // the picker's label ("Dark Modern"); the setting's id has "Default "
    await page.keyboard.type(label);
    await page.locator(".quick-input-list .monaco-list-row", { hasText: label }).first().waitFor({ timeout: 10000 });
    await page.keyboard.press("Enter");
    await shown(15000);
  }
  await page.waitForTimeout(800);
  return page.evaluate(() => document.querySelector(".monaco-workbench")?.classList.contains("vs-dark") ? "dark" : "light");
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

/** Every lens of the model's line, and whether each lies inside the editor's visible text area (left of the minimap). */
async function lensVisibility() {
  return page.evaluate(() => {
    for (const ed of document.querySelectorAll(".monaco-editor")) {
      if (!ed.querySelector(".view-lines")?.textContent.includes("R.dataflow")) continue;
      const guard = ed.querySelector(".overflow-guard")?.getBoundingClientRect() ?? ed.getBoundingClientRect();
      const minimap = ed.querySelector(".minimap");
      const mm = minimap && minimap.getBoundingClientRect().width > 0 ? minimap.getBoundingClientRect().left : guard.right;
      const right = Math.min(guard.right, mm);
      const line = ed.querySelector(".codelens-decoration");
      if (!line) return null;
      const lenses = [...line.querySelectorAll("a")].map((a) => {
        const r = a.getBoundingClientRect();
        return { title: a.textContent.trim(), tooltip: a.title || a.getAttribute("aria-label") || "",
          visible: r.width > 0 && r.left >= guard.left - 1 && r.right <= right + 1 };
      });
      return { editorWidth: Math.round(right - guard.left), lenses };
    }
    return null;
  });
}

/** The frame of the visible webview panel of `kind` (the newest drawn), or null. */
async function panelFrame(kind, timeout = 120000) {
  const deadline = Date.now() + timeout;
  while (Date.now() < deadline) {
    let best = null, bestAt = -1;
    for (const f of page.frames()) {
      const got = await f.evaluate(() => ({ kind: document.body?.dataset?.kind, at: Number(document.body?.dataset?.rendered ?? 0),
        hasApp: !!document.getElementById("app")?.childElementCount })).catch(() => null);
      if (got && got.kind === kind && got.hasApp && got.at >= bestAt) { best = f; bestAt = got.at; }
    }
    if (best) return best;
    await page.waitForTimeout(500);
  }
  return null;
}

/** Wait until a panel of `kind` has drawn a payload after `since` (its body's data-rendered). */
async function drawnAfter(kind, since, selector, timeout = 300000) {
  const deadline = Date.now() + timeout;
  while (Date.now() < deadline) {
    const f = await panelFrame(kind, 5000);
    if (f) {
      const ok = await f.evaluate(([t, sel]) => Number(document.body.dataset.rendered ?? 0) > t && !!document.querySelector(sel),
        [since, selector]).catch(() => false);
      if (ok) return f;
    }
    await page.waitForTimeout(500);
  }
  throw new Error(`the ${kind} panel did not draw ${selector}`);
}

/** An item of the model's lens ("<latency>[ ⚠]": a quick pick) by its exact label. */
async function more(label) {
  await page.locator(".codelens-decoration a", { hasText: /^[\d.]+ (µs|ms|s)( ⚠)?$/ }).first().click();
  const row = page.locator(".quick-input-list .monaco-list-row")
    .filter({ has: page.locator(".label-name", { hasText: new RegExp(`^${label.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`) }) });
  await row.first().waitFor({ timeout: 20000 });
  if (!facts.moreItems) {
    facts.moreItems = (await page.locator(".quick-input-list .monaco-list-row .label-name").allInnerTexts()).map((t) => t.trim());
    facts.moreRows = (await page.locator(".quick-input-list .monaco-list-row").allInnerTexts()).map((t) => t.replace(/\s+/g, " ").trim());
    facts.moreTitle = (await page.locator(".quick-input-widget .quick-input-title").innerText().catch(() => "")).trim();
    await shot("lens-pick");
  }
  await row.first().click();
}

/** Open a panel's tab (title starts with "ASight <Title>"). */
async function focusTab(title) {
  await page.locator(".tabs-container .tab", { hasText: title }).first().click();
  await page.waitForTimeout(700);
}

/** Model panel: every value of every row inside the panel, and no sideways scrolling. */
const modelColumns = (f) => f.evaluate(() => {
  const hidden = [];
  for (const tr of document.querySelectorAll("tr.task-row")) {
    for (const td of tr.querySelectorAll(":scope > td")) {
      if (td.classList.contains("flag") && !td.textContent.trim()) continue;
      const r = td.getBoundingClientRect();
      if (!(r.width > 0 && r.height > 0 && r.left >= -1 && r.right <= window.innerWidth + 1)) {
        hidden.push(`${tr.dataset.task}: ${td.dataset.label ?? td.className ?? "?"}`);
      }
    }
  }
  return { width: window.innerWidth, hidden, overflowX: document.documentElement.scrollWidth - window.innerWidth };
});

/** Loop view: values cut short ("16×…", or wider than their box) and the axis names. */
const loopValues = (f) => f.evaluate(() => {
  const labels = [...document.querySelectorAll(".loop-view .bar-label")];
  const cut = labels.filter((l) => l.textContent.includes("…") || l.scrollWidth > l.clientWidth + 1).map((l) => l.textContent);
  return { values: labels.length, cut, axes: [...document.querySelectorAll(".loop-name")].map((n) => n.textContent.trim()),
    runLine: document.querySelector(".run-line")?.textContent ?? "",
    us: document.body.innerText.match(/.{0,30}\d ?us\b.{0,10}/g) ?? [] };
});

/** Stage graph: its nodes' texts, kernels with their cost line, the header's run line. */
const graphFacts = (f) => f.evaluate(() => ({
  level: document.querySelector(".stage-graph-panel .summary")?.textContent ?? "",
  ioLabels: [...document.querySelectorAll(".node.io .node-label")].map((t) => t.textContent.trim()),
  kernels: [...document.querySelectorAll(".node.kernel")].map((g) => ({ task: g.dataset.task,
    detail: g.querySelector(".node-detail")?.textContent ?? "", cost: g.querySelector(".node-cost")?.textContent ?? "" })),
  blocks: [...document.querySelectorAll(".node.block:not(.kernel) .node-label")].map((t) => t.textContent.trim()),
  runLine: document.querySelector(".run-line")?.textContent ?? "",
  hasInputR: [...document.querySelectorAll("text, li")].some((t) => /^input R$/.test(t.textContent.trim())),
  // sideways scroll of the panel or of the graph's box (issue 23: a model's chain scrolled at 1000×800)
  overflowX: Math.max(document.scrollingElement.scrollWidth - window.innerWidth,
    (() => { const g = document.querySelector(".graph-scroll"); return g ? g.scrollWidth - g.clientWidth : 0; })()),
  us: document.body.innerText.match(/.{0,30}\d ?us\b.{0,10}/g) ?? [],   // "us" a user reads (facts stay small: stdout is a pipe)
}));

/** Where a panel's text has "us" after a figure (µs / ms only), for the check. */
const panelUs = (f) => f.evaluate(() => document.body.innerText.match(/.{0,30}\d ?us\b.{0,10}/g) ?? []).catch(() => ["unread"]);

/** Model panel: its headline, which measurement it shows, whether it says the measurement changed or a newer one exists. */
const modelFacts = (f) => f.evaluate(() => ({
  headline: document.querySelector("p.headline")?.textContent.trim() ?? "",
  measurement: document.querySelector(".measured")?.dataset.measurement ?? null,
  measuredText: document.querySelector(".measured")?.textContent ?? "",
  changed: document.querySelector(".measured .changed")?.textContent ?? null,
  changedFrom: document.querySelector(".measured .changed")?.dataset.from ?? null,
  newer: document.querySelector("header p.newer")?.textContent ?? null,
  rows: [...document.querySelectorAll("tr.task-row")].map((r) => ({ task: r.getAttribute("data-task"),
    cells: [...r.querySelectorAll(":scope > td")].slice(1, 8).map((td) => td.textContent.trim()),
    calls: [...r.querySelectorAll("button.call")].map((b) => b.textContent.trim()) })),
  rendered: Number(document.body.dataset.rendered ?? 0),
  us: document.body.innerText.match(/.{0,30}\d ?us\b.{0,10}/g) ?? [],   // "us" a user reads (facts stay small: stdout is a pipe)
}));

/** The model lens's quick pick rows (label + detail), closed again. */
async function pickRows() {
  await page.locator(".codelens-decoration a", { hasText: /^[\d.]+ (µs|ms|s)( ⚠)?$/ }).first().click();
  await page.locator(".quick-input-list .monaco-list-row").first().waitFor({ timeout: 20000 });
  const rows = (await page.locator(".quick-input-list .monaco-list-row").allInnerTexts()).map((t) => t.replace(/\s+/g, " ").trim());
  await page.keyboard.press("Escape");
  return rows;
}

/** Hotspots: each entry's name and figures, the measurement shown and what the panel says of it. */
const hotspotFacts = (f) => f.evaluate(() => ({
  entries: [...document.querySelectorAll("li.hotspot")].map((li) => `${li.dataset.name} ${li.querySelector(".bar-detail")?.textContent ?? ""}`),
  measurement: document.querySelector(".measured")?.dataset.measurement ?? null,
  measuredText: document.querySelector(".measured")?.textContent ?? "",
  changed: document.querySelector(".measured .changed")?.textContent ?? null,
  changedFrom: document.querySelector(".measured .changed")?.dataset.from ?? null,
  notes: [...document.querySelectorAll("ul.notes li")].map((li) => li.textContent),
  rendered: Number(document.body.dataset.rendered ?? 0),
  us: document.body.innerText.match(/.{0,30}\d ?us\b.{0,10}/g) ?? [],   // "us" a user reads (facts stay small: stdout is a pipe)
}));

/** Check and photograph the editor, Model panel, loop view and stage graph at one size and theme. */
async function surfaces(tag) {
  const out = {};
  // the source as a user comes back to it: scrolled to its top-left (a selection may have scrolled it sideways)
  await page.locator(".monaco-editor .view-lines", { hasText: "R.dataflow" }).first().click({ position: { x: 60, y: 10 } })
    .catch(() => undefined);
  await page.keyboard.press("Control+Home");
  await page.waitForTimeout(300);
  out.lens = await lensVisibility();
  await shot(`${tag}-editor`);
  await focusTab("ASight Model");
  const model = await panelFrame("model", 30000);
  if (model) out.model = { ...(await modelColumns(model)), us: await panelUs(model) };
  await shot(`${tag}-model`);
  await focusTab("ASight Loop view");
  const loops = await panelFrame("loopView", 30000);
  if (loops) out.loopView = await loopValues(loops);
  await shot(`${tag}-loopview`);
  await focusTab("ASight Stage graph");
  const graph = await panelFrame("stageGraph", 30000);
  if (graph) out.stageGraph = await graphFacts(graph);
  await shot(`${tag}-stagegraph`);
  facts.surfaces[tag] = out;
  step(`surfaces ${tag}`, { lens: out.lens?.lenses?.map((l) => `${l.title}${l.visible ? "" : " (HIDDEN)"}`).join(" | "),
    modelHidden: out.model?.hidden?.length, cut: out.loopView?.cut?.length });
}

let failure = null;
facts.surfaces = {};
facts.sectionErrors = {};

/** A part of the drive whose failure is recorded (with a screenshot) without stopping the rest. */
async function section(name, fn) {
  try {
    await fn();
  } catch (err) {
    facts.sectionErrors[name] = String(err && err.stack || err).slice(0, 1500);
    await shot(`failure-${name.replace(/\W+/g, "-")}`).catch(() => undefined);
    await page.keyboard.press("Escape").catch(() => undefined);
  }
}
try {
  await setTheme(LIGHT);
  await gotoWorkspace();
  await page.locator(".monaco-workbench").waitFor({ timeout: 90000 });
  step("workbench");
  const row = page.locator(".explorer-folders-view .monaco-list-row", { hasText: "tiny_relax.py" });
  await row.waitFor({ timeout: 60000 });
  await row.click();
  await page.locator(".monaco-editor .view-lines", { hasText: "R.dataflow" }).first().waitFor({ timeout: 30000 });
  step("opened");

  // The short lens line of a model: one lens, "<latency>[ ⚠]" (a quick pick of the rest).
  const lens = page.locator(".codelens-decoration a", { hasText: /^[\d.]+ (µs|ms|s)( ⚠)?$/ }).first();
  await lens.waitFor({ timeout: 120000 });
  facts.lenses = (await page.locator(".codelens-decoration").first().innerText()).trim();
  facts.lensAlone = await lensVisibility();
  step("model lens", { lenses: facts.lenses });

  // A binding's hover: untuned → tuned, the task's trials and what its schedule did.
  await page.locator(".view-line", { hasText: /^\s*lv4:\sR\.Tensor/ }).first().click({ position: { x: 140, y: 6 } });
  const hover = page.locator(".monaco-hover-content", { hasText: "kernel call" });
  for (let i = 0; i < 5 && !(await hover.isVisible()); i++) {
    await page.keyboard.press("Control+k"); await page.keyboard.press("Control+i");
    await hover.waitFor({ timeout: 6000 }).catch(() => undefined);
  }
  facts.hover = (await hover.innerText().catch(() => "")).trim();
  step("hover", { hover: facts.hover.split("\n").slice(0, 4).join(" / ") });
  await shot("hover");
  await page.keyboard.press("Escape");

  await more("Model");
  let model = await panelFrame("model");
  await model.locator("tr.task-row, .unavailable .message, p.error").first().waitFor({ timeout: 120000 });
  if (!(await model.locator("tr.task-row").count())) {
    facts.modelMessage = (await model.locator(".unavailable .message, p.error").first().innerText()).trim();
    throw new Error(`the Model panel shows no rows: ${facts.modelMessage}`);
  }
  facts.headline = (await model.locator("p.headline").innerText()).trim();
  facts.modelMeasurement = (await model.locator(".measured").innerText().catch(() => "")).trim();
  facts.modelBefore = await modelFacts(model);
  facts.rows = await model.locator("tr.task-row").evaluateAll((rows) => rows.map((r) => ({
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
  await model.locator(`tr.task-row[data-task="${twice.task}"] button.task`).click();
  const sel = await selectedLines();
  facts.selectedLines = sel.lines;
  facts.cursors = sel.cursors;
  step("task clicked", { task: twice.task, lines: facts.selectedLines.length });
  await shot("selection");

  // The model's stage graph (More… → Stage graph): kernel calls; a click opens a kernel's blocks.
  await more("Stage graph");
  let graph = await drawnAfter("stageGraph", 0, ".node.kernel, .unavailable, p.error", 180000);
  facts.stageGraph = await graphFacts(graph);
  step("stage graph", { kernels: facts.stageGraph.kernels.length, io: facts.stageGraph.ioLabels });
  await shot("stagegraph");
  const before = Number(await graph.evaluate(() => document.body.dataset.rendered));
  await graph.locator(`.node.kernel[data-task="${twice.task}"]`).first().click();
  graph = await drawnAfter("stageGraph", before, ".stage-graph-panel .back, .unavailable", 180000);
  facts.kernelGraph = await graphFacts(graph);
  facts.kernelGraph.intro = await graph.evaluate(() => document.querySelector(".stage-graph-panel > p.hint")?.textContent ?? "");
  step("kernel graph", { blocks: facts.kernelGraph.blocks });
  await shot("kernelgraph");
  await graph.locator("button.back").click().catch(() => undefined);
  await drawnAfter("stageGraph", Number(await graph.evaluate(() => document.body.dataset.rendered).catch(() => 0)), ".node.kernel", 120000)
    .catch(() => undefined);

  // Hotspots twice: the same measurement and numbers; after a re-measurement, a new one said so (or kept aside).
  await more("Hotspots");
  let hot = await drawnAfter("hotspots", 0, "li.hotspot, .unavailable, p.error", 300000);
  facts.hotspots1 = await hotspotFacts(hot);
  step("hotspots 1", { measurement: facts.hotspots1.measurement, entries: facts.hotspots1.entries.length });
  await shot("hotspots-1");
  await more("Hotspots");
  hot = await drawnAfter("hotspots", facts.hotspots1.rendered, "li.hotspot, .unavailable, p.error", 300000);
  facts.hotspots2 = await hotspotFacts(hot);
  step("hotspots 2", { measurement: facts.hotspots2.measurement });
  facts.lensBefore = await lensVisibility();
  await more("Re-measure");
  const measured = page.locator(".notification-toast", { hasText: /a new measurement/ });
  await measured.first().waitFor({ timeout: 300000 });
  facts.remeasureMessage = (await measured.first().locator(".notification-list-item-message").innerText()).trim();
  step("re-measured", { message: facts.remeasureMessage.slice(0, 200) });
  await page.keyboard.press("Escape");
  await more("Hotspots");
  hot = await drawnAfter("hotspots", facts.hotspots2.rendered, "li.hotspot, .unavailable, p.error", 300000);
  facts.hotspots3 = await hotspotFacts(hot);
  step("hotspots 3", { measurement: facts.hotspots3.measurement, changed: facts.hotspots3.changed });
  await shot("hotspots-3");

  // The Model panel opened before the Re-measure (a tab beside): it shows the run's new figure (or says a newer
  // one exists), the same as the lens; the lens's tooltip and its pick's Model entry say which measurement.
  await section("model after re-measure", async () => {
    // Both surfaces follow the server's refresh, each when the client redraws it: read each until it shows
    // the measurement the Re-measure made (or, when that one was kept aside, until nothing changes), never a
    // fixed wait that a slow machine outlasts.
    await focusTab("ASight Model");
    const adopted = /the views show it now/.test(facts.remeasureMessage ?? "");
    for (let i = 0; i < 120; i++) {
      const m = await panelFrame("model", 60000);
      await m.locator("tr.task-row").first().waitFor({ timeout: 60000 });
      facts.modelAfter = await modelFacts(m);
      const redrawn = facts.modelAfter.measurement !== facts.modelBefore.measurement || facts.modelAfter.newer;
      if (!adopted || redrawn) break;
      await page.waitForTimeout(500);
    }
    await shot("model-after-remeasure");
    await page.locator(".tabs-container .tab", { hasText: "tiny_relax.py" }).first().click();
    const shownWhen = (lens) => (lens?.lenses?.[0]?.tooltip ?? "").match(/Shows the measurement of (.+?) UTC/)?.[1];
    for (let i = 0; i < 120; i++) {                      // the lens names the measurement the panel shows
      facts.lensAfter = await lensVisibility();
      const when = shownWhen(facts.lensAfter);
      if (when && (facts.modelAfter.newer || facts.modelAfter.measuredText.includes(when))) break;
      await page.waitForTimeout(500);
    }
    facts.pickAfter = await pickRows();
    step("model after re-measure", { headline: facts.modelAfter.headline, lens: facts.lensAfter?.lenses?.[0]?.title,
      changed: facts.modelAfter.changed, newer: facts.modelAfter.newer });
  });

  // A task's loop view and search space from its Model row.
  await focusTab("ASight Model");
  model = await panelFrame("model", 30000);
  const measuredRow = facts.rows.find((r) => r.cells[4] !== "0" && r.cells[4] !== "–") ?? facts.rows[0];
  facts.spaceTask = measuredRow.task;
  await model.locator(`tr.task-row[data-task="${measuredRow.task}"] button[data-view="loopView"]`).click();
  const loops = await drawnAfter("loopView", 0, ".loop-view .bar-row, .unavailable", 180000);
  facts.loopView = await loopValues(loops);
  step("loop view", { values: facts.loopView.values, cut: facts.loopView.cut.length, axes: facts.loopView.axes.slice(0, 8) });
  await shot("loopview");
  await focusTab("ASight Model");
  model = await panelFrame("model", 30000);
  await model.locator(`tr.task-row[data-task="${measuredRow.task}"] button[data-view="searchSpace"]`).click();
  const space = await drawnAfter("searchSpace", 0, "select.task-select, .unavailable", 180000);
  facts.taskSelector = await space.evaluate(() => {
    const s = document.querySelector("select.task-select");
    return s ? { value: s.value, options: [...s.options].map((o) => o.value) } : null;
  });
  if (!facts.taskSelector) throw new Error("no task selector in the search-space panel");
  step("task selector", facts.taskSelector);
  await shot("task-space");

  await section("code and export", async () => {
    // The task's scheduled code (More… → Scheduled code), the task under the cursor offered first.
    const binding = /#\d+ (\w+)/.exec(measuredRow.calls[0])[1];
    const source = page.locator(".monaco-editor", { has: page.locator(".view-lines", { hasText: "R.dataflow" }) }).first();
    // near the line's start: a long line runs under the panel group beside, whose webview takes the click
    await source.locator(".view-line", { hasText: new RegExp(`^\\s*${binding}:\\sR\\.Tensor`) }).first()
      .click({ position: { x: 140, y: 6 } });
    await more("Scheduled code");
    // the task pick replaces the More… pick: wait for its row of the task under the cursor
    await page.locator(".quick-input-list .monaco-list-row", { hasText: /at the cursor|% of kernel time/ }).first()
      .waitFor({ timeout: 60000 });
    const first = page.locator(".quick-input-list .monaco-list-row").first();
    facts.codePick = (await first.innerText()).replace(/\s+/g, " ").trim();
    step("code task pick", { first: facts.codePick });
    await page.keyboard.press("Enter");
    const codeTab = page.locator(".tabs-container .tab", { hasText: /\.scheduled\.py/ });
    await codeTab.first().waitFor({ timeout: 120000 });
    await page.locator(".monaco-editor .view-lines", { hasText: "T.prim_func" }).first().waitFor({ timeout: 30000 });
    facts.codeTab = (await codeTab.first().innerText()).replace(/\s+/g, "");
    facts.codeSelected = (await selectedLines()).lines;
    facts.codeStatus = (await page.locator(".statusbar").innerText().catch(() => "")).replace(/\s+/g, " ");
    step("task code", { tab: facts.codeTab, status: facts.codeStatus.slice(0, 160) });
    await shot("task-code");

    // Export from the palette, from the model's source (as a user would): a progress notification, then the
    // library path and the check (any other outcome is recorded too).
    await page.locator(".tabs-container .tab", { hasText: "tiny_relax.py" }).first().click();
    await palette("ASight: Export Tuned Model");
    const progress = page.locator(".notification-toast", { hasText: "ASight: exporting" });
    await progress.waitFor({ timeout: 60000 }).then(() => { facts.exportProgress = true; }).catch(() => undefined);
    const done = page.locator(".notification-toast")      // its outcome, whatever it is (the test checks it)
      .filter({ hasText: /wrote|export|worker|failed|error/i, hasNotText: /ASight: exporting|a new measurement/ });
    await done.first().waitFor({ timeout: 300000 });
    facts.exportMessage = (await done.first().locator(".notification-list-item-message").innerText()).trim();
    facts.exportButtons = await done.first().locator(".monaco-button, a.monaco-button").allInnerTexts();
    step("exported", { message: facts.exportMessage.slice(0, 200) });
    await shot("exported");
    await page.keyboard.press("Escape");
  });
  // close the code view, whatever the section reached: it opened a third editor group beside the panels
  const codeTab = page.locator(".tabs-container .tab", { hasText: /\.scheduled\.py/ }).first();
  if (await codeTab.count()) {
    await codeTab.hover().catch(() => undefined);
    await codeTab.locator(".codicon-close, .tab-actions .action-label").first().click().catch(() => undefined);
  }

  // Every surface at two window sizes, light and dark (panels beside the source, as a user opens them).
  await page.locator(".tabs-container .tab", { hasText: "tiny_relax.py" }).first().click();
  for (const [w, h, theme] of [[1400, 900, LIGHT], [1000, 800, LIGHT], [1400, 900, DARK], [1000, 800, DARK]]) {
    await page.setViewportSize({ width: w, height: h });
    const tag = `${w}x${h}-${theme === DARK ? "dark" : "light"}`;
    const shownTheme = await setTheme(theme).catch((e) => `not switched: ${String(e).slice(0, 200)}`);
    await page.locator(".tabs-container .tab", { hasText: "tiny_relax.py" }).first().click().catch(() => undefined);
    await section(`surfaces ${tag}`, () => surfaces(tag));
    if (facts.surfaces[tag]) facts.surfaces[tag].theme = shownTheme;
  }
} catch (err) {
  failure = err;
}
await finish(failure);
