"""A time budget and the schedule library through the real tuning job (`asight tune --minutes`, two runs
sharing one library, `asight library export/import` with the sandboxed worker's replay check)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from asight_lsp.store.runs import Run, read_records

pytestmark = [pytest.mark.tvm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures"


def asight(*args: str, library: Path, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asight_lsp", *args], capture_output=True, text=True, cwd=cwd,
                          timeout=timeout, env={**os.environ, "PYTHONPATH": str(ROOT), "ASIGHT_LIBRARY": str(library)})


@pytest.fixture(scope="module")
def first_run(tmp_path_factory):
    """The 64^3 matmul tuned for 6 seconds (no --trials: the time alone bounds it), feeding a new library."""
    work = tmp_path_factory.mktemp("deadline")
    shutil.copy(FIX / "matmul64.py", work / "matmul64.py")
    library = work / "library"
    proc = asight("tune", "matmul64.py", "--minutes", "0.1", "--seed", "0", "--work-dir", ".asight", "--json",
                  library=library, cwd=work)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return work, library, json.loads(proc.stdout)


def events(run_dir: str) -> list[dict]:
    return [json.loads(line) for line in Path(run_dir, "events.jsonl").read_text().splitlines() if line.strip()]


def test_the_deadline_ends_the_search_within_one_batch_then_the_best_is_measured(first_run):
    _, _, data = first_run
    assert data["state"] == "done" and data["extra"]["tuning"]["deadline_hit"] is True
    budget = data["extra"]["time_budget"]
    assert budget["minutes"] == 0.1 and budget["trials"] is False and budget["until"] > 0
    assert 0 < data["trials_done"] == len(read_records(Path(data["run_dir"])))
    assert "shortfall" not in data["extra"]                 # the time, not a failure, set how many were tried
    progress = [e for e in events(data["run_dir"]) if e["type"] == "progress"]
    assert all(e["trials"] is None and e["seconds_left"] is not None for e in progress)
    # the search proposes nothing after the deadline: the last batch began before it, so the overrun is at
    # most one batch (the longest gap between two batches' reports), whatever the machine's load
    times = [data["started"]] + [e["time"] for e in progress]     # the job's start, then each batch's report
    batch = max(b - a for a, b in zip(times, times[1:]))
    assert progress and progress[-1]["time"] - budget["until"] <= batch + 0.5
    assert data["measurement"]["tuned"]["median_us"] < data["measurement"]["untuned"]["median_us"]


def test_a_second_run_starts_from_the_library_and_says_so(first_run, tmp_path):
    work, library, first = first_run
    assert first["extra"]["library"]["fed"] == 1 and first["extra"]["library"]["hits"] == []
    shutil.copy(FIX / "matmul64.py", tmp_path / "matmul64.py")
    proc = asight("tune", "matmul64.py", "--trials", "3", "--seed", "1", "--work-dir", ".asight", "--no-profile",
                  library=library, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "library  1 of 1 task started from the schedule library: main (" in proc.stdout
    run_dir = next((tmp_path / ".asight" / "runs").iterdir())
    meta = Run(run_dir).load()
    [hit] = meta.extra["library"]["hits"]
    best_first = first["extra"]["tuning"]["best_us"]
    assert hit["task"] == "main" and hit["library_us"] == pytest.approx(best_first, rel=1e-6)
    assert hit["measured_us"] > 0 and meta.trials_done == 3          # the library's schedule is one of the 3
    [start, *_] = read_records(run_dir)            # measured first, here, as a trial of this run
    assert start["latency_us"] == pytest.approx(hit["measured_us"], rel=1e-6)


def test_a_library_file_from_elsewhere_is_checked_and_a_record_that_does_not_replay_is_refused(first_run, tmp_path):
    work, library, _ = first_run
    shared = tmp_path / "team-library.json"
    proc = asight("library", "export", str(shared), library=library, cwd=tmp_path)
    assert proc.returncode == 0 and "wrote 1 workloads" in proc.stdout, proc.stdout + proc.stderr
    data = json.loads(shared.read_text())
    trace = json.dumps(data["records"][0][0])
    assert '"C"' in trace
    good = json.loads(json.dumps(data["records"][0]))
    data["records"][0][0] = json.loads(trace.replace('"C"', '"no_such_block"', 1))
    crash = json.loads(json.dumps(good))                      # a tile decision of zeros: TVM dies replaying it
    tile = next(d for d in crash[0][1] if isinstance(d[1], list) and len(d[1]) == 4)
    tile[1] = [0, 0, 0, 0]
    data["workloads"] = data["workloads"] * 3
    data["records"] = [data["records"][0], crash, good]
    data["names"] = ["bad", "crash", "good"]
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(data))
    elsewhere = tmp_path / "other-library"
    proc = asight("library", "import", str(bad), library=elsewhere, cwd=tmp_path)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "refused bad: its record does not replay on its workload" in proc.stdout
    assert "Cannot find a block with the name: no_such_block" in proc.stdout
    assert "refused crash: its record does not replay on its workload (TVM crashed replaying it" in proc.stdout
    assert "1 workloads added" in proc.stdout                 # the good one, beside the two refused
    listing = json.loads(asight("library", "list", "--json", library=elsewhere, cwd=tmp_path).stdout)
    assert [e["task"] for e in listing["targets"][0]["entries"]] == ["good"]
    proc = asight("library", "import", str(shared), library=elsewhere, cwd=tmp_path)   # the same record again
    assert proc.returncode == 0 and "0 workloads added, 1 not added (the library's own were as fast)" in proc.stdout
    proc = asight("library", "import", str(shared), library=tmp_path / "third", cwd=tmp_path)
    assert proc.returncode == 0 and "1 workloads added" in proc.stdout, proc.stdout + proc.stderr
    listing = json.loads(asight("library", "list", "--json", library=tmp_path / "third", cwd=tmp_path).stdout)
    [target] = listing["targets"]
    assert target["workloads"] == 1 and target["entries"][0]["task"] == "matmul64"


def test_a_deadline_before_the_first_trial_still_tries_every_kernel_once(tmp_path):
    """A model's time budget shorter than the job's start: each task gets one trial past the deadline (a
    kernel without one is a kernel `asight export` refuses), then the search stops."""
    shutil.copy(FIX / "relax_cnn.py", tmp_path / "relax_cnn.py")
    proc = asight("tune", "relax_cnn.py", "--func", "Net", "--minutes", "0.01", "--seed", "0", "--work-dir", ".asight",
                  "--no-profile", "--json", library=Path("off"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    assert data["extra"]["tuning"]["deadline_hit"] is True
    per_task = Run(data["run_dir"]).load().extra["tuning"]["best_tasks_us"]
    assert len(per_task) == len(data["tasks"]) >= 3 and all(v is not None for v in per_task.values()), per_task
    assert data["trials_done"] == len(data["tasks"])          # one each, nothing more after the deadline


def test_a_damaged_library_costs_a_run_its_start_never_its_measurements(first_run, tmp_path):
    """Every file of the library is data a user (or a crash) can damage: a run leaves out what is not
    valid, says so, tunes and measures as without a library, and its feed writes the library valid again."""
    _, library, _ = first_run
    damaged = tmp_path / "library"
    shutil.copytree(library, damaged)
    [records] = damaged.glob("*/database_tuning_record.json")
    records.write_text(records.read_text()[:50])               # a record line cut short
    shutil.copy(FIX / "matmul64.py", tmp_path / "matmul64.py")
    proc = asight("tune", "matmul64.py", "--trials", "2", "--work-dir", ".asight", "--no-profile", "--json",
                  library=damaged, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    data = json.loads(proc.stdout)
    assert data["state"] == "done" and data["trials_done"] == 2 and data["measurement"]["tuned"]
    section = data["extra"]["library"]
    assert section["hits"] == [] and section["fed"] == 1
    assert any("not valid were left out" in n for n in section["notes"]), section
    assert any("were set aside" in n for n in section["notes"]), section
    listing = json.loads(asight("library", "list", "--json", library=damaged, cwd=tmp_path).stdout)
    assert listing["targets"][0]["workloads"] == 1 and "problem" not in listing["targets"][0]
