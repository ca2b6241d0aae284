"""Real MetaSchedule tuning of the 64^3 matmul with tiny budgets: CLI, resume, DB used by TVM, bad input."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from asight_lsp.services.tuning import TuneRequest, start_tune
from asight_lsp.store.runs import Run, read_records

pytestmark = [pytest.mark.tvm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures"
ASIGHT = [sys.executable, "-m", "asight_lsp"]


def asight(*args: str, cwd: Path | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([*ASIGHT, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})


@pytest.fixture(scope="module")
def tuned(cli_tuned_matmul64):
    """One 16-trial CLI run of the 64^3 matmul (the file copied into a scratch workspace; `asight tune
    FILE --trials 16 --seed 0 --work-dir WS/.asight --json`): the session's copy (tests/tuned_models.py)
    for this module, and the command's JSON reply."""
    work = cli_tuned_matmul64.checkout()
    return work, work / "matmul64.py", cli_tuned_matmul64.made


def test_cli_tunes_and_records(tuned):
    work, src, data = tuned
    run = Run(data["run_dir"])
    assert data["state"] == "done" and data["error"] is None
    assert data["trials_done"] == 16 == len(read_records(run.path))
    (task,) = data["tasks"]
    assert data["kind"] == "tir" and task.pop("workload_hash").isdigit()   # maps records to the task
    assert task == {"name": "main", "weight": 1.0, "functions": ["matmul64"]}
    assert data["target"]["kind"] == "llvm" and data["target"]["mcpu"] and data["target"]["num-cores"] >= 1
    assert 0 < data["best_us"] < data["baseline_us"] and data["speedup"] > 2
    # the headline is a re-measurement (interleaved untuned vs tuned), the runner's figures are kept apart
    record = data["measurement"]
    assert record["by"] == "tuning job" and record["scope"] == "function" and record["trials"] == 16
    assert record["process"] == "sandboxed worker"        # the file's program was timed in the sandbox
    assert data["baseline_us"] == record["untuned"]["median_us"] and data["best_us"] == record["tuned"]["median_us"]
    assert data["speedup"] == record["speedup"]["estimate"] and record["verdict"] == "faster"
    low, high = record["speedup"]["ci"]
    assert low <= data["speedup"] <= high and record["check"]["ok"] is True
    records = [r for r in read_records(run.path) if r["latency_us"] is not None]
    assert data["extra"]["tuning"]["best_us"] == pytest.approx(min(r["latency_us"] for r in records))
    [chosen] = record["chosen"]                                   # the best by re-measurement of the top 5
    fastest = sorted(records, key=lambda r: r["latency_us"])[:5]
    assert [c["trial"] for c in chosen["candidates"]] == [r["trial"] for r in fastest]
    assert chosen["measured_us"] == min(c["measured_us"] for c in chosen["candidates"])
    events = run.events()
    assert events[0]["type"] == "started" and events[-1]["type"] == "finished"
    assert any(e["type"] == "status" and e.get("stage") == "measure" for e in events)
    progress = [e for e in events if e["type"] == "progress"]
    assert [e["trials_done"] for e in progress] == [8, 16]          # two batches of 8
    assert progress[-1]["best_us"] == pytest.approx(data["extra"]["tuning"]["best_us"])
    assert (run.path / "database_workload.json").exists() and (run.path / "logs").is_dir()
    assert run.source_path.read_text() == src.read_text()


def test_cli_prints_progress_and_summary(tuned):
    work, src, data = tuned
    proc = asight("tune", str(src), "--trials", "16", "--work-dir", str(work / ".asight"))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert f"run      {data['id']}" in out and "trials   16 of 16" in out
    assert "measured untuned " in out and "× faster (95% CI" in out and "resuming with 16 records" in out
    assert "interleaved rounds" in out and "while tuning: best" in out


def test_resume_adds_records(tuned):
    work, src, data = tuned
    job = start_tune(TuneRequest(file=str(src), trials=24, store_root=str(work / ".asight")))
    assert str(job.run.path) == data["run_dir"]
    meta = job.wait(300)
    assert meta.state == "done", meta.error
    assert meta.trials_done == 24 == len(read_records(job.run.path))
    # new trials: measured again (the old record kept in the history)
    assert meta.measurement["trials"] == 24 and meta.extra["measurement_history"][-1] == data["measurement"]
    assert meta.extra["tuning"]["best_us"] <= data["extra"]["tuning"]["best_us"] * 1.0001
    assert [s["resumed"] for s in meta.sessions][-1] is True and meta.sessions[-1]["trials_before"] >= 16
    started = [e for e in job.run.events() if e["type"] == "started"][-1]
    assert started["remaining"] == 24 - started["trials_done"]


