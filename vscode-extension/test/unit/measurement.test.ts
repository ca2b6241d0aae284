/** Which measurement a panel shows and whether its run has a newer one (shared/measurement.ts; issue 23). */
import { test } from "node:test";
import * as assert from "node:assert/strict";
import { newerMeasurement, newerText, shownTaken } from "../../src/shared/measurement";
import type { MeasurementStamp, RunSummary } from "../../src/shared/protocol";

const stamp = (taken: number, by = "the editor's Re-measure"): MeasurementStamp =>
  ({ taken, when: "26 Nov 09:31:02", by, load: "quiet (other processes 0.10 cores)", busy: false, text: "" });
const run = (taken: number): RunSummary => ({ id: "Module-1", measurement: stamp(taken) });

test("a Model or Hotspots payload shows its profile's headline record; a run view its run summary's", () => {
  assert.equal(shownTaken({ run: "Module-1", measurement: { headline: { taken: 100 } } }), 100);
  assert.equal(shownTaken({ run: { id: "Module-1", measurement: stamp(90) } }), 90);
  assert.equal(shownTaken({ run: { id: "Module-1" } }), undefined);
});

test("a newer measurement of the run is reported, the same or an older one is not", () => {
  const model = { run: { id: "Module-1" }, measurement: { headline: { taken: 100 } } };
  assert.equal(newerMeasurement(model, run(100))?.taken, undefined);
  assert.equal(newerMeasurement(model, run(99))?.taken, undefined);
  assert.equal(newerMeasurement(model, run(160))?.taken, 160);
  assert.equal(newerMeasurement({ run: { id: "x" } }, run(160)), undefined);   // a payload that does not say: no claim
  assert.equal(newerMeasurement(model, undefined), undefined);
  assert.match(newerText(stamp(160)), /^A newer measurement \(26 Nov 09:31:02 UTC, the editor's Re-measure, quiet .*\) of this run exists/);
});
