"""A design space written by the user, tuned for real (64^3 matmul, tiny budgets), and its failures."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from asight_lsp.analysis.spacestats import record_values, site_stats
from asight_lsp.store.runs import Run, read_records
from asight_lsp.tvmscript.design_spaces import find_spaces

pytestmark = [pytest.mark.tvm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TEXT = (ROOT / "fixtures" / "matmul_space.py").read_text()


def asight(*args: str, env: dict | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asight_lsp", *args], capture_output=True, text=True,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT), "ASIGHT_TRIALS_PER_ITER": "8",
                                                **(env or {})})


def _line(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines()) if needle in line)


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    work = tmp_path_factory.mktemp("space")
    src = work / "matmul_space.py"
    src.write_text(TEXT)
    proc = asight("tune", str(src), "--space", "schedule_matmul", "--trials", "16", "--seed", "0",
                  "--work-dir", str(work / ".asight"), "--json")
    assert proc.returncode == 0, proc.stderr
    return work, src, json.loads(proc.stdout)


def test_space_tuned_end_to_end(tuned):
    work, src, data = tuned
    assert data["state"] == "done" and data["function"] == "matmul64" and data["trials_done"] == 16
    assert 0 < data["best_us"] < data["baseline_us"]
    space = data["extra"]["space"]
    assert (space["function"], space["mode"], space["applies_to"]) == ("schedule_matmul", "alone", "matmul64")
    # every sampling instruction of the design space is mapped to the line of its sch.sample_* call
    static_lines = [s.line for s in find_spaces(TEXT)[0].sites]
    mapped = space["mapping"]["instructions"]
    assert [m["line"] for m in mapped] == static_lines == [s["line"] for s in space["sites"]]
    assert [m["kind"] for m in mapped] == ["SamplePerfectTile"] * 3 + ["SampleCategorical"]
    assert mapped[0]["line"] == _line(TEXT, "i_tiles = sch.sample_perfect_tile")
    # every record comes from the user's space and the mapping reads its decisions
    records = read_records(Run(data["run_dir"]).path)
    assert len(records) == 16
    values = [record_values(r, space["mapping"]) for r in records]
    assert all(v is not None for v in values)
    assert all(v[3] in (0, 16, 64) and v[0][0] * v[0][1] == 64 for v in values)
    stats = site_stats(records, space["mapping"])
    best = min((r for r in records if r["latency_us"] is not None), key=lambda r: r["latency_us"])
    assert stats[mapped[0]["line"]].best == [record_values(best, space["mapping"])[0]]
    assert best["latency_us"] == pytest.approx(data["extra"]["tuning"]["best_us"])   # the runner's best
    assert data["best_us"] == data["measurement"]["tuned"]["median_us"]              # the headline


def test_union_mode_and_no_resume_across_spaces(tuned):
    work, src, data = tuned
    proc = asight("tune", str(src), "--space", "schedule_matmul", "--space-mode", "union", "--trials", "8",
                  "--seed", "0", "--work-dir", str(work / ".asight"), "--json")
    assert proc.returncode == 0, proc.stderr
    union = json.loads(proc.stdout)
    assert union["id"] != data["id"] and union["extra"]["space"]["mode"] == "union"
    assert union["extra"]["space"]["mapping"]["instructions"] == data["extra"]["space"]["mapping"]["instructions"]
    assert union["state"] == "done" and union["trials_done"] == 8


def test_check_with_tvm_accepts_a_file_with_a_space_function():
    """import tvm, meta_schedule, a PrimFunc and a schedule function: TVM's parse sees only the PrimFunc."""
    proc = asight("check", str(ROOT / "fixtures" / "matmul_space.py"), "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["diagnostics"] == [] and data["parsed_units"] == ["matmul64"]


def _variant(tmp_path: Path, old: str, new: str) -> Path:
    assert old in TEXT
    path = tmp_path / "space.py"
    path.write_text(TEXT.replace(old, new))
    return path


def test_space_that_raises_fails_fast_with_the_users_line(tmp_path):
    src = _variant(tmp_path, 'sch.get_sblock("C")', 'sch.get_sblock("nope")')
    started = time.monotonic()
    proc = asight("tune", str(src), "--space", "schedule_matmul", "--trials", "8", "--work-dir", str(tmp_path / "s"))
    assert time.monotonic() - started < 60
    assert proc.returncode == 1
    line = _line(src.read_text(), 'get_sblock("nope")') + 1
    assert (f"asight: error: design space 'schedule_matmul' raised at {src}:{line}: ScheduleError: "
            "Cannot find a block with the name: nope") in proc.stderr
    [run] = (tmp_path / "s" / "runs").iterdir()
    meta = json.loads((run / "run.json").read_text())
    assert meta["state"] == "failed" and "raised at" in meta["error"] and meta["extra"]["error_kind"] == "input"
    assert meta["baseline_us"] is None    # failed before any measurement


def test_bad_return_hang_and_no_valid_candidate(tmp_path):
    bad = _variant(tmp_path, "    sch.parallel(i0)\n", "    return 42\n")
    proc = asight("tune", str(bad), "--space", "schedule_matmul", "--trials", "8", "--work-dir", str(tmp_path / "a"))
    assert proc.returncode == 1 and "must return None, the schedule or a list of schedules (it returned int)" in proc.stderr
    hang = _variant(tmp_path, '    block = sch.get_sblock("C")\n', '    while True:\n        pass\n')
    proc = asight("tune", str(hang), "--space", "schedule_matmul", "--trials", "8", "--work-dir", str(tmp_path / "b"),
                  env={"ASIGHT_SPACE_TIMEOUT_S": "3"}, timeout=60)
    assert proc.returncode == 1 and "did not return within 3.0 s" in proc.stderr
    nobuild = _variant(tmp_path, "    sch.parallel(i0)\n", '    sch.bind(i0, "threadIdx.x")\n')
    proc = asight("tune", str(nobuild), "--space", "schedule_matmul", "--trials", "8", "--work-dir", str(tmp_path / "c"))
    assert proc.returncode == 1
    assert "design space 'schedule_matmul' produced no valid candidate (8 measured, 8 failed to build or run)" in proc.stderr
