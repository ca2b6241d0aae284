"""The schedule library's files and the time budget's rules, without TVM (store/library.py,
analysis/budget.py, store/record.TimeBudget, views/text.budget_text, services/tuning.session_trials)."""
from __future__ import annotations

import base64
import json
import struct

import pytest

from asight_lsp.analysis.budget import TRIAL_CEILING, minutes_problem, trials_for_minutes
from asight_lsp.errors import AsightError
from asight_lsp.services.tuning import TuneRequest, session_trials
from asight_lsp.store import library as shelf
from asight_lsp.store.record import TimeBudget, section_problems
from asight_lsp.store.runs import DB_RECORDS, DB_WORKLOADS, RunMeta
from asight_lsp.views.text import budget_text, event_budget_text


def workload(n: int) -> list:
    graph = json.dumps({"root_index": 0, "nodes": [{"type": "None"}], "n": n}).encode()
    return [str(1000 + n), base64.b64encode(struct.pack("<Q", len(graph)) + graph).decode()]


def record(secs: float) -> list:
    return [[[["GetSBlock", [], ["C", "main"], ["b0"]]], []], [secs], {"kind": "llvm"}, []]


def lines(rows: list) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


@pytest.fixture
def folder(tmp_path, monkeypatch):
    monkeypatch.setenv(shelf.LIBRARY_ENV, str(tmp_path / "lib"))
    folder = shelf.folder_for("llvm -mcpu=test")
    folder.mkdir(parents=True)
    return folder


def test_each_workload_keeps_its_newest_record_and_what_is_not_valid_is_left_out_and_said(folder):
    (folder / DB_WORKLOADS).write_text(lines([workload(0), workload(1), workload(2)]))
    (folder / DB_RECORDS).write_text(lines([[0, record(3e-6)], [1, record(5e-6)], [0, record(4e-6)], [2, record(1e-6)],
                                            [2, record(-1.0)], [7, record(1e-6)]]) + '[0, [[[], []], [1e-6')
    (folder / shelf.NAMES_FILE).write_text(json.dumps({"1000": "conv2d\x1b[31m"}))
    read = shelf.read(folder)
    assert [(e.hash, e.mean_us) for e in read.entries] == [("1001", 5.0), ("1000", 4.0), ("1002", 1.0)]
    assert read.entries[1].task == "conv2d\\x1b[31m" and read.entries[0].task == "workload 1001"
    assert len(read.problems) == 3 and "run_secs -1.0" in read.problems[0]
    assert read.problem().endswith("(and 2 more)")
    # a change rewrites the folder from the valid entries (the newest MAX_WORKLOADS), names travelling along
    before, kept = shelf.change(folder, "llvm -mcpu=test", lambda entries: entries[-2:])
    assert len(before.entries) == 3 and [e.hash for e in kept] == ["1000", "1002"]
    again = shelf.read(folder)
    assert not again.problems and [e.task for e in again.entries] == ["conv2d\\x1b[31m", "workload 1002"]


def test_a_link_in_the_library_is_never_written_through(folder, tmp_path):
    outside = tmp_path / "outside.json"
    outside.write_text(lines([[0, record(1e-6)]]))
    (folder / DB_WORKLOADS).write_text(lines([workload(0)]))
    (folder / DB_RECORDS).symlink_to(outside)
    assert "symbolic link" in shelf.read(folder).problem()
    with pytest.raises(shelf.LibraryProblem, match="nothing was changed"):
        shelf.change(folder, "llvm -mcpu=test", lambda entries: entries)
    assert outside.read_text() == lines([[0, record(1e-6)]])


def test_a_run_feeds_its_best_valid_record_per_task_and_a_slower_one_never_replaces_a_faster(folder, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / DB_WORKLOADS).write_text(lines([workload(0), workload(5)]))
    (run / DB_RECORDS).write_text(lines([[0, record(4e-6)], [0, record(2e-6)], [0, record(1e10)], [1, record(1e-6)]]))
    fed = shelf.feed("llvm -mcpu=test", run, {"1000": "dense"})            # workload 5 is not one of the tasks
    assert fed["fed"] == 1 and [(e.hash, e.mean_us, e.task) for e in shelf.read(folder).entries] == [("1000", 2.0, "dense")]
    (run / DB_RECORDS).write_text(lines([[0, record(3e-6)]]))               # another run, slower: no change
    assert shelf.feed("llvm -mcpu=test", run, {"1000": "dense"})["fed"] == 0
    held = shelf.read(folder).entries[0]
    # unless that run re-measured the library's own schedule here: its best is the truth on this machine
    assert shelf.feed("llvm -mcpu=test", run, {"1000": "dense"}, {"1000": held.record[0]})["fed"] == 1
    assert shelf.read(folder).entries[0].mean_us == 3.0


def test_the_library_is_off_by_name_and_outside_the_workspace_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv(shelf.LIBRARY_ENV, "off")
    assert shelf.root() is None and shelf.folder_for("llvm") is None
    monkeypatch.delenv(shelf.LIBRARY_ENV)
    monkeypatch.setenv("ASIGHT_CACHE_DIR", str(tmp_path / "cache"))
    assert shelf.root() == tmp_path / "cache" / "library"


