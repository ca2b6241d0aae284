/**
 * Stage-graph panel: blocks (or Relax bindings) as nodes, buffers as edges, laid out by layer; edges
 * routed around the nodes (layout.ts), each block with its measured cost (latency and share of the
 * program, from the run's profile) or "no measurement".
 */
import { formatLatency } from "../shared/format";
import type { ShowMessage } from "../shared/messages";
import type { GraphEdge, GraphNode, StageCost, StageGraphPayload } from "../shared/views";
import { header, notes, pct, reveal, sourceLink } from "./common";
import { post } from "./host";
import { arr, h, mount, num, obj, s, str } from "./dom";
import { glossary } from "./glossary";
import { boxDown, boxOf, GAP_X, NODE_H, NODE_W, portX, portY, routeDown, routeEdge, type Box, type Placed, type Route } from "./layout";

/** How a graph is laid out: left to right by layer (a kernel's blocks), or top-down (a model's kernel
 * calls: a long chain grows downwards and fits the panel's width). */
interface Flow {
  down: boolean;
  box(p: Placed): Box;
  route(a: Placed, b: Placed, from: number, to: number, layers: Map<number, Box[]>): Route;
  port(b: Box, i: number, n: number): number;
}
const ACROSS: Flow = { down: false, box: boxOf, route: routeEdge, port: portY };
const DOWN: Flow = { down: true, box: boxDown, route: routeDown, port: portX };

/** Node and edge texts are cut to fit (the full text is in the element's <title>). */
export function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

export function nodeBox(n: GraphNode, flow: Flow = ACROSS): { x: number; y: number } {
  const b = flow.box({ layer: num(n.layer) ?? 0, row: num(n.row) ?? 0 });
  return { x: b.x, y: b.y };
}

/** `lv3 [1×8×16×16] float32`; `short` (the top-down flow, where labels sit side by side) leaves out the dtype. */
function edgeLabel(e: GraphEdge, short = false): string {
  const shape = arr<number>(e.shape);
  return `${str(e.buffer)}${shape.length ? ` [${shape.join("×")}]` : ""}${e.dtype && !short ? ` ${str(e.dtype)}` : ""}`;
}

/** `135 µs · 96 %` of a measured block, else `no measurement`. */
export function costText(cost: StageCost | null | undefined): string {
  const us = num(cost?.us);
  if (us === null) return "no measurement";
  const share = num(cost?.share);
  const fused = arr<string>(cost?.shared_with).length ? " (fused)" : "";
  return `${formatLatency(us)}${share !== null ? ` · ${pct(share)}` : ""}${fused}`;
}

const placed = (n: GraphNode) => ({ layer: num(n.layer) ?? 0, row: num(n.row) ?? 0 });

function edgeLayer(nodes: GraphNode[], edges: GraphEdge[], byKey: Map<string, GraphNode>, flow: Flow): SVGGElement {
  const columns = new Map<number, Box[]>();
  for (const n of nodes) {
    const p = placed(n);
    columns.set(p.layer, [...(columns.get(p.layer) ?? []), flow.box(p)]);
  }
  // Spread the edges of a node over its side, ordered by the other end's height (fewer crossings).
  const outs = new Map<string, GraphEdge[]>(), ins = new Map<string, GraphEdge[]>();
  for (const e of edges) {
    const a = byKey.get(e.source)!.id, b = byKey.get(e.target)!.id;
    outs.set(a, [...(outs.get(a) ?? []), e]);
    ins.set(b, [...(ins.get(b) ?? []), e]);
  }
  const rowOf = (key: string) => placed(byKey.get(key)!).row + placed(byKey.get(key)!).layer / 1000;
  for (const list of outs.values()) list.sort((x, y) => rowOf(x.target) - rowOf(y.target));
  for (const list of ins.values()) list.sort((x, y) => rowOf(x.source) - rowOf(y.source));
  const g = s("g", { class: "edges" });
  for (const e of edges) {
    const a = byKey.get(e.source)!, b = byKey.get(e.target)!;
    const aOut = outs.get(a.id)!, bIn = ins.get(b.id)!;
    const route = flow.route(placed(a), placed(b), flow.port(flow.box(placed(a)), aOut.indexOf(e), aOut.length),
      flow.port(flow.box(placed(b)), bIn.indexOf(e), bIn.length), columns);
    g.appendChild(s("g", { class: "edge", "data-buffer": str(e.buffer), "data-source": a.id, "data-target": b.id },
      s("path", { d: route.d, "marker-end": "url(#arrow)" }),
      s("text", { x: route.label[0], y: route.label[1], "text-anchor": flow.down ? "start" : "middle", class: "edge-label" },
        clip(edgeLabel(e, flow.down), flow.down ? 18 : 21)),
      s("title", {}, `${edgeLabel(e)} (${str(e.scope)})`)));
  }
  return g;
}

