"""run.json's measurement record, typed (store/record.Measurement, RunMeta.measured): well-formed,
absent, of the wrong shape (None, and ``section_problems`` names the field), ``chosen == []`` kept."""
from __future__ import annotations

import json

import pytest

from asight_lsp.store.record import (UNMEASURED, Build, Measurement, build_of, measured_headline,
                                     section_problems)
from asight_lsp.store.runs import Run, RunMeta

RECORD = {"schema": "asight.measurement/1", "scope": "program", "by": "tuning job", "taken": 1795674078.0,
          "harness": {"rounds": 20, "threads": 4}, "load": {"other_cores": 1.3, "busy": True, "reasons": ["x"]},
          "untuned": {"median_us": 120.0}, "tuned": {"median_us": 60.0}, "parts": {"untuned": {"median_us": 120.0}},
          "speedup": {"estimate": 2.0, "ci": [1.9, 2.1]}, "verdict": "faster",
          "chosen": [{"task": "conv", "workload": 0, "trial": 7}], "trials": 32,
          "defaults": [{"task": "mean", "default": "default", "default_us": 0.9, "measured_us": 3.9}],
          "check": {"ok": True}, "applied": {"kernels": 2}, "build": {"deployable": True, "bound": 3}}


def _meta(measurement=None, **extra) -> RunMeta:
    return RunMeta(id="r", file="/m.py", function="main", kind="relax", measurement=measurement, extra=extra)


def test_a_well_formed_record_is_typed_and_keeps_its_dict():
    measured = _meta(RECORD).measured
    assert measured.raw is RECORD                     # what analysis/measurement.py's texts take
    assert (measured.scope, measured.by, measured.verdict, measured.trials) == ("program", "tuning job", "faster", 32)
    assert (measured.untuned_us, measured.tuned_us, measured.speedup_estimate) == (120.0, 60.0, 2.0)
    assert measured.headline and measured.busy and measured.check == {"ok": True}
    assert measured.chosen == RECORD["chosen"] and measured.default_tasks == {"mean"}
    assert measured.picks == RECORD["chosen"] + RECORD["defaults"]
    assert measured.build == Build(deployable=True, bound=3)
    assert section_problems(_meta(RECORD)) == []


def test_no_record_reads_none_and_no_problem():
    for value in (None, {}):
        assert _meta(value).measured is None and Measurement.read(value) == (None, None)
        assert section_problems(_meta(value)) == [] and measured_headline(_meta(value)) is None
    assert (UNMEASURED.chosen, UNMEASURED.tuned_us, UNMEASURED.busy, UNMEASURED.raw) == (None, None, False, {})


def test_chosen_empty_is_measured_with_every_default_kept_not_none():
    from asight_lsp.services.lookup import chosen_records
    kept = _meta({**RECORD, "chosen": []})
    assert kept.measured.chosen == [] and chosen_records(kept) == []
    assert _meta({**RECORD, "chosen": None}).measured.chosen is None and chosen_records(_meta()) is None


def test_a_failed_measurement_holds_its_error_and_is_no_headline():
    failed = _meta({"schema": "asight.measurement/1", "error": "RuntimeError: no GPU"})
    assert failed.measured.error == "RuntimeError: no GPU" and not failed.measured.headline
    assert measured_headline(failed) is None and measured_headline(_meta(RECORD)).tuned_us == 60.0


@pytest.mark.parametrize("record, said", [
    (3, "measurement is 3, not an object"),
    ({**RECORD, "chosen": {"conv": 7}}, 'measurement.chosen is {"conv": 7}, not list'),
    ({**RECORD, "chosen": [7]}, "measurement.chosen[0] is 7, not an object"),
    ({**RECORD, "defaults": [{"task": "a"}, "b"]}, 'measurement.defaults[1] is "b", not an object'),
    ({**RECORD, "tuned": {"median_us": "60"}}, 'measurement.tuned.median_us is "60", not int or float'),
    ({**RECORD, "untuned": {"p25_us": 1.0}}, "measurement.untuned.median_us is missing"),
    ({**RECORD, "speedup": [2.0]}, "measurement.speedup is [2.0], not dict"),
    ({**RECORD, "trials": True}, "measurement.trials is true, not int"),
    ({**RECORD, "error": 1}, "measurement.error is 1, not str"),
    ({**RECORD, "build": {"bound": "3"}}, 'measurement.build.bound is "3", not int'),
])
def test_a_wrong_shaped_record_reads_as_absent_and_is_said(record, said):
    meta = _meta(record)
    assert meta.measured is None and Measurement.read(record) == (None, said)
    assert section_problems(meta) == [said] and measured_headline(meta) is None


def test_a_loaded_run_with_a_wrong_shaped_record_loads_and_says_it(tmp_path):
    run = Run(tmp_path / "runs" / "main-1")
    run.path.mkdir(parents=True)
    run.meta_path.write_text(json.dumps({"id": "x", "file": "/m.py", "function": "main",
                                         "measurement": {**RECORD, "chosen": "all"}}))
    meta = run.load()
    assert meta.measurement is None and meta.measured is None          # no reader meets it...
    assert meta.extra["measurement_unread"]["record"]["chosen"] == "all"    # ...and it is kept
    assert section_problems(meta)[0].startswith('measurement.chosen is "all", not list (set aside')
    meta = Run(run.path).load()
    run.save(meta)                                                     # saved again: still kept
    assert json.loads(run.meta_path.read_text())["extra"]["measurement_unread"]["record"]["chosen"] == "all"


def test_every_field_the_words_read_is_checked_so_a_damaged_record_never_reaches_them(tmp_path):
    """A run.json of any of these shapes loads as a run with no measurement (its records shown), the record
    set aside and named: the words about a record (speedup, how it was taken) never meet it."""
    bad = [[1, 2, 3], "x", {**RECORD, "speedup": {"estimate": "fast", "ci": "wide"}},
           {**RECORD, "speedup": {"estimate": 2.0, "ci": [1.0, "a"]}}, {**RECORD, "speedup": {"ci": [1.0]}},
           {**RECORD, "harness": {"calls_per_repeat": [1]}}, {**RECORD, "load": {"busy": "yes"}}]
    for i, record in enumerate(bad):
        run = Run(tmp_path / "runs" / f"main-{i}")
        run.path.mkdir(parents=True)
        run.meta_path.write_text(json.dumps({"id": f"x{i}", "file": "/m.py", "function": "main", "measurement": record}))
        meta = run.load()
        assert meta.measurement is None and meta.extra["measurement_unread"]["record"] == record, record
        assert len(section_problems(meta)) == 1, record


def test_the_build_is_extra_s_else_the_one_an_older_run_kept_in_its_record():
    assert build_of(_meta(RECORD, build={"deployable": True, "bound": 5})).bound == 5
    assert build_of(_meta(RECORD)).bound == 3                                       # a run before extra.build
    assert build_of(_meta({**RECORD, "build": None})) is None
    without_key = build_of(_meta(None, build={"bound": 2, "weights_digest": "d"}))   # as the truthy dict read it
    assert without_key == Build(deployable=True, bound=2, weights_digest="d")
    assert without_key.as_dict() == {"deployable": True, "weights": None, "bound": 2, "weights_digest": "d"}
