/**
 * Line links of an `asight.code/1` payload (pure: no `vscode`, no DOM), for the code view.
 *
 * A link ties one generated line to the source line it came from (0-based). Each linked source
 * line gets a colour band (its index in source order, cycled over the palette), so a source line
 * and its generated lines share a colour, like Compiler Explorer.
 */
import type { CodeLink } from "./protocol";

export interface CodePayload {
  schema?: string;
  status?: string;
  message?: string;
  file?: string;
  function?: string;
  level?: string;
  serial?: boolean;
  stale?: boolean | null; // the function changed since the run (its trace was replayed on the current source)
  language?: string;
  run?: string | null;
  candidate?: { trial?: number | null; latencyUs?: number | null; best?: boolean } | null;
  text?: string;
  links?: CodeLink[];
  note?: string;
  /** A Relax run's task (fused kernel) this code is: the tab is named after it. */
  task?: string | null;
  shareSource?: string | null;
  /** Blocks and loops a trace instruction derived from a source block (docs/codeview.md, lineage). */
  lineage?: LineageEntry[];
}

export interface LineageEntry {
  block?: string | null; // the generated block (null: a loop the schedule made)
  loop?: boolean;
  source?: string; // the source block
  derivation?: string[]; // ["rfactor partial", "init"]
  label?: string; // "sum — rfactor partial, init"
  line?: number | null; // its `with T.sblock(...)` line in the generated text (scheduled level)
}

export interface CodeDiffPayload {
  schema?: string;
  status?: string;
  message?: string;
  function?: string;
  sides?: { label?: string; text?: string; trace?: string; run?: string | null }[];
  latencyUs?: (number | null)[];
  deltaUs?: number | null;
  ratio?: number | null;
  decisions?: { block?: string | null; inst?: string; loopVar?: string | null; annotation?: string | null; a?: unknown; b?: unknown }[];
}

/** Band colours (translucent, readable in light and dark themes) and the cursor highlight. */
export const BAND_COLOURS = ["rgba(79, 156, 255, 0.16)", "rgba(255, 153, 51, 0.18)", "rgba(80, 200, 120, 0.18)",
  "rgba(200, 110, 255, 0.16)", "rgba(255, 99, 132, 0.16)", "rgba(0, 200, 200, 0.16)"] as const;
export const ACTIVE_COLOUR = "rgba(255, 200, 0, 0.45)";

export class LinkIndex {
  private readonly toSource = new Map<number, CodeLink>();
  /** Every source line of a generated line (a Relax task's kernel: one per call of the task). */
  private readonly toSources = new Map<number, number[]>();
  private readonly toGenerated = new Map<number, number[]>();
  private readonly bands = new Map<number, number>();

  constructor(links: readonly CodeLink[]) {
    for (const link of links) {
      if (typeof link.line !== "number" || typeof link.sourceLine !== "number") continue;
      if (!this.toSource.has(link.line)) this.toSource.set(link.line, link);
      const sources = this.toSources.get(link.line) ?? [];
      if (!sources.includes(link.sourceLine)) sources.push(link.sourceLine);
      this.toSources.set(link.line, sources);
      const list = this.toGenerated.get(link.sourceLine) ?? [];
      list.push(link.line);
      this.toGenerated.set(link.sourceLine, list);
    }
    [...this.toGenerated.keys()].sort((a, b) => a - b).forEach((src, i) => this.bands.set(src, i));
  }

  /** Generated lines that came from `sourceLine` (sorted). */
  generatedOf(sourceLine: number): number[] {
    return [...(this.toGenerated.get(sourceLine) ?? [])].sort((a, b) => a - b);
  }

  sourceOf(line: number): number | undefined {
    return this.toSource.get(line)?.sourceLine;
  }

  link(line: number): CodeLink | undefined {
    return this.toSource.get(line);
  }

  sourceLines(): number[] {
    return [...this.bands.keys()];
  }

  generatedLines(): number[] {
    return [...this.toSource.keys()].sort((a, b) => a - b);
  }

  /** Palette index of a source line's band (undefined: the line has no generated lines). */
  band(sourceLine: number): number | undefined {
    const i = this.bands.get(sourceLine);
    return i === undefined ? undefined : i % BAND_COLOURS.length;
  }

