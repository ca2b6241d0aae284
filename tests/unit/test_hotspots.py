"""Hotspot ranking and the ``asight hotspots`` command on recorded data (no TVM: a stub worker)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from asight_lsp.analysis import matching
from asight_lsp.analysis.hotspot_ranking import relax_hotspots, tir_hotspots
from asight_lsp.commands import hotspots as command
from asight_lsp.errors import AsightError
from asight_lsp.store.runs import RunMeta, RunStore

from test_matching_recorded import RECORDED  # noqa: E402  (same folder, no package)

ROOT = Path(__file__).resolve().parents[2]


def test_stage_of_blocks_without_flops_is_shared_equally():
    source = {"nodes": [{"id": "a", "kind": "block", "name": "a", "flops": None},
                        {"id": "b", "kind": "block", "name": "b", "flops": 0}]}
    match = {"source": {"a": {"match": "graph"}, "b": {"match": "graph"}},
             "transformed": {"a": {"source": ["a"]}, "b2": {"source": ["b"]}}}
    hot = tir_hotspots(source, match, [{"index": 0, "us": 8.0, "blocks": ["a", "b2"]}])
    assert [(e["id"], e["us"], e["split"]) for e in hot["entries"]] == [("a", 4.0, "equal"), ("b", 4.0, "equal")]
    assert [e["rank"] for e in hot["entries"]] == [1, 2]


def test_blocks_the_match_leaves_unpaired_are_attributed_by_the_trace_lineage():
    """rfactor makes row_max_rf_init/update, which the graph match does not pair: the trace's
    lineage (row_max_rf_* ← row_max) pairs them in the match, so their stage is attributed instead
    of left unattributed."""
    import copy
    from asight_lsp.analysis.matching.tir import adopt_lineage
    source = {"nodes": [{"id": "b0", "kind": "block", "name": "row_max", "flops": 10},
                        {"id": "b1", "kind": "block", "name": "out", "flops": 10}]}
    match = {"source": {"b0": {"match": "graph", "transformed": [], "evidence": [], "inlined_into": None},
                        "b1": {"match": "graph", "transformed": [], "evidence": [], "inlined_into": None}},
             "transformed": {"row_max": {"source": ["b0"]}, "out": {"source": ["b1"]}},
             "unmatched": ["row_max_rf_init", "row_max_rf_update"], "unmatched_source": []}
    stages = [{"index": 0, "us": 6.0, "blocks": ["row_max_rf_init", "row_max_rf_update"]},
              {"index": 1, "us": 2.0, "blocks": ["out"]}]
    without = tir_hotspots(source, match, stages)
    assert [u["stage"] for u in without["unattributed"]] == [0]
    lineage = {"row_max_rf_init": "row_max", "row_max_rf_update": "row_max", "elsewhere": "missing"}
    adopted = adopt_lineage(copy.deepcopy(match), source, lineage)
    assert adopted["unmatched"] == [] and adopted["transformed"]["row_max_rf_init"] == \
        {"source": ["b0"], "role": "derived", "unit": None, "match": "lineage"}
    hot = tir_hotspots(source, adopted, stages)
    assert hot["unattributed"] == []
    assert {e["name"]: e["us"] for e in hot["entries"]} == {"row_max": 6.0, "out": 2.0}


def test_repeated_kernel_calls_land_on_their_own_call_sites():
    data = copy.deepcopy(RECORDED["relax_cnn"])
    result = matching.match_relax(data["source"], data["transformed"])
    # pretend both convolutions run the same kernel: call 0 is site 0, call 1 is site 1
    for site in result["sites"][:2]:
        site["function"] = "fused_conv"
    calls = [{"task": "fused_conv", "call": 0, "us": 10.0}, {"task": "fused_conv", "call": 1, "us": 30.0}]
    hot = relax_hotspots(data["source"], data["transformed"], result, calls)
    by = {e["id"]: e for e in hot["entries"]}
    assert by["c1"]["calls"] == ["fused_conv#0"] and by["c2"]["calls"] == ["fused_conv#1"]
    assert by["c1"]["us"] + by["r1"]["us"] == pytest.approx(10.0)
    assert by["c2"]["us"] + by["s"]["us"] + by["r2"]["us"] == pytest.approx(30.0)
    assert hot["entries"][0]["id"] == "c2"


# --------------------------------------------------------------------------- the command


class StubWorker:
    """Answers block_graph/relax_graph with recorded graphs, like the TVM worker would."""

    def __init__(self, reply: dict):
        self.reply, self.requests = reply, []

    def request(self, method, params, timeout=None):
        self.requests.append((method, params))
        return copy.deepcopy(self.reply)


def _run(tmp_path, function: str, kind: str) -> str:
    store = RunStore(tmp_path / "store")
    store.create(RunMeta(id="r1", file="x.py", function=function, kind=kind, state="done"))
    return str(store.root)


MBR_PROFILE = {"kind": "tir", "kernels": [{
    "name": "main", "function": "MatmulBiasRelu.main", "best": {"latency_us": 1.0},
    "stages": {"tuned": {"stages": [
        {"index": 0, "us": 90.0, "blocks": [{"name": "matmul_init"}, {"name": "matmul_update"}]},
        {"index": 1, "us": 10.0, "blocks": [{"name": "relu"}]}], "whole_us": 101.0}}}]}


def test_collect_ranks_tir_blocks_with_ranges(tmp_path):
    root = _run(tmp_path, "MatmulBiasRelu.main", "tir")
    rec = RECORDED["mbr_inline"]
    worker = StubWorker({"function": "main", "source": rec["source"], "workload_match": "structural hash",
                         "transformed": [{**rec["transformed"], "record": {"trial": 3, "latency_us": 1.0}}]})
    result = command.collect(str(ROOT / "fixtures/matmul_bias_relu.py"), "r1", store_root=root, worker=worker,
                             profile=copy.deepcopy(MBR_PROFILE))
    method, params = worker.requests[0]
    assert method == "block_graph" and params["records"] == "best" and params["function"] == "main"
    part = result["parts"][0]
    assert [e["name"] for e in part["entries"]] == ["matmul", "bias_add", "relu"]
    top = part["entries"][0]
    assert top["us"] == pytest.approx(90.0) and top["share"] == pytest.approx(0.9)
    assert top["range"]["start"]["line"] == 16 and top["source_id"] == "MatmulBiasRelu.main/matmul"
    assert part["entries"][1]["inlined_into"] == "relu" and part["entries"][1]["split"] == "flops"
    assert part["match"]["method"] == "isomorphism" and "warning" not in part
    text = command.render(result)
    assert "matmul" in text and "90.0 µs" in text and "matmul_init (init)" in text
    assert "split by flops" in text and "inlined into relu" in text
    json.dumps(result)  # plain data all the way


def test_collect_ranks_relax_bindings(tmp_path):
    root = _run(tmp_path, "Net", "relax")
    worker = StubWorker(RECORDED["relax_cnn"])
    calls = [{"task": "fused_conv2d_relu", "call": 0, "us": 36.0}, {"task": "fused_conv2d_add_relu", "call": 0, "us": 44.0},
             {"task": "mean", "call": 0, "us": 3.0}, {"task": "fused_matmul_add1", "call": 0, "us": 1.0}]
    profile = {"kind": "relax", "relax": {"tasks": {"tuned": {"tasks": calls, "whole_us": 90.0}}}}
    result = command.collect(str(ROOT / "fixtures/relax_cnn.py"), "r1", store_root=root, worker=worker,
                             profile=profile)
    part = result["parts"][0]
    assert worker.requests[0][0] == "relax_graph" and worker.requests[0][1]["function"] == "main"
    assert [e["name"] for e in part["entries"][:2]] == ["c2", "c1"]
    assert part["entries"][0]["range"]["start"]["line"] == 16 and part["entries"][0]["source_id"] == "Net.main/c2"
    assert [s["bindings"] for s in part["match"]["sites"]][0] == ["c1", "r1"]
    assert "fused_conv2d_add_relu#0" in command.render(result)


def test_collect_explains_a_profile_without_stages(tmp_path):
    root = _run(tmp_path, "MatmulBiasRelu.main", "tir")
    profile = {"kind": "tir", "kernels": [{"name": "main", "stages": {"tuned": {"error": "rdtsc failed"}}}]}
    with pytest.raises(AsightError, match="rdtsc failed"):
        command.collect(str(ROOT / "fixtures/matmul_bias_relu.py"), "r1", store_root=root,
                        worker=StubWorker({}), profile=profile)


def test_collect_reports_a_trace_that_no_longer_applies(tmp_path):
    root = _run(tmp_path, "MatmulBiasRelu.main", "tir")
    worker = StubWorker({"source": RECORDED["mbr_inline"]["source"], "transformed": [{"error": "block not found"}]})
    with pytest.raises(AsightError, match="does not apply.*block not found"):
        command.collect(str(ROOT / "fixtures/matmul_bias_relu.py"), "r1", store_root=root, worker=worker,
                        profile=copy.deepcopy(MBR_PROFILE))
