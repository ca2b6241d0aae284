// Build with esbuild: separate bundles for the extension host, the webview and the tests.
//   node build.mjs [--watch] [--minify]
// The host bundle may not import webview code and vice versa; both may import src/shared/ (the
// `parts` plugin fails the build otherwise). Tests are bundled for node's built-in test runner.
import * as esbuild from "esbuild";
import { readdirSync } from "node:fs";
import * as path from "node:path";
import { partsPlugin } from "./scripts/parts-plugin.mjs";

const here = path.dirname(new URL(import.meta.url).pathname);
const watch = process.argv.includes("--watch");
const minify = process.argv.includes("--minify");
const src = (p) => path.join(here, "src", p);

const parts = (name, forbidden) => partsPlugin(path.join(here, "src"), name, forbidden);

const common = { bundle: true, sourcemap: !minify, logLevel: "warning", minify, legalComments: "none" };
const tests = readdirSync(path.join(here, "test", "unit")).filter((f) => f.endsWith(".test.ts"));

const configs = [
  { ...common, entryPoints: [src("extension/extension.ts")], outfile: "out/extension/extension.js", platform: "node",
    format: "cjs", target: "node20", external: ["vscode"], plugins: [parts("extension host", ["webview"])] },
  { ...common, entryPoints: [src("webview/main.ts")], outfile: "out/webview/main.js", platform: "browser",
    format: "iife", target: "es2022", plugins: [parts("webview", ["extension"])] },
  { ...common, entryPoints: tests.map((f) => path.join(here, "test", "unit", f)), outdir: "out/test/unit",
    platform: "node", format: "cjs", target: "node20", sourcemap: "inline", packages: "external" },
  // The panel HTML shell, for the webview tests (tests/webview) that render panels in Chromium.
  { ...common, entryPoints: [src("extension/html.ts")], outfile: "out/test/html.js", platform: "node", format: "cjs",
    target: "node20" },
];

const started = Date.now();
if (watch) {
  for (const c of configs) await (await esbuild.context(c)).watch();
  console.log("watching…");
} else {
  await Promise.all(configs.map((c) => esbuild.build(c)));
  console.log(`built ${configs.length} bundles in ${Date.now() - started} ms`);
}
