// The build keeps extension-host code and webview code apart (each may use src/shared/).
import * as fs from "node:fs";
import * as path from "node:path";
import { pathToFileURL } from "node:url";
import { test } from "node:test";
import * as assert from "node:assert/strict";

const ext = path.resolve(__dirname, "..", "..", "..");

test("built bundles exist and the webview bundle holds no extension-host code", () => {
  const web = fs.readFileSync(path.join(ext, "out", "webview", "main.js"), "utf8");
  const host = fs.readFileSync(path.join(ext, "out", "extension", "extension.js"), "utf8");
  assert.doesNotMatch(web, /require\("vscode"\)|vscode-languageclient|node:child_process/);
  assert.match(host, /require\("vscode"\)/);
  assert.doesNotMatch(host, /acquireVsCodeApi/);
  assert.ok(fs.existsSync(path.join(ext, "out", "webview", "main.css")));
});

test("a cross import fails the build (the real plugin of build.mjs)", async () => {
  const { partsPlugin } = await import(pathToFileURL(path.join(ext, "scripts", "parts-plugin.mjs")).href);
  const esbuild = await import("esbuild");
  const bad = path.join(ext, "src", "webview", `__cross_${process.pid}.ts`);
  fs.writeFileSync(bad, 'import { isTvmScript } from "../extension/detect";\nconsole.log(isTvmScript(""));\n');
  const build = (forbidden: string[]) => esbuild.build({ entryPoints: [bad], bundle: true, write: false, logLevel: "silent",
    plugins: [partsPlugin(path.join(ext, "src"), "webview", forbidden)] });
  try {
    await assert.rejects(build(["extension"]), /webview code must not import src\/extension\//);
    await build([]); // the same file builds when the boundary is not enforced
  } finally {
    fs.rmSync(bad, { force: true });
  }
});
