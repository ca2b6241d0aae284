// Render loop-view payloads built by the real CLI from the adopted H100 run (tests/webview/test_gpu_panel.py
// writes them) in headless Chromium; report what the GPU block shows.
//   node tests/webview/gpu.mjs CASES_JSON OUT_DIR      (prints {"cases": {...}} on stdout)
import { mkdirSync, readFileSync } from "node:fs";
import * as path from "node:path";
import { startHarness } from "./harness.mjs";

const cases = JSON.parse(readFileSync(process.argv[2], "utf8"));
const outDir = path.resolve(process.argv[3]);
mkdirSync(outDir, { recursive: true });
const { open, close } = await startHarness();
const out = {};
for (const [name, { kind, payload, viewport }] of Object.entries(cases)) {
  try {
    const { page, facts } = await open(kind, payload, { viewport });
    Object.assign(facts, await page.evaluate(() => {
      const block = document.querySelector("section.gpu-block");
      const facts = Object.fromEntries([...document.querySelectorAll(".gpu-fact")].map((f) =>
        [f.getAttribute("data-fact"), f.querySelector("dd")?.textContent ?? null]));
      const box = block?.getBoundingClientRect();
      return {
        gpuBlocks: document.querySelectorAll("section.gpu-block").length,
        title: block?.querySelector("h2")?.textContent ?? null,
        trial: block?.getAttribute("data-trial") ?? null,
        axes: [...document.querySelectorAll(".gpu-axis")].map((a) => [a.getAttribute("data-axis"), a.querySelector("strong")?.textContent]),
        bindingText: block?.querySelector(".gpu-binding-text")?.textContent ?? null,
        facts,
        limiter: block?.querySelector(".gpu-limiter")?.textContent ?? null,
        kept: block?.querySelector(".gpu-kept")?.textContent ?? null,
        origin: document.querySelector(".legend .origin")?.textContent ?? null,
        originKind: document.querySelector(".legend .origin")?.getAttribute("data-origin") ?? null,
        levels: document.querySelector(".legend .levels")?.textContent ?? null,
        contourLines: document.querySelectorAll("svg.honeycomb polyline.contour").length,
        limiterKind: block?.querySelector(".gpu-limiter")?.getAttribute("data-kind") ?? null,
        source: block?.querySelector(".gpu-source")?.textContent ?? null,
        notMeasured: [...(block?.querySelectorAll(".gpu-not-measured") ?? [])].map((e) => e.textContent),
        stages: document.querySelectorAll("section.stage").length,
        blockBeforeStages: !!block && !!document.querySelector("section.stage") &&
          !!(block.compareDocumentPosition(document.querySelector("section.stage")) & Node.DOCUMENT_POSITION_FOLLOWING),
        overflowX: document.documentElement.scrollWidth > window.innerWidth + 1,
        blockWidth: box ? box.width : null,
        pwned: window.__pwned ?? null,
        imgs: document.querySelectorAll("img").length,
        text: document.body.innerText,
        violations: window.__violations,
      };
    }));
    await page.screenshot({ path: path.join(outDir, `gpu-${name}.png`), fullPage: true });
    await page.close();
    out[name] = facts;
  } catch (err) {
    out[name] = { error: String((err && err.stack) || err) };
  }
}
await close();
process.stdout.write(JSON.stringify({ cases: out }));
