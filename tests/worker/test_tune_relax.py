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
    per_task = meta.extra["tuning"]["best_tasks_us"]
    assert set(per_task) == TASKS and all(v is not None and v > 0 for v in per_task.values())
    progress = [e for e in job.run.events() if e["type"] == "progress"]
    assert {e["task"] for e in progress} == TASKS
    # the headline: the whole program, untuned vs built with the chosen records, interleaved
    record = meta.measurement
    assert record["scope"] == "program" and record["by"] == "tuning job" and record["trials"] == 8
    assert meta.baseline_us == record["untuned"]["median_us"] and meta.best_us == record["tuned"]["median_us"]
    assert record["harness"]["rounds"] >= 5 and min(record["harness"]["calls_per_repeat"].values()) >= 2
    # the tuned build really ran the tuned kernels: every task with a chosen record was applied
    chosen = {c["task"] for c in record["chosen"]}
    kept_default = {d["task"] for d in record["defaults"]}     # no trial beat the default schedule there
    assert chosen | kept_default == TASKS and not chosen & kept_default
    assert set(record["applied"]["from_records"]) == chosen
    assert record["applied"]["missing"] == [] and record["check"]["ok"] is True
    for entry in record["chosen"]:   # each task's best by re-measurement of its top candidates
        assert 1 <= len(entry["candidates"]) <= 5 and entry["trial"] in {c["trial"] for c in entry["candidates"]}
        assert entry["measured_us"] == min(c["measured_us"] for c in entry["candidates"] if "measured_us" in c)


def test_a_build_that_ignores_the_records_fails_loudly():
    """compile_relax of a database whose records match no kernel would silently run untuned ones."""
    from asight_lsp.worker import remeasure
    from asight_lsp.worker.compat import ms
    from asight_lsp.worker.parse import parse_unit
    from asight_lsp.worker.programs import measuring_target
    from asight_lsp.tvmscript.outline import build_outline
    text = (FIX / "relax_cnn.py").read_text()
    outline = build_outline(text)
    unit = outline.units[0]
    mod = parse_unit(text.splitlines(), {"start_line": unit.start_line, "end_line": unit.end_line},
                     outline.constants, outline.aliases)
    target = measuring_target(None)
    empty = ms.database.MemoryDatabase()
    assert remeasure.applied_kernels(mod, empty, target, off=frozenset())["from_records"] == []
    with pytest.raises(ValueError, match="applied none of the 1 tuned kernels"):
        remeasure.compare_relax(mod, "main", empty, target, ["fused_conv2d_relu"], timed=False, off=frozenset())
