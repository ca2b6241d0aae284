"""The candidate table of a run: every measured record with its latency, sampled decisions,
sketch, MetaSchedule feature rows and scheduled loop nests (TVM-free).

Feature rows and loop nests come from the TVM worker's ``features`` request
(``asight_lsp/worker/extract.py``) and are cached in the run directory as ``features.msgpack``
(``{"schema": "asight.features/1", "records": {trial: entry}, "baselines": {workload: entry}}``,
rows as little-endian float32 bytes).  The cache only grows: a run that was tuned further gets the
new trials extracted, the old ones are kept.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import msgpack
import numpy as np

from ..errors import AsightError, WorkerError
from ..store.runs import Run, RunMeta, read_records
from ..tvmscript.outline import Function, build_outline
from . import featurelayout as fl
from .traces import BlockInfo, Decision, TraceParser, block_infos, label_sketches

FEATURES_FILE = "features.msgpack"
FEATURES_SCHEMA = "asight.features/1"


# --------------------------------------------------------------------------- the feature cache


def read_feature_cache(run_dir: str | os.PathLike) -> dict | None:
    """The cached worker answer, or None when missing, unreadable or of another schema."""
    path = Path(run_dir) / FEATURES_FILE
    try:
        data = msgpack.unpackb(path.read_bytes(), raw=False, strict_map_key=False)
    except (OSError, ValueError, msgpack.exceptions.ExtraData, msgpack.exceptions.UnpackException):
        return None
    if not isinstance(data, dict) or data.get("schema") != FEATURES_SCHEMA:
        return None
    data.setdefault("records", {})
    data.setdefault("baselines", {})
    return data


def write_feature_cache(run_dir: str | os.PathLike, data: dict) -> None:
    """Write atomically (a reader never sees half a file)."""
    path = Path(run_dir) / FEATURES_FILE
    tmp = path.with_suffix(f".tmp{os.getpid()}")
    tmp.write_bytes(msgpack.packb(data, use_bin_type=True))
    os.replace(tmp, path)


def source_params(meta: RunMeta, run_dir: Path) -> dict:
    """Source text and unit of the run's function, for the worker's fallback (empty if unreadable)."""
    path = resolve_source(meta.file, run_dir)
    if path is None:
        return {}
    text = path.read_text(encoding="utf-8", errors="replace")
    outline = build_outline(text, str(path))
    fn = outline.function(meta.function)
    unit = next((u for u in outline.units if (fn and fn.id in u.functions) or u.name == meta.function), None)
    if unit is None or not unit.safe:
        return {}
    return {"text": text, "unit": {"start_line": unit.start_line, "end_line": unit.end_line},
            "constants": outline.constants, "aliases": outline.aliases, "function": meta.function}


def ensure_features(run: Run, worker=None, records: list[dict] | None = None, timeout: float | None = None,
                    on_event: Callable[[dict], None] | None = None) -> dict | None:
    """The feature cache of a run, extracting missing trials through ``worker`` (a WorkerClient).

    Without a worker, returns what is cached (or None).  A worker failure raises ``WorkerError``;
    the cache on disk is left as it was.
    """
    cache = read_feature_cache(run.path)
    records = records if records is not None else read_records(run.path)
    have = set(cache["records"]) if cache else set()
    missing = [r["trial"] for r in records if r["trial"] not in have]
    if not missing or worker is None:
        return cache
    params = {"run_dir": str(run.path), "trials": missing}
    try:
        params.update(source_params(run.load(), run.path))
    except (AsightError, OSError):
        pass
    reply = worker.request("features", params, timeout=timeout or 60 + 0.05 * len(missing), on_event=on_event)
    merged = cache or {"schema": FEATURES_SCHEMA, "records": {}, "baselines": {}}
    merged["records"].update({int(k): v for k, v in reply.get("records", {}).items()})
    for key, value in reply.get("baselines", {}).items():
        if int(key) not in merged["baselines"] or merged["baselines"][int(key)].get("error"):
            merged["baselines"][int(key)] = value
    merged["feature_length"] = reply.get("feature_length", fl.LENGTH)
    merged["tvm"] = reply.get("tvm")
    write_feature_cache(run.path, merged)
    return merged


def resolve_source(file: str | None, run_dir: Path) -> Path | None:
    """The run's source file: absolute, relative to the cwd, or to the run dir and its parents."""
    if not file:
        return None
    path = Path(file)
    if path.is_absolute():
        return path if path.is_file() else None
    for base in [Path.cwd(), run_dir, *run_dir.resolve().parents]:
        if (base / path).is_file():
            return base / path
    return None


def source_function(meta: RunMeta, run_dir: Path, text: str | None = None) -> Function | None:
    """The run's function in its source file (``sourcemap.Function``), or None."""
    if text is None:
        path = resolve_source(meta.file, run_dir)
        if path is None:
            return None
        text = path.read_text(encoding="utf-8", errors="replace")
    outline = build_outline(text, meta.file or "<run>")
    fn = outline.function(meta.function)
    if fn is None:
        unit = next((u for u in outline.units if u.name == meta.function), None)
        if unit and len(unit.functions) >= 1:
            fn = outline.function(unit.functions[0])
    return fn


# --------------------------------------------------------------------------- the table


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


def build_candidates(records: list[dict], cache: dict | None = None, meta: RunMeta | None = None,
                     function: Function | None = None) -> CandidateTable:
    """The candidate table from ``runs.read_records`` rows and the feature cache (optional)."""
    blocks = block_infos(function) if function is not None else {}
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


def load_candidates(run: Run, worker=None, function: Function | None = None, extract: bool = True,
                    on_event: Callable[[dict], None] | None = None) -> tuple[CandidateTable, list[str]]:
    """The candidate table of a run and notes on what is missing (e.g. features not extracted)."""
    meta = run.load()
    records = read_records(run.path)
    notes = []
    cache = read_feature_cache(run.path)
    if extract and worker is not None and records:
        try:
            cache = ensure_features(run, worker, records, on_event=on_event)
        except WorkerError as err:
            notes.append(f"feature extraction failed ({err}); using sampled decisions instead")
    if function is None:
        try:
            function = source_function(meta, run.path)
        except OSError:
            function = None
    if function is None:
        notes.append(f"source of {meta.function} not found ({meta.file}): blocks are named from the trace only")
    table = build_candidates(records, cache, meta, function)
    if records and not table.has_features:
        notes.append("no feature vectors cached for this run; the layout uses sampled decisions")
    return table, notes
