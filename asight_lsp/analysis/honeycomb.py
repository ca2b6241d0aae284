"""Honeycomb layout: 2-D reduction, clustering, hex cells grown from cluster centres.

Pipeline (``layout``): standardised features -> PCA to 2-D -> KMeans with k chosen by the mean
silhouette (k = 2..8, silhouette on a seeded sample of at most 2,000 points) -> clusters packed
together (``pack_centres``) -> hex cells grown outward from each cluster centre.  Growth visits each cluster's points nearest-first (clusters
interleaved by their rank fraction, so they grow at the same pace) and puts each point into the
nearest cell of its own cluster that still has room, or claims the nearest free hex next to the
cluster's region.  So every cluster is one connected patch of cells, every point sits in exactly
one cell, and points close in the plane share or neighbour a cell.

Hex geometry: pointy-top axial coordinates ``(q, r)``; centre ``x = size*sqrt(3)*(q + r/2)``,
``y = size*1.5*r``.  The hex size is chosen so that the points, at their own positions, would
occupy about ``target_cells`` hexes; ``capacity = ceil(2 n / target_cells)`` (with no slack, points
in dense spots are pushed several cells away and near neighbours end up apart).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

SQRT3 = math.sqrt(3.0)
NEIGHBOURS = ((1, 0), (1, -1), (0, -1), (-1, 0), (-1, 1), (0, 1))
K_RANGE = (2, 8)
SILHOUETTE_SAMPLE = 2000
FIT_SAMPLE = 5000     # KMeans is fitted on a seeded sample of this many points, then predicts all
CAPACITY_SLACK = 2.0  # a cell holds up to twice the average: dense spots spill over less


@dataclass
class Layout:
    """The honeycomb of ``n`` points.  ``cell_of[i]`` is the cell of point i."""
    xy: np.ndarray                    # (n, 2) plane coordinates (reduced, clusters packed)
    labels: np.ndarray                # (n,) cluster of each point
    centres: np.ndarray               # (k, 2)
    cell_of: np.ndarray               # (n,) cell index
    cells_qr: np.ndarray              # (m, 2) axial coordinates
    cells_cluster: np.ndarray         # (m,)
    size: float
    capacity: int
    k: int
    reduction: dict = field(default_factory=dict)
    clustering: dict = field(default_factory=dict)
    pca_xy: np.ndarray | None = None  # the reduced coordinates before packing

    @property
    def cells_xy(self) -> np.ndarray:
        return hex_centres(self.cells_qr, self.size)


def hex_centres(qr: np.ndarray, size: float) -> np.ndarray:
    qr = np.asarray(qr, dtype=np.float64).reshape(-1, 2)
    return np.stack([size * SQRT3 * (qr[:, 0] + qr[:, 1] / 2.0), size * 1.5 * qr[:, 1]], axis=1)


def hex_corners(x: float, y: float, size: float) -> list[list[float]]:
    """The six corners of a pointy-top hex, counter-clockwise from the upper right."""
    return [[x + size * math.cos(math.radians(60 * i - 30)), y + size * math.sin(math.radians(60 * i - 30))]
            for i in range(6)]


def to_axial(xy: np.ndarray, size: float) -> np.ndarray:
    """Nearest hex (axial ``q, r``) of each point, by cube rounding."""
    q = (SQRT3 / 3.0 * xy[:, 0] - xy[:, 1] / 3.0) / size
    r = (2.0 / 3.0 * xy[:, 1]) / size
    x, z = q, r
    y = -x - z
    rx, ry, rz = np.round(x), np.round(y), np.round(z)
    dx, dy, dz = np.abs(rx - x), np.abs(ry - y), np.abs(rz - z)
    fix_x = (dx > dy) & (dx > dz)
    fix_z = ~fix_x & (dz >= dy)
    rx = np.where(fix_x, -ry - rz, rx)
    rz = np.where(fix_z, -rx - ry, rz)
    return np.stack([rx, rz], axis=1).astype(np.int64)


def hex_distance(a: tuple[int, int], b: tuple[int, int]) -> int:
    dq, dr = a[0] - b[0], a[1] - b[1]
    return (abs(dq) + abs(dr) + abs(dq + dr)) // 2


def target_cells(n: int) -> int:
    """How many cells a layout of n points aims at: 4 sqrt(n), at least 12, at most n."""
    return int(min(n, max(12, round(4 * math.sqrt(max(n, 1))))))


def reduce_2d(X: np.ndarray, seed: int = 0) -> tuple[np.ndarray, dict]:
    """PCA to two components via the eigen-decomposition of the covariance (d x d), which is far
    cheaper than an SVD of the n x d data at 20k candidates.  Signs are fixed (the largest loading of
    each component is positive) so a layout does not flip between runs."""
    n, d = X.shape
    if n < 3 or d == 0:
        xy = np.zeros((n, 2))
        if n and d:
            xy[:, : min(d, 2)] = X[:, : min(d, 2)]
        return xy, {"method": "pca", "explained_variance": [0.0, 0.0]}
    centred = np.asarray(X, dtype=np.float64) - X.mean(axis=0)
    values, vectors = np.linalg.eigh(centred.T @ centred / max(n - 1, 1))
    order = np.argsort(values)[::-1][:2]
    comps = vectors[:, order]
    comps *= np.where(comps[np.abs(comps).argmax(axis=0), np.arange(comps.shape[1])] < 0, -1.0, 1.0)
    xy = centred @ comps
    if xy.shape[1] < 2:
        xy = np.concatenate([xy, np.zeros((n, 2 - xy.shape[1]))], axis=1)
    total = float(values.sum())
    ratio = [float(values[i] / total) if total > 0 else 0.0 for i in order] + [0.0] * (2 - len(order))
    return xy, {"method": "pca", "explained_variance": ratio, "solver": "covariance eigh"}


def cluster(xy: np.ndarray, seed: int = 0, k_range: tuple[int, int] = K_RANGE) -> tuple[np.ndarray, np.ndarray, dict]:
    """KMeans on the plane, k by the best mean silhouette score."""
    n = len(xy)
    distinct = len(np.unique(np.round(xy, 9), axis=0)) if n else 0
    k_hi = min(k_range[1], distinct - 1, n - 1)
    criterion = (f"k = argmax of the mean silhouette score over k = {k_range[0]}..{k_range[1]} "
                 f"(KMeans fitted on a seeded sample of at most {FIT_SAMPLE} points, silhouette on at most "
                 f"{SILHOUETTE_SAMPLE})")
    if k_hi < k_range[0]:
        labels = np.zeros(n, dtype=np.int32)
        centres = xy.mean(axis=0, keepdims=True) if n else np.zeros((1, 2))
        return labels, centres, {"method": "kmeans", "k": 1, "criterion": criterion, "scores": {},
                                 "note": "too few distinct points to cluster"}
    rng = np.random.default_rng(seed)
    fit_on = xy[np.sort(rng.choice(n, FIT_SAMPLE, replace=False))] if n > FIT_SAMPLE else xy
    sample = np.sort(rng.choice(len(fit_on), SILHOUETTE_SAMPLE, replace=False)) \
        if len(fit_on) > SILHOUETTE_SAMPLE else np.arange(len(fit_on))
    pts = fit_on[sample]
    sq = (pts ** 2).sum(axis=1)
    dist = np.sqrt(np.maximum(sq[:, None] + sq[None, :] - 2.0 * pts @ pts.T, 0.0))  # once, for every k
    scores, fits = {}, {}
    for k in range(k_range[0], k_hi + 1):
        km_labels, km_centres = kmeans(fit_on, k, seed=seed)
        if len(np.unique(km_labels)) < 2:
            continue
        scores[k] = silhouette(dist, km_labels[sample])
        fits[k] = (km_labels, km_centres)
    if not scores:
        labels = np.zeros(n, dtype=np.int32)
        return labels, xy.mean(axis=0, keepdims=True), {"method": "kmeans", "k": 1, "criterion": criterion,
                                                        "scores": {}}
    best = max(scores, key=lambda k: (round(scores[k], 9), -k))
    km_labels, km_centres = fits[best]
    labels = nearest_centre(xy, km_centres) if len(fit_on) < n else km_labels
    return (labels.astype(np.int32), km_centres,
            {"method": "kmeans", "k": best, "criterion": criterion, "fit_sample": int(len(fit_on)),
             "scores": {str(k): round(v, 4) for k, v in scores.items()}})


def kmeans(X: np.ndarray, k: int, seed: int = 0, n_init: int = 3, max_iter: int = 100) -> tuple[np.ndarray, np.ndarray]:
    """Lloyd's k-means with k-means++ seeding, best inertia of ``n_init`` seeded starts.

    Written in numpy (2-D points, at most ``FIT_SAMPLE`` of them) rather than taken from
    scikit-learn: importing ``sklearn.cluster`` took 4–5 s in a fresh process on this VM, longer
    than the whole payload (docs/analytics.md, "Speed")."""
    X = np.asarray(X, dtype=np.float64)
    rng = np.random.default_rng(seed)
    tol = 1e-4 * float(X.var(axis=0).mean())   # scikit-learn's convergence rule: centre shift² ≤ tol
    best = None
    for _ in range(n_init):
        centres = _plusplus(X, k, rng)
        for _ in range(max_iter):
            labels = nearest_centre(X, centres)
            sums = np.zeros_like(centres)
            np.add.at(sums, labels, X)
            counts = np.bincount(labels, minlength=k)[:, None]
            moved = np.where(counts > 0, sums / np.maximum(counts, 1), centres)
            shift = float(((moved - centres) ** 2).sum())
            centres = moved
            if shift <= tol:
                break
        labels = nearest_centre(X, centres)
        inertia = float(((X - centres[labels]) ** 2).sum())
        if best is None or inertia < best[0] - 1e-12:
            best = (inertia, labels, centres)
    return best[1], best[2]


def _plusplus(X: np.ndarray, k: int, rng: np.random.Generator) -> np.ndarray:
    centres = [X[rng.integers(len(X))]]
    d2 = ((X - centres[0]) ** 2).sum(axis=1)
    for _ in range(1, k):
        total = d2.sum()
        pick = rng.choice(len(X), p=d2 / total) if total > 0 else rng.integers(len(X))
        centres.append(X[pick])
        d2 = np.minimum(d2, ((X - X[pick]) ** 2).sum(axis=1))
    return np.array(centres)


def nearest_centre(X: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """Index of the nearest centre of each point."""
    d2 = (X ** 2).sum(axis=1)[:, None] - 2.0 * X @ centres.T + (centres ** 2).sum(axis=1)[None, :]
    return d2.argmin(axis=1).astype(np.int32)


def silhouette(dist: np.ndarray, labels: np.ndarray) -> float:
    """Mean silhouette coefficient from a precomputed distance matrix (as sklearn defines it:
    a point alone in its cluster scores 0)."""
    codes = np.unique(labels, return_inverse=True)[1].ravel()
    k = int(codes.max()) + 1
    onehot = np.zeros((len(codes), k))
    onehot[np.arange(len(codes)), codes] = 1.0
    sums = dist @ onehot                      # distance of each point to all points of each cluster
    sizes = onehot.sum(axis=0)
    own = sizes[codes]
    a = sums[np.arange(len(codes)), codes] / np.maximum(own - 1, 1)
    mean_other = sums / np.maximum(sizes, 1)
    mean_other[np.arange(len(codes)), codes] = np.inf
    b = mean_other.min(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        s = np.where(own > 1, (b - a) / np.maximum(a, b), 0.0)
    return float(np.nan_to_num(s).mean())


def hex_size_for(xy: np.ndarray, cells: int) -> float:
    """Hex size at which the points, where they are, occupy about ``cells`` hexes (bisection)."""
    span = float(np.ptp(xy, axis=0).max()) if len(xy) else 0.0
    if span <= 1e-12:
        return 1.0
    lo, hi = span / (4.0 * max(cells, 1)), span
    for _ in range(18):
        mid = math.sqrt(lo * hi)
        qr = to_axial(xy, mid)
        occupied = len(np.unique(qr[:, 0] * 4_000_003 + qr[:, 1]))
        if occupied > cells:
            lo = mid
        else:
            hi = mid
    return hi


class _Grower:
    """State of the growth: owner of each hex, open cells and frontier per cluster."""

    def __init__(self, k: int, size: float, capacity: int):
        self.size, self.capacity = size, capacity
        self.owner: dict[tuple[int, int], int] = {}     # hex -> cell id
        self.qr: list[tuple[int, int]] = []
        self.cluster: list[int] = []
        self.count: list[int] = []
        self.open = [set() for _ in range(k)]           # cell ids with room
        self.frontier = [set() for _ in range(k)]       # free hexes next to the cluster's cells
        self.arrays: list[tuple | None] = [None] * k    # cached candidate arrays per cluster

    def centre(self, h: tuple[int, int]) -> tuple[float, float]:
        return self.size * SQRT3 * (h[0] + h[1] / 2.0), self.size * 1.5 * h[1]

    def claim(self, h: tuple[int, int], c: int) -> int:
        cid = len(self.qr)
        self.owner[h] = cid
        self.qr.append(h)
        self.cluster.append(c)
        self.count.append(0)
        self.open[c].add(cid)
        for j in range(len(self.frontier)):
            if h in self.frontier[j]:
                self.frontier[j].discard(h)
                self.arrays[j] = None
        for dq, dr in NEIGHBOURS:
            nb = (h[0] + dq, h[1] + dr)
            if nb not in self.owner:
                self.frontier[c].add(nb)
        self.arrays[c] = None
        return cid

    def seed_hex(self, h: tuple[int, int]) -> tuple[int, int]:
        """The free hex nearest to ``h`` (ring search)."""
        if h not in self.owner:
            return h
        for radius in range(1, 10_000):
            q, r = h[0] - radius, h[1] + radius
            for dq, dr in NEIGHBOURS:
                for _ in range(radius):
                    if (q, r) not in self.owner:
                        return (q, r)
                    q, r = q + dq, r + dr
        raise RuntimeError("no free hex")  # pragma: no cover

    def candidates(self, c: int) -> tuple:
        if self.arrays[c] is None:
            cells = sorted(self.open[c])
            hexes = sorted(self.frontier[c])
            pts = [self.centre(self.qr[i]) for i in cells] + [self.centre(h) for h in hexes]
            self.arrays[c] = (np.asarray(pts, dtype=np.float64).reshape(-1, 2), cells, hexes)
        return self.arrays[c]

    def place(self, p: np.ndarray, c: int) -> int:
        """Cell for a point of cluster c at plane position p."""
        pts, cells, hexes = self.candidates(c)
        if len(pts):
            d = ((pts - p) ** 2).sum(axis=1)
            j = int(np.argmin(d))
            cid = cells[j] if j < len(cells) else self.claim(hexes[j - len(cells)], c)
        else:  # enclosed by other clusters: overfill its nearest own cell
            own = [i for i, cl in enumerate(self.cluster) if cl == c]
            d = [((np.asarray(self.centre(self.qr[i])) - p) ** 2).sum() for i in own]
            cid = own[int(np.argmin(d))]
        return self.fill(cid, c)

    def fill(self, cid: int, c: int) -> int:
        self.count[cid] += 1
        if self.count[cid] >= self.capacity and cid in self.open[c]:
            self.open[c].discard(cid)
            self.arrays[c] = None
        return cid


def grow(xy: np.ndarray, labels: np.ndarray, centres: np.ndarray, size: float, capacity: int) -> tuple:
    """Assign every point to a hex cell, growing each cluster's region from its centre."""
    n, k = len(xy), len(centres)
    grower = _Grower(k, size, capacity)
    order_key = np.zeros(n)
    for c in range(k):
        members = np.flatnonzero(labels == c)
        if not len(members):
            continue
        dist = np.linalg.norm(xy[members] - centres[c], axis=1)
        ranks = np.empty(len(members))
        ranks[np.argsort(dist, kind="stable")] = np.arange(len(members))
        order_key[members] = ranks / len(members)
    order = np.lexsort((labels, order_key))
    started = [False] * k
    cell_of = np.empty(n, dtype=np.int64)
    centre_hex = to_axial(np.asarray(centres, dtype=np.float64).reshape(-1, 2), size)
    for i in order:
        c = int(labels[i])
        if not started[c]:  # the nearest point of a cluster opens the cell at its centre
            started[c] = True
            cid = grower.claim(grower.seed_hex((int(centre_hex[c, 0]), int(centre_hex[c, 1]))), c)
            cell_of[i] = grower.fill(cid, c)
            continue
        cell_of[i] = grower.place(xy[i], c)
    return cell_of, np.asarray(grower.qr, dtype=np.int64).reshape(-1, 2), np.asarray(grower.cluster, dtype=np.int32)


