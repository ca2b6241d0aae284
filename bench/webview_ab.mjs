// Honeycomb render time, this tree against another checkout of the repo, interleaved (A, B, A, B …)
// in one Chromium so both see the same machine load.
//   node bench/webview_ab.mjs OTHER_REPO [--sizes 1000,20000] [--repeat 7] [--python PY]
// OTHER_REPO: a checkout with its vscode-extension built (e.g. `git archive <commit> | tar -x -C DIR`,
// node_modules linked, `node build.mjs`). Time as in bench/webview.mjs: post the payload → drawn +
// two animation frames, fresh page per render. Prints medians, min/max and the load average;
// writes bench/results/webview_ab.json.
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { repo, startHarness } from "../tests/webview/harness.mjs";

const other = path.resolve(process.argv[2]);
const arg = (name, def) => { const i = process.argv.indexOf(`--${name}`); return i > 0 ? process.argv[i + 1] : def; };
const sizes = arg("sizes", "1000,20000").split(",").map(Number);
const repeat = Number(arg("repeat", "7"));
const python = arg("python", process.env.ASIGHT_PYTHON || path.join(repo, ".venv", "bin", "python"));
const tmp = path.join(os.tmpdir(), `asight-webview-ab-${process.pid}`);
mkdirSync(tmp, { recursive: true });
execFileSync(python, [path.join(repo, "bench", "webview_payload.py"), tmp, ...sizes.map(String)], { stdio: "inherit" });

const A = await startHarness();
const B = await (await import(path.join(other, "tests", "webview", "harness.mjs"))).startHarness();
async function once(h, payload) {
  const { page } = await h.open("searchSpace", { schema: "asight.searchSpace/1", status: "unavailable", message: "warm-up" });
  const ms = await page.evaluate(async (p) => {
    const t = performance.now();
    const before = document.body.dataset.rendered;
    window.postMessage({ type: "show", kind: "searchSpace", args: {}, payload: p }, "*");
    while (document.body.dataset.rendered === before) await new Promise((r) => setTimeout(r, 0));
    await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
    return performance.now() - t;
  }, payload);
  await page.close();
  return ms;
}
const stats = (xs) => { const s = [...xs].sort((a, b) => a - b); return { median_ms: +s[Math.floor(s.length / 2)].toFixed(1), min_ms: +s[0].toFixed(1), max_ms: +s[s.length - 1].toFixed(1) }; };
const load0 = os.loadavg();
const results = [];
for (const n of sizes) {
  const payload = JSON.parse(readFileSync(path.join(tmp, `searchSpace-${n}.json`), "utf8"));
  const a = [], b = [];
  for (let r = 0; r < repeat; r++) { a.push(await once(A, payload)); b.push(await once(B, payload)); }
  const row = { candidates: n, this: stats(a), other: stats(b), ratio_of_medians: +(stats(a).median_ms / stats(b).median_ms).toFixed(2) };
  results.push(row);
  console.log(`${n} candidates: this ${JSON.stringify(row.this)}  other ${JSON.stringify(row.other)}  ratio ${row.ratio_of_medians}`);
}
await A.close(); await B.close();
const out = { other, repeat, loadavg_before: load0, loadavg_after: os.loadavg(), cpus: os.cpus().length, results };
console.log(`load average before ${load0.map((x) => x.toFixed(2)).join(" ")}, after ${out.loadavg_after.map((x) => x.toFixed(2)).join(" ")}`);
mkdirSync(path.join(repo, "bench", "results"), { recursive: true });
writeFileSync(path.join(repo, "bench", "results", "webview_ab.json"), JSON.stringify(out, null, 1) + "\n");
