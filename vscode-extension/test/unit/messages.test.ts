import { test } from "node:test";
import * as assert from "node:assert/strict";
import { parseWebviewMessage } from "../../src/shared/messages";

test("well-formed webview messages pass, with unknown fields dropped", () => {
  assert.deepEqual(parseWebviewMessage({ type: "openCandidate", run: "r1", trial: 3, extra: "x" }), { type: "openCandidate", run: "r1", trial: 3 });
  assert.deepEqual(parseWebviewMessage({ type: "showCandidateCode", run: "r1", trial: 0, cmd: "x" }), { type: "showCandidateCode", run: "r1", trial: 0 });
  assert.deepEqual(parseWebviewMessage({ type: "compareCandidates", run: "r1", trials: [1, 2] }), { type: "compareCandidates", run: "r1", trials: [1, 2] });
  assert.deepEqual(parseWebviewMessage({ type: "revealSource", uri: "file:///a.py", line: 4 }), { type: "revealSource", uri: "file:///a.py", line: 4 });
  assert.deepEqual(parseWebviewMessage({ type: "openPanel", kind: "loopView" }), { type: "openPanel", kind: "loopView" });
  assert.deepEqual(parseWebviewMessage({ type: "state", cell: null }), { type: "state", cell: null });
});

test("malformed or unknown messages are refused", () => {
  for (const bad of [null, 3, "ready", {}, { type: "exec", command: "rm" }, { type: "openCandidate", run: "r", trial: -1 },
    { type: "openCandidate", run: "", trial: 1 }, { type: "showCandidateCode", run: "r", trial: 1.5 }, { type: "compareCandidates", run: "r", trials: [1] },
    { type: "revealSource", line: 2 }, { type: "revealSource", uri: "file:///a", line: "2" },
    { type: "openPanel", kind: "settings" }, { type: "state", cell: "x" }]) {
    assert.equal(parseWebviewMessage(bad), null, JSON.stringify(bad));
  }
});

test("restored panel state keeps only valid fields", async () => {
  const { restoreState } = await import("../../src/extension/panelState");
  assert.deepEqual(restoreState("loopView", { kind: "searchSpace", args: { uri: "file:///a.py", run: 3, x: 1 }, cell: 4 }),
    { kind: "loopView", args: { uri: "file:///a.py" }, cell: 4 });
  assert.deepEqual(restoreState("hotspots", "garbage"), { kind: "hotspots", args: {}, cell: null });
});
