// Pure parts of the code view: link index (peers both ways, bands), share labels, paths, diff summary.
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { BAND_COLOURS, codePath, derivationMarks, diffSummary, generatedHover, LinkIndex, shareLabel } from "../../src/shared/codeLinks";

const links = [
  { line: 11, sourceLine: 13 },
  { line: 26, sourceLine: 16 }, { line: 27, sourceLine: 16 },
  { line: 33, sourceLine: 20, block: "matmul", share: 0.873, us: 100 },
  { line: 40, sourceLine: 25, block: "bias_add", share: 0.042 },
  { line: 41, sourceLine: 20, block: "matmul", share: 0.873 },
];

test("peers: a source line highlights its generated lines and a generated line its source line", () => {
  const index = new LinkIndex(links);
  assert.deepEqual(index.peers("source", 20), { source: [20], generated: [33, 41] });
  assert.deepEqual(index.peers("generated", 41), { source: [20], generated: [33, 41] });
  assert.deepEqual(index.peers("generated", 12), { source: [], generated: [] });   // a new loop: no link
  assert.deepEqual(index.peers("source", 3), { source: [], generated: [] });
  assert.deepEqual(index.generatedLines(), [11, 26, 27, 33, 40, 41]);
});

test("bands: one colour per linked source line, in source order, cycled", () => {
  const index = new LinkIndex(links);
  assert.deepEqual(index.sourceLines().map((s) => index.band(s)), [0, 1, 2, 3]);
  const many = new LinkIndex(Array.from({ length: 8 }, (_, i) => ({ line: i, sourceLine: 10 + i })));
  assert.equal(many.band(10 + BAND_COLOURS.length), 0);
  assert.equal(many.band(99), undefined);
});

test("share labels, virtual document paths and the diff summary", () => {
  const index = new LinkIndex(links);
  assert.equal(shareLabel(index.link(33)), "  100.0 µs · 87% matmul");   // the block's time, then its share
  assert.equal(shareLabel(index.link(40)), "  4.2% bias_add");
  assert.equal(shareLabel(index.link(11)), "");
  assert.equal(shareLabel({ line: 1, sourceLine: 2, lineShare: 0.412 }), "  41% instr");
  assert.equal(shareLabel({ line: 1, sourceLine: 2, block: "C", share: 0.9, lineShare: 0.05 }), "  90% C · 5.0% instr");
  assert.equal(codePath({ run: "mbr128", function: "Mod.main", level: "asm", candidate: { trial: 3 } }),
    "/mbr128/Mod.main.trial-3.asm.s");
  assert.equal(codePath({ run: null, function: "<img onerror=x>", level: "scheduled", candidate: null }),
    "/untuned/_img_onerror_x_.untuned.scheduled.py");
  assert.equal(codePath({ run: "r1", function: "matmul64", level: "scheduled", candidate: { trial: 5, best: true } }),
    "/r1/matmul64.trial-5-best.scheduled.py");
  // a Relax task's kernel is named after the task, not the model's function
  assert.equal(codePath({ run: "r1", function: "Module.main", task: "fused_conv2d1_add_relu", level: "scheduled",
    candidate: { trial: 4, best: true } }), "/r1/fused_conv2d1_add_relu.trial-4-best.scheduled.py");
  assert.equal(shareLabel({ line: 1, sourceLine: 2, block: "conv2d_nchw", share: 0.54, us: 2.394 }), "  2.39 µs · 54% conv2d_nchw");
  // one kernel line linked to the binding of each of the task's two calls: both light up
  const two = new LinkIndex([{ line: 5, sourceLine: 16 }, { line: 5, sourceLine: 25 }, { line: 6, sourceLine: 16 }]);
  assert.deepEqual(two.peers("generated", 5), { source: [16, 25], generated: [5, 6] });
  const summary = diffSummary({ latencyUs: [705.06, 115.5], decisions: [
    { block: "matmul", inst: "SamplePerfectTile", loopVar: "i", a: [4, 4, 2, 4], b: [4, 1, 4, 8] }] });
  assert.equal(summary, "705.1 µs → 115.5 µs (−589.6 µs) · 1 decision differs — matmul i: [4,4,2,4] → [4,1,4,8]");
});

test("derived lines: the hover names the derivation and block headers get it as after-text", () => {
  const link = { line: 5, sourceLine: 11, derivedBlock: "sum_rf_init", derivedFrom: "sum",
    derivation: "sum — rfactor partial, init", block: "sum", share: 0.41 };
  assert.equal(generatedHover(11, link), "from source line 12 — sum_rf_init: sum — rfactor partial, init  41% sum");
  assert.equal(generatedHover(11, { line: 2, sourceLine: 11, derivedBlock: null, derivation: "sum — loop made by the schedule" }),
    "from source line 12 — sum — loop made by the schedule");
  assert.equal(generatedHover(20, { line: 9, sourceLine: 20 }), "from source line 21");
  const marks = derivationMarks({ lineage: [
    { block: "sum_rf_init", source: "sum", label: "sum — rfactor partial, init", line: 4 },
    { block: null, loop: true, source: "sum", label: "sum — loop made by the schedule", line: null },
  ] });
  assert.deepEqual([...marks], [[4, "  ← sum — rfactor partial, init"]]);
});
