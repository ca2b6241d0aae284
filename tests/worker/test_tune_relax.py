"""Relax CNN: tasks extracted from the legalized+fused module, tuned with a small budget."""
from __future__ import annotations

from pathlib import Path

import pytest

from asight_lsp.services.tuning import TuneRequest, start_tune
from asight_lsp.store.runs import read_records

pytestmark = [pytest.mark.tvm, pytest.mark.slow]

FIX = Path(__file__).resolve().parents[2] / "fixtures"
TASKS = {"fused_conv2d_relu", "fused_conv2d_add_relu", "mean", "fused_matmul_add1"}


def test_relax_cnn_tasks_tuned(tmp_path, monkeypatch):
    monkeypatch.setenv("ASIGHT_TRIALS_PER_ITER", "2")     # 4 tasks x 2 trials: every task measured
    job = start_tune(TuneRequest(file=str(FIX / "relax_cnn.py"), function="Net", trials=8,
                                 store_root=str(tmp_path), seed=0))
    meta = job.wait(600)
    assert meta.state == "done", meta.error
    assert meta.kind == "relax" and meta.function == "Net"
    assert {t["name"] for t in meta.tasks} == TASKS and all(t["weight"] == 1.0 for t in meta.tasks)
    records = read_records(job.run.path)
    assert len(records) == meta.trials_done == 8
    assert len({r["workload"] for r in records}) == 4              # each task got its trials
    per_task = meta.extra["best_tasks_us"]
    assert set(per_task) == TASKS and all(v is not None and v > 0 for v in per_task.values())
    assert meta.extra["untuned_tasks"] == []
    assert meta.baseline_us > 0 and meta.best_us > 0               # both measured end to end on the VM
    assert meta.extra["best_tasks_sum_us"] == pytest.approx(sum(per_task.values()))
    progress = [e for e in job.run.events() if e["type"] == "progress"]
    assert {e["task"] for e in progress} == TASKS