PACK_SAMPLE = 400  # points per cluster used to test for collisions while packing


def pack_centres(xy: np.ndarray, labels: np.ndarray, centres: np.ndarray, size: float,
                 seed: int = 0) -> np.ndarray:
    """Cluster centres pulled toward their common centroid until the clusters (nearly) touch.

    Clusters are placed nearest-to-the-centroid first; each slides rigidly along its own ray from
    the centroid to the closest position (never farther out than it was) where none of its points
    comes within one hex size of a point of a cluster already placed.  Directions are kept and each
    cluster keeps its shape; the empty space between clusters goes, so the honeycomb is one compact
    picture in which neighbouring clusters share borders.
    """
    from scipy.spatial import cKDTree
    k = len(centres)
    if k < 2:
        return centres.copy()
    rng = np.random.default_rng(seed)
    samples = []
    for c in range(k):
        members = np.flatnonzero(labels == c)
        if len(members) > PACK_SAMPLE:
            members = np.sort(rng.choice(members, PACK_SAMPLE, replace=False))
        samples.append(xy[members] - centres[c])  # shape relative to the centre
    counts = np.bincount(labels, minlength=k)
    mid = np.average(centres, axis=0, weights=np.maximum(counts, 1))
    offsets = centres - mid
    dist = np.linalg.norm(offsets, axis=1)
    packed = centres.copy()
    placed_pts = np.zeros((0, 2))
    for c in np.argsort(dist, kind="stable"):
        if not len(placed_pts):
            packed[c] = mid  # the first cluster sits on the centroid
        elif len(samples[c]):
            tree = cKDTree(placed_pts)
            unit = offsets[c] / dist[c] if dist[c] > 1e-12 else np.array([1.0, 0.0])
            for t in np.linspace(0.0, dist[c], max(2, int(dist[c] / (0.25 * size)) + 2)):
                gap, _ = tree.query(mid + t * unit + samples[c], k=1)
                if gap.min() >= size:
                    packed[c] = mid + t * unit
                    break
        placed_pts = np.concatenate([placed_pts, packed[c] + samples[c]])
    return packed