/** `call 1 of 2 · 4 trials` under a kernel call's task name (a model's stage graph). */
export function kernelDetail(n: GraphNode): string {
  const calls = num(n.calls) ?? 1;
  const trials = num(n.trials);
  return [calls > 1 ? `call ${(num(n.call) ?? 0) + 1} of ${calls}` : "one call",
    n.weights_only ? "weights only" : trials === null ? "" : `${trials} trial${trials === 1 ? "" : "s"}`].filter(Boolean).join(" · ");
}

function kernelElement(n: GraphNode, flow: Flow): SVGGElement {
  const { x, y } = nodeBox(n, flow);
  const cost = obj(n.cost) as StageCost;
  const share = num(cost.share);
  const bar = share !== null ? s("rect", { class: "cost-bar", x: 0, y: NODE_H - 4, height: 4,
    width: Math.max(1, Math.min(1, share) * NODE_W), rx: 1 }) : null;
  return s("g", { class: "node block kernel", "data-node": n.id, "data-task": str(n.task), transform: `translate(${x} ${y})`,
    tabindex: 0, role: "button" },
  s("rect", { class: "node-box", width: NODE_W, height: NODE_H, rx: 4 }), bar,
  s("text", { x: NODE_W / 2, y: 17, "text-anchor": "middle", class: "node-label" }, clip(str(n.task, n.id), 24)),
  s("text", { x: NODE_W / 2, y: 33, "text-anchor": "middle", class: "node-detail" }, kernelDetail(n)),
  s("text", { x: NODE_W / 2, y: 49, "text-anchor": "middle", class: "node-cost" }, costText(cost)),
  s("title", {}, [str(n.task), kernelDetail(n), `bindings ${arr<string>(n.bindings).join(", ")}`,
    `cost: ${costText(cost)} (${str(cost.source)})`, "click: the blocks of this kernel"].join("\n")));
}

function nodeElement(n: GraphNode, flow: Flow): SVGGElement {
  if (n.kind === "kernel") return kernelElement(n, flow);
  const { x, y } = nodeBox(n, flow);
  const io = n.kind === "io";
  const cost = obj(n.cost) as StageCost;
  const measured = num(cost.us) !== null;
  const share = num(cost.share);
  const bar = measured && share !== null ? s("rect", { class: "cost-bar", x: 0, y: NODE_H - 4, height: 4,
    width: Math.max(1, Math.min(1, share) * NODE_W), rx: 1 }) : null;
  return s("g", { class: `node ${io ? "io" : "block"}`, "data-node": n.id, transform: `translate(${x} ${y})`,
    tabindex: io ? null : 0, role: io ? null : "button" },
  s("rect", { class: "node-box", width: NODE_W, height: NODE_H, rx: io ? NODE_H / 2 : 4 }),
  bar,
  s("text", { x: NODE_W / 2, y: io ? NODE_H / 2 + 4 : 17, "text-anchor": "middle", class: "node-label" },
    clip(io ? `${str(n.role)} ${str(n.label)}` : str(n.label, n.id), 22)),
  io ? null : s("text", { x: NODE_W / 2, y: 33, "text-anchor": "middle", class: "node-detail" },
    clip(str(n.schedule, str(n.iter_kinds, cost.kernel ? `kernel ${str(cost.kernel)}` : "")), 28)),
  io || n.cost === undefined ? null : s("text", { x: NODE_W / 2, y: 49, "text-anchor": "middle",
    class: measured ? "node-cost" : "node-cost none" }, costText(cost)),
  s("title", {}, [str(n.label, n.id), n.iter_kinds ? `iterators ${str(n.iter_kinds)} (S = spatial, R = reduction)` : "",
    num(n.flops) !== null ? `${n.flops} FLOPs` : "", num(n.bytes) !== null ? `${n.bytes} bytes` : "",
    n.schedule ? `best schedule: ${str(n.schedule)}` : "",
    n.cost !== undefined ? `cost: ${costText(cost)} (${str(cost.source)})` : "",
    cost.kernel ? `kernel call ${str(cost.kernel)}${arr<string>(cost.shared_with).length ?
      `, fused with ${arr<string>(cost.shared_with).join(", ")}` : ""}` : ""].filter(Boolean).join("\n")));
}

