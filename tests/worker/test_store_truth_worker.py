"""The store never lies, with real TVM (docs/tuning.md): a resumed run measures only new schedules
and says what it set aside; a torn last line does not stop the sandboxed worker (which may not
repair files); a damaged database is one clear line from `asight profile` and `asight code`."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from asight_lsp.store.owner import mark_own

from asight_lsp.store.runs import DB_RECORDS, DB_WORKLOADS, Run, read_records

pytestmark = [pytest.mark.tvm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures"
TORN = '[0,[[[["GetSBlock",[],["C","main"],["b0"]],'


def asight(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asight_lsp", *args], capture_output=True, text=True, timeout=600,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def task_mod(source: Path):
    from asight_lsp.tvmscript.outline import build_outline
    from asight_lsp.worker.compat import normalize_mod
    from asight_lsp.worker.parse import parse_unit
    text = source.read_text()
    outline = build_outline(text, str(source))
    unit = outline.units[0]
    return normalize_mod(parse_unit(text.splitlines(), {"start_line": unit.start_line, "end_line": unit.end_line},
                                    outline.constants, outline.aliases))


def scheduled(mod, trace):
    """The module a record measured: its trace replayed on the task, postprocessors included."""
    from asight_lsp.worker.compat import s_tir, tvm
    sch = s_tir.Schedule(tvm.ir.load_json(tvm.ir.save_json(mod)))
    trace.apply_to_schedule(sch, remove_postproc=False)
    return sch


@pytest.fixture(scope="module")
def resumed(cli_tuned_matmul64):
    """16 trials of the 64^3 matmul (`asight tune FILE --trials 16 --seed 0 --json`: the session's copy,
    tests/tuned_models.py), a torn line appended (a job killed mid-write), resumed to 40."""
    work = cli_tuned_matmul64.checkout()
    source = work / "matmul64.py"
    run = Run(cli_tuned_matmul64.made["run_dir"])
    with run.records_path.open("a") as out:
        out.write(TORN)
    second = asight("tune", str(source), "--trials", "40", "--work-dir", str(work / ".asight"), cwd=work,
                    env={"ASIGHT_TRIALS_PER_ITER": "8"})
    assert second.returncode == 0, second.stderr
    return source, run, second.stdout


def test_a_resumed_run_measures_only_schedules_its_database_did_not_hold(resumed):
    from asight_lsp.worker.compat import ms, tvm_ffi
    source, run, _ = resumed
    mod = task_mod(source)
    workload = ms.database.Workload(mod)
    hashes = []
    for row in (json.loads(line) for line in run.records_path.read_text().splitlines()):
        record = ms.database.TuningRecord.from_json(row[1], workload)
        hashes.append(int(tvm_ffi.structural_hash(scheduled(mod, record.trace).mod)))
    assert len(hashes) == 40 and len(read_records(run.path)) == 40
    assert not set(hashes[16:]) & set(hashes[:16])       # nothing measured before is measured again
    assert len(set(hashes[16:])) == 24
    assert isinstance(run.load().extra["tuning"]["repeats_skipped"], int)


def test_the_resume_says_what_it_set_aside(resumed):
    _, run, stdout = resumed
    assert "set aside 1 torn line of the records file (a write cut short); 16 measured records kept ..." in stdout
    assert (f"records  1 torn line of {DB_RECORDS} (a write cut short) set aside in {DB_RECORDS}.unreadable; "
            "the 40 readable records are kept") in stdout
    assert (run.path / f"{DB_RECORDS}.unreadable").read_text() == TORN + "\n"
    assert run.load().extra["set_aside_records"] == 1


def test_the_search_drops_candidates_the_database_already_holds(resumed):
    """``BudgetedSearch`` alone, on the run's database: known schedules are skipped, a batch of only
    known ones is asked for again, and the budget counts only what is measured."""
    from asight_lsp.worker.compat import ms, s_tir
    from asight_lsp.worker.search import BudgetedSearch, TrialBudget
    source, run, _ = resumed
    mod = task_mod(source)
    database = ms.database.JSONDatabase(work_dir=str(run.path), allow_missing=False)
    records = list(database.get_all_tuning_records())[:3]
    known = [ms.MeasureCandidate(scheduled(mod, r.trace), r.args_info) for r in records]
    new = ms.MeasureCandidate(s_tir.Schedule(mod), records[0].args_info)   # the untuned schedule: never measured

    class Inner:
        def __init__(self, batches):
            self.batches, self.calls = list(batches), 0

        def pre_tuning(self, *args):
            pass

        def generate_measure_candidates(self):
            self.calls += 1
            return self.batches.pop(0) if self.batches else None

    inner, budget = Inner([known, known + [new]]), TrialBudget(10)
    search = BudgetedSearch._cls(inner, budget)
    search.mod = mod
    search.pre_tuning(10, 4, [], database, None)
    assert len(search.measured) == 40
    [picked] = search.generate_measure_candidates()
    assert picked is new and inner.calls == 2 and budget.repeats_skipped == 6 and budget.left == 9
    assert search.generate_measure_candidates() is None


# --------------------------------------------------------------------------- reading a run


@pytest.fixture
def mbr(tmp_path):
    source = tmp_path / "matmul_bias_relu.py"
    shutil.copy(FIX / "matmul_bias_relu.py", source)
    run = tmp_path / ".asight" / "runs" / "mbr128"
    shutil.copytree(FIX / "runs" / "mbr128", run)
    meta = json.loads((run / "run.json").read_text())
    meta["measurement"] = None           # no chosen record: the views use the database as TVM loads it
    (run / "run.json").write_text(json.dumps(meta))
    mark_own(run)                        # the user's own run (a shipped one is never measured: owner.require_own)
    return source, Run(run)


def test_the_sandboxed_worker_reads_a_run_with_a_torn_last_line(worker, mbr):
    from asight_lsp.engine import wire
    from asight_lsp.tvmscript.outline import build_outline
    from asight_lsp.worker.compat import ms
    source, run = mbr
    with run.records_path.open("a") as out:
        out.write(TORN)
    before = run.records_path.read_bytes()
    with pytest.raises(Exception, match="parallel_for_dynamic"):    # what TVM itself does with the file
        ms.database.JSONDatabase(work_dir=str(run.path), allow_missing=False)
    text = source.read_text()
    outline = build_outline(text, str(source))
    view = worker.request(wire.CODE, {**wire.source_params(text, outline, outline.units[0], "main"),
                                      "run_dir": str(run.path), "level": "scheduled"}, timeout=300)
    assert view["applied"]["source"] == "best record of the run" and view["text"]
    assert run.records_path.read_bytes() == before                      # answered; the file untouched


@pytest.mark.parametrize("command", ["profile", "code"])
def test_a_damaged_database_is_one_clear_line(mbr, command):
    source, run = mbr
    workloads = run.path / DB_WORKLOADS
    data = workloads.read_bytes()
    workloads.write_bytes(data[:len(data) // 2])
    args = ["--no-stages", "--budget", "0.2"] if command == "profile" else []
    proc = asight(command, str(source), "--run", "mbr128", *args, cwd=source.parent)
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(f"asight: error: damaged database in run mbr128: {DB_WORKLOADS} line 1 is not a "
                           "readable workload; TVM cannot load it (its 40 readable records stay in")
    assert "Check failed" not in proc.stdout + proc.stderr
    assert workloads.read_bytes() == data[:len(data) // 2]
