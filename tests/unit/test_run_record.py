"""run.json's typed sections (store/record.py): valid, missing, wrong-typed, an old run, a schema."""
from __future__ import annotations

import json

import pytest

from asight_lsp.errors import AsightError
from asight_lsp.store.record import RUN_SCHEMA, Adopted, Build, Shortfall, Space, read_section, section_problems
from asight_lsp.store.runs import Run, RunMeta

ADOPTED = {"from": "/w", "from_size": 10, "how": "structural hash", "workload": 2, "flops": 1.5e6,
           "dtypes": ["float32"], "records": 32, "measured": 30, "counters": None, "digest": {"a": "b"}, "set_aside": 0}
SPACE = {"function": "space", "mode": "alone", "hash": "h", "line": 4, "mapping": {"1": 2}, "applies_to": "M.main",
         "sites": []}
BUILD = {"deployable": True, "weights": "/m.npz", "bound": 3, "weights_digest": "d"}
SHORT = {"schema": "asight.shortfall/1", "requested": 8, "measured": 6, "reasons": [], "text": "2 builds failed"}


def _meta(**extra) -> RunMeta:
    return RunMeta(id="r", file="/f.py", function="main", extra=extra)


def test_valid_sections_are_typed():
    meta = _meta(adopted=ADOPTED, space=SPACE, build=BUILD, shortfall=SHORT)
    assert meta.adopted == Adopted(workload=2, source="/w", from_size=10, how="structural hash", flops=1.5e6,
                                   dtypes=["float32"], records=32, measured=30, digest={"a": "b"}, set_aside=0)
    assert meta.adopted.work() == {"workload": 2, "flops": 1.5e6, "dtypes": ["float32"]}
    assert meta.space.key() == ("space", "alone", "h") and meta.space.mapping == {"1": 2}
    assert meta.build == Build(deployable=True, weights="/m.npz", bound=3, weights_digest="d")
    assert meta.shortfall == Shortfall(text="2 builds failed", requested=8, measured=6, reasons=[])
    assert section_problems(meta) == []


def test_an_old_run_without_the_sections_reads_none_and_no_problem():
    meta = _meta(selection={"unit": "M"})
    assert (meta.adopted, meta.space, meta.build, meta.shortfall) == (None, None, None, None)
    assert section_problems(meta) == [] and section_problems(_meta(adopted={}, shortfall={})) == []


@pytest.mark.parametrize("section, value, said", [
    (Adopted, {"workload": True}, "extra.adopted.workload is true, not int"),
    (Adopted, {"workload": 1, "digest": "x"}, "extra.adopted.digest is \"x\", not dict"),
    (Adopted, [1], "extra.adopted is [1], not an object"),
    (Space, {"mode": "alone"}, "extra.space.function is missing"),
    (Space, {"function": "s", "line": "4"}, "extra.space.line is \"4\", not int"),
    (Build, {"deployable": 1}, "extra.build.deployable is 1, not bool"),
    (Shortfall, {"text": 3, "requested": 1, "measured": 0}, "extra.shortfall.text is 3, not str"),
])
def test_a_wrong_typed_section_is_none_with_its_reason(section, value, said):
    extra = {section.KEY: value}
    assert section.from_extra(extra) is None and read_section(extra, section) == (None, said)
    assert section_problems(_meta(**extra)) == [said]


def test_not_a_dict_extra_never_raises():
    assert Adopted.from_extra(None) is None and Space.from_extra([1]) is None


def _write(tmp_path, data: dict) -> Run:
    run = Run(tmp_path / "runs" / "main-1")
    run.path.mkdir(parents=True)
    run.meta_path.write_text(json.dumps({"id": "x", "file": "/f.py", "function": "main", **data}))
    return run


def test_load_keeps_schema_1_and_a_run_without_schema(tmp_path):
    assert _write(tmp_path, {"schema": RUN_SCHEMA}).load().schema == RUN_SCHEMA
    assert _write(tmp_path / "b", {}).load().schema == RUN_SCHEMA


def test_load_refuses_an_unknown_schema_with_its_reason(tmp_path):
    with pytest.raises(AsightError, match=r'its schema is "asight.run/2", not asight.run/1'):
        _write(tmp_path, {"schema": "asight.run/2"}).load()


def test_load_refuses_a_wrong_typed_adopted_field(tmp_path):
    # a run read as not adopted would skip adopt's checks of its records
    with pytest.raises(AsightError, match=r"extra.adopted.from_size is \"9\", not int"):
        _write(tmp_path, {"extra": {"adopted": {"workload": 0, "from_size": "9"}}}).load()
    with pytest.raises(AsightError, match=r"extra.adopted.digest"):
        _write(tmp_path / "b", {"adopted": {"workload": 0, "digest": 3}}).load()    # top level: moved into extra


def test_the_levers_a_run_was_made_with_are_a_typed_section():
    from asight_lsp.store.record import Levers, section_problems
    from asight_lsp.store.runs import RunMeta
    made = RunMeta(id="r", file="m.py", function="main", extra={"levers_off": ["layout"], "pipeline_levers": ["layout", "nhwc"]})
    assert Levers.from_extra(made.extra) == Levers(("layout",), ("layout", "nhwc"))
    assert Levers.read({}) == (None, None)                         # a run made before the record
    assert Levers.read({"levers_off": ["layout"]}) == (Levers(("layout",), None), None)
    assert Levers.read({"pipeline_levers": ["layout"]}) == (Levers(None, ("layout",)), None)   # off not recorded
    bad = RunMeta(id="r", file="m.py", function="main", extra={"levers_off": "layout"})
    assert Levers.from_extra(bad.extra) is None
    assert section_problems(bad) == ['extra.levers_off is "layout", not a list of lever names']
