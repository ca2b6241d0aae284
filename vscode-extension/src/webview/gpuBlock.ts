/**
 * The loop view's GPU block (issue 20): what the best GPU schedule did, from the payload's `gpu`
 * (`analysis/gpu_words.py`): thread and block binding with extents, the buffers placed in shared and
 * local memory, and — from measured counters when the run has them — registers a thread, shared
 * memory a block, achieved occupancy and the limiting factor in words. Nothing for a CPU run.
 */
import type { GpuBlock } from "../shared/views";
import { arr, h, num, obj, str } from "./dom";

const AXIS_ORDER = ["blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z", "vthread"];

const AXIS_TITLES: Record<string, string> = {
  blockIdx: "a grid axis: blocks of threads, spread over the streaming multiprocessors",
  threadIdx: "a block axis: threads of one block, which share its shared memory",
  vthread: "virtual threads: one thread computes this many interleaved tiles",
};

/** `[[axis, extent], ...]` in launch order (grid, block, vthread), unknown axes dropped. */
export function launchAxes(axes: unknown): [string, number][] {
  const o = obj(axes);
  return AXIS_ORDER.filter((a) => num(o[a]) !== null).map((a) => [a, num(o[a])!]);
}

function fact(label: string, value: string, title: string, key: string): HTMLElement {
  return h("div", { class: "gpu-fact", "data-fact": key }, h("dt", { title }, label), h("dd", {}, value));
}

function measuredFacts(g: GpuBlock): HTMLElement[] {
  const out: HTMLElement[] = [];
  const regs = num(g.registers), shared = num(g.shared_bytes), occ = num(g.occupancy_pct);
  if (regs !== null) out.push(fact("registers a thread", regs.toFixed(0), "launch__registers_per_thread (Nsight Compute)", "registers"));
  if (shared !== null) out.push(fact("shared memory a block", `${Math.round(shared).toLocaleString("en-US")} B`,
    "launch__shared_mem_per_block_static (Nsight Compute)", "shared_bytes"));
  if (occ !== null) out.push(fact("achieved occupancy", `${occ.toFixed(occ < 10 ? 1 : 0)} %`,
    "sm__warps_active: the share of warp slots busy on average (Nsight Compute)", "occupancy"));
  return out;
}

function bufferList(names: string[]): string {
  return names.length ? names.join(", ") : "none";
}

/** The section, or null when the payload has no `gpu` (a CPU run). */
export function gpuSection(value: unknown): HTMLElement | null {
  if (!value || typeof value !== "object") return null;
  const g = value as GpuBlock;
  const axes = launchAxes(g.axes);
  if (!axes.length) return null;
  const sources = obj(g.sources);
  const measured = measuredFacts(g);
  const limiter = obj(g.limiter);
  const trial = num(g.trial);
  return h("section", { class: "gpu-block", "data-trial": trial === null ? "" : String(trial) },
    h("h2", {}, trial === null ? "GPU — best candidate" : `GPU — best candidate (trial ${trial})`),
    h("div", { class: "gpu-binding", title: str(sources.binding) },
      ...axes.map(([axis, n]) => h("span", { class: `gpu-axis ${axis.split(".")[0]}`, "data-axis": axis,
        title: AXIS_TITLES[axis.split(".")[0]] ?? "" }, `${axis} `, h("strong", {}, String(n))))),
    str(g.kept) ? h("p", { class: "gpu-kept", role: "note" }, str(g.kept)) : null,
    h("p", { class: "hint gpu-binding-text" }, str(g.binding)),
    h("dl", { class: "gpu-facts" },
      fact("shared memory buffers", bufferList(arr<string>(g.shared).map((x) => str(x))), str(sources.memory), "shared"),
      fact("local (register) buffers", bufferList(arr<string>(g.local).map((x) => str(x))), str(sources.memory), "local"),
      ...measured),
    str(limiter.text) ? h("p", { class: `gpu-limiter ${str(limiter.kind).replace(/[^a-z-]/g, "")}`, role: "note",
      "data-kind": str(limiter.kind) }, h("strong", {}, "limiting factor: "), str(limiter.text)) : null,
    ...sourceLines(g, measured.length > 0));
}

/** Where the measured facts come from; with counters, each figure they lack said with the metric it needs
 * (`not_measured`: an ncu run with fewer --metrics); without counters, how to get them. */
function sourceLines(g: GpuBlock, measured: boolean): HTMLElement[] {
  const launch = str(obj(g.sources).launch);
  if (!launch) {
    return [h("p", { class: "hint gpu-source" }, "registers, occupancy, limiting factor: not measured (no counters for this " +
      "candidate; run `asight counters` on a machine with the GPU, or adopt a run with --counters)")];
  }
  const lacking = arr<string>(g.not_measured).map((x) => str(x)).filter((x) => x);
  const out: HTMLElement[] = measured ? [h("p", { class: "hint gpu-source" }, `registers, shared memory, occupancy: ${launch}`)] : [];
  return out.concat(lacking.map((line) => h("p", { class: "hint gpu-not-measured", role: "note" }, line)));
}
