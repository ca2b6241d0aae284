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
    glossary: [...document.querySelectorAll("details.glossary dt")].map((dt) => [dt.textContent, dt.nextElementSibling?.textContent]),
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

// ---- honeycomb legibility: numbered cells, a legend that follows the colour mode, size follows the panel
await run("searchSpace.legible", async () => {
  const payload = fixture("searchSpace");
  const facts = {};
  const legendState = () => {
    const visible = (el) => !!el && getComputedStyle(el).display !== "none" && el.getClientRects().length > 0;
    return {
      gradientVisible: visible(document.querySelector(".legend .latency-legend .gradient")),
      swatches: [...document.querySelectorAll(".legend .categories .swatch")].map((el) => ({
        category: Number(el.dataset.category), visible: visible(el), color: getComputedStyle(el).backgroundColor })),
      keys: [...document.querySelectorAll(".legend .categories li")].map((li) => li.innerText),
      mode: document.querySelector(".legend")?.dataset.mode ?? null,
    };
  };
  const cellFacts = () => [...document.querySelectorAll("polygon.cell")].map((poly) => {
    const id = poly.getAttribute("data-cell");
    const label = document.querySelector(`text.cell-label[data-cell="${id}"]`);
    const fill = getComputedStyle(poly).fill;
    return { id: Number(id), label: label?.textContent ?? null, labelShown: !!label && label.getClientRects().length > 0,
      fill, ink: label ? label.getAttribute("fill") : null };
  });
  const size = () => {
    const svg = document.querySelector("svg.honeycomb"), plot = document.querySelector(".plot");
    const r = svg.getBoundingClientRect();
    return { svgW: r.width, svgH: r.height, plotW: plot.clientWidth, viewportW: window.innerWidth,
      sideW: document.querySelector(".search-space .side").getBoundingClientRect().width,
      overflow: document.scrollingElement.scrollWidth - window.innerWidth };
  };
  for (const width of [480, 1200]) {
    const { page, facts: pageFacts } = await open("searchSpace", payload, { viewport: { width, height: 900 } });
    await page.waitForTimeout(50);
    facts[`size${width}`] = await page.evaluate(size);
    if (width === 1200) {
      facts.latency = await page.evaluate(legendState);
      facts.cellsLatency = await page.evaluate(cellFacts);
      await page.selectOption(".colour-by select", "category");
      facts.category = await page.evaluate(legendState);
      facts.cellsCategory = await page.evaluate(cellFacts);
      await page.setViewportSize({ width: 700, height: 900 });
      await page.waitForTimeout(100);
      facts.resized700 = await page.evaluate(size);
      await page.setViewportSize({ width: 1600, height: 900 });
      await page.waitForTimeout(100);
      facts.resized1600 = await page.evaluate(size);
      await page.screenshot({ path: path.join(outDir, "search-space-by-category.png"), fullPage: true });
      Object.assign(facts, await common(page, pageFacts));
    }
    await page.close();
  }
  return facts;
});

// ---- stage graph routing: a graph whose edges skip layers full of nodes (a straight line would cross them)
function skipGraph() {
  const block = (id, layer, row, cost) => ({ id, kind: "block", label: id, layer, row, iter_kinds: "SS", line: 3, cost });
  const nodes = [
    { id: "input:X", kind: "io", role: "input", label: "X", layer: 0, row: 0 },
    { id: "input:W", kind: "io", role: "input", label: "W", layer: 0, row: 1 },
    block("a", 1, 0, { us: 10, share: 0.5, source: "tuned program, test" }),
    block("b", 1, 1, { us: 6, share: 0.3, source: "tuned program, test" }),
    block("c", 1, 2, { us: null, share: null, source: "no measurement: profile the run" }),
    block("d", 2, 0, { us: 3, share: 0.15, source: "tuned program, test" }),
    block("e", 2, 1, { us: 1, share: 0.05, source: "tuned program, test" }),
    block("f", 3, 0, { us: null, share: null, source: "no measurement: profile the run" }),
    { id: "output:Y", kind: "io", role: "output", label: "Y", layer: 4, row: 0 },
  ];
  const e = (source, target, buffer) => ({ source, target, buffer, shape: [8, 8], dtype: "float32", scope: "alloc" });
  const edges = [e("input:X", "a", "X"), e("input:W", "b", "W"), e("input:W", "c", "W"), e("input:X", "f", "X"),
    e("input:W", "d", "W"), e("a", "d", "A"), e("b", "e", "B"), e("c", "f", "C"), e("a", "f", "A"), e("d", "f", "D"),
    e("e", "f", "E"), e("b", "output:Y", "B"), e("f", "output:Y", "F")];
  return { schema: "asight.stageGraph/1", status: "ok", run: { id: "synthetic", function: "skip" }, notes: [],
    function: "skip", kind: "prim_func", nodes, edges };
}

