"""The worker's ``features`` handler on a real recorded run (40 MetaSchedule records of
matmul+bias+relu): feature rows, written buffers, scheduled loop nests, baseline; cached by the core."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from asight_lsp.store.caches import FEATURES_FILE, read_feature_cache
from asight_lsp.analysis.candidates import decode_rows
from asight_lsp.services.run_data import ensure_features
from asight_lsp.store.runs import Run
from asight_lsp.services.run_data import build_view as build

ROOT = Path(__file__).resolve().parents[2]
RUN = ROOT / "fixtures" / "runs" / "mbr128"

pytestmark = pytest.mark.tvm


def fresh_run(tmp_path: Path) -> Run:
    """A copy of the recorded run without its feature cache, pointing at the absolute source path."""
    target = tmp_path / "mbr128"
    shutil.copytree(RUN, target)
    (target / FEATURES_FILE).unlink()
    meta = json.loads((target / "run.json").read_text())
    meta["file"] = str(ROOT / "fixtures" / "matmul_bias_relu.py")
    (target / "run.json").write_text(json.dumps(meta))
    return Run(target)


def test_features_of_a_real_run(worker, tmp_path):
    run = fresh_run(tmp_path)
    events = []
    cache = ensure_features(run, worker, on_event=events.append)
    assert (run.path / FEATURES_FILE).exists() and read_feature_cache(run.path) is not None
    assert sorted(cache["records"]) == list(range(40)) and cache["feature_length"] == 164
    assert events and events[-1]["done"] == 40
    recorded = read_feature_cache(RUN)
    for trial, entry in cache["records"].items():
        assert entry["error"] is None and entry["stores"] == ["C", "E", "D"]
        rows = decode_rows(entry)
        assert rows.shape == (3, 164) and np.isfinite(rows).all()
        assert np.allclose(rows, decode_rows(recorded["records"][trial]), atol=1e-4)  # deterministic
        nests = entry["blocks"]
        assert {"matmul_update", "relu"} <= set(nests)
        assert all(k in "spvut" for nest in nests.values() for _, k, _ in nest)
    # the relu block is parallel + vectorised by MetaSchedule's post-processor in every candidate
    assert all(any(k == "p" for _, k, _ in e["blocks"]["relu"]) for e in cache["records"].values())
    base = cache["baselines"][0]
    assert base["stores"] == ["C", "E", "D"] and base["blocks"]["matmul"] == [[128, "s", 0]] * 3
    # a vector loop in the scheduled nest shows up in the feature row of its store
    entry = cache["records"][36]
    rows = decode_rows(entry)
    vec_len = int(round(2 ** rows[2, 18] - 1))  # D's row: vectorize length (slog)
    assert vec_len == [e for e, k, _ in entry["blocks"]["relu"] if k == "v"][0]


def test_source_fallback_without_workload_file(worker, tmp_path):
    run = fresh_run(tmp_path)
    (run.path / "database_workload.json").unlink()
    cache = ensure_features(run, worker)
    assert all(e["error"] is None and e["n_rows"] == 3 for e in cache["records"].values())


def test_payload_through_the_worker(worker, tmp_path):
    run = fresh_run(tmp_path)
    p = build("searchSpace", run.path, worker=worker)
    assert p["status"] == "ok" and p["features"]["source"].startswith("MetaSchedule PerStoreFeature")
    assert p["contour"]["lines"] and {c["id"] for c in p["contour"]["categories"]} == {"memory", "compute",
                                                                                        "parallelism"}
