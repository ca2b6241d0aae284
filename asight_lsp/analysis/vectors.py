"""Numeric views of the candidates: feature matrix for the layout, decision columns for principles.

The layout's features are MetaSchedule's per-store rows aligned by the buffer they write (so a
column means the same thing in every candidate: "bytes of buffer 1 touched by the store to C");
when rows cannot be aligned (a candidate writes other buffers than another) the rows of each
candidate are summarised by their sum and max.  Without any feature rows the sampled decisions
are used (log2 of tile factors, categorical values, one-hot sketch).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from . import featurelayout as fl
from .candidates import CandidateTable


@dataclass
class DecisionColumn:
    """One sampled coordinate across candidates (NaN where a candidate does not have it)."""
    key: str
    inst: str
    block: str | None
    values: np.ndarray               # float64 (n,)
    kind: str                        # "ordinal" | "categorical"
    loop: int | None = None
    index: int | None = None         # factor position for tiles
    n_factors: int | None = None
    loop_var: str | None = None
    annotation: str | None = None
    categories: list | None = None   # for categorical columns: value labels by code


def decision_columns(table: CandidateTable) -> list[DecisionColumn]:
    """Columns of every sampled decision (tile factors split per position) plus the sketch."""
    n = len(table)
    cols: dict[str, DecisionColumn] = {}
    for i, decisions in enumerate(table.decisions):
        for d in decisions:
            if isinstance(d.value, list):
                for j, factor in enumerate(d.value):
                    key = f"{d.key}:{j}"
                    col = cols.get(key)
                    if col is None:
                        col = cols[key] = DecisionColumn(key, d.inst, d.block, np.full(n, np.nan), "ordinal",
                                                         loop=d.loop, index=j, n_factors=len(d.value),
                                                         loop_var=d.loop_var)
                    col.values[i] = float(factor)
            else:
                col = cols.get(d.key)
                if col is None:
                    numeric = isinstance(d.value, (int, float)) and d.inst != "SampleComputeLocation"
                    col = cols[d.key] = DecisionColumn(d.key, d.inst, d.block, np.full(n, np.nan),
                                                       "ordinal" if numeric else "categorical",
                                                       annotation=d.annotation, categories=None if numeric else [])
                if col.kind == "ordinal" and isinstance(d.value, (int, float)):
                    col.values[i] = float(d.value)
                else:
                    if col.categories is None:
                        col.categories = []
                    if d.value not in col.categories:
                        col.categories.append(d.value)
                    col.values[i] = float(col.categories.index(d.value))
    out = list(cols.values())
    if len(table.sketches) > 1:
        out.append(DecisionColumn("sketch", "Sketch", None, table.sketch.astype(np.float64), "categorical",
                                  categories=[s["label"] for s in table.sketches]))
    return out


def _aligned_rows(table: CandidateTable, idx: np.ndarray) -> tuple[np.ndarray, list[str]] | None:
    """Rows placed by written buffer: ``(len(idx), n_buffers * 164)``, or None if not alignable."""
    buffers: list[str] = []
    for i in idx:
        rows, stores = table.rows[i], table.stores[i]
        if rows is None or len(stores) != rows.shape[0]:
            return None
        for name in stores:
            if name not in buffers:
                buffers.append(name)
    slot = {name: k for k, name in enumerate(buffers)}
    X = np.zeros((len(idx), len(buffers) * fl.LENGTH), dtype=np.float32)
    for out_row, i in enumerate(idx):
        for r, name in enumerate(table.stores[i]):
            k = slot[name]
            X[out_row, k * fl.LENGTH:(k + 1) * fl.LENGTH] = table.rows[i][r]
    return X, buffers


def feature_matrix(table: CandidateTable, idx: np.ndarray) -> tuple[np.ndarray, str]:
    """The matrix the layout reduces, for candidates ``idx``, and a sentence saying what it is."""
    if all(table.rows[i] is not None for i in idx) and len(idx):
        aligned = _aligned_rows(table, idx)
        if aligned is not None:
            X, buffers = aligned
            return X, (f"MetaSchedule PerStoreFeature ({fl.LENGTH} per store), aligned by written buffer "
                       f"({', '.join(buffers)})")
        X = np.stack([np.concatenate([table.rows[i].sum(0), table.rows[i].max(0)]) for i in idx]).astype(np.float32)
        return X, f"MetaSchedule PerStoreFeature ({fl.LENGTH} per store), sum and max over stores"
    cols = decision_columns(table)
    parts = []
    for col in cols:
        values = col.values[idx]
        if col.kind == "categorical":
            codes = np.nan_to_num(values, nan=-1).astype(int)
            for code in range(len(col.categories or [])):
                parts.append((codes == code).astype(np.float32))
        else:
            parts.append(np.log2(np.nan_to_num(values, nan=0.0) + 1.0).astype(np.float32))
    if not parts:
        return np.zeros((len(idx), 1), dtype=np.float32), "no features (no sampled decisions)"
    return np.stack(parts, axis=1), "sampled decisions (log2 tile factors, categorical one-hot); no feature cache"


def standardise(X: np.ndarray) -> np.ndarray:
    """Z-scores per column; constant columns dropped (float32 to keep 20k x 1000 small)."""
    X = np.asarray(X, dtype=np.float32)
    if X.shape[0] == 0:
        return X
    std = X.std(axis=0)
    keep = std > 1e-6
    if not keep.any():
        return np.zeros((X.shape[0], 1), dtype=np.float32)
    X = X[:, keep]
    return (X - X.mean(axis=0)) / std[keep]


def log2_safe(x: float) -> float:
    return math.log2(x) if x and x > 0 else float("nan")
