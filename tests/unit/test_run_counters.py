"""The views read a run's own counters.jsonl with adopt's checks (outside probe 5, N3): after adopt, an
edited line (occupancy 140 %, a torn line, a kernel time 123x off its record) made every view drop
all 41 lines silently ("no counters for this candidate") or was shown as measured."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from asight_lsp.services.catalogue import RunView
from asight_lsp.errors import AsightError
from asight_lsp.services.adopt_checks import run_counters
from asight_lsp.store.runs import Run, RunMeta, read_records

GPU = Path(__file__).resolve().parents[2] / "fixtures" / "gpu"
OCC = "sm__warps_active.avg.pct_of_peak_sustained_active"


def _edit(line: str, how: str) -> str:
    entry = json.loads(line)
    if how == "occ140":
        entry["metrics"][OCC] = 140.0
    elif how == "torn":
        return line[:60]
    elif how == "swapped":
        entry["metrics"].update({"gpu__time_duration.sum": 16495552.0, "launch__registers_per_thread": 44.0})
    return json.dumps(entry)


def _run(tmp_path: Path, how: str | None) -> tuple[Path, int]:
    """A copy of the H100 run with its first counters line edited ``how``; the first line's candidate."""
    for name in ("database_tuning_record.json", "database_workload.json"):
        shutil.copy(GPU / name, tmp_path / name)
    lines = (GPU / "counters.jsonl").read_text().splitlines()
    first = json.loads(lines[0])["candidate"]
    if how:
        lines[0] = _edit(lines[0], how)
    (tmp_path / "counters.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path, first


REFUSED = {"occ140": rf"counters.jsonl:1: metric '{OCC}' is 140.0: a share of a peak above 100 %",
           "torn": r"counters.jsonl:1: not JSON",
           "swapped": r"counters.jsonl:1: candidate \d+'s counters time its kernel at 16,495.6 µs, its record at "
                      r"[\d.,]+ µs \(\d+× apart.*counters of another program"}


@pytest.mark.parametrize("how", sorted(REFUSED))
def test_the_views_refuse_an_edited_run_counters_file_as_adopt_does(tmp_path, how):
    run_dir, _ = _run(tmp_path, how)
    with pytest.raises(AsightError, match=REFUSED[how]):
        run_counters(run_dir, read_records(run_dir))


def test_an_intact_run_counters_file_and_none_are_read(tmp_path):
    run_dir, _ = _run(tmp_path, None)
    assert len(run_counters(run_dir, read_records(run_dir))) == 41
    (run_dir / "counters.jsonl").unlink()
    assert run_counters(run_dir, read_records(run_dir)) is None


@pytest.mark.parametrize("how", sorted(REFUSED))
def test_the_loop_view_says_the_refused_file_once_not_no_counters(tmp_path, how):
    from asight_lsp.analysis.gpu_words import NO_COUNTERS, measured_lines
    from asight_lsp.services.run_data import _counters
    run_dir, _ = _run(tmp_path, how)
    notes: list[str] = []
    entries, refused = _counters(Run(run_dir), RunMeta(id="x", file="", function="mm"),
                                 read_records(run_dir), notes)
    assert entries is None and len(notes) == 1 and notes[0].startswith(f"counters not used: {run_dir}")
    assert refused.startswith("counters.jsonl:1: ")
    [line] = measured_lines(None, refused)
    assert line != NO_COUNTERS
    assert line == f"registers, occupancy, limiting factor: not measured (the run's counters.jsonl is not used: {refused})"


@pytest.mark.parametrize("how", [None, "swapped", "torn"])
def test_the_hover_checks_the_run_counters_as_the_views_do(tmp_path, how):
    from asight_lsp.server.hover import gpu_lines
    from asight_lsp.services.results import FunctionResult
    run_dir, first = _run(tmp_path, how)
    target = read_records(run_dir)[first]["target"]
    result = FunctionResult("mm", RunView(RunMeta(id="x", file="", function="mm", target=target), run_dir, "fresh"),
                            best={"trial": first})
    lines = gpu_lines(result)
    if how is None:
        assert lines[0] == f"- GPU (measured counters of trial {first}):"
        return
    assert lines == [f"- GPU (trial {first}): registers, occupancy, limiting factor: not measured (the run's "
                     f"counters.jsonl is not used: counters.jsonl:1: {lines[0].split('counters.jsonl:1: ')[1]}"]
    assert "44 registers" not in "\n".join(lines)