def test_an_export_reads_back_and_a_faster_record_wins_a_slower_does_not(folder, tmp_path):
    (folder / DB_WORKLOADS).write_text(lines([workload(0)]))
    (folder / DB_RECORDS).write_text(lines([[0, record(4e-6)]]))
    path = tmp_path / "team.json"
    path.write_text(json.dumps(shelf.export_library(folder, "llvm -mcpu=test")))
    target, incoming = shelf.read_library_file(str(path))
    assert target == "llvm -mcpu=test" and len(incoming) == 1
    held = shelf.read(folder).entries
    assert shelf.merge(held, incoming)[1] == 0                              # as fast: kept as it was
    incoming[0].record = record(2e-6)
    merged, taken = shelf.merge(held, incoming)
    assert taken == 1 and [e.mean_us for e in merged] == [2.0]


@pytest.mark.parametrize("content, said", [
    ("not json", "not JSON"),
    (json.dumps({"schema": "other"}), "schema is not asight.library/1"),
    (json.dumps({"schema": shelf.SCHEMA, "target": "llvm", "workloads": [workload(0)], "records": []}),
     "as many workloads, records and names"),
    (json.dumps({"schema": shelf.SCHEMA, "target": "llvm", "workloads": [["1", "not base64!"]],
                 "records": [record(1e-6)]}), "entry 0 is a workload that is not"),
    (json.dumps({"schema": shelf.SCHEMA, "target": "llvm", "workloads": [workload(0)],
                 "records": [record(-1.0)]}), "entry 0 is run_secs -1.0"),
    (json.dumps({"schema": shelf.SCHEMA, "target": "llvm", "workloads": [workload(0)], "records": [record(1e-6)],
                 "names": ["a", "b"]}), "as many workloads, records and names"),
])
def test_a_library_file_that_is_not_one_is_refused_as_data(tmp_path, content, said):
    path = tmp_path / "lib.json"
    path.write_text(content)
    with pytest.raises(shelf.LibraryProblem, match=said):
        shelf.read_library_file(str(path))


def test_hits_are_said_with_their_tasks_and_times():
    hits = [{"task": f"t{i}", "library_us": 2.0, "measured_us": 1.5} for i in range(4)]
    text = shelf.hits_text(hits, 19)
    assert text.startswith("4 of 19 tasks started from the schedule library: t0, t1, t2 and 1 more")
    assert "6.0 µs here in all, 8.0 µs where recorded" in text
    assert shelf.library_lines({"library": {"tasks": 19, "hits": hits}}) == [text]
    assert shelf.library_lines({"library": {"tasks": 3, "hits": []}}) == []
    assert shelf.library_lines({"library": "damaged"}) == []
    assert shelf.library_lines({"library": {"hits": [], "notes": ["the schedule library was not\nwritten"]}}) == \
        ["the schedule library was not\\nwritten"]


def test_a_time_budget_plans_its_batches_and_refuses_what_is_no_time():
    assert trials_for_minutes(10, TRIAL_CEILING) == 150 and trials_for_minutes(10, 40) == 40
    assert trials_for_minutes(0.01, 100) == 1
    for bad in (0, -1, float("nan"), True, "5", 10 ** 9):
        assert minutes_problem(bad), bad
    assert minutes_problem(0.5) is None


def test_trials_and_minutes_bound_a_session_each_or_together():
    assert session_trials(TuneRequest(file="f", trials=64)) == 64
    assert session_trials(TuneRequest(file="f", trials=None, minutes=5)) == TRIAL_CEILING
    assert session_trials(TuneRequest(file="f", trials=32, minutes=5)) == 32
    with pytest.raises(AsightError, match="--minutes must be more than 0"):
        session_trials(TuneRequest(file="f", minutes=0))
    with pytest.raises(AsightError, match="--trials must be a positive number"):
        session_trials(TuneRequest(file="f", trials=None))


def test_progress_says_time_left_and_the_trial_bound_only_where_there_is_one():
    extra = {"time_budget": {"minutes": 10, "trials": False, "until": 1000.0 + 360}}
    assert budget_text(12, TRIAL_CEILING, extra, now=1000.0) == "12 trials · 6 min left"
    assert budget_text(12, 64, {"time_budget": {"minutes": 10, "trials": True}}) == "12/64 trials · 10 min budget"
    assert budget_text(12, 64, {}) == "12/64 trials"
    assert event_budget_text({"trials_done": 3, "trials": None, "seconds_left": 42.2}) == "3 trials · 42 s left"
    assert event_budget_text({"trials_done": 3, "trials": 9}) == "3/9 trials"
    assert TimeBudget.from_extra({"time_budget": {"minutes": "ten"}}) is None
    meta = RunMeta(id="r", file="f", function="main", extra={"time_budget": {"minutes": "ten"}})
    assert section_problems(meta) == ['extra.time_budget.minutes is "ten", not int or float']
