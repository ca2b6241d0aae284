/** Candidates of a run's MetaSchedule JSON database, read without TVM, and their schedule text. Pure. */
import { formatLatency } from "../shared/format";
import { traceLines } from "./traceText";

export const DB_RECORDS = "database_tuning_record.json";
export const FAILED_LATENCY_S = 1e9; // MetaSchedule's marker of a failed measurement

export interface CandidateRecord {
  trial: number;
  workload: number;
  insts: unknown;
  decisions: unknown;
  latencyUs: number | null;
}

/** Record `trial` of a JSON database text (trials count the parseable lines, as runs.read_records does). */
export function findRecord(text: string, trial: number): CandidateRecord | undefined {
  let n = 0;
  for (const raw of text.split("\n")) {
    const lineText = raw.trim();
    if (!lineText) continue;
    let row: unknown;
    try { row = JSON.parse(lineText); } catch { continue; }
    if (n++ !== trial) continue;
    if (!Array.isArray(row) || !Array.isArray(row[1]) || !Array.isArray(row[1][0])) return undefined;
    const [[insts, decisions], runSecs] = row[1] as [[unknown, unknown], unknown];
    const secs = Array.isArray(runSecs) ? runSecs.map(Number).filter(Number.isFinite) : [];
    const ok = secs.length > 0 && Math.min(...secs) < FAILED_LATENCY_S;
    return {
      trial, workload: Number(row[0]), insts, decisions,
      latencyUs: ok ? (secs.reduce((a, b) => a + b, 0) / secs.length) * 1e6 : null,
    };
  }
  return undefined;
}

/** The document text of one candidate. */
export function scheduleText(run: string, rec: CandidateRecord): string {
  return [
    `# ASight candidate: run ${run}, trial ${rec.trial}, workload ${rec.workload}`,
    `# latency: ${rec.latencyUs === null ? "failed to build or run" : formatLatency(rec.latencyUs)}`,
    "# The MetaSchedule trace of this candidate, as a schedule function (postprocessing included).",
    "",
    "def apply_schedule(sch):",
    ...traceLines(rec.insts, rec.decisions).map((l) => `    ${l}`),
    "",
  ].join("\n");
}