  /** What to highlight when the cursor is on `line` of the source (`side` "source") or of the generated code. */
  peers(side: "source" | "generated", line: number): { source: number[]; generated: number[] } {
    const all = side === "generated" ? this.toSources.get(line) ?? [] : [];
    if (all.length > 1) {   // a task's kernel line: the bindings of every call, and what they link to
      const generated = [...new Set(all.flatMap((s) => this.generatedOf(s)))].sort((a, b) => a - b);
      return { source: [...all].sort((a, b) => a - b), generated };
    }
    const src = side === "source" ? line : this.sourceOf(line);
    if (src === undefined) return { source: [], generated: [] };
    const generated = this.generatedOf(src);
    return generated.length ? { source: [src], generated } : { source: [], generated: [] };
  }
}

/** After-text of a generated line: its source block's measured share (` 87% matmul`), or "". */
export function shareLabel(link: CodeLink | undefined): string {
  if (!link) return "";
  const pct = (v: number) => { const p = v * 100; return p >= 10 ? p.toFixed(0) : p.toFixed(1); };
  const parts: string[] = [];
  const us = typeof link.us === "number" ? `${link.us >= 1000 ? `${(link.us / 1000).toFixed(2)} ms` : `${link.us.toFixed(link.us < 10 ? 2 : 1)} µs`} · ` : "";
  if (typeof link.share === "number") parts.push(`${us}${pct(link.share)}% ${link.block ?? ""}`.trimEnd());
  if (typeof link.lineShare === "number") parts.push(`${pct(link.lineShare)}% instr`);
  return parts.length ? `  ${parts.join(" · ")}` : "";
}

/** Hover text of a generated line: its source line, how the trace derived it, its share. */
export function generatedHover(sourceLine: number, link: CodeLink | undefined): string {
  const derived = link?.derivation ? ` — ${link.derivedBlock ? `${link.derivedBlock}: ` : ""}${link.derivation}` : "";
  return `from source line ${sourceLine + 1}${derived}${shareLabel(link)}`;
}

/** After-text of derived block headers: `{generated line: "← sum — rfactor partial, init"}`. */
export function derivationMarks(payload: CodePayload): Map<number, string> {
  const marks = new Map<number, string>();
  for (const entry of payload.lineage ?? []) {
    if (typeof entry.line === "number" && entry.label) marks.set(entry.line, `  ← ${entry.label}`);
  }
  return marks;
}

/** The virtual document path of a payload: `/<run|untuned>/<function>.<level>.<ext>`. */
export function codePath(payload: CodePayload): string {
  const ext = payload.level === "llvm" ? "ll" : payload.level === "asm" ? "s" : payload.level === "cuda" ? "cu" : payload.level === "ptx" ? "ptx" : "py";
  const trial = payload.candidate?.trial;
  const best = payload.candidate?.best ? "best" : "";
  const which = typeof trial === "number" ? `trial-${trial}${best ? "-best" : ""}` : payload.candidate ? "best" : "untuned";
  const safe = (s: string) => s.replace(/[^A-Za-z0-9_.-]+/g, "_");
  const level = `${payload.level ?? "scheduled"}${payload.serial ? "-serial" : ""}`;
  if (payload.task) return `/${safe(payload.run ?? "untuned")}/${safe(payload.task)}.${which}.${level}.${ext}`;
  return `/${safe(payload.run ?? "untuned")}/${safe(payload.function ?? "function")}.${which}.${level}.${ext}`;
}

/** One-line summary of a code diff: latency change and the decisions that differ. */
export function diffSummary(diff: CodeDiffPayload): string {
  const [a, b] = diff.latencyUs ?? [];
  const us = (v: number) => (v >= 1000 ? `${(v / 1000).toFixed(3)} ms` : `${v.toFixed(1)} µs`);
  const parts: string[] = [];
  if (typeof a === "number" && typeof b === "number") {
    const delta = b - a;
    parts.push(`${us(a)} → ${us(b)} (${delta >= 0 ? "+" : "−"}${us(Math.abs(delta))})`);
  }
  const decisions = diff.decisions ?? [];
  parts.push(`${decisions.length} decision${decisions.length === 1 ? " differs" : "s differ"}`);
  const shown = decisions.slice(0, 4).map((d) =>
    `${d.block ?? "?"} ${d.loopVar ?? d.annotation ?? d.inst ?? ""}: ${JSON.stringify(d.a)} → ${JSON.stringify(d.b)}`);
  return parts.join(" · ") + (shown.length ? ` — ${shown.join("; ")}${decisions.length > 4 ? "; …" : ""}` : "");
}
