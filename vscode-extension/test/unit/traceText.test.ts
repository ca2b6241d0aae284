import * as fs from "node:fs";
import * as path from "node:path";
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { findRecord, scheduleText } from "../../src/extension/records";
import { traceLines } from "../../src/extension/traceText";

const repo = path.resolve(__dirname, "..", "..", "..", "..");
const db = fs.readFileSync(path.join(repo, "fixtures", "runs", "mbr128", "database_tuning_record.json"), "utf8");

test("a recorded trace reads as a Python schedule with its sampled decisions", () => {
  const rec = findRecord(db, 0)!;
  assert.equal(rec.trial, 0);
  const lines = traceLines(rec.insts, rec.decisions);
  assert.equal(lines[0], 'b0 = sch.get_sblock(name="matmul", func_name="main")');
  assert.ok(lines.includes('sch.annotate(block_or_loop=b0, ann_key="meta_schedule.tiling_structure", ann_val="SSRSRS")'), lines.join("\n"));
  assert.ok(lines.includes("l2, l3, l4 = sch.get_loops(block=b0)"));
  assert.ok(lines.includes("v5, v6, v7, v8 = sch.sample_perfect_tile(loop=l2, n=4, max_innermost_factor=64, decision=[1, 2, 4, 16])"));
  assert.ok(lines.includes("l9, l10, l11, l12 = sch.split(loop=l2, factors=[v5, v6, v7, v8], preserve_unit_iters=True, disable_predication=False)"));
  assert.ok(lines.some((l) => l.startsWith("v26 = sch.sample_categorical(candidates=[0, 16, 64, 512], probs=[0.25, 0.25, 0.25, 0.25], decision=")));
  assert.ok(lines.includes("sch.enter_postproc()"));
  assert.ok(lines.includes("sch.reverse_compute_at(block=b25, loop=l17, preserve_unit_loops=True, index=-1)"));
});

test("trials count parseable lines like runs.read_records; torn lines are skipped", () => {
  const lines = db.trim().split("\n");
  const torn = [lines[0], '{"torn": [1, 2', "", lines[1]].join("\n");
  assert.equal(findRecord(torn, 1)!.workload, findRecord(db, 1)!.workload);
  assert.deepEqual(findRecord(torn, 1)!.decisions, findRecord(db, 1)!.decisions);
  assert.equal(findRecord(torn, 5), undefined);
});

test("the schedule document says which run, trial and latency it shows", () => {
  const text = scheduleText("mbr128", findRecord(db, 3)!);
  assert.match(text, /^# ASight candidate: run mbr128, trial 3/);
  assert.match(text, /# latency: \d/);
  assert.match(text, /\ndef apply_schedule\(sch\):\n {4}b0 = sch\.get_sblock/);
});

test("unknown instructions fall back to a generic call", () => {
  assert.deepEqual(traceLines([["FancyNewThing", ["b0", 3], [true], ["b9"]]], []), ["b9 = sch.fancy_new_thing(b0, 3, attr0=True)"]);
  assert.deepEqual(traceLines("garbage", null), []);
});

test("cache_write keeps keyword order valid Python (consumer blocks last)", () => {
  assert.deepEqual(traceLines([["CacheWrite", ["b0", []], [0, "global"], ["b25"]]], []),
    ['b25 = sch.cache_write(block=b0, write_buffer_index=0, storage_scope="global", consumer_blocks=[])']);
  assert.deepEqual(traceLines([["Vectorize", ["l1", "l2"], [], []]], []), ["sch.vectorize(loop=l1, input1=l2)"]);
});
