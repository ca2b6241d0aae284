/**
 * Pure geometry of the panels (no DOM, so node's test runner can check it): the stage graph's node
 * boxes and edge routes, and the honeycomb's category numbers.
 */

export const NODE_W = 170, NODE_H = 60, GAP_X = 120, GAP_Y = 30, PAD = 20;

export interface Box { x: number; y: number; w: number; h: number }
export interface Placed { layer: number; row: number }
export type Point = [number, number];

/** Where a node sits: columns by layer, rows within the layer. */
export function boxOf(n: Placed): Box {
  return { x: PAD + n.layer * (NODE_W + GAP_X), y: PAD + n.row * (NODE_H + GAP_Y), w: NODE_W, h: NODE_H };
}

/** Is (x, y) strictly inside the box shrunk by `inset`? */
export function inside(b: Box, x: number, y: number, inset = 0.5): boolean {
  return x > b.x + inset && x < b.x + b.w - inset && y > b.y + inset && y < b.y + b.h - inset;
}

/**
 * A y at which a straight horizontal line crosses the column of `layer` without touching a node:
 * `ideal` itself when it is clear (with a margin), else the centre of the nearest free corridor
 * (above the first node, between two rows, or below the last).
 */
export function corridorY(columnBoxes: Box[], ideal: number, margin = 6): number {
  const boxes = [...columnBoxes].sort((a, b) => a.y - b.y);
  if (!boxes.some((b) => ideal > b.y - margin && ideal < b.y + b.h + margin)) return ideal;
  const free: number[] = [boxes[0].y - GAP_Y / 2];
  for (let i = 1; i < boxes.length; i++) {
    const top = boxes[i - 1].y + boxes[i - 1].h, bottom = boxes[i].y;
    if (bottom - top >= 2 * margin) free.push((top + bottom) / 2);
  }
  free.push(boxes[boxes.length - 1].y + boxes[boxes.length - 1].h + GAP_Y / 2);
  return free.reduce((a, b) => (Math.abs(b - ideal) < Math.abs(a - ideal) ? b : a));
}

export interface Route {
  /** SVG path data. */
  d: string;
  /** Where the edge's label goes (middle of its first stretch between two columns). */
  label: Point;
  /** The corners the path goes through, start and end included (for tests and hit checks). */
  points: Point[];
}

const r1 = (v: number) => Math.round(v * 10) / 10;

/** A smooth step from p to q with horizontal tangents; its control points stay within [p.x, q.x]. */
function curve(p: Point, q: Point): string {
  const mx = r1((p[0] + q[0]) / 2);
  return `C${mx} ${r1(p[1])} ${mx} ${r1(q[1])} ${r1(q[0])} ${r1(q[1])}`;
}

/**
 * The route of an edge from `a` (leaving its right side at `fromY`) to `b` (entering its left side
 * at `toY`). Between two columns the path is a curve that stays in the gap (no node lives there);
 * across a column it passes by a free corridor of that column, so it never crosses a node's box.
 * An edge that does not go rightwards (a graph with a cycle is drawn in one column) loops through
 * the gap to the right of its column and enters `b` from the right.
 */
export function routeEdge(a: Placed, b: Placed, fromY: number, toY: number, columns: Map<number, Box[]>): Route {
  const A = boxOf(a), B = boxOf(b);
  const start: Point = [A.x + A.w, fromY];
  if (b.layer <= a.layer) {
    const out = A.x + A.w + GAP_X / 3;
    const end: Point = [B.x + B.w, toY];
    const d = `M${r1(start[0])} ${r1(start[1])}C${r1(out)} ${r1(start[1])} ${r1(out)} ${r1(end[1])} ${r1(end[0])} ${r1(end[1])}`;
    return { d, label: [r1(out - 4), r1((start[1] + end[1]) / 2)], points: [start, end] };
  }
  const end: Point = [B.x, toY];
  const points: Point[] = [start];
  let d = `M${r1(start[0])} ${r1(start[1])}`;
  let prev = start;
  for (let layer = a.layer + 1; layer < b.layer; layer++) {
    const left = PAD + layer * (NODE_W + GAP_X);
    const t = (left - start[0]) / (end[0] - start[0]);
    const y = corridorY(columns.get(layer) ?? [], start[1] + t * (end[1] - start[1]));
    const enter: Point = [left, y], leave: Point = [left + NODE_W, y];
    d += curve(prev, enter) + `L${r1(leave[0])} ${r1(leave[1])}`;
    points.push(enter, leave);
    prev = leave;
  }
  d += curve(prev, end);
  points.push(end);
  const first = points[1];
  return { d, label: [r1((start[0] + first[0]) / 2), r1((start[1] + first[1]) / 2 - 5)], points };
}

/** Ports: the i-th of n edges on a side of a box leaves/enters at this y (spread over the side). */
export function portY(box: Box, i: number, n: number): number {
  return box.y + (box.h * (i + 1)) / (n + 1);
}

// ---- top-down flow (a model's kernel calls): layers are rows, so a long chain grows downwards and the
// graph fits a panel's width (issue 23: a model's stage graph scrolled sideways at 1000×800).

/** Gaps of the top-down flow: between nodes of one layer, and between layers (room for edge labels). */
export const DOWN_GAP_X = 30, DOWN_GAP_Y = 56;

