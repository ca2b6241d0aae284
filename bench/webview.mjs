// Render time of the search-space honeycomb with 20,000 candidates in headless Chromium (goal <= 500 ms).
//   node bench/webview.mjs [--sizes 1000,5000,20000] [--repeat 5] [--python /path/to/python]
// Payloads are the real asight.searchSpace/1 of synthetic runs (bench/webview_payload.py, the same
// generator as bench/space.py); the page is the extension's panel (tests/webview/harness.mjs).
// Time = from posting the payload to the webview until two animation frames after it drew the
// cells (message delivery + DOM build + style/layout/paint), median of --repeat renders in fresh
// pages. Needs vscode-extension built (`npm run build`). Writes bench/results/webview.json.
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { repo, startHarness } from "../tests/webview/harness.mjs";

const arg = (name, def) => { const i = process.argv.indexOf(`--${name}`); return i > 0 ? process.argv[i + 1] : def; };
const sizes = arg("sizes", "1000,5000,20000").split(",").map(Number);
const repeat = Number(arg("repeat", "5"));
const python = arg("python", process.env.ASIGHT_PYTHON || path.join(repo, ".venv", "bin", "python"));
const GOAL_MS = 500;

const tmp = path.join(os.tmpdir(), `asight-webview-bench-${process.pid}`);
mkdirSync(tmp, { recursive: true });
execFileSync(python, [path.join(repo, "bench", "webview_payload.py"), tmp, ...sizes.map(String)], { stdio: "inherit" });

const { open, close } = await startHarness();
const results = [];
for (const n of sizes) {
  const text = readFileSync(path.join(tmp, `searchSpace-${n}.json`), "utf8");
  const payload = JSON.parse(text);
  const times = [];
  let cells = 0;
  for (let r = 0; r < repeat; r++) {
    const { page } = await open("searchSpace", { schema: "asight.searchSpace/1", status: "unavailable", message: "warm-up" });
    const ms = await page.evaluate(async (p) => {
      const t = performance.now();
      const before = document.body.dataset.rendered;
      window.postMessage({ type: "show", kind: "searchSpace", args: {}, payload: p }, "*");
      while (document.body.dataset.rendered === before) await new Promise((r) => setTimeout(r, 0));
      await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
      return performance.now() - t;
    }, payload);
    cells = await page.locator("polygon.cell").count();
    times.push(ms);
    await page.close();
  }
  times.sort((a, b) => a - b);
  const median = times[Math.floor(times.length / 2)];
  const row = { candidates: payload.candidates.trial.length, cells, payload_mb: +(text.length / 1e6).toFixed(2),
    median_ms: +median.toFixed(1), min_ms: +times[0].toFixed(1), max_ms: +times[times.length - 1].toFixed(1), repeat };
  results.push(row);
  console.log(`${String(row.candidates).padStart(6)} candidates  ${String(cells).padStart(4)} cells  ` +
    `payload ${row.payload_mb} MB  render median ${row.median_ms} ms (min ${row.min_ms}, max ${row.max_ms})`);
}
await close();
const at20k = results.find((r) => r.candidates >= 20000);
const out = { goal_ms: GOAL_MS, chromium: "/usr/bin/chromium (headless)", cpus: os.cpus().length, results,
  meets_goal: at20k ? at20k.median_ms <= GOAL_MS : null };
mkdirSync(path.join(repo, "bench", "results"), { recursive: true });
writeFileSync(path.join(repo, "bench", "results", "webview.json"), JSON.stringify(out, null, 1) + "\n");
console.log(at20k ? `20k: ${at20k.median_ms} ms (goal <= ${GOAL_MS} ms): ${out.meets_goal ? "met" : "NOT met"}` : "");
