/** Stage-graph panel: blocks (or Relax bindings) as nodes, buffers as edges, laid out by layer. */
import type { ShowMessage } from "../shared/messages";
import type { GraphEdge, GraphNode, StageGraphPayload } from "../shared/views";
import { header, notes, reveal, sourceLink } from "./common";
import { arr, h, mount, num, s, str } from "./dom";

const NODE_W = 170, NODE_H = 46, GAP_X = 150, GAP_Y = 28;

/** Node and edge texts are cut to fit (the full text is in the element's <title>). */
export function clip(text: string, max: number): string {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

export function nodeBox(n: GraphNode): { x: number; y: number } {
  return { x: 20 + (num(n.layer) ?? 0) * (NODE_W + GAP_X), y: 20 + (num(n.row) ?? 0) * (NODE_H + GAP_Y) };
}

function edgeLabel(e: GraphEdge): string {
  const shape = arr<number>(e.shape);
  return `${str(e.buffer)}${shape.length ? ` [${shape.join("×")}]` : ""}${e.dtype ? ` ${str(e.dtype)}` : ""}`;
}

export function renderStageGraph(root: HTMLElement, msg: ShowMessage): void {
  const p = msg.payload as StageGraphPayload;
  const nodes = arr<GraphNode>(p.nodes).filter((n) => n && typeof n.id === "string");
  // Edges name blocks by label (`matmul`) or io nodes by id (`input:A`): resolve both.
  const byKey = new Map<string, GraphNode>();
  for (const n of nodes) { byKey.set(n.id, n); if (n.label && !byKey.has(n.label)) byKey.set(n.label, n); }
  const edges = arr<GraphEdge>(p.edges).filter((e) => byKey.has(e.source) && byKey.has(e.target));
  const width = Math.max(...nodes.map((n) => nodeBox(n).x + NODE_W), 200) + 20;
  const height = Math.max(...nodes.map((n) => nodeBox(n).y + NODE_H), 100) + 20;
  const svg = s("svg", { class: "stage-graph", viewBox: `0 0 ${width} ${height}`, width, height, role: "img",
    "aria-label": `Stage graph: ${nodes.length} nodes, ${edges.length} edges` },
  s("defs", {}, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7,
    orient: "auto-start-reverse" }, s("path", { d: "M0 0L10 5L0 10z", class: "arrow-head" }))));
  const edgeLayer = s("g", { class: "edges" });
  for (const e of edges) {
    const a = nodeBox(byKey.get(e.source)!), b = nodeBox(byKey.get(e.target)!);
    const x1 = a.x + NODE_W, y1 = a.y + NODE_H / 2, x2 = b.x, y2 = b.y + NODE_H / 2;
    const mx = (x1 + x2) / 2;
    edgeLayer.appendChild(s("g", { class: "edge", "data-buffer": str(e.buffer) },
      s("path", { d: `M${x1} ${y1}C${mx} ${y1} ${mx} ${y2} ${x2} ${y2}`, "marker-end": "url(#arrow)" }),
      s("text", { x: mx, y: (y1 + y2) / 2 - 4, "text-anchor": "middle", class: "edge-label" }, clip(edgeLabel(e), 26)),
      s("title", {}, `${edgeLabel(e)} (${str(e.scope)})`)));
  }
  svg.appendChild(edgeLayer);
  const nodeLayer = s("g", { class: "nodes" });
  for (const n of nodes) {
    const { x, y } = nodeBox(n);
    const io = n.kind === "io";
    const g = s("g", { class: `node ${io ? "io" : "block"}`, "data-node": n.id, transform: `translate(${x} ${y})`,
      tabindex: io ? null : 0, role: io ? null : "button" },
    s("rect", { width: NODE_W, height: NODE_H, rx: io ? NODE_H / 2 : 4 }),
    s("text", { x: NODE_W / 2, y: io ? NODE_H / 2 + 4 : 18, "text-anchor": "middle", class: "node-label" },
      clip(io ? `${str(n.role)} ${str(n.label)}` : str(n.label, n.id), 22)),
    io ? null : s("text", { x: NODE_W / 2, y: 35, "text-anchor": "middle", class: "node-detail" },
      clip(str(n.schedule, str(n.iter_kinds)), 30)),
    s("title", {}, [str(n.label, n.id), n.iter_kinds ? `iterators ${str(n.iter_kinds)}` : "",
      num(n.flops) !== null ? `${n.flops} FLOPs` : "", num(n.bytes) !== null ? `${n.bytes} bytes` : "",
      n.schedule ? `best: ${str(n.schedule)}` : ""].filter(Boolean).join("\n")));
    nodeLayer.appendChild(g);
  }
  svg.appendChild(nodeLayer);
  const list = h("ul", { class: "node-list" }, ...nodes.filter((n) => n.kind !== "io").map((n) =>
    h("li", {}, sourceLink(str(n.label, n.id), null, msg, n.line), n.schedule ? ` — ${str(n.schedule)}` : "")));
  mount(root, h("div", { class: "stage-graph-panel" }, header("stageGraph", msg),
    h("div", { class: "graph-scroll" }, svg), list,
    p.source ? h("p", { class: "hint" }, `source: ${str(p.source)}; ${str(p.layout)}`) : null, notes(p)));
  // Clicking a block node jumps to its line (same as the list's link).
  svg.addEventListener("click", (e) => {
    const el = e.target instanceof Element ? e.target.closest(".node.block") : null;
    const node = el ? nodes.find((n) => n.id === el.getAttribute("data-node")) : undefined;
    if (node && typeof node.line === "number") reveal(msg, null, node.line);
  });
}
