/** Texts the extension shows for command results (pure, unit-tested). */
import { formatLatency, formatSpeedup } from "../shared/format";
import type * as P from "../shared/protocol";

/** One line for a profile result: the server's message, which states the run's measurement record
 *  (the same figures as the lens, the CLI and the report); "profiled" when there is none. */
export function profileText(result: P.CommandResult | undefined): string {
  return result?.message || "profiled";
}

const md = (s: unknown) => String(s ?? "").replace(/[\\`*_{}[\]()#+|<>!-]/g, (c) => `\\${c}`);

/** The compareRuns payload as a Markdown table (names escaped). */
export function compareMarkdown(payload: Record<string, unknown>): string {
  const runs = (payload.runs as P.RunSummary[] | undefined) ?? [];
  const blocks = (payload.blocks as Array<{ block: string; runs: Array<{ headline?: string } | null> }> | undefined) ?? [];
  const head = runs.map((r) => `${md(r.function)} · ${md(r.id)}`);
  const lines = [`# ASight: compare runs`, "", `| | ${head.join(" | ")} |`, `|---|${runs.map(() => "---").join("|")}|`,
    `| best | ${runs.map((r) => formatLatency(r.bestUs)).join(" | ")} |`,
    `| vs untuned | ${runs.map((r) => formatSpeedup(r.speedup) || "—").join(" | ")} |`,
    `| trials | ${runs.map((r) => r.trialsDone ?? 0).join(" | ")} |`,
    `| target | ${runs.map((r) => md(r.target)).join(" | ")} |`];
  for (const b of blocks) lines.push(`| block ${md(b.block)} | ${b.runs.map((x) => md(x?.headline ?? "—")).join(" | ")} |`);
  const ratio = payload.speedupOfSecond;
  if (typeof ratio === "number") lines.push("", `The second run's best is ${formatSpeedup(ratio)} the speed of the first.`);
  return lines.join("\n") + "\n";
}