export function renderStageGraph(root: HTMLElement, msg: ShowMessage): void {
  const p = msg.payload as StageGraphPayload;
  const nodes = arr<GraphNode>(p.nodes).filter((n) => n && typeof n.id === "string");
  // Edges name blocks by label (`matmul`) or io nodes by id (`input:A`): resolve both.
  const byKey = new Map<string, GraphNode>();
  for (const n of nodes) { byKey.set(n.id, n); if (n.label && !byKey.has(n.label)) byKey.set(n.label, n); }
  const edges = arr<GraphEdge>(p.edges).filter((e) => byKey.has(e.source) && byKey.has(e.target));
  // A model's kernel calls flow top-down (a long chain grows downwards); a kernel's blocks left to right.
  const flow = p.level === "model" ? DOWN : ACROSS;
  const right = flow.down ? 70 : GAP_X / 3 + 4;   // room for the labels of edges beside / a loop-back edge
  const width = Math.max(...nodes.map((n) => nodeBox(n, flow).x + NODE_W), 200) + right;
  const height = Math.max(...nodes.map((n) => nodeBox(n, flow).y + NODE_H), 100) + 30;
  const svg = s("svg", { class: "stage-graph", viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
    "aria-label": `Stage graph: ${nodes.length} nodes, ${edges.length} edges` },
  s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7,
    orient: "auto-start-reverse" }, s("path", { d: "M0 0L10 5L0 10z", class: "arrow-head" }))),
  edgeLayer(nodes, edges, byKey, flow), s("g", { class: "nodes" }, ...nodes.map((n) => nodeElement(n, flow))));
  if (flow.down) {          // fits the panel's width: never a sideways scroll (a wide layer shrinks instead)
    svg.classList.add("down");
    svg.style.maxWidth = "100%";
    svg.style.height = "auto";
  } else {
    svg.style.minWidth = `${Math.round(width * 0.8)}px`; // narrower panels scroll rather than shrink the text further
  }
  const blocks = nodes.filter((n) => n.kind !== "io");
  const list = h("ul", { class: "node-list" }, ...blocks.map((n) =>
    h("li", { "data-node": n.id }, sourceLink(n.kind === "kernel" ? `${str(n.task)} (${kernelDetail(n)})` : str(n.label, n.id),
      null, msg, p.level === "kernel" ? null : n.line),
      n.cost !== undefined ? h("span", { class: "cost" }, ` — ${costText(obj(n.cost) as StageCost)}`) : null,
      n.schedule ? ` — best schedule: ${str(n.schedule)}` : "")));
  const sources = [...new Set(blocks.map((n) => str(obj(n.cost).source)).filter(Boolean))];
  const model = p.level === "model";
  const intro = model
    ? "Boxes are the model's kernel calls (each a fused kernel, a task of the run); arrows are the tensors one call " +
      "computes and the next reads. Weights and what is folded from them are not drawn. Under each name: which call, " +
      "the task's trials, then the call's measured time · share of the kernel time. Click a box for its blocks."
    : p.level === "kernel"
      ? `Blocks of ${str(p.task)}'s tuned kernel (its scheduled code); arrows are the buffers one block writes and the ` +
        `next reads. ${str(p.kernelCost)}.`
      : "Boxes are the program's stages (blocks); arrows are the buffers one stage writes and the " +
        "next reads. Under each name: what the best schedule did to it, then its measured cost (latency · share of the " +
        "program); the bar at the bottom of a box is that share.";
  const back = p.level === "kernel" ? h("button", { type: "button", class: "secondary back" }, "← the model's kernels") : null;
  back?.addEventListener("click", () => post({ type: "clearTask" }));
  mount(root, h("div", { class: "stage-graph-panel" }, header("stageGraph", msg),
    h("p", { class: "hint" }, intro), p.summary ? h("p", { class: "hint summary" }, str(p.summary)) : null, back,
    h("div", { class: "graph-scroll" }, svg), list,
    sources.length ? h("p", { class: "hint cost-source" }, `cost: ${sources.join("; ")}`) : null,
    p.source ? h("p", { class: "hint" }, `source: ${str(p.source)}; ${str(p.layout)}`) : null, notes(p),
    glossary(["stage", "S / R (iterators)", "share", "compute-at", "cache read / write"])));
  // Clicking a kernel opens its blocks; clicking a block node jumps to its line (same as the list's link).
  svg.addEventListener("click", (e) => {
    const el = e.target instanceof Element ? e.target.closest(".node.block") : null;
    const node = el ? nodes.find((n) => n.id === el.getAttribute("data-node")) : undefined;
    if (node?.kind === "kernel" && node.task) post({ type: "selectTask", task: node.task });
    else if (node && typeof node.line === "number" && p.level !== "kernel") reveal(msg, null, node.line);
  });
}
