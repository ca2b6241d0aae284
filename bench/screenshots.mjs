// Screenshots of every panel, as a user sees them: headless Chromium at two panel widths, light and dark.
//   node bench/screenshots.mjs [--widths 480,1200] [--out bench/results/screenshots] [--python PY]
// Panels: search space, loop view, stage graph, hotspots (the webview, from the payload fixtures of
// run mbr128 in vscode-extension/test/fixtures, drawn by tests/webview/harness.mjs) and the HTML
// report (views/report.py from the same payloads, via PY). Dark = VS Code's Dark Modern colours set
// as the --vscode-* variables a real webview gets; the report follows prefers-color-scheme.
// Needs the extension built (`cd vscode-extension && node build.mjs`). Writes <panel>-<width>-<theme>.png.
import { execFileSync } from "node:child_process";
import { mkdirSync, writeFileSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { fixture, repo, startHarness } from "../tests/webview/harness.mjs";

const arg = (name, def) => { const i = process.argv.indexOf(`--${name}`); return i > 0 ? process.argv[i + 1] : def; };
const widths = arg("widths", "480,1200").split(",").map(Number);
const outDir = path.resolve(arg("out", path.join(repo, "bench", "results", "screenshots")));
const python = arg("python", process.env.ASIGHT_PYTHON || path.join(repo, ".venv", "bin", "python"));
const HEIGHT = 900;

/** The theme variables VS Code sets in a webview (Dark Modern / Light Modern). */
export const THEMES = {
  light: { "--vscode-editor-background": "#ffffff", "--vscode-foreground": "#3b3b3b",
    "--vscode-descriptionForeground": "#717171", "--vscode-panel-border": "#e5e5e5", "--vscode-focusBorder": "#005fb8",
    "--vscode-textLink-foreground": "#005fb8", "--vscode-button-background": "#005fb8", "--vscode-button-foreground": "#ffffff",
    "--vscode-button-secondaryBackground": "#e5e5e5", "--vscode-button-secondaryForeground": "#3b3b3b",
    "--vscode-editorHoverWidget-background": "#f8f8f8", "--vscode-editorHoverWidget-border": "#c8c8c8" },
  dark: { "--vscode-editor-background": "#1f1f1f", "--vscode-foreground": "#cccccc",
    "--vscode-descriptionForeground": "#9d9d9d", "--vscode-panel-border": "#2b2b2b", "--vscode-focusBorder": "#0078d4",
    "--vscode-textLink-foreground": "#4daafc", "--vscode-button-background": "#0078d4", "--vscode-button-foreground": "#ffffff",
    "--vscode-button-secondaryBackground": "#313131", "--vscode-button-secondaryForeground": "#cccccc",
    "--vscode-editorHoverWidget-background": "#202020", "--vscode-editorHoverWidget-border": "#454545",
    "--vscode-dropdown-background": "#313131", "--vscode-dropdown-foreground": "#cccccc",
    "--vscode-charts-blue": "#3794ff", "--vscode-charts-purple": "#b180d7", "--vscode-charts-green": "#89d185",
    "--vscode-charts-orange": "#d18616", "--vscode-errorForeground": "#f85149" },
};

const PANELS = [
  { name: "search-space", kind: "searchSpace", extra: "principles" },
  { name: "search-space-by-category", kind: "searchSpace", extra: "principles", colourBy: "category" },
  { name: "loop-view", kind: "loopView" },
  { name: "stage-graph", kind: "stageGraph" },
  { name: "hotspots", kind: "hotspots" },
];

mkdirSync(outDir, { recursive: true });
const { open, browser, close } = await startHarness();
const written = [];
for (const width of widths) {
  for (const [theme, vars] of Object.entries(THEMES)) {
    for (const panel of PANELS) {
      const { page, facts } = await open(panel.kind, fixture(panel.kind), {
        extra: panel.extra ? fixture(panel.extra) : undefined, theme: vars, viewport: { width, height: HEIGHT } });
      if (panel.colourBy) await page.selectOption(".colour-by select", panel.colourBy);
      await page.waitForTimeout(100); // the resize observer's first callback
      const file = path.join(outDir, `${panel.name}-${width}-${theme}.png`);
      await page.screenshot({ path: file, fullPage: true });
      if (facts.pageErrors.length || facts.consoleErrors.length) console.error(file, facts.pageErrors, facts.consoleErrors);
      written.push(path.relative(repo, file));
      await page.close();
    }
    // The HTML report of the same payloads (its own page; light/dark by prefers-color-scheme).
    const tmp = path.join(os.tmpdir(), `asight-report-${process.pid}.html`);
    writeFileSync(tmp, execFileSync(python, [path.join(repo, "bench", "report_fixture.py")], { cwd: repo, maxBuffer: 1 << 26 }));
    const page = await browser.newPage({ viewport: { width, height: HEIGHT }, colorScheme: theme });
    await page.goto(`file://${tmp}`);
    const file = path.join(outDir, `report-${width}-${theme}.png`);
    await page.screenshot({ path: file, fullPage: true });
    written.push(path.relative(repo, file));
    await page.close();
  }
}
await close();
console.log(`wrote ${written.length} screenshots to ${path.relative(repo, outDir)}:\n  ${written.join("\n  ")}`);
