"""Per-candidate data that needs TVM: MetaSchedule feature vectors and the scheduled loop nests.

``features`` replays each tuning record of a run (``TuningRecord.as_measure_candidate``) and
returns, per record, ``PerStoreFeature``'s rows (164 floats per written buffer, float32 bytes), the
written buffer of each row, and each block's enclosing loops (extent, kind, unroll pragma) in the
scheduled program; plus the same for the untuned program of each workload (the baseline).

The workload comes from MetaSchedule's own ``database_workload.json``, so a run can be analysed
even after its source file changed; ``text``/``unit``/``function`` (with ``constants``/``aliases``)
are a fallback for a database without a readable workload.  The core caches the answer as
``features.msgpack`` in the run directory (``asight_lsp.analysis.candidates``).
"""
from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path

import numpy as np

from ..store.runs import read_json_lines, read_records
from ..engine import wire
from .compat import ms, normalize_mod, s_tir, stub_tensor_intrin, tirx, tvm

FEATURES_SCHEMA = "asight.features/1"
KIND_CODES = {0: "s", 1: "p", 2: "v", 3: "u", 4: "t"}  # ForKind: serial parallel vectorized unrolled thread
UNROLL_PRAGMA = "pragma_auto_unroll_max_step"
PROGRESS_EVERY = 256


def _int(value) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def loop_nests(func) -> tuple[dict, list[str]]:
    """``{block: [[extent, kind, unroll_step], ...]}`` (outermost first) and the written buffers in
    first-store order (what the feature rows follow)."""
    blocks: dict = {}
    stores: list[str] = []

    def walk(stmt, loops):
        if stmt is None:
            return
        if isinstance(stmt, tirx.SeqStmt):
            for child in stmt.seq:
                walk(child, loops)
        elif isinstance(stmt, tirx.For):
            step = stmt.annotations.get(UNROLL_PRAGMA) if stmt.annotations else None
            entry = [_int(stmt.extent), KIND_CODES.get(int(stmt.kind), "s"), _int(step) or 0]
            walk(stmt.body, loops + [entry])
        elif isinstance(stmt, s_tir.SBlockRealize):
            walk(stmt.block, loops)
        elif isinstance(stmt, s_tir.SBlock):
            if stmt.name_hint != "root":
                blocks.setdefault(stmt.name_hint, loops)
            if stmt.init is not None:
                walk(stmt.init, loops)
            walk(stmt.body, loops)
        elif isinstance(stmt, tirx.BufferStore):
            if not isinstance(stmt.value, (tirx.IntImm, tirx.FloatImm)) and stmt.buffer.name not in stores:
                stores.append(stmt.buffer.name)
        elif isinstance(stmt, tirx.IfThenElse):
            walk(stmt.then_case, loops)
            walk(stmt.else_case, loops)
        elif hasattr(stmt, "body"):
            walk(stmt.body, loops)

    walk(func.body, [])
    return blocks, stores


def _prim_func(mod):
    for _, func in mod.functions.items():
        if isinstance(func, tirx.PrimFunc):
            return func
    raise ValueError("the workload holds no PrimFunc")


def _feature_entry(rows, sch) -> dict:
    blocks, stores = loop_nests(_prim_func(sch.mod))
    rows = np.asarray(rows, dtype="<f4")
    return {"n_rows": int(rows.shape[0]), "rows": rows.tobytes(), "stores": stores, "blocks": blocks,
            "error": None}


def _failed(message: str) -> dict:
    return {"n_rows": 0, "rows": b"", "stores": [], "blocks": {}, "error": message[:300]}


def _source_workload(params: dict):
    """The tuned PrimFunc rebuilt from source text (fallback when the workload file is unreadable)."""
    from .parse import parse_request
    parsed = parse_request(params)
    if isinstance(parsed, tirx.PrimFunc):
        return ms.database.Workload(normalize_mod(parsed))
    name = params["function"].split(".")[-1]
    return ms.database.Workload(normalize_mod(parsed[name]))


