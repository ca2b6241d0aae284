/**
 * Which measurement a panel shows, and whether the run now has a newer one (issue 23: one set of
 * numbers across open panels). Pure and dependency-free; the host and the webview both use it.
 *
 * A payload says it in one of two places: `measurement.headline.taken` (Model, Hotspots: the
 * profile's headline record, views/measured.py) or `run.measurement.taken` (every payload built from
 * a run summary). The run's summary (`asight/runs`, `asight/runUpdated`) carries the measurement the
 * run shows now (`RunSummary.measurement`).
 */
import type { MeasurementStamp, RunSummary } from "./protocol";

const rec = (v: unknown): Record<string, unknown> => (v && typeof v === "object" ? (v as Record<string, unknown>) : {});

/** The `taken` time of the measurement a payload shows (undefined when it does not say). */
export function shownTaken(payload: unknown): number | undefined {
  const p = rec(payload);
  const head = rec(rec(p.measurement).headline).taken;
  if (typeof head === "number") return head;
  const run = rec(rec(p.run).measurement).taken;
  return typeof run === "number" ? run : undefined;
}

/** The run's current measurement when it is newer than the one the payload shows, else undefined. */
export function newerMeasurement(payload: unknown, run: RunSummary | undefined): MeasurementStamp | undefined {
  const now = run?.measurement;
  if (!now || typeof now.taken !== "number") return undefined;
  const shown = shownTaken(payload);
  return shown !== undefined && now.taken > shown + 1e-3 ? now : undefined;   // a payload that does not say: no claim
}

/** The line a panel shows when a newer measurement exists: "A newer measurement (…) exists". */
export function newerText(m: MeasurementStamp): string {
  return `A newer measurement (${m.when} UTC, ${m.by}, ${m.load}) of this run exists; this panel shows an older one.`;
}