for (const [name, payload] of [["stageGraph.routes", fixture("stageGraph")], ["stageGraph.skip", skipGraph()]]) {
  await run(name, async () => {
    const { page, facts } = await open("stageGraph", payload);
    Object.assign(facts, await page.evaluate(() => {
      const boxes = [...document.querySelectorAll("svg.stage-graph g.node")].map((g) => {
        const m = /translate\(([-\d.]+) ([-\d.]+)\)/.exec(g.getAttribute("transform"));
        const r = g.querySelector("rect.node-box");
        return { id: g.getAttribute("data-node"), x: +m[1], y: +m[2], w: +r.getAttribute("width"), h: +r.getAttribute("height") };
      });
      const inside = (b, x, y) => x > b.x + 0.5 && x < b.x + b.w - 0.5 && y > b.y + 0.5 && y < b.y + b.h - 0.5;
      const crossings = [], straightCrossings = [];
      let samples = 0;
      for (const g of document.querySelectorAll("svg.stage-graph g.edge")) {
        const path = g.querySelector("path");
        const len = path.getTotalLength();
        const pts = [];
        for (let t = 0; t <= len; t += 1) { const p = path.getPointAtLength(t); pts.push([p.x, p.y]); }
        samples += pts.length;
        const [x0, y0] = pts[0], [x1, y1] = pts[pts.length - 1];
        const edge = `${g.dataset.source}->${g.dataset.target}`;
        for (const b of boxes) {
          if (pts.some(([x, y]) => inside(b, x, y))) crossings.push(`${edge} through ${b.id}`);
          for (let k = 0; k <= 200; k++) {
            if (inside(b, x0 + ((x1 - x0) * k) / 200, y0 + ((y1 - y0) * k) / 200)) { straightCrossings.push(`${edge} ${b.id}`); break; }
          }
        }
      }
      return {
        boxes: boxes.length, samples, crossings, straightCrossings,
        costs: Object.fromEntries([...document.querySelectorAll("svg.stage-graph g.node.block")].map((g) =>
          [g.getAttribute("data-node"), g.querySelector(".node-cost")?.textContent ?? null])),
        costBars: Object.fromEntries([...document.querySelectorAll("svg.stage-graph g.node.block")].map((g) =>
          [g.getAttribute("data-node"), g.querySelector(".cost-bar") ? +g.querySelector(".cost-bar").getAttribute("width") : null])),
        listCosts: [...document.querySelectorAll(".node-list li .cost")].map((el) => el.textContent),
      };
    }));
    await page.screenshot({ path: path.join(outDir, `${name.replace(".", "-")}.png`), fullPage: true });
    await common(page, facts);
    await page.close();
    return facts;
  });
}

// ---- a model's stage graph of a long chain (issue 23: it scrolled sideways at 1000×800): kernel calls in a
// chain of 28 with a residual branch every 4th call (two calls side by side, an edge skipping a layer), at three
// panel widths; and the line a panel shows when its run has a newer measurement than the one drawn.
function chainGraph() {
  const nodes = [{ id: "input:input", kind: "io", role: "input", label: "input", layer: 0, row: 0 }];
  const edges = [];
  const e = (source, target, buffer) => ({ source, target, buffer, shape: [1, 8, 16, 16], dtype: "float32", scope: "tensor" });
  let prev = "input:input", layer = 1;
  for (let k = 0; k < 28; k++) {
    const id = `call:${k}`;
    nodes.push({ id, kind: "kernel", label: `fused_conv2d${k % 5}_add_relu`, task: `fused_conv2d${k % 5}_add_relu`, call: 0,
      calls: 1, trials: 4, layer, row: 0, bindings: [`lv${k}`], cost: { us: 2 + k, share: 0.03, source: "profile, test" } });
    edges.push(e(prev, id, `lv${k - 1}`));
    if (k % 4 === 3) {                                   // a downsample branch beside it, joined two layers down
      nodes.push({ id: `side:${k}`, kind: "kernel", label: "fused_conv2d9_add", task: "fused_conv2d9_add", call: k, calls: 7,
        trials: 2, layer, row: 1, bindings: [`sv${k}`], cost: { us: 1.5, share: 0.01, source: "profile, test" } });
      edges.push(e(prev, `side:${k}`, `lv${k - 1}`), e(`side:${k}`, `call:${k + 2}`, `sv${k}`));
    }
    prev = id;
    layer++;
  }
  // the side branches join two calls down: move them to their real targets' inputs (already in edges above)
  nodes.push({ id: "output:gv", kind: "io", role: "output", label: "gv", layer, row: 0 });
  edges.push(e(prev, "output:gv", "gv"));
  return { schema: "asight.stageGraph/1", status: "ok", level: "model", notes: [],
    run: { id: "Module-20261126-093856-77f0", function: "Module", trials: 112, measured: 112, headline: "88 µs · 2.1× vs untuned" },
    function: "Module.main", kind: "relax_function", summary: "28 kernel calls of 6 kernels", nodes,
    edges: edges.filter((x) => nodes.some((n) => n.id === x.target)) };
}

