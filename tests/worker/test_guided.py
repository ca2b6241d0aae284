"""A guided run through the real tuning job: constraints honoured, run readable like any other."""
from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from asight_lsp.analysis.constraints import trace_violations
from asight_lsp.services.run_data import build_view as build
from asight_lsp.services.tuning import TuneRequest, start_tune
from asight_lsp.store.runs import RunStore
from tests.conftest import FIXTURES, ROOT

pytestmark = pytest.mark.tvm


def test_guided_run_honours_its_constraints(tmp_path):
    shutil.copytree(FIXTURES / "runs" / "mbr128", tmp_path / "runs" / "mbr128")
    job = start_tune(TuneRequest(file=str(FIXTURES / "matmul_bias_relu.py"), trials=8, store_root=str(tmp_path),
                                 seed=1, guided_by="mbr128"))
    meta = job.wait(600)
    assert meta.state == "done", meta.error
    assert meta.guided_by == "mbr128" and meta.extra["seeded_records"] == 40
    constraints = meta.extra["constraints"]
    assert constraints and meta.extra["guidance"]["principles"][0]["text"]
    records = job.run.records()
    new = records[40:]
    assert len(new) >= 4
    assert not [r["trial"] for r in new if trace_violations(r["insts"], r["decisions"], constraints)]
    seeded_violations = [r for r in records[:40] if trace_violations(r["insts"], r["decisions"], constraints)]
    assert seeded_violations, "the constraint must exclude part of the unguided space, or the test proves nothing"
    payload = build("principles", job.run.path)
    assert payload["status"] == "ok" and payload["run"]
    # a plain re-tune of the same function does not resume the guided run
    found = RunStore(tmp_path).find_resumable(meta.file, meta.function, meta.source_hashes, meta.target_label)
    assert found is None or not found.load().guided_by


def test_cli_guided_by_unknown_run_is_one_line(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "asight_lsp", "tune", "fixtures/matmul64.py", "--trials", "8",
                           "--work-dir", str(tmp_path), "--guided-by", "nope"], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.strip().startswith("asight: error: no run 'nope'") and "Traceback" not in proc.stderr
