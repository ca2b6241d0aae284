// Render search-space payloads built by the Python views (tests/webview/test_insight_panels.py writes
// them) in headless Chromium; report the contour legend, the contour layer and the failures section.
//   node tests/webview/insight.mjs CASES_JSON OUT_DIR      (prints {"cases": {...}} on stdout)
import { mkdirSync, readFileSync } from "node:fs";
import * as path from "node:path";
import { startHarness } from "./harness.mjs";

const cases = JSON.parse(readFileSync(process.argv[2], "utf8"));
const outDir = path.resolve(process.argv[3]);
mkdirSync(outDir, { recursive: true });
const { open, close } = await startHarness();
const out = {};
for (const [name, { kind, payload, extra }] of Object.entries(cases)) {
  try {
    const { page, facts } = await open(kind, payload, { extra });
    Object.assign(facts, await page.evaluate(() => ({
      contourLines: document.querySelectorAll("svg.honeycomb polyline.contour").length,
      contourDraw: document.querySelector("svg.honeycomb g.contours")?.getAttribute("data-draw") ?? null,
      contourOpacity: (() => { const g = document.querySelector("svg.honeycomb g.contours"); return g ? getComputedStyle(g).opacity : null; })(),
      agreement: document.querySelector(".legend .agreement")?.textContent ?? null,
      verdict: document.querySelector(".legend .agreement")?.getAttribute("data-verdict") ?? null,
      sources: [...document.querySelectorAll(".legend ul.sources li")].map((li) => li.textContent),
      levels: document.querySelector(".legend .levels")?.textContent ?? null,
      failuresTitle: document.querySelector("section.failures h2")?.textContent ?? null,
      failures: [...document.querySelectorAll("section.failures li.failure")].map((li) => li.textContent),
      failuresLog: document.querySelector("section.failures .log code")?.textContent ?? null,
      shortfall: document.querySelector("section.failures .shortfall")?.textContent ?? null,
      nextSteps: [...document.querySelectorAll(".principles .next-step")].map((li) => li.textContent),
      principlesText: document.querySelector(".principles")?.textContent ?? null,
    })));
    await page.screenshot({ path: path.join(outDir, `insight-${name}.png`), fullPage: true });
    await page.close();
    out[name] = facts;
  } catch (err) {
    out[name] = { error: String((err && err.stack) || err) };
  }
}
await close();
process.stdout.write(JSON.stringify({ cases: out }));
