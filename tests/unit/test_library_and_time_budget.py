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
    return shelf.folder_for("llvm -mcpu=test", make=True)


def test_compact_keeps_each_workloads_newest_record_and_the_workloads_fed_last(folder):
    (folder / DB_WORKLOADS).write_text(lines([workload(0), workload(1), workload(2)]))
    (folder / DB_RECORDS).write_text(lines([[0, record(3e-6)], [1, record(5e-6)], [0, record(4e-6)], [2, record(1e-6)]]))
    shelf.name_workloads(folder, {"1000": "conv2d"})
    kept = shelf.entries(folder)
    assert [(e.workload[0], e.mean_us) for e in kept] == [("1001", 5.0), ("1000", 4.0), ("1002", 1.0)]
    assert kept[1].task == "conv2d" and kept[0].task == "workload 1001"
    assert shelf.compact(folder, 2) == 2
    again = shelf.entries(folder)
    assert [(e.workload[0], e.mean_us) for e in again] == [("1000", 4.0), ("1002", 1.0)]
    assert again[0].task == "conv2d"                       # the names travel with the compaction
    assert len((folder / DB_RECORDS).read_text().splitlines()) == 2


def test_the_library_is_off_by_name_and_outside_the_workspace_by_default(tmp_path, monkeypatch):
    monkeypatch.setenv(shelf.LIBRARY_ENV, "off")
    assert shelf.root() is None and shelf.folder_for("llvm") is None
    monkeypatch.delenv(shelf.LIBRARY_ENV)
    monkeypatch.setenv("ASIGHT_CACHE_DIR", str(tmp_path / "cache"))
    assert shelf.root() == tmp_path / "cache" / "library"


def test_an_export_imports_and_a_faster_record_wins_a_slower_does_not(folder, tmp_path):
    (folder / DB_WORKLOADS).write_text(lines([workload(0)]))
    (folder / DB_RECORDS).write_text(lines([[0, record(4e-6)]]))
    path = tmp_path / "team.json"
    path.write_text(json.dumps(shelf.export_library(folder, "llvm -mcpu=test")))
    target, incoming = shelf.read_library_file(str(path))
    assert target == "llvm -mcpu=test" and len(incoming) == 1
    assert shelf.merge(folder, target, incoming) == (0, 1)                  # as fast: kept as it was
    incoming[0].record = record(2e-6)
    assert shelf.merge(folder, target, incoming) == (1, 0)
    assert [e.mean_us for e in shelf.entries(folder)] == [2.0]


@pytest.mark.parametrize("content, said", [
    ("not json", "not JSON"),
    (json.dumps({"schema": "other"}), "schema is not asight.library/1"),
    (json.dumps({"schema": shelf.SCHEMA, "target": "llvm", "workloads": [workload(0)], "records": []}),
     "as many workloads as records"),
    (json.dumps({"schema": shelf.SCHEMA, "target": "llvm", "workloads": [["1", "not base64!"]],
                 "records": [record(1e-6)]}), "entry 0 is not a workload"),
])
def test_a_library_file_that_is_not_one_is_refused_as_data(tmp_path, content, said):
    path = tmp_path / "lib.json"
    path.write_text(content)
    with pytest.raises(AsightError, match=said):
        shelf.read_library_file(str(path))


def test_hits_are_said_with_their_tasks_and_times():
    hits = [{"task": f"t{i}", "library_us": 2.0, "measured_us": 1.5} for i in range(4)]
    text = shelf.hits_text(hits, 19)
    assert text.startswith("4 of 19 tasks started from the schedule library: t0, t1, t2 and 1 more")
    assert "6.0 µs here in all, 8.0 µs where recorded" in text
    assert shelf.library_lines({"library": {"tasks": 19, "hits": hits}}) == [text]
    assert shelf.library_lines({"library": {"tasks": 3, "hits": []}}) == []
    assert shelf.library_lines({"library": "damaged"}) == []


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