/** Where a node sits in the top-down flow: rows by layer, columns within the layer. */
export function boxDown(n: Placed): Box {
  return { x: PAD + n.row * (NODE_W + DOWN_GAP_X), y: PAD + n.layer * (NODE_H + DOWN_GAP_Y), w: NODE_W, h: NODE_H };
}

/** Ports of the top-down flow: the i-th of n edges on the top or bottom side leaves/enters at this x. */
export function portX(box: Box, i: number, n: number): number {
  return box.x + (box.w * (i + 1)) / (n + 1);
}

/** An x at which a vertical line crosses the row of a layer without touching a node (`corridorY` turned
 * sideways); a tie goes to the right-hand corridor (the left margin is narrow). */
export function corridorX(rowBoxes: Box[], ideal: number, margin = 6): number {
  const boxes = [...rowBoxes].sort((a, b) => a.x - b.x);
  if (!boxes.some((b) => ideal > b.x - margin && ideal < b.x + b.w + margin)) return ideal;
  const free: number[] = [Math.max(4, boxes[0].x - DOWN_GAP_X / 2)];
  for (let i = 1; i < boxes.length; i++) {
    const left = boxes[i - 1].x + boxes[i - 1].w, right = boxes[i].x;
    if (right - left >= 2 * margin) free.push((left + right) / 2);
  }
  free.push(boxes[boxes.length - 1].x + boxes[boxes.length - 1].w + DOWN_GAP_X / 2);
  return free.reduce((a, b) => (Math.abs(b - ideal) <= Math.abs(a - ideal) ? b : a));
}

/** A smooth step from p down to q with vertical tangents. */
function curveDown(p: Point, q: Point): string {
  const my = r1((p[1] + q[1]) / 2);
  return `C${r1(p[0])} ${my} ${r1(q[0])} ${my} ${r1(q[0])} ${r1(q[1])}`;
}

/**
 * The route of an edge in the top-down flow, from `a`'s bottom side (at `fromX`) to `b`'s top side (at
 * `toX`); across the rows of layers in between it passes by a free corridor, so it never crosses a node.
 * An edge that does not go downwards loops out to the right of both boxes. Its label sits beside the
 * first stretch, to the right of the line (`labelLeft`: where the label text starts).
 */
export function routeDown(a: Placed, b: Placed, fromX: number, toX: number, rows: Map<number, Box[]>): Route {
  const A = boxDown(a), B = boxDown(b);
  if (b.layer <= a.layer) {
    const out = Math.max(A.x + A.w, B.x + B.w) + DOWN_GAP_X / 2;
    const start: Point = [A.x + A.w, A.y + A.h / 2], end: Point = [B.x + B.w, B.y + B.h / 2];
    const d = `M${r1(start[0])} ${r1(start[1])}C${r1(out)} ${r1(start[1])} ${r1(out)} ${r1(end[1])} ${r1(end[0])} ${r1(end[1])}`;
    return { d, label: [r1(out + 2), r1((start[1] + end[1]) / 2)], points: [start, end] };
  }
  const start: Point = [fromX, A.y + A.h], end: Point = [toX, B.y];
  const points: Point[] = [start];
  let d = `M${r1(start[0])} ${r1(start[1])}`;
  let prev = start;
  for (let layer = a.layer + 1; layer < b.layer; layer++) {
    const top = PAD + layer * (NODE_H + DOWN_GAP_Y);
    const t = (top - start[1]) / (end[1] - start[1]);
    const x = corridorX(rows.get(layer) ?? [], start[0] + t * (end[0] - start[0]));
    const enter: Point = [x, top], leave: Point = [x, top + NODE_H];
    d += curveDown(prev, enter) + `L${r1(leave[0])} ${r1(leave[1])}`;
    points.push(enter, leave);
    prev = leave;
  }
  d += curveDown(prev, end);
  points.push(end);
  const first = points[1];
  return { d, label: [r1((start[0] + first[0]) / 2 + 6), r1((start[1] + first[1]) / 2 + 4)], points };
}

/** Category numbers for the key: 1, 2, … in the order of the categories list (ids may be sparse). */
export function categoryNumbers(ids: number[]): Map<number, number> {
  return new Map(ids.map((id, i) => [id, i + 1]));
}

/**
 * Where a contour's label goes: the point along its line (vertices and segment midpoints) farthest
 * from every honeycomb cell centre, where the cells' numbers are drawn; ties go to the point nearest
 * the middle of the line. `centres` are the cells' [x, y]; returns [x, y].
 */
export function labelSpot(pts: readonly number[][], centres: readonly number[][]): number[] {
  const spots: number[][] = [];
  for (let i = 0; i < pts.length; i++) {
    spots.push(pts[i]);
    if (i + 1 < pts.length) spots.push([(pts[i][0] + pts[i + 1][0]) / 2, (pts[i][1] + pts[i + 1][1]) / 2]);
  }
  const middle = (spots.length - 1) / 2;
  let best = spots[Math.floor(middle)] ?? [0, 0], bestScore = -Infinity;
  spots.forEach((q, k) => {
    let clear = Infinity;
    for (const c of centres) clear = Math.min(clear, Math.hypot(q[0] - c[0], q[1] - c[1]));
    const score = clear - 1e-6 * Math.abs(k - middle);
    if (score > bestScore) { bestScore = score; best = q; }
  });
  return best;
}
