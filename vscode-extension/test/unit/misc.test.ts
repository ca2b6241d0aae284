import { test } from "node:test";
import * as assert from "node:assert/strict";
import { isTvmScript } from "../../src/extension/detect";
import { RestartPolicy } from "../../src/extension/restartPolicy";
import { compareMarkdown, profileText } from "../../src/extension/texts";
import { formatLatency, formatShare, formatSpeedup } from "../../src/shared/format";

test("TVMScript detection", () => {
  assert.ok(isTvmScript("from tvm.script import tir as T\n\n@T.prim_func\ndef f(): pass\n"));
  assert.ok(isTvmScript("import tvm\n@I.ir_module\nclass M:\n  pass\n"));
  assert.ok(!isTvmScript("import numpy as np\nprint('T.prim_func')\n"));
  assert.ok(!isTvmScript("def f():\n    return 1\n"));
});

test("latency and speedup formats match the server's (results.format_latency)", () => {
  assert.deepEqual([5.93, 35.2, 200, 12_345, 1_200_000, null].map(formatLatency), ["5.9 µs", "35 µs", "0.20 ms", "12.3 ms", "1.20 s", "—"]);
  assert.deepEqual([107.4, 3.42, null].map(formatSpeedup), ["107×", "3.4×", ""]);
  assert.equal(formatShare(0.423), "42 %");
});

test("restart policy: at most 5 crashes in 3 minutes", () => {
  const p = new RestartPolicy(5, 180_000);
  for (let i = 0; i < 5; i++) assert.equal(p.crashed(1000 + i), true);
  assert.equal(p.crashed(2000), false);
  assert.equal(p.crashed(1000 + 181_000), true, "old crashes leave the window");
});

test("compare-runs markdown escapes names from user files", () => {
  const text = compareMarkdown({
    runs: [{ id: "a", function: "<img src=x onerror=alert(1)>", bestUs: 200, speedup: 10, trialsDone: 8 },
      { id: "b", function: "f|g", bestUs: 100, trialsDone: 16 }],
    blocks: [{ block: "C*<b>", runs: [{ headline: "parallel 64" }, null] }], speedupOfSecond: 2,
  });
  assert.doesNotMatch(text, /(?<!\\)<(img|b)/, "every < is escaped for Markdown");
  assert.match(text, /\\<img src=x onerror=alert\\\(1\\\)\\>/);
  assert.match(text, /\| block C\\\*\\<b\\> \| parallel 64 \| — \|/);
  assert.match(text, /0\.20 ms \| 0\.10 ms/);
});

test("profile text uses the numbers when the server sends them", () => {
  // the server's message is the record's headline; numbers in `data` are never re-derived here
  const message = "untuned 2.00 ms → tuned 100 µs: 20× faster (95% CI 19×–21×)";
  assert.equal(profileText({ message, data: { baseline_us: 9999, tuned_us: 1 } }), message);
  assert.equal(profileText({ message: "" }), "profiled");
});

test("one latency unit per table", async () => {
  const { tableLatency } = await import("../../src/shared/format");
  const ms = tableLatency([1771.4, 890, 12.5]);
  assert.deepEqual([ms(1771.4), ms(890), ms(12.5)], ["1.77 ms", "0.890 ms", "0.013 ms"]);
  const us = tableLatency([54.2, 3.1, null]);
  assert.deepEqual([us(54.2), us(3.1), us(null)], ["54.2 µs", "3.10 µs", "—"]);
});