APPLY = textwrap.dedent('''
    import json, sys
    import numpy as np
    sys.path.insert(0, sys.argv[2])
    from matmul64 import matmul64
    from asight_lsp.worker.compat import ms, tvm, tvm_ffi, normalize_mod, s_tir
    meta = json.load(open(sys.argv[1] + "/run.json"))
    target = tvm.target.Target(meta["target"])
    db = ms.database.JSONDatabase(work_dir=sys.argv[1], allow_missing=False)
    sch = ms.tir_integration.compile_tir(db, matmul64, target)        # TVM's own API, original PrimFunc
    best = db.get_top_k(db.commit_workload(normalize_mod(matmul64)), 1)[0]
    ref = s_tir.Schedule(normalize_mod(matmul64))
    best.trace.apply_to_schedule(ref, remove_postproc=False)
    same = tvm_ffi.structural_equal(sch.mod, ref.mod)
    dev = tvm.cpu()
    lib = tvm.compile(sch.mod, target=target).jit()
    args = [tvm.runtime.tensor(np.random.default_rng(0).random((64, 64), dtype="float32"), dev) for _ in range(3)]
    lib["main"](*args)
    a, b, c = (x.numpy() for x in args)
    print(json.dumps({"same_schedule": bool(same), "correct": bool(np.allclose(c, a @ b, rtol=1e-4, atol=1e-4))}))
''')


def test_database_is_usable_by_tvm(tuned):
    """compile_tir on the original PrimFunc picks the best record, and it runs as fast as recorded."""
    work, src, data = tuned
    best = Run(data["run_dir"]).load().best_us
    proc = subprocess.run([sys.executable, "-c", APPLY, data["run_dir"], str(FIX)], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["same_schedule"]
    # TVM's build of the record computes the matmul (its speed is the measurement record's business:
    # a timing here would depend on the machine's load)
    assert best is not None and result["correct"], (result, best)


def test_bad_input_exit_codes(tmp_path):
    store = str(tmp_path / ".asight")
    cases = [
        (["tune", str(FIX / "matmul64.py"), "--func", "nope", "--work-dir", store], 2,
         "asight: error: no function 'nope' in"),
        (["tune", str(FIX / "matmul64.py"), "--target", "foo", "--work-dir", store], 2,
         "asight: error: unknown target 'foo'"),
        (["tune", str(FIX / "broken" / "syntax_error.py"), "--work-dir", store], 1, "syntax error"),
        (["tune", str(FIX / "hostile" / "import_in_body.py"), "--work-dir", store], 1, "refusing to tune 'evil'"),
        (["tune", str(FIX / "broken" / "not_well_formed.py"), "--work-dir", store, "--trials", "8"], 1,
         "not_well_formed.py:13:13: not well-formed"),
        (["tune", str(FIX / "matmul64.py"), "--target", "llvm -bogus=1", "--work-dir", store, "--trials", "8"], 2,
         "unknown target 'llvm -bogus=1'"),
    ]
    for argv, code, message in cases:
        proc = asight(*argv)
        assert proc.returncode == code, (argv, proc.stdout, proc.stderr)
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("asight: error:") and message in lines[0], (argv, proc.stderr)
        assert "Traceback" not in proc.stdout + proc.stderr


def test_a_run_never_measures_more_than_its_budget(tmp_path):
    """Three tasks in batches of 6: MetaSchedule alone asked for a fourth batch (24 of 20 trials)."""
    job = start_tune(TuneRequest(file=str(FIX / "three_kernels.py"), trials=20, store_root=str(tmp_path), seed=0))
    meta = job.wait(600)
    assert meta.state == "done", meta.error
    records = read_records(job.run.path)
    assert len(records) == meta.trials_done == 20
    assert {r["workload"] for r in records} == {0, 1, 2}
    record = meta.measurement
    assert record["scope"] == "module" and len(record["chosen"]) == 3
    # the module's latency is the sum of its PrimFuncs, untuned and tuned, timed in the same rounds
    parts = record["parts"]
    assert record["untuned"]["median_us"] == pytest.approx(
        sum(parts[f"untuned {n}"]["median_us"] for n in ("mm_square", "mm_tall", "mm_wide")), rel=0.25)
    # each function's Loop view and Search space lens (they name the function) shows that function's task,
    # titled by it, its best the record the measurement chose for it (outside probe 9, F1, F2: every lens
    # showed the largest task's best under the first function's name)
    from asight_lsp.services.run_data import build_view
    for pick in record["chosen"]:
        function = f"ThreeKernels.{pick['task']}"
        view = build_view("loopView", job.run.path, for_function=function)
        assert view["function"] == function and view["run"]["task"] == pick["task"], (view["function"], view["run"])
        assert {stage["best"]["trial"] for stage in view["stages"] if stage.get("best")} == {pick["trial"]}
        assert build_view("searchSpace", job.run.path, for_function=function)["best"]["trial"] == pick["trial"]
    from asight_lsp.services.report import build_report
    page = build_report(str(FIX / "three_kernels.py"), str(job.run.path), hotspots=False, task="mm_tall")
    assert "Loop view — ThreeKernels.mm_tall" in page and "Loop view — ThreeKernels.mm_square" not in page