def layout(X: np.ndarray, seed: int = 0, cells: int | None = None) -> Layout:
    """The honeycomb of standardised features ``X`` (n, d)."""
    from threadpoolctl import threadpool_limits  # numpy's BLAS (eigh, matrix products); no scikit-learn here
    n = len(X)
    with threadpool_limits(limits=1):  # small problems: threads cost more than they give (2-core box)
        xy, reduction = reduce_2d(X, seed)
        labels, centres, clustering = cluster(xy, seed)
    m = cells or target_cells(n)
    capacity = max(1, math.ceil(CAPACITY_SLACK * n / max(m, 1)))
    size = hex_size_for(xy, m)
    packed = pack_centres(xy, labels, centres, size, seed)
    plane = xy + (packed - centres)[labels]  # each cluster moved rigidly to its packed centre
    cell_of, qr, owners = grow(plane, labels, packed, size, capacity)
    clustering = dict(clustering, packing="cluster centres pulled toward their centroid until the clusters "
                                          "touch; each cluster keeps its own shape")
    return Layout(plane, labels, packed, cell_of, qr, owners, size, capacity, int(len(centres)),
                  reduction, clustering, pca_xy=xy)


def adjacent_pairs(qr: np.ndarray) -> list[tuple[int, int]]:
    """Pairs of cell indices (i < j) whose hexes share an edge."""
    index = {(int(q), int(r)): i for i, (q, r) in enumerate(qr)}
    pairs = []
    for (q, r), i in index.items():
        for dq, dr in NEIGHBOURS[:3]:
            j = index.get((q + dq, r + dr))
            if j is not None:
                pairs.append((min(i, j), max(i, j)))
    return pairs


def shared_edge(a: np.ndarray, b: np.ndarray, size: float) -> list[float]:
    """The edge between two adjacent hexes (centres a, b): ``[x1, y1, x2, y2]``."""
    mid = (a + b) / 2.0
    direction = (b - a) / np.linalg.norm(b - a)
    half = size / 2.0  # an edge of a regular hex is as long as its size
    normal = np.array([-direction[1], direction[0]])
    p1, p2 = mid + normal * half, mid - normal * half
    return [float(p1[0]), float(p1[1]), float(p2[0]), float(p2[1])]
