/**
 * A MetaSchedule trace (the JSON form stored in the tuning database: `[insts, decisions]`, each
 * inst `[kind, inputs, attrs, outputs]`, each decision `[inst index, value]`) written as the Python
 * schedule it stands for, close to TVM's `Trace.as_python()`. Pure and TVM-free: the extension
 * shows any candidate's schedule without asking the TVM worker.
 */

type Json = null | boolean | number | string | Json[] | { [k: string]: Json };

interface Spec {
  method: string;
  /** Names of the inputs; "*" takes the rest as positional arguments. */
  inputs: string[];
  /** Names of the attributes, in order. */
  attrs: string[];
  /** Keyword order in the printed call, when it differs from inputs-then-attributes. */
  order?: string[];
}

const S = (method: string, inputs: string[] = [], attrs: string[] = [], order?: string[]): Spec =>
  ({ method, inputs, attrs, order });

const SPECS: Record<string, Spec> = {
  GetSBlock: S("get_sblock", [], ["name", "func_name"]),
  GetBlock: S("get_block", [], ["name", "func_name"]),
  GetLoops: S("get_loops", ["block"]),
  GetChildBlocks: S("get_child_blocks", ["block_or_loop"]),
  GetProducers: S("get_producers", ["block"]),
  GetConsumers: S("get_consumers", ["block"]),
  SamplePerfectTile: S("sample_perfect_tile", ["loop"], ["n", "max_innermost_factor"]),
  SamplePartitionedTile: S("sample_partitioned_tile", ["loop"], ["n", "partition_pos", "innerpart_factor"]),
  SampleCategorical: S("sample_categorical", [], ["candidates", "probs"]),
  SampleComputeLocation: S("sample_compute_location", ["block"]),
  Split: S("split", ["loop", "factors*"], ["preserve_unit_iters", "disable_predication"]),
  Fuse: S("fuse", ["*"], ["preserve_unit_iters"]),
  Reorder: S("reorder", ["*"]),
  Parallel: S("parallel", ["loop"]),
  Vectorize: S("vectorize", ["loop"]),
  Unroll: S("unroll", ["loop"]),
  Bind: S("bind", ["loop"], ["thread_axis"]),
  ComputeAt: S("compute_at", ["block", "loop"], ["preserve_unit_loops", "index"]),
  ReverseComputeAt: S("reverse_compute_at", ["block", "loop"], ["preserve_unit_loops", "index"]),
  ComputeInline: S("compute_inline", ["block"]),
  ReverseComputeInline: S("reverse_compute_inline", ["block"]),
  CacheRead: S("cache_read", ["block", "consumer_blocks"], ["read_buffer_index", "storage_scope"],
    ["block", "read_buffer_index", "storage_scope", "consumer_blocks"]),
  CacheWrite: S("cache_write", ["block", "consumer_blocks"], ["write_buffer_index", "storage_scope"],
    ["block", "write_buffer_index", "storage_scope", "consumer_blocks"]),
  DecomposeReduction: S("decompose_reduction", ["block", "loop"]),
  RFactor: S("rfactor", ["loop"], ["factor_axis"]),
  Annotate: S("annotate", ["block_or_loop", "ann_val"], ["ann_key"], ["block_or_loop", "ann_key", "ann_val"]),
  Unannotate: S("unannotate", ["block_or_loop"], ["ann_key"]),
  TransformLayout: S("transform_layout", ["block"], ["buffer_index", "buffer_index_type", "index_map"]),
  Tensorize: S("tensorize", ["block_or_loop"], ["tensor_intrin"]),
  EnterPostproc: S("enter_postproc"),
};

const BOOL_ATTRS = new Set(["preserve_unit_iters", "disable_predication", "preserve_unit_loops"]);

function snake(kind: string): string {
  return kind.replace(/([a-z0-9])([A-Z])/g, "$1_$2").toLowerCase();
}

/** A Python literal for an attribute or literal input. */
export function pyLiteral(v: Json, asBool = false): string {
  if (v === null) return "None";
  if (asBool && (v === 0 || v === 1)) return v ? "True" : "False";
  if (typeof v === "boolean") return v ? "True" : "False";
  if (typeof v === "number") return Number.isInteger(v) ? String(v) : String(Number(v.toPrecision(6)));
  if (typeof v === "string") return JSON.stringify(v);
  if (Array.isArray(v)) return `[${v.map((x) => pyLiteral(x)).join(", ")}]`;
  return `{${Object.entries(v).map(([k, x]) => `${JSON.stringify(k)}: ${pyLiteral(x)}`).join(", ")}}`;
}

/** An input: a random-variable name (`b0`, `l3`, `v7`) as is; a quoted literal (`"\"SSRSRS\""`) unquoted once. */
function pyInput(v: Json): string {
  if (Array.isArray(v)) return `[${v.map(pyInput).join(", ")}]`;
  if (typeof v === "string") {
    if (/^[blv]\d+$/.test(v)) return v;
    if (v === "None") return "None";
    if (v.startsWith('"') && v.endsWith('"')) {
      try { return JSON.stringify(JSON.parse(v)); } catch { /* fall through */ }
    }
    return JSON.stringify(v);
  }
  return pyLiteral(v);
}

function line(kind: string, inputs: Json[], attrs: Json[], outputs: Json[], decision: Json | undefined): string {
  const spec = SPECS[kind] ?? S(snake(kind), ["*"], attrs.map((_, i) => `attr${i}`));
  const args: string[] = [];
  let i = 0;
  for (const name of spec.inputs) {
    if (name === "*") { args.push(...inputs.slice(i).map(pyInput)); i = inputs.length; break; }
    if (name.endsWith("*")) { args.push(`${name.slice(0, -1)}=[${inputs.slice(i).map(pyInput).join(", ")}]`); i = inputs.length; break; }
    if (i < inputs.length) args.push(`${name}=${pyInput(inputs[i++])}`);
  }
  // Inputs beyond the known names: keyword form, so the call stays valid Python.
  inputs.slice(i).forEach((v, k) => args.push(`input${i + k}=${pyInput(v)}`));
  spec.attrs.forEach((name, k) => {
    if (k < attrs.length) args.push(`${name}=${pyLiteral(attrs[k], BOOL_ATTRS.has(name))}`);
  });
  if (spec.order) {
    const rank = (a: string) => { const k = spec.order!.indexOf(a.split("=")[0]); return k < 0 ? spec.order!.length : k; };
    args.sort((a, b) => rank(a) - rank(b));
  }
  if (decision !== undefined) args.push(`decision=${pyLiteral(decision)}`);
  const call = `sch.${spec.method}(${args.join(", ")})`;
  const outs = outputs.map(String);
  return outs.length ? `${outs.join(", ")} = ${call}` : call;
}

/** The trace as Python lines (`sch.split(...)`), decisions written where they were sampled. */
export function traceLines(insts: unknown, decisions: unknown): string[] {
  const dec = new Map<number, Json>();
  for (const d of Array.isArray(decisions) ? decisions : []) {
    if (Array.isArray(d) && typeof d[0] === "number") dec.set(d[0], d[1] as Json);
  }
  const out: string[] = [];
  (Array.isArray(insts) ? insts : []).forEach((inst, idx) => {
    if (!Array.isArray(inst) || typeof inst[0] !== "string") return;
    const [kind, inputs, attrs, outputs] = inst as [string, Json[], Json[], Json[]];
    out.push(line(kind, Array.isArray(inputs) ? inputs : [], Array.isArray(attrs) ? attrs : [],
      Array.isArray(outputs) ? outputs : [], dec.get(idx)));
  });
  return out;
}
