// Drive a real VS Code (code-server) with the ASight extension installed, in headless Chromium.
//   CS_URL=http://127.0.0.1:PORT CS_FOLDER=/path/to/workspace SHOT_DIR=dir node tests/e2e/drive.mjs
// Steps (each logged with its time): open matmul64.py from the explorer; code lenses; a hover on
// the block; "ASight: Tune" from the palette (trials from the settings) with its progress
// notification; the result lens and inlay hints; a killed server comes back with a message (CRASH=1);
// the scheduled code beside the source with linked highlights; the search-space panel from the
// result lens; click a cell and see its candidates; open one. Prints one JSON line of facts at the end (also on failure, with "error").
import { openSession } from "./session.mjs";

const { page, facts, step, shot, palette, finish, gotoWorkspace } = await openSession({ height: 900, shotPrefix: "e2e-", paletteShot: "palette" });

let failure = null;
try {
  await gotoWorkspace();
  await page.locator(".monaco-workbench").waitFor({ timeout: 90000 });
  step("workbench");

  const row = page.locator(".explorer-folders-view .monaco-list-row", { hasText: "matmul64.py" });
  await row.waitFor({ timeout: 60000 });
  await row.click();
  await page.locator(".monaco-editor .view-lines", { hasText: "T.prim_func" }).first().waitFor({ timeout: 30000 });
  step("opened");

  const tune = page.locator(".codelens-decoration a", { hasText: "Tune" }).first();
  await tune.waitFor({ timeout: 90000 });
  facts.lenses = (await page.locator(".codelens-decoration").first().innerText()).trim();
  step("lenses", { lenses: facts.lenses });

  // Hover on the block: cursor on `T.sblock("C")`, then "Show or Focus Hover" (Ctrl+K Ctrl+I).
  await page.locator(".view-line", { hasText: "T.sblock" }).first().click();
  const hover = page.locator(".monaco-hover-content", { hasText: "iterators" });
  for (let i = 0; i < 5 && !(await hover.isVisible()); i++) {
    await page.keyboard.press("Control+k"); await page.keyboard.press("Control+i");
    await hover.waitFor({ timeout: 6000 }).catch(() => undefined);
  }
  await hover.waitFor({ timeout: 20000 });
  facts.hover = (await hover.innerText()).trim();
  step("hover", { hover: facts.hover.split("\n")[0] });
  await shot("editor");
  await page.keyboard.press("Escape");

  // Tune from the palette: a cancellable progress notification, then the result.
  await page.locator(".view-line", { hasText: "T.sblock" }).first().click();
  await palette("ASight: Tune");
  const progress = page.locator(".notification-toast", { hasText: "ASight: tuning matmul64" });
  await progress.waitFor({ timeout: 60000 });
  step("progress shown");
  const trialsSeen = new Set();
  const done = page.locator(".notification-toast", { hasText: /ASight: tuned matmul64|tuning of matmul64 (failed|cancelled)/ });
  const deadline = Date.now() + 240000;
  // Poll with short waits: the progress toast disappears when tuning ends, and an innerText() that
  // waited its default 30 s for it could outlast the result toast (which VS Code hides again).
  while (Date.now() < deadline && !facts.result) {
    if (await done.isVisible()) {
      facts.result = (await done.locator(".notification-list-item-message").innerText({ timeout: 5000 }).catch(() => "")).trim();
      if (facts.result) break;
    }
    const text = await progress.innerText({ timeout: 1000 }).catch(() => "");
    const m = /(\d+)\/(\d+) trials/.exec(text);
    if (m) trialsSeen.add(`${m[1]}/${m[2]}`);
    if (!facts.progressText && m) {
      facts.progressText = (await progress.locator(".notification-list-item-message").innerText({ timeout: 1000 }).catch(() => text)).trim();
      await shot("progress");
    }
    facts.cancelButton = facts.cancelButton || (await progress.locator("a, .monaco-button", { hasText: "Cancel" }).count()) > 0;
    const bar = page.locator("#status\\.asight\\.tuning, .statusbar-item", { hasText: "ASight matmul64" });
    if (!facts.statusBar && (await bar.count()) > 0) facts.statusBar = (await bar.first().innerText({ timeout: 1000 }).catch(() => "")).trim() || undefined;
    await page.waitForTimeout(300);
  }
  facts.trialsSeen = [...trialsSeen];
  if (!facts.result) throw new Error("no 'tuned' notification within 240 s");
  step("tuned", { result: facts.result, trialsSeen: facts.trialsSeen });

  const resultLens = page.locator(".codelens-decoration a", { hasText: /^(?!⟳).*\d+ trials/ }).first();
  await resultLens.waitFor({ timeout: 60000 });
  facts.resultLens = (await resultLens.innerText()).trim();
  step("result lens", { lens: facts.resultLens });

  // Inlay hints of the best schedule (rendered by VS Code as text inside the view lines).
  const hints = await page.waitForFunction(() => {
    const found = [...document.querySelectorAll(".monaco-editor .view-lines span[class*='dyn-rule'], .monaco-editor .view-lines .inlay-hint, .monaco-editor .view-lines span")]
      .map((e) => e.textContent.replace(/\u00a0/g, " ").trim())
      .filter((s) => /^(C|[ijk]|i, j, k)?:?\s?.*(split|parallel|vector|unroll|×|%)/.test(s) && s.length < 160 && !/T\.|\bwith\b|=/.test(s));
    return found.length ? found : false;
  }, null, { timeout: 60000 });
  facts.inlayHints = await hints.jsonValue();
  step("inlay hints", { hints: facts.inlayHints.slice(0, 3) });
  await shot("tuned");

  // Code view: the "Scheduled code" lens opens the best candidate's scheduled TVMScript beside the
  // source; the cursor on the update store of C highlights that line and the generated line(s) from
  // it in both editors (the ACTIVE_COLOUR of src/shared/codeLinks.ts).
  await page.keyboard.press("Escape");
  await page.locator(".codelens-decoration a", { hasText: "Scheduled code" }).first().click();
  const codeTab = page.locator(".tabs-container .tab", { hasText: /\.scheduled\.py/ });
  await codeTab.first().waitFor({ timeout: 120000 });
  await page.locator(".monaco-editor .view-lines", { hasText: "from tvm.script import" }).first().waitFor({ timeout: 30000 });
  facts.codeTab = (await codeTab.first().innerText()).replace(/\s+/g, "");
  step("code view opened", { tab: facts.codeTab });
  const source = page.locator(".monaco-editor", { has: page.locator(".view-lines", { hasText: "64x64x64 fp32 matmul" }) });
  await source.locator(".view-line", { hasText: "C[vi, vj] + A[vi, vk]" }).first().click();
  const linked = await page.waitForFunction((colour) => {
    const out = [];
    for (const ed of document.querySelectorAll(".monaco-editor")) {
      const tops = new Set();
      for (const d of ed.querySelectorAll(".view-overlays div")) {
        const row = d.parentElement && d.parentElement.parentElement && d.parentElement.parentElement.classList.contains("view-overlays") ? d.parentElement : null;
        if (row && getComputedStyle(d).backgroundColor === colour) tops.add(row.style.top);
      }
      if (!tops.size) continue;
      const lines = [...ed.querySelectorAll(".view-lines .view-line")].filter((l) => tops.has(l.style.top))
        .map((l) => l.textContent.replace(/\u00a0/g, " ").trim());
      out.push({ code: !ed.querySelector(".view-lines").textContent.replace(/\u00a0/g, " ").includes("64x64x64 fp32 matmul"), lines });
    }
    return out.length >= 2 ? out : false;
  }, "rgba(255, 200, 0, 0.45)", { timeout: 30000 });
  facts.codeHighlight = await linked.jsonValue();
  step("code view linked", { highlight: facts.codeHighlight });
  await shot("code-view");
  await page.keyboard.press("Escape");

  // The server crashes (the test kills it when it reads the marker): a message, then it is back.
  if (process.env.CRASH === "1") {
    console.error("@@KILL-SERVER");
    const warn = page.locator(".notification-toast", { hasText: "stopped unexpectedly; restarting" });
    await warn.waitFor({ timeout: 60000 });
    facts.crashMessage = (await warn.locator(".notification-list-item-message").innerText()).trim();
    step("crash message", { message: facts.crashMessage });
    await page.locator(".codelens-decoration a", { hasText: /^(?!⟳).*\d+ trials/ }).first().waitFor({ timeout: 60000 });
    step("server back");
  }

  // Search space panel from the result lens (a server command, routed by the extension's middleware).
  await page.keyboard.press("Escape");
  await page.locator(".codelens-decoration a", { hasText: /^(?!⟳).*\d+ trials/ }).first().click();
  const wv = page.frameLocator("iframe.webview.ready").frameLocator("#active-frame");
  // Either cells or the server's "unavailable" message (then fail at once, saying why).
  await wv.locator("svg.honeycomb polygon.cell, .unavailable .message, p.error").first().waitFor({ timeout: 150000 });
  if (!(await wv.locator("svg.honeycomb polygon.cell").count())) {
    facts.searchSpaceMessage = (await wv.locator(".unavailable .message, p.error").first().innerText()).trim();
    await shot("search-space");
    throw new Error(`the search-space panel shows no cells: ${facts.searchSpaceMessage}`);
  }
  facts.cells = await wv.locator("svg.honeycomb polygon.cell").count();
  facts.legend = await wv.locator(".legend").isVisible();
  step("search space", { cells: facts.cells });
  const cell = wv.locator("svg.honeycomb polygon.cell").first();
  await cell.hover();
  await wv.locator(".tooltip:not([hidden])").waitFor({ timeout: 10000 });
  facts.tooltip = (await wv.locator(".tooltip").innerText()).split("\n")[0];
  await cell.click();
  await wv.locator(".selection table.candidates tbody tr").first().waitFor({ timeout: 10000 });
  facts.candidateRows = await wv.locator(".selection table.candidates tbody tr").count();
  step("candidates", { rows: facts.candidateRows, tooltip: facts.tooltip });
  await shot("search-space");

  // One candidate's scheduled code beside the source, from its row's "code" (asight/code).
  const codeRow = wv.locator(".selection table.candidates tbody tr").last();
  const codeTrial = await codeRow.getAttribute("data-trial");
  await codeRow.locator("button.link", { hasText: "code" }).click();
  const candidateTab = page.locator(".tabs-container .tab", { hasText: new RegExp(`trial-${codeTrial}(-best)?\\.scheduled`) });
  await candidateTab.first().waitFor({ timeout: 60000 });
  facts.candidateCodeTab = (await candidateTab.first().innerText()).replace(/\s+/g, "");
  step("candidate code", { tab: facts.candidateCodeTab, trial: codeTrial });

  // Open one candidate's schedule in an editor (asight-schedule: document).
  await wv.locator(".selection button.link", { hasText: "open" }).first().click();
  const tab = page.locator(".tabs-container .tab", { hasText: /trial-\d+\.py/ });
  await tab.first().waitFor({ timeout: 20000 });
  await page.locator(".monaco-editor .view-lines", { hasText: "sch.get_sblock" }).first().waitFor({ timeout: 20000 });
  facts.scheduleTab = (await tab.first().innerText()).replace(/\s+/g, "");
  step("schedule opened", { tab: facts.scheduleTab });
  await shot("schedule");

  // A design space written in a file: its lens tunes with it, then its sampling calls show the
  // best candidate's decisions as inlay hints.
  await page.keyboard.press("Escape");
  const spaceRow = page.locator(".explorer-folders-view .monaco-list-row", { hasText: "matmul_space.py" });
  await spaceRow.waitFor({ timeout: 30000 });
  await spaceRow.click();
  await page.locator(".monaco-editor .view-lines", { hasText: "sample_perfect_tile" }).first().waitFor({ timeout: 30000 });
  const spaceLens = page.locator(".codelens-decoration a", { hasText: "Tune with this space" }).first();
  await spaceLens.waitFor({ timeout: 60000 });
  step("space lens");
  await spaceLens.click();
  const spaceHints = await page.waitForFunction(() => {
    const found = [...document.querySelectorAll(".monaco-editor .view-lines span")]
      .map((e) => e.textContent.replace(/\u00a0/g, " ").trim())
      .filter((s) => /^best /.test(s) && s.length < 120);
    return found.length ? [...new Set(found)] : false;
  }, null, { timeout: 240000 });
  facts.spaceHints = await spaceHints.jsonValue();
  step("space hints", { hints: facts.spaceHints });
  await shot("space");
} catch (err) {
  failure = err;
}
await finish(failure);
