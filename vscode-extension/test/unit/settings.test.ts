import * as path from "node:path";
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as P from "../../src/shared/protocol";
import { DEFAULTS, initializationOptions, needsRestart, readSettings, resolvePath, serverCommand } from "../../src/extension/settings";

const from = (o: Record<string, unknown>) => readSettings((k) => o[k]);

test("defaults when nothing is set, and bad types fall back to defaults", () => {
  assert.deepEqual(from({}), DEFAULTS);
  const s = from({ trials: "many", pythonPath: 3, disabledFeatures: ["hover", 7], serverEnv: { A: "1", B: 2 } });
  assert.equal(s.trials, 64);
  assert.equal(s.pythonPath, "");
  assert.deepEqual(s.disabledFeatures, ["hover"]);
  assert.deepEqual(s.serverEnv, { A: "1" });
  assert.equal(from({ trials: 0 }).trials, 1);
  assert.equal(from({ trials: 8.7 }).trials, 8);
});

test("the server runs `python -m asight_lsp serve --stdio` with the configured interpreter", () => {
  assert.deepEqual(serverCommand(from({}), "/ws").command, "python3");
  const c = serverCommand(from({ pythonPath: "${workspaceFolder}/.venv/bin/python" }), "/ws");
  assert.equal(c.command, "/ws/.venv/bin/python");
  assert.deepEqual(c.args, ["-I", "-m", "asight_lsp", "serve", "--stdio"]);
  assert.equal(serverCommand(from({ pythonPath: "python3.11" }), "/ws").command, "python3.11", "a bare name stays on PATH");
  assert.equal(serverCommand(from({ pythonPath: "~/venv/bin/python" }), "/ws", "/home/u").command, "/home/u/venv/bin/python");
});

test("initializationOptions use the protocol's keys; empty strings become null", () => {
  const o = initializationOptions(from({ workerPythonPath: "/opt/tvm/bin/python", trials: 8, workDir: "runs-here" }), false, "/ws");
  assert.deepEqual(Object.keys(o).sort(), [P.OPT_TRUSTED, P.OPT_STORE_ROOT, P.OPT_WORKER_PYTHON, P.OPT_TARGET, P.OPT_TRIALS,
    P.OPT_DISABLED_FEATURES, P.OPT_DIAGNOSTICS_DELAY_MS, P.OPT_COUNTERS_BUDGET, P.OPT_TUNE_MINUTES].sort());
  assert.equal(o[P.OPT_TRUSTED], false);
  assert.equal(o[P.OPT_WORKER_PYTHON], "/opt/tvm/bin/python");
  assert.equal(o[P.OPT_TRIALS], 8);
  assert.equal(o[P.OPT_TARGET], null);
  assert.equal(o[P.OPT_STORE_ROOT], path.resolve("/ws", "runs-here"));
  assert.equal(initializationOptions(from({}), true, "/ws")[P.OPT_STORE_ROOT], null);
});

test("only interpreter, environment and start-time features need a restart", () => {
  const a = from({});
  assert.equal(needsRestart(a, from({ trials: 8, target: "cuda", workerPythonPath: "/x" })), false);
  assert.equal(needsRestart(a, from({ pythonPath: "/other/python" })), true);
  assert.equal(needsRestart(a, from({ disabledFeatures: ["inlayHint"] })), true);
  assert.equal(needsRestart(a, from({ serverEnv: { TVM_NUM_THREADS: "1" } })), true);
});

test("resolvePath keeps absolute paths and bare names", () => {
  assert.equal(resolvePath("/abs/python", "/ws"), "/abs/python");
  assert.equal(resolvePath("python3", "/ws"), "python3");
  assert.equal(resolvePath("./venv/bin/python", "/ws"), "/ws/venv/bin/python");
  assert.equal(resolvePath("", "/ws"), "");
});

test("the GPU counters budget: off by default (null), seconds when set, bad values off", () => {
  assert.equal(initializationOptions(from({}), true, "/ws")[P.OPT_COUNTERS_BUDGET], null);
  assert.equal(initializationOptions(from({ countersBudgetSeconds: 45 }), true, "/ws")[P.OPT_COUNTERS_BUDGET], 45);
  assert.equal(from({ countersBudgetSeconds: -3 }).countersBudgetSeconds, 0);
  assert.equal(from({ countersBudgetSeconds: "lots" }).countersBudgetSeconds, 0);
});

test("the tune time budget: off by default (null), minutes when set (fractions kept), bad values off", () => {
  assert.equal(initializationOptions(from({}), true, "/ws")[P.OPT_TUNE_MINUTES], null);
  assert.equal(initializationOptions(from({ tuneMinutes: 0.5 }), true, "/ws")[P.OPT_TUNE_MINUTES], 0.5);
  assert.equal(from({ tuneMinutes: -1 }).tuneMinutes, 0);
  assert.equal(from({ tuneMinutes: "soon" }).tuneMinutes, 0);
});