def _workloads(run_dir: Path, params: dict) -> list:
    out = []
    for row in read_json_lines(run_dir / "database_workload.json"):
        try:
            out.append(ms.database.Workload.from_json(row))
        except Exception:  # noqa: BLE001 - a workload TVM cannot read falls back to the source
            out.append(None)
    if not out and params.get("text"):
        out.append(_source_workload(params))
    if params.get("text"):
        out = [w if w is not None else _source_workload(params) for w in out]
    return out


def _extract_group(extractor, ctx, cands: list) -> list:
    """Feature rows of a batch; a candidate TVM cannot featurise fails alone."""
    try:
        return [f.numpy() for f in extractor.extract_from(ctx, cands)]
    except Exception:  # noqa: BLE001
        out = []
        for cand in cands:
            try:
                out.append(extractor.extract_from(ctx, [cand])[0].numpy())
            except Exception as err:  # noqa: BLE001
                out.append(err)
        return out


def features(params: dict, emit=None, off=None) -> dict:
    """Feature rows and loop nests of a run's records (all, or ``params["trials"]``)."""
    started = time.perf_counter()
    stub_tensor_intrin()
    run_dir = Path(params["run_dir"])
    wanted = set(params["trials"]) if params.get("trials") is not None else None
    records = [r for r in read_records(run_dir) if wanted is None or r["trial"] in wanted]
    workloads = _workloads(run_dir, params)
    extractor = ms.feature_extractor.PerStoreFeature()
    out: dict = {}
    groups: dict = defaultdict(list)
    for rec in records:
        workload = workloads[rec["workload"]] if 0 <= rec["workload"] < len(workloads) else None
        if workload is None:
            out[rec["trial"]] = _failed(f"workload {rec['workload']} is not readable")
            continue
        try:
            record = ms.database.TuningRecord.from_json(
                [[rec["insts"], rec["decisions"]], rec["run_secs"], rec["target"], rec["args_info"]], workload)
            groups[(rec["workload"], json.dumps(rec["target"], sort_keys=True))].append((rec["trial"], record))
        except Exception as err:  # noqa: BLE001
            out[rec["trial"]] = _failed(f"record does not load: {err}")
    baselines, done = {}, 0
    for (widx, _), items in groups.items():
        ctx = ms.TuneContext(mod=workloads[widx].mod, target=items[0][1].target, task_name=f"task{widx}")
        cands, trials = [], []
        for trial, record in items:
            try:
                cands.append(record.as_measure_candidate())
                trials.append(trial)
            except Exception as err:  # noqa: BLE001 - the trace no longer applies
                out[trial] = _failed(f"trace does not replay: {err}")
        for start in range(0, len(cands), PROGRESS_EVERY):
            chunk = cands[start:start + PROGRESS_EVERY]
            for trial, cand, rows in zip(trials[start:start + PROGRESS_EVERY], chunk,
                                         _extract_group(extractor, ctx, chunk)):
                out[trial] = _failed(str(rows)) if isinstance(rows, Exception) else _feature_entry(rows, cand.sch)
            done += len(chunk)
            if emit:
                emit({"type": "progress", "done": done, "total": len(records)})
        if widx not in baselines and items:
            baselines[widx] = _baseline(extractor, ctx, workloads[widx], items[0][1])
    return {"schema": FEATURES_SCHEMA, "feature_length": int(extractor.feature_vector_length),
            "records": {int(t): e for t, e in out.items()}, "baselines": {int(k): v for k, v in baselines.items()},
            "seconds": time.perf_counter() - started, "tvm": tvm.__version__}


def _baseline(extractor, ctx, workload, record) -> dict:
    """Features and loops of the untuned program (what the gains are measured against)."""
    try:
        sch = s_tir.Schedule(workload.mod)
        cand = ms.MeasureCandidate(sch, record.args_info)
        return _feature_entry(extractor.extract_from(ctx, [cand])[0].numpy(), sch)
    except Exception as err:  # noqa: BLE001
        return _failed(f"baseline features: {err}")


HANDLERS = {wire.FEATURES: features}
