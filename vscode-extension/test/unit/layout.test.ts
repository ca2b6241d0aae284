import { test } from "node:test";
import * as assert from "node:assert/strict";
import { boxOf, categoryNumbers, corridorY, inside, labelSpot, NODE_H, portY, routeEdge, type Box, type Placed, type Point } from "../../src/webview/layout";

/** Points along a route's corners and the straight pieces between them (the curves stay in the gaps). */
function samples(points: Point[], step = 2): Point[] {
  const out: Point[] = [];
  for (let i = 1; i < points.length; i++) {
    const [a, b] = [points[i - 1], points[i]];
    const n = Math.max(1, Math.ceil(Math.hypot(b[0] - a[0], b[1] - a[1]) / step));
    for (let k = 0; k <= n; k++) out.push([a[0] + ((b[0] - a[0]) * k) / n, a[1] + ((b[1] - a[1]) * k) / n]);
  }
  return out;
}

/** A layered graph in which many edges skip layers (they must pass columns full of nodes). */
function graph(seed: number): { nodes: Placed[]; edges: [number, number][] } {
  let x = seed;
  const rnd = () => { x = (x * 1103515245 + 12345) % 2147483648; return x / 2147483648; };
  const nodes: Placed[] = [];
  const perLayer = [2, 4, 3, 5, 2];
  perLayer.forEach((n, layer) => { for (let row = 0; row < n; row++) nodes.push({ layer, row }); });
  const edges: [number, number][] = [];
  for (let i = 0; i < nodes.length; i++) for (let j = 0; j < nodes.length; j++) {
    if (nodes[j].layer > nodes[i].layer && rnd() < 0.3) edges.push([i, j]);
  }
  return { nodes, edges };
}

test("routed edges never enter a node's box, however many layers they skip", () => {
  for (let seed = 1; seed <= 20; seed++) {
    const { nodes, edges } = graph(seed);
    const boxes = nodes.map(boxOf);
    const columns = new Map<number, Box[]>();
    nodes.forEach((n, i) => columns.set(n.layer, [...(columns.get(n.layer) ?? []), boxes[i]]));
    let skipping = 0;
    for (const [i, j] of edges) {
      const a = boxes[i], b = boxes[j];
      const route = routeEdge(nodes[i], nodes[j], portY(a, 0, 1), portY(b, 0, 1), columns);
      assert.deepEqual(route.points[0], [a.x + a.w, a.y + NODE_H / 2]);
      assert.deepEqual(route.points[route.points.length - 1], [b.x, b.y + NODE_H / 2]);
      if (nodes[j].layer - nodes[i].layer > 1) skipping++;
      for (const [px, py] of samples(route.points)) {
        for (const box of boxes) assert.ok(!inside(box, px, py), `seed ${seed}: edge ${i}->${j} enters a box at ${px},${py}`);
      }
    }
    assert.ok(skipping > 0, "the case has edges that skip layers");
  }
});

test("a straight line would have crossed a node; the route goes by a free corridor", () => {
  const nodes: Placed[] = [{ layer: 0, row: 0 }, { layer: 1, row: 0 }, { layer: 2, row: 0 }];
  const boxes = nodes.map(boxOf);
  const columns = new Map([[0, [boxes[0]]], [1, [boxes[1]]], [2, [boxes[2]]]]);
  const route = routeEdge(nodes[0], nodes[2], portY(boxes[0], 0, 1), portY(boxes[2], 0, 1), columns);
  const straight = samples([route.points[0], route.points[route.points.length - 1]]);
  assert.ok(straight.some(([x, y]) => inside(boxes[1], x, y)), "the direct line goes through the middle node");
  assert.equal(route.points.length, 4);
  const y = route.points[1][1];
  assert.ok(y < boxes[1].y || y > boxes[1].y + boxes[1].h, "it passes above or below the middle node");
});

test("corridorY keeps a clear line and otherwise picks the nearest gap", () => {
  const col = [boxOf({ layer: 1, row: 0 }), boxOf({ layer: 1, row: 1 })];
  const below = col[1].y + col[1].h + 40;
  assert.equal(corridorY(col, below), below);
  const y = corridorY(col, col[0].y + col[0].h - 2);
  assert.ok(y > col[0].y + col[0].h && y < col[1].y, "between the two rows");
});

test("edges that do not go rightwards loop through the gap beside their column", () => {
  const a: Placed = { layer: 0, row: 0 }, b: Placed = { layer: 0, row: 2 };
  const route = routeEdge(a, b, 30, 220, new Map([[0, [boxOf(a), boxOf({ layer: 0, row: 1 }), boxOf(b)]]]));
  assert.ok(route.points.every(([x]) => x >= boxOf(a).x + boxOf(a).w));
});

test("categoryNumbers numbers categories from 1 in list order", () => {
  assert.deepEqual([...categoryNumbers([4, 0, 2])], [[4, 1], [0, 2], [2, 3]]);
});

test("a contour label sits between cells, never on a cell's number", () => {
  // a line running straight through two cell centres (0,0) and (10,0): the label goes where it is farthest from both
  const centres = [[0, 0], [10, 0], [20, 0]];
  const spot = labelSpot([[0, 0], [10, 0], [20, 0]], centres);
  assert.ok(Math.min(...centres.map((c) => Math.hypot(spot[0] - c[0], spot[1] - c[1]))) >= 5, String(spot));
  assert.deepEqual(labelSpot([[0, 0]], []), [0, 0]);
});

test("top-down flow (a model's kernel calls): routes never enter a box, and a chain stays one box wide", async () => {
  const { boxDown, portX, routeDown } = await import("../../src/webview/layout");
  for (let seed = 1; seed <= 20; seed++) {
    const { nodes, edges } = graph(seed);
    const boxes = nodes.map(boxDown);
    const rows = new Map<number, Box[]>();
    nodes.forEach((n, i) => rows.set(n.layer, [...(rows.get(n.layer) ?? []), boxes[i]]));
    for (const [i, j] of edges) {
      const a = boxes[i], b = boxes[j];
      const route = routeDown(nodes[i], nodes[j], portX(a, 0, 1), portX(b, 0, 1), rows);
      assert.deepEqual(route.points[0], [a.x + a.w / 2, a.y + a.h]);          // leaves the bottom side
      assert.deepEqual(route.points[route.points.length - 1], [b.x + b.w / 2, b.y]);   // enters the top side
      for (const [px, py] of samples(route.points)) {
        for (const box of boxes) assert.ok(!inside(box, px, py), `seed ${seed}: edge ${i}->${j} enters a box at ${px},${py}`);
      }
    }
  }
  const chain = Array.from({ length: 40 }, (_, layer) => boxDown({ layer, row: 0 }));
  assert.equal(new Set(chain.map((b) => b.x)).size, 1);                       // 40 calls: one column, 40 rows
  assert.ok(chain[39].y > chain[0].y + 39 * NODE_H);
});
