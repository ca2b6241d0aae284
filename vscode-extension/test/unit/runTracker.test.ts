import { test } from "node:test";
import * as assert from "node:assert/strict";
import { progressPercent, progressText, resultText, RunTracker, statusBarText } from "../../src/extension/runTracker";

const run = (o: Record<string, unknown>) => ({ id: "r1", function: "matmul64", trialsRequested: 8, trialsDone: 0, state: "running", ...o });

test("progress notifications update a live run; the finished event settles waiters", async () => {
  const t = new RunTracker();
  const seen: number[] = [];
  t.onUpdate((x) => seen.push(x.run.trialsDone ?? -1));
  t.update({ event: "started", uri: "file:///a.py", run: run({}) });
  const done = t.finished("r1");
  t.update({ event: "progress", run: run({ trialsDone: 4, bestUs: 35.2 }) });
  assert.equal(t.live().length, 1);
  assert.equal(t.get("r1")!.uri, "file:///a.py", "the uri sticks when later messages omit it");
  t.update({ event: "finished", run: run({ trialsDone: 8, bestUs: 30, state: "done" }) });
  const end = await done;
  assert.equal(end.run.state, "done");
  assert.equal(t.live().length, 0);
  assert.deepEqual(seen, [0, 4, 8]);
});

test("a late progress message never revives a finished run", () => {
  const t = new RunTracker();
  t.update({ event: "finished", run: run({ trialsDone: 8, state: "cancelled" }) });
  t.update({ event: "progress", run: run({ trialsDone: 5 }) });
  assert.equal(t.get("r1")!.run.state, "cancelled");
  assert.equal(t.live().length, 0);
});

test("finished() of an ended run resolves at once; abandonAll ends live runs as failed", async () => {
  const t = new RunTracker();
  t.update({ event: "started", run: run({}) });
  t.abandonAll("the language server stopped");
  const end = await t.finished("r1");
  assert.equal(end.run.state, "failed");
  assert.match(resultText(end.run).text, /failed: the language server stopped/);
});

test("status-bar, progress and result texts", () => {
  assert.equal(progressText(run({ trialsDone: 4, bestUs: 35.2 })), "4/8 trials · best 35 µs");
  assert.equal(progressPercent(run({ trialsDone: 4 })), 50);
  assert.equal(statusBarText([]), undefined);
  const one = statusBarText([{ run: run({ trialsDone: 2, bestUs: 210 }), uri: null, finished: false }])!;
  assert.equal(one.text, "$(sync~spin) ASight matmul64: 2/8 trials · best 0.21 ms");
  assert.match(one.tooltip, /Click to cancel/);
  const two = statusBarText([{ run: run({ trialsDone: 2, bestUs: 210 }), uri: null, finished: false },
    { run: run({ id: "r2", function: "conv", trialsDone: 1, trialsRequested: 16, bestUs: 90 }), uri: null, finished: false }])!;
  assert.equal(two.text, "$(sync~spin) ASight: 2 runs · 3/24 trials · best 90 µs");
  const ok = resultText(run({ state: "done", trialsDone: 8, bestUs: 200, speedup: 107 }));
  assert.deepEqual(ok, { text: "ASight: tuned matmul64: 0.20 ms · 107× vs untuned · 8 trials", level: "info" });
  assert.equal(resultText(run({ state: "cancelled", trialsDone: 3, bestUs: 12 })).level, "warning");
});
