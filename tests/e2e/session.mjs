// What both drives share: headless Chromium on code-server (CS_URL, CS_FOLDER, SHOT_DIR, CHROMIUM),
// timed steps, screenshots, the command palette, and the one JSON line of facts printed at the end.
import { createRequire } from "node:module";
import * as path from "node:path";

const repo = path.resolve(path.dirname(new URL(import.meta.url).pathname), "..", "..");
const require = createRequire(path.join(repo, "vscode-extension", "package.json"));
const { chromium } = require("playwright-core");

/** A browser page on the workspace's code-server, with the helpers the drives use. */
export async function openSession({ height = 900, shotPrefix = "e2e-", paletteShot = null } = {}) {
  const t0 = Date.now();
  const facts = { steps: {}, pageErrors: [] };
  const step = (name, extra = {}) => {
    facts.steps[name] = { t: +((Date.now() - t0) / 1000).toFixed(1), ...extra };
    console.error(`${facts.steps[name].t}s ${name} ${JSON.stringify(extra)}`);
  };
  const browser = await chromium.launch({ executablePath: process.env.CHROMIUM || "/usr/bin/chromium", headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
      "--disable-sync", "--no-first-run", "--disable-quic"] });
  const page = await browser.newPage({ viewport: { width: 1400, height } });
  page.on("pageerror", (e) => facts.pageErrors.push(String(e).slice(0, 300)));
  const shot = (name) => page.screenshot({ path: path.join(process.env.SHOT_DIR || ".", `${shotPrefix}${name}.png`) });

  /** Run a palette command by its exact title ("ASight: Tune" also fuzzily matches longer titles). */
  async function palette(title) {
    await openPalette();
    await page.keyboard.type(title);
    const label = title.replace(/^>?\s*/, "");
    const row = page.locator(".quick-input-list .monaco-list-row")
      .filter({ has: page.locator(".label-name", { hasText: new RegExp(`^${label.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`) }) });
    await row.first().waitFor({ timeout: 20000 });
    if (paletteShot) await shot(paletteShot);
    await row.first().click();
  }

  /**
   * F1 until the palette's input has the keyboard: a click that focuses an editor can land after the
   * palette opened and close it again, and keys typed then would edit the source (as a user sees the
   * palette vanish and presses F1 again).
   */
  async function openPalette() {
    for (let attempt = 1; ; attempt++) {
      await page.keyboard.press("F1");
      await page.locator(".quick-input-widget input").waitFor();
      const focused = await page.waitForFunction(
        () => document.activeElement?.matches(".quick-input-widget input"), null, { timeout: 3000 })
        .then(() => true, () => false);
      if (focused) return;
      if (attempt === 3) throw new Error("the command palette opened but never took the keyboard");
      await page.keyboard.press("Escape");
    }
  }

  /** Record an error (with a screenshot), close the browser, print the facts. */
  async function finish(err) {
    if (err) {
      facts.error = String(err && err.stack || err).slice(0, 2000);
      await shot("failure").catch(() => undefined);
    }
    facts.total_s = +((Date.now() - t0) / 1000).toFixed(1);
    await browser.close();
    process.stdout.write(JSON.stringify(facts) + "\n");
  }

  /** Open the workspace folder in code-server. */
  const gotoWorkspace = () => page.goto(`${process.env.CS_URL}/?folder=${encodeURIComponent(process.env.CS_FOLDER)}`);
  return { page, facts, step, shot, palette, finish, gotoWorkspace };
}