for (const width of [200, 480, 1000, 1400]) {   // 200: the panel's width at 1000×800 with three editor groups
  await run(`stageGraph.chain.${width}`, async () => {
    const newer = { taken: 1795674078, when: "26 Nov 09:41:18", by: "the editor's Re-measure", load: "quiet (other processes 0.10 cores)",
      busy: false, text: "" };
    const { page, facts } = await open("stageGraph", chainGraph(), { viewport: { width, height: 800 }, newer });
    Object.assign(facts, await page.evaluate(() => {
      const scroller = document.querySelector(".graph-scroll");
      const svg = document.querySelector("svg.stage-graph");
      const boxes = [...document.querySelectorAll("svg.stage-graph g.node")].map((g) => {
        const m = /translate\(([-\d.]+) ([-\d.]+)\)/.exec(g.getAttribute("transform"));
        const r = g.querySelector("rect.node-box");
        return { id: g.getAttribute("data-node"), x: +m[1], y: +m[2], w: +r.getAttribute("width"), h: +r.getAttribute("height") };
      });
      const inside = (b, x, y) => x > b.x + 0.5 && x < b.x + b.w - 0.5 && y > b.y + 0.5 && y < b.y + b.h - 0.5;
      const crossings = [];
      for (const g of document.querySelectorAll("svg.stage-graph g.edge")) {
        const path = g.querySelector("path");
        const len = path.getTotalLength();
        for (const b of boxes) {
          for (let t = 0; t <= len; t += 2) {
            const p = path.getPointAtLength(t);
            if (inside(b, p.x, p.y)) { crossings.push(`${g.dataset.source}->${g.dataset.target} through ${b.id}`); break; }
          }
        }
      }
      const label = document.querySelector("svg.stage-graph .node-label");
      return {
        pageOverflow: document.scrollingElement.scrollWidth - window.innerWidth,
        graphOverflow: scroller.scrollWidth - scroller.clientWidth,
        svgWidth: svg.getBoundingClientRect().width, svgHeight: svg.getBoundingClientRect().height,
        labelPx: label ? label.getBoundingClientRect().height : 0,
        kernels: document.querySelectorAll("svg.stage-graph g.node.kernel").length,
        edges: document.querySelectorAll("svg.stage-graph g.edge").length, crossings,
        newer: document.querySelector("header p.newer")?.textContent ?? null,
        newerButton: !!document.querySelector("header p.newer button"),
      };
    }));
    await page.locator("header p.newer button").click();
    await page.screenshot({ path: path.join(outDir, `stage-graph-chain-${width}.png`) });
    await common(page, facts);
    await page.close();
    return facts;
  });
}

// ---- loop view: latency per strategy value, no horizontal overflow in a narrow panel
await run("loopView.latency", async () => {
  const { page, facts } = await open("loopView", fixture("loopView"), { viewport: { width: 480, height: 900 } });
  Object.assign(facts, await page.evaluate(() => ({
    overflow: document.scrollingElement.scrollWidth - window.innerWidth,
    rows: [...document.querySelectorAll("section.stage")].map((sec) => ({
      block: sec.getAttribute("data-block"),
      strategies: Object.fromEntries([...sec.querySelectorAll(".strategy[data-strategy]")]
        .filter((st) => !st.querySelector(".per-loop") && st.getAttribute("data-strategy") !== "loop_share")
        .map((st) => [st.getAttribute("data-strategy"), [...st.querySelectorAll(".bar-row")].map((r) => ({
          label: r.querySelector(".bar-label").textContent, detail: r.querySelector(".bar-detail").textContent,
          median: r.querySelector(".median")?.textContent ?? null,
          fastest: !!r.querySelector(".median.fastest") }))])),
      tiles: Object.fromEntries([...sec.querySelectorAll('.strategy[data-strategy="tile"] .per-loop')].map((pl) => [
        pl.querySelector(".loop-name").textContent.replace(/^axis /, "").replace(/^loop (\d+)$/, "loop$1"),
        [...pl.querySelectorAll(".bar-row")].filter((r) => r.querySelector(".median.fastest"))
          .map((r) => r.querySelector(".bar-label").textContent)])),
    })),
  })));
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
