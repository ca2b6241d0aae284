"""Search constraints from principles, checked on real recorded traces (no TVM)."""
from __future__ import annotations

from asight_lsp.analysis.constraints import describe, is_decision_constraint, trace_violations, violations
from asight_lsp.analysis.traces import parse_decisions
from asight_lsp.store.runs import read_records
from tests.conftest import FIXTURES

RECORDS = read_records(FIXTURES / "runs" / "mbr128")


def tile(record, loop):
    return next(d.value for d in parse_decisions(record["insts"], record["decisions"])
                if d.inst == "SamplePerfectTile" and d.block == "matmul" and d.loop == loop)


def test_tile_bound_splits_the_recorded_candidates_exactly():
    c = {"block": "matmul", "inst": "SamplePerfectTile", "loop": 2, "index": 1, "n": 2, "max": 4}
    broken = [bool(trace_violations(r["insts"], r["decisions"], [c])) for r in RECORDS]
    expected = [tile(r, 2)[1] > 4 for r in RECORDS]
    assert broken == expected
    assert any(broken) and not all(broken)


def test_min_and_in_bounds():
    values = [tile(r, 0)[-1] for r in RECORDS]
    low = {"block": "matmul", "inst": "SamplePerfectTile", "loop": 0, "index": -1, "n": 4, "min": 8}
    assert [not trace_violations(r["insts"], r["decisions"], [low]) for r in RECORDS] == [v >= 8 for v in values]
    allowed = sorted(set(values))[:1]
    member = {"block": "matmul", "inst": "SamplePerfectTile", "loop": 0, "index": -1, "n": 4, "in": allowed}
    assert [not trace_violations(r["insts"], r["decisions"], [member]) for r in RECORDS] == \
        [v in allowed for v in values]


def test_categorical_constraint():
    unroll = [d for r in RECORDS for d in parse_decisions(r["insts"], r["decisions"]) if d.inst == "SampleCategorical"]
    chosen = unroll[0].value
    c = {"block": unroll[0].block, "inst": "SampleCategorical", "annotation": unroll[0].annotation, "in": [chosen]}
    assert violations([unroll[0]], [c]) == []
    other = next(d for d in unroll if d.value != chosen)
    assert violations([other], [c]) == [c]


def test_constraints_on_other_blocks_or_sketches_do_not_apply():
    elsewhere = {"block": "relu", "inst": "SamplePerfectTile", "loop": 0, "index": 0, "max": 1}
    sketch = {"sketch": "cache-write matmul"}
    assert not is_decision_constraint(sketch)
    assert all(not trace_violations(r["insts"], r["decisions"], [elsewhere, sketch]) for r in RECORDS)
    assert describe({"block": "C", "inst": "SamplePerfectTile", "loop": 2, "index": 3, "n": 4, "max": 4}) == \
        "C: tile factor 3/4 of loop 2 <= 4"
