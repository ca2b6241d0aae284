"""A real tune whose candidates fail to build: the failures are grouped by reason in run.json, the CLI
summary and the run info, and every full message is in the run's failures.log."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from asight_lsp.store.runs import RunStore
from asight_lsp.views.runs import run_summary

pytestmark = [pytest.mark.tvm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_failed_builds_are_grouped_with_their_reason_and_log(tmp_path):
    text = (ROOT / "fixtures" / "matmul_space.py").read_text()
    src = tmp_path / "nobuild.py"
    src.write_text(text.replace("    sch.parallel(i0)\n", '    sch.bind(i0, "threadIdx.x")\n'))   # no GPU thread on llvm
    store = tmp_path / ".asight"
    proc = subprocess.run([sys.executable, "-m", "asight_lsp", "tune", str(src), "--space", "schedule_matmul",
                           "--trials", "8", "--work-dir", str(store)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "ASIGHT_TRIALS_PER_ITER": "8"})
    assert proc.returncode == 1, proc.stderr
    meta = RunStore(str(store)).get("latest").load()
    groups = meta.extra["failures"]
    assert sum(g["count"] for g in groups) == 8
    top = groups[0]
    assert top["stage"] == "build" and "An exception occurred" not in top["reason"]
    assert "Error" in top["reason"] and "(in " in top["reason"]   # the error's line and where it was raised
    log = Path(top["log"])
    assert log == RunStore(str(store)).get(meta.id).path / "failures.log"
    entries = log.read_text().split("=== trial ")[1:]
    assert len(entries) == 8 and all("· build" in e.splitlines()[0] for e in entries)
    # the CLI: the summary lists the reason and the log, the error names the most frequent reason
    assert "8 candidate(s) failed; by reason:" in proc.stdout and f"8 × build: {top['reason']}" in proc.stdout
    assert str(log) in proc.stdout
    assert f"most often (8 × build): {top['reason']}" in proc.stderr
    # the run info the server sends (asight/runs, lens, panels)
    assert run_summary(meta)["failures"] == [{k: top[k] for k in ("reason", "count", "stage", "log")}]
    print(json.dumps(groups, indent=1))


def test_a_kernel_that_indexes_with_an_integer_input_is_measured(tmp_path):
    """An embedding lookup (fixtures/embedding.py: rows of a table picked by an int64 input).
    MetaSchedule's default runner filled the ids with random integers, every trial read out of bounds
    and died ("Subprocess terminated"), and the run ended with 0 measured; the runner's integer
    inputs are zero now (``inputs.runner_arguments``)."""
    store = tmp_path / ".asight"
    proc = subprocess.run([sys.executable, "-m", "asight_lsp", "tune", str(ROOT / "fixtures" / "embedding.py"),
                           "--trials", "4", "--work-dir", str(store)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    meta = RunStore(str(store)).get("latest").load()
    assert meta.trials_done >= 1 and not meta.extra.get("failures")
    assert meta.best_us is not None and meta.best_us > 0


def test_a_task_whose_buffers_outgrow_the_machine_is_refused_up_front(tmp_path):
    src = tmp_path / "huge.py"
    src.write_text('''from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def k(A: T.Buffer((2**62,), "float32"), B: T.Buffer((2**62,), "float32")):
    for i in range(2**62):
        with T.sblock("b"):
            vi = T.axis.spatial(2**62, i)
            B[vi] = A[vi] + T.float32(1)
''')
    proc = subprocess.run([sys.executable, "-m", "asight_lsp", "tune", str(src), "--trials", "2", "--work-dir",
                           str(tmp_path / "s")], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 1, proc.stderr
    assert "buffer 'A' holds 4,611,686,018,427,387,904 elements" in proc.stderr and "every trial allocates" in proc.stderr
    assert "XGBoost" not in proc.stderr and "data.cc" not in proc.stderr
