/** The Model panel's logic (shared/model.ts) on a real `asight model --json` payload of the tiny imported model. */
import { test } from "node:test";
import * as assert from "node:assert/strict";
import * as fs from "node:fs";
import * as path from "node:path";
import { parseWebviewMessage } from "../../src/shared/messages";
import {
  callLabel, callRanges, callSiteRanges, isSlower, modelRows, refusalActions, taskAtLine, taskChoices, taskPickItems, type ModelPayload,
} from "../../src/shared/model";

const payload = JSON.parse(fs.readFileSync(path.join(__dirname, "..", "..", "..", "test", "fixtures", "model.json"), "utf8")) as ModelPayload;

test("rows: one per task, every call of a repeated kernel with its own lines", () => {
  const rows = modelRows(payload);
  assert.equal(rows.length, payload.tasks!.length);
  const repeated = rows.filter((r) => r.calls.length === 2);
  assert.ok(repeated.length >= 2, "the tiny model repeats its residual block's kernels");
  for (const r of repeated) {
    assert.equal(r.ranges.length, 2);
    const [a, b] = r.ranges;
    assert.ok(a.endLine < b.line, `${r.task}: the second call's lines come after the first's`);
  }
  const conv = rows.find((r) => r.task === "fused_conv2d1_add_relu")!;
  assert.deepEqual(conv.ranges, conv.calls.map((c) => ({ line: c.lines![0], endLine: c.lines![1] })));
  assert.match(callLabel(conv.calls[1]), /^#1 lv13, lv15, lv16 · lines \d+–\d+$/);
});

test("slower than untuned: the server's flag, never recomputed in the client", () => {
  assert.equal(isSlower(true), true);
  assert.equal(isSlower(false), false);
  assert.equal(isSlower("true"), false);
  const flags = new Map((payload.tasks ?? []).map((t) => [t.task, t.slower === true]));
  for (const r of modelRows(payload)) assert.equal(r.slower, flags.get(r.task), r.task);
});

test("bad rows and calls are skipped, never thrown on", () => {
  const rows = modelRows({ tasks: [{ task: "" }, { task: "t", calls: [{ lines: [-1] }, { lines: [3, 1] }, { lines: [4, 6] }, { lines: [4, 6] }] },
    null as never] });
  assert.equal(rows.length, 1);
  assert.deepEqual(rows[0].ranges, [{ line: 3, endLine: 3 }, { line: 4, endLine: 6 }]);
  assert.deepEqual(modelRows(undefined), []);
  assert.deepEqual(callRanges([]), []);
});

test("a call's own ranges leave another kernel's bindings out of the selection", () => {
  // lines 82-89, with another task's bindings on 84-86: two selections for this call
  assert.deepEqual(callRanges([{ lines: [81, 88], ranges: [[81, 82], [86, 88]] }]), [{ line: 81, endLine: 82 }, { line: 86, endLine: 88 }]);
  assert.deepEqual(callRanges([{ lines: [3, 5], ranges: [[9, 1]] }]), [{ line: 3, endLine: 5 }]);   // bad ranges: its lines
});

test("the task under the cursor, and the quick pick puts it first", () => {
  const rows = modelRows(payload);
  const conv = rows.find((r) => r.task === "fused_conv2d1_add_relu")!;
  assert.equal(taskAtLine(rows, conv.ranges[1].line), "fused_conv2d1_add_relu");
  assert.equal(taskAtLine(rows, 0), undefined);
  const items = taskPickItems(["reshape", ...rows.map((r) => r.task)], rows, "fused_conv2d1_add_relu");
  assert.equal(items[0].task, "fused_conv2d1_add_relu");
  assert.match(items[0].description, /at the cursor · 2 calls/);
  assert.equal(items.length, rows.length + 1);
  assert.equal(items[items.length - 1].task, "reshape");
});

test("code payload call sites (1-based span lines) become 0-based ranges", () => {
  assert.deepEqual(callSiteRanges([{ call: 1, lines: [30, 27, 29] }, { call: 0, lines: [17] }, { lines: ["x"] }]),
    [{ line: 16, endLine: 16 }, { line: 26, endLine: 29 }]);
  assert.deepEqual(callSiteRanges(undefined), []);
});

test("task selector: only for runs of several tasks", () => {
  assert.deepEqual(taskChoices({ task: "b", tasks: ["a", "b"] }), { tasks: ["a", "b"], current: "b" });
  assert.deepEqual(taskChoices({ task: "z", tasks: ["a", "b", 3] }), { tasks: ["a", "b"], current: null });
  assert.equal(taskChoices({ tasks: ["a"] }), null);
  assert.equal(taskChoices(undefined), null);
});

test("model panel messages are validated", () => {
  assert.deepEqual(parseWebviewMessage({ type: "revealCalls", uri: "file:///m.py", ranges: [{ line: 3, endLine: 5, x: 1 }], y: 2 }),
    { type: "revealCalls", uri: "file:///m.py", ranges: [{ line: 3, endLine: 5 }] });
  assert.deepEqual(parseWebviewMessage({ type: "selectTask", task: "mean" }), { type: "selectTask", task: "mean" });
  assert.deepEqual(parseWebviewMessage({ type: "openTaskView", view: "code", task: "mean" }), { type: "openTaskView", view: "code", task: "mean" });
  for (const bad of [{ type: "revealCalls", uri: "file:///m.py", ranges: [] }, { type: "revealCalls", ranges: [{ line: 1, endLine: 1 }] },
    { type: "revealCalls", uri: "file:///m.py", ranges: [{ line: 5, endLine: 3 }] }, { type: "selectTask", task: 3 },
    { type: "openTaskView", view: "settings", task: "mean" }, { type: "openPanel", kind: "nope" }]) {
    assert.equal(parseWebviewMessage(bad), null, JSON.stringify(bad));
  }
  assert.deepEqual(parseWebviewMessage({ type: "openPanel", kind: "model" }), { type: "openPanel", kind: "model" });
});

test("panel arguments keep the task across reloads", async () => {
  const { restoreState } = await import("../../src/extension/panelState");
  assert.deepEqual(restoreState("searchSpace", { args: { uri: "file:///m.py", task: "mean", run: "r" } }),
    { kind: "searchSpace", args: { uri: "file:///m.py", run: "r", task: "mean" }, cell: null });
});

test("a refused export offers to tune the missing kernels or to export anyway, each the same export again", () => {
  const actions = refusalActions({ status: "refused", applied: { missing: ["fused_conv2d_add_relu", "fused_mean"] } });
  assert.ok(actions);
  assert.equal(actions.tune.label, "Tune the missing kernels (8 trials)");
  assert.deepEqual(actions.tune.args, { tuneMissing: 8 });
  assert.equal(actions.anyway.label, "Export anyway (untuned kernels)");
  assert.deepEqual(actions.anyway.args, { allowUntuned: true });
  assert.match(actions.anyway.done, /2 kernels untuned \(fused_conv2d_add_relu, fused_mean\)/);
  const many = refusalActions({ status: "refused", applied: { missing: ["a", "b", "c"] } });
  assert.equal(many?.tune.args.tuneMissing, 12);
  assert.equal(refusalActions({ status: "ok", applied: { missing: [] } }), undefined);
  assert.equal(refusalActions({ status: "failed" }), undefined);      // outputs differ: nothing to offer
});

test("what the levers did for a task comes from the server, strings only", () => {
  const rows = modelRows({ tasks: [{ task: "conv", levers: ["twin of conv_b; 1 transfer(s)", 3 as never, "", "weights packed into the schedule's layout at build time"] },
    { task: "mean" }] });
  assert.deepEqual(rows[0].levers, ["twin of conv_b; 1 transfer(s)", "weights packed into the schedule's layout at build time"]);
  assert.deepEqual(rows[1].levers, []);
});
