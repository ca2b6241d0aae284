"""The candidate table of a run: every measured record with its latency, sampled decisions,
sketch, MetaSchedule feature rows and scheduled loop nests (pure: built from data passed in).

Records are ``store.runs.read_records`` rows; feature rows and loop nests are the entries of the
run's feature cache (``store/caches.py``, filled by ``services/run_data.py``).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..tvmscript.model import Function
from . import featurelayout as fl
from .traces import BlockInfo, Decision, TraceParser, block_infos, label_sketches


def decode_rows(entry: dict | None) -> np.ndarray | None:
    """Feature rows of one cache entry as ``(n_rows, 164)`` float32, or None."""
    if not entry or entry.get("error") or not entry.get("n_rows"):
        return None
    rows = np.frombuffer(entry["rows"], dtype="<f4")
    n = int(entry["n_rows"])
    if rows.size != n * fl.LENGTH:
        return None
    return rows.reshape(n, fl.LENGTH)


@dataclass
class CandidateTable:
    """Columns over the candidates of a run, in trial order (failed ones included, NaN latency)."""
    trials: np.ndarray
    latency_us: np.ndarray
    workload: np.ndarray
    sketch: np.ndarray
    sketches: list[dict]
    decisions: list[list[Decision]]
    rows: list[np.ndarray | None]
    stores: list[list[str]]
    loops: list[dict]
    baseline_rows: dict = field(default_factory=dict)
    baseline_stores: dict = field(default_factory=dict)
    baseline_loops: dict = field(default_factory=dict)
    baseline_us: float | None = None
    num_cores: int | None = None
    records: list[dict] = field(default_factory=list)
    blocks: dict[str, BlockInfo] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.trials)

    @property
    def valid(self) -> np.ndarray:
        """Candidates that were measured (finite latency)."""
        return np.isfinite(self.latency_us)

    @property
    def has_features(self) -> bool:
        return any(r is not None for r in self.rows)

    def best_index(self) -> int | None:
        if not self.valid.any():
            return None
        return int(np.nanargmin(self.latency_us))

    def category_labels(self) -> list[str]:
        return [s["label"] for s in self.sketches]


def _parse(records: list[dict], blocks: dict[str, BlockInfo]) -> tuple[np.ndarray, list[dict], list]:
    """Sketch id per record, the sketches, and each record's decisions."""
    parser = TraceParser(blocks)
    index: dict[tuple, int] = {}
    tags, ids, decisions = [], [], []
    for rec in records:
        sig, sketch_tag_list, decided = parser.parse(rec["insts"], rec["decisions"])
        if sig not in index:
            index[sig] = len(index)
            tags.append(sketch_tag_list)
        ids.append(index[sig])
        decisions.append(decided)
    labels = label_sketches(tags)
    ids_arr = np.asarray(ids, dtype=np.int32)
    sketches = [{"id": i, "label": labels[i], "tags": tags[i], "count": int((ids_arr == i).sum())}
                for i in range(len(labels))]
    return ids_arr, sketches, decisions


def _num_cores(target: Any) -> int | None:
    if isinstance(target, dict):
        try:
            return int(target.get("num-cores"))
        except (TypeError, ValueError):
            return None
    return None


def build_candidates(records: list[dict], cache: dict | None = None, meta: Any = None,
                     function: Function | None = None, blocks: dict[str, BlockInfo] | None = None) -> CandidateTable:
    """The candidate table from ``runs.read_records`` rows and the feature cache (optional);
    ``blocks``: the tuned kernel's blocks when the source function has none (a Relax task)."""
    blocks = blocks if blocks is not None else block_infos(function) if function is not None else {}
    entries = (cache or {}).get("records", {})
    sketch_ids, sketches, decisions = _parse(records, blocks)
    lat = np.array([r["latency_us"] if r["latency_us"] is not None else np.nan for r in records], dtype=np.float64)
    table = CandidateTable(
        trials=np.array([r["trial"] for r in records], dtype=np.int64), latency_us=lat,
        workload=np.array([r["workload"] for r in records], dtype=np.int32), sketch=sketch_ids, sketches=sketches,
        decisions=decisions,
        rows=[decode_rows(entries.get(r["trial"])) for r in records],
        stores=[list((entries.get(r["trial"]) or {}).get("stores") or []) for r in records],
        loops=[dict((entries.get(r["trial"]) or {}).get("blocks") or {}) for r in records],
        baseline_us=meta.baseline_us if meta else None, records=records, blocks=blocks,
        num_cores=_num_cores(meta.target if meta else None) or _num_cores(records[0]["target"] if records else None))
    for key, entry in ((cache or {}).get("baselines") or {}).items():
        table.baseline_rows[int(key)] = decode_rows(entry)
        table.baseline_stores[int(key)] = list(entry.get("stores") or [])
        table.baseline_loops[int(key)] = dict(entry.get("blocks") or {})
    return table


MAX_VIEW_RECORDS = 5000   # a view's candidates: a 2,048-trial model run has fewer per task


def view_records(records: list[dict], limit: int = MAX_VIEW_RECORDS) -> tuple[list[dict], str | None]:
    """The records a view extracts features for and draws: all of them, or the ``limit`` fastest
    measured ones (failed trials dropped first), in trial order, with a note saying so.  Each record
    costs the worker 2-6 ms and ~18 KB to extract: 10,000 tiny valid lines (17 KB in git) would hold a
    read-only `asight loops` for 24 s, and the records limit admits ~500,000."""
    if len(records) <= limit:
        return records, None
    ranked = sorted(records, key=lambda r: (r.get("latency_us") is None, r.get("latency_us") or 0.0, r["trial"]))
    kept = sorted(ranked[:limit], key=lambda r: r["trial"])
    return kept, f"showing the {limit:,} fastest of {len(records):,} candidates (a view draws at most {limit:,})"

