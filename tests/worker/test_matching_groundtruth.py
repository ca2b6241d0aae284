"""Ground truth for the hotspot matcher: schedules applied by hand with TVM's schedule API, and the
mapping every transformed block must get (real TVM, in-process; no tuning except the last test).

Fixtures whose intermediate buffers are ``T.alloc_buffer`` are rewritten to ``T.sblock_alloc_buffer``
where a test inlines: TVM 0.27 treats blocks writing a body-level ``AllocBuffer`` as output blocks and
refuses ``compute_inline`` on them (MetaSchedule's AutoInline skips them for the same reason).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

pytest.importorskip("tvm")

from asight_lsp.analysis import matching  # noqa: E402
from asight_lsp.tvmscript.outline import build_outline  # noqa: E402
from asight_lsp.worker import relax_graphs, tir_graphs  # noqa: E402
from asight_lsp.worker.compat import normalize_mod, s_tir  # noqa: E402
from asight_lsp.worker.parse import parse_unit  # noqa: E402

pytestmark = pytest.mark.tvm
ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures"

TWIN_BRANCHES = '''
from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def twins(A: T.Buffer((64, 64), "float32"), B1: T.Buffer((64, 64), "float32"),
          B2: T.Buffer((64, 64), "float32")):
    T.func_attr({"global_symbol": "twins", "tir.noalias": True})
    for i, j in T.grid(64, 64):
        with T.sblock("left"):
            vi, vj = T.axis.remap("SS", [i, j])
            B1[vi, vj] = A[vi, vj] * T.float32(2)
    for i, j in T.grid(64, 64):
        with T.sblock("right"):
            vi, vj = T.axis.remap("SS", [i, j])
            B2[vi, vj] = A[vi, vj] * T.float32(2)
'''


RESIDUAL_CHAIN = '''
from tvm.script import ir as I
from tvm.script import relax as R


@I.ir_module
class Res:
    @R.function
    def main(x: R.Tensor((1, 8, 16, 16), "float32"), w: R.Tensor((8, 8, 3, 3), "float32"),
             b: R.Tensor((1, 8, 1, 1), "float32")) -> R.Tensor((1, 8, 16, 16), "float32"):
        with R.dataflow():
            a1 = R.nn.conv2d(x, w, padding=[1, 1, 1, 1])
            a2 = R.add(a1, b)
            a3 = R.nn.relu(a2)
            a4 = R.add(a3, x)
            b1 = R.nn.conv2d(a4, w, padding=[1, 1, 1, 1])
            b2 = R.add(b1, b)
            b3 = R.nn.relu(b2)
            b4 = R.add(b3, a4)
            c1 = R.nn.conv2d(b4, w, padding=[1, 1, 1, 1])
            c2 = R.add(c1, b)
            c3 = R.nn.relu(c2)
            c4 = R.add(c3, b4)
            t = R.permute_dims(c4, [0, 1, 3, 2])
            s = R.nn.softmax(t, axis=-1)
            out = R.multiply(s, R.const(2.0, "float32"))
            R.output(out)
        return out
'''


def _params(text: str, sblock_alloc: bool = False) -> dict:
    if sblock_alloc:
        text = text.replace("T.alloc_buffer", "T.sblock_alloc_buffer")
    outline = build_outline(text)
    return {"text": text, "unit": asdict(outline.units[0]), "constants": outline.constants,
            "aliases": outline.aliases}


def _func(params: dict):
    parsed = parse_unit(params["text"].splitlines(), params["unit"], params["constants"], params["aliases"])
    return tir_graphs.fresh_copy(parsed if not hasattr(parsed, "functions") else parsed["main"])


def _fixture(name: str, sblock_alloc: bool = False) -> dict:
    return _params((FIXTURES / f"{name}.py").read_text(), sblock_alloc)


def _match(params: dict, schedule) -> tuple[dict, dict, dict]:
    """(source graph, transformed graph, match) for ``schedule(sch)`` applied to the function."""
    func = _func(params)
    sch = s_tir.Schedule(normalize_mod(func))
    schedule(sch)
    source = tir_graphs.tir_graph(_func(params))
    transformed = tir_graphs.tir_graph(sch.mod["main"])
    return source, transformed, matching.match_tir(source, transformed)


def _mapping(result: dict) -> dict:
    return {b: (sorted(v["source"]), v["role"]) for b, v in result["transformed"].items()}


def _assert_complete(result: dict) -> None:
    assert result["method"] == "isomorphism", result["notes"]
    assert result["unmatched"] == [] and result["unmatched_source"] == []


# --------------------------------------------------------------------------- schedules


def test_split_reorder_fuse_parallel_vectorize_decompose():
    def schedule(sch):
        blk = sch.get_sblock("C")
        i, j, k = sch.get_loops(blk)
        io, ii = sch.split(i, [None, 8])
        jo, ji = sch.split(j, [None, 16])
        sch.reorder(io, jo, k, ii, ji)
        fused = sch.fuse(io, jo)
        sch.parallel(fused)
        sch.vectorize(ji)
        sch.decompose_reduction(blk, k)

    source, transformed, result = _match(_fixture("matmul64"), schedule)
    _assert_complete(result)
    assert _mapping(result) == {"C_init": (["C"], "init"), "C_update": (["C"], "compute")}
    assert result["source"]["C"]["match"] == matching.GRAPH


def test_cache_read_cache_write_compute_at():
    def schedule(sch):
        blk = sch.get_sblock("C")
        a_cache = sch.cache_read(blk, 0, "global")
        b_cache = sch.cache_read(blk, 1, "global")
        c_cache = sch.cache_write(blk, 0, "global")
        i, j, k = sch.get_loops(blk)
        io, ii = sch.split(i, [None, 16])
        jo, ji = sch.split(j, [None, 16])
        sch.reorder(io, jo, k, ii, ji)
        sch.reverse_compute_at(c_cache, jo)
        sch.compute_at(a_cache, k)
        sch.compute_at(b_cache, k)
        sch.decompose_reduction(blk, k)

    source, transformed, result = _match(_fixture("matmul64"), schedule)
    _assert_complete(result)
    assert _mapping(result) == {"A_global": (["C"], "cache_read"), "B_global": (["C"], "cache_read"),
                                "C_init": (["C"], "init"), "C_update": (["C"], "compute"),
                                "C_global": (["C"], "cache_write")}
    evidence = " | ".join(result["source"]["C"]["evidence"])
    assert "cache_write: C_global" in evidence and "cache_read: A_global" in evidence


def test_compute_inline_and_reverse_compute_at():
    def schedule(sch):
        sch.compute_inline(sch.get_sblock("bias_add"))
        mm = sch.get_sblock("matmul")
        i, j, k = sch.get_loops(mm)
        sch.parallel(i)
        sch.reverse_compute_at(sch.get_sblock("relu"), i)
        sch.decompose_reduction(mm, k)

    source, transformed, result = _match(_fixture("matmul_bias_relu", sblock_alloc=True), schedule)
    _assert_complete(result)
    assert _mapping(result) == {"matmul_init": (["matmul"], "init"), "matmul_update": (["matmul"], "compute"),
                                "relu": (["bias_add", "relu"], "compute")}
    assert result["transformed"]["relu"]["source"][0] == "relu"          # the block that computes it
    assert result["source"]["bias_add"]["inlined_into"] == "relu"
    assert result["inlined"] == [{"block": "bias_add", "how": "compute_inline", "into": "relu"}]
    # relu runs inside matmul's loop nest: one stage, two source blocks
    stages = {n["name"]: n["stage"] for n in transformed["nodes"] if n["kind"] == "block"}
    assert stages["relu"] == stages["matmul_update"]


def test_reverse_compute_inline():
    def schedule(sch):
        sch.reverse_compute_inline(sch.get_sblock("relu"))

    source, transformed, result = _match(_fixture("matmul_bias_relu", sblock_alloc=True), schedule)
    _assert_complete(result)
    assert _mapping(result) == {"matmul": (["matmul"], "compute"), "bias_add": (["bias_add", "relu"], "compute")}
    assert result["inlined"] == [{"block": "relu", "how": "reverse_compute_inline", "into": "bias_add"}]


def test_rfactor_both_reductions_and_compute_at():
    def schedule(sch):
        row_max = sch.get_sblock("row_max")
        _, k = sch.get_loops(row_max)
        _, ki = sch.split(k, [None, 16])
        sch.rfactor(ki, 1)
        exp_sum = sch.get_sblock("exp_sum")
        _, k = sch.get_loops(exp_sum)
        ko, _ = sch.split(k, [8, None])
        sch.rfactor(ko, 0)
        norm_i = sch.get_loops(sch.get_sblock("normalize"))[0]
        sch.compute_at(sch.get_sblock("exp_sum"), norm_i)
        for name in ("row_max_rf", "row_max", "exp_sum_rf", "exp_sum"):
            blk = sch.get_sblock(name)
            sch.decompose_reduction(blk, sch.get_loops(blk)[1])

    source, transformed, result = _match(_fixture("softmax", sblock_alloc=True), schedule)
    _assert_complete(result)
    mapping = _mapping(result)
    assert mapping["row_max_rf_update"] == (["row_max"], "rfactor")
    assert mapping["row_max_rf_init"] == (["row_max"], "init")
    assert mapping["row_max_update"] == (["row_max"], "compute")
    assert mapping["exp_sum_rf_update"] == (["exp_sum"], "rfactor")
    assert mapping["exp_sum_update"] == (["exp_sum"], "compute")
    assert mapping["normalize"] == (["normalize"], "compute")
    assert len(mapping) == 9
    # rfactor blocks lose their spans: structure, not spans, placed them
    rf = next(n for n in transformed["nodes"] if n.get("name") == "row_max_rf_update")
    assert rf["store_lines"] == []


def test_inline_padding_into_convolution_with_cache_write():
    def schedule(sch):
        sch.compute_inline(sch.get_sblock("pad"))
        conv = sch.get_sblock("conv")
        out = sch.cache_write(conv, 0, "global")
        loops = sch.get_loops(conv)
        sch.reverse_compute_at(out, loops[2])
        sch.decompose_reduction(conv, loops[4])

    source, transformed, result = _match(_fixture("conv2d_nhwc", sblock_alloc=True), schedule)
    _assert_complete(result)
    assert _mapping(result) == {"conv_init": (["conv", "pad"], "init"), "conv_update": (["conv", "pad"], "compute"),
                                "Y_global": (["conv", "pad"], "cache_write")}
    assert result["source"]["pad"]["inlined_into"] == "conv"


def test_compute_at_keeps_blocks_apart():
    def schedule(sch):
        dw = sch.get_sblock("depthwise")
        n, c, h, w, rh, rw = sch.get_loops(dw)
        sch.compute_at(sch.get_sblock("pad"), c)
        out = sch.cache_write(dw, 0, "global")
        sch.reverse_compute_at(out, c)
        sch.parallel(c)

    source, transformed, result = _match(_fixture("depthwise_conv2d", sblock_alloc=True), schedule)
    _assert_complete(result)
    assert _mapping(result) == {"pad": (["pad"], "compute"), "depthwise": (["depthwise"], "compute"),
                                "Y_global": (["depthwise"], "cache_write")}


def test_shared_cache_read_serves_every_consumer():
    def schedule(sch):
        sch.cache_read(sch.get_sblock("row_max"), 0, "global")   # every reader of A uses the copy

    source, transformed, result = _match(_fixture("softmax"), schedule)
    _assert_complete(result)
    assert result["transformed"]["A_global"]["role"] == "cache_read"
    assert sorted(result["transformed"]["A_global"]["source"]) == ["exp_sum", "normalize", "row_max"]


def test_batch_matmul_fuse_split_vectorize_cache_read():
    def schedule(sch):
        blk = sch.get_sblock("bmm")
        b, i, j, k = sch.get_loops(blk)
        bi = sch.fuse(b, i)
        jo, ji = sch.split(j, [None, 8])
        sch.reorder(bi, jo, k, ji)
        cache = sch.cache_read(blk, 1, "global")
        sch.compute_at(cache, k)
        sch.vectorize(ji)
        sch.parallel(bi)

    source, transformed, result = _match(_fixture("batch_matmul"), schedule)
    _assert_complete(result)
    assert _mapping(result) == {"B_global": (["bmm"], "cache_read"), "bmm": (["bmm"], "compute")}


def test_symmetric_branches_are_told_apart_by_names_and_spans():
    def schedule(sch):
        for name in ("left", "right"):
            i, j = sch.get_loops(sch.get_sblock(name))
            sch.parallel(i)

    source, transformed, result = _match(_params(TWIN_BRANCHES), schedule)
    _assert_complete(result)
    assert _mapping(result) == {"left": (["left"], "compute"), "right": (["right"], "compute")}
    assert result["isomorphisms"] == 2 and not result["ambiguous"]
    assert result["source"]["left"]["match"] == matching.GRAPH_NAMES
    assert any(e.startswith("span:") for e in result["source"]["left"]["evidence"])


# --------------------------------------------------------------------------- Relax


def test_relax_cnn_tasks_map_to_their_bindings():
    reply = relax_graphs.relax_graph(_fixture("relax_cnn"))
    result = matching.match_relax(reply["source"], reply["transformed"])
    sites = {s["function"]: s["bindings"] for s in result["sites"]}
    assert sites == {"fused_conv2d_relu": ["c1", "r1"], "fused_conv2d_add_relu": ["c2", "s", "r2"],
                     "mean": ["p"], "fused_matmul_add1": ["d", "out"]}
    assert all(s["match"] == matching.GRAPH for s in result["sites"])
    assert result["unmatched"] == [] and result["unmatched_source"] == []
    lines = {n["name"]: n["lines"] for n in reply["source"]["nodes"] if n["kind"] == "binding"}
    assert lines["c1"][0] < lines["r1"][0] < lines["c2"][0]      # spans of the source bindings


def test_relax_match_survives_renamed_transformed_vars():
    reply = relax_graphs.relax_graph(_fixture("relax_cnn"))
    for node in reply["transformed"]["nodes"]:
        if node["kind"] == "call":
            node["name"] = f"lv{abs(hash(node['id'])) % 1000}"
    result = matching.match_relax(reply["source"], reply["transformed"])
    sites = {s["function"]: s["bindings"] for s in result["sites"]}
    assert sites["fused_conv2d_add_relu"] == ["c2", "s", "r2"] and sites["fused_conv2d_relu"] == ["c1", "r1"]


def test_relax_deduplicated_kernel_calls_are_told_apart_by_dataflow():
    """FuseOps turns three identical residual blocks into ONE function called three times; its inner
    variable names are those of the first block, so names point all three calls at a1..a4."""
    reply = relax_graphs.relax_graph(_params(RESIDUAL_CHAIN))
    functions = [s["function"] for s in reply["transformed"]["sites"]]
    assert functions[:3] == ["fused_conv2d_add_relu_add1"] * 3
    result = matching.match_relax(reply["source"], reply["transformed"])
    assert [s["bindings"] for s in result["sites"]] == [
        ["a1", "a2", "a3", "a4"], ["b1", "b2", "b3", "b4"], ["c1", "c2", "c3", "c4"], ["t"], ["s", "out"]]
    assert all(s["match"] == matching.GRAPH for s in result["sites"])
    assert "names agree on 0/4" in result["sites"][1]["evidence"]
    assert result["unmatched"] == [] and result["unmatched_source"] == []


# --------------------------------------------------------------------------- real runs


def _all_records_mapped(params: dict, run_dir: str) -> set:
    reply = tir_graphs.block_graph({**params, "run_dir": run_dir, "records": "all"})
    assert reply["workload_match"] == "structural hash"
    assert len(reply["transformed"]) >= 4
    roles = set()
    for graph in reply["transformed"]:
        assert "error" not in graph, graph
        result = matching.match_tir(reply["source"], graph)
        _assert_complete(result)
        roles |= {v["role"] for v in result["transformed"].values()}
    return roles


def test_every_record_of_the_recorded_fixture_run_is_mapped():
    """fixtures/runs/mbr128: 40 MetaSchedule trials of matmul+bias+relu (128x128)."""
    run_dir = FIXTURES / "runs" / "mbr128"
    if not (run_dir / "database_tuning_record.json").exists():
        pytest.skip("fixture run not present")
    assert {"init", "compute"} <= _all_records_mapped(_fixture("matmul_bias_relu"), str(run_dir))


@pytest.fixture(scope="module")
def softmax_run(tmp_path_factory):
    """8 MetaSchedule trials of the softmax (rfactor, decompose_reduction, compute_at sketches)."""
    store = tmp_path_factory.mktemp("store")
    env = dict(os.environ, TVM_NUM_THREADS="2")
    proc = subprocess.run([sys.executable, "-m", "asight_lsp", "tune", str(FIXTURES / "softmax.py"), "--trials", "8",
                           "--work-dir", str(store), "--seed", "1", "--json"],
                          capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return store, json.loads(proc.stdout)["run_dir"]


@pytest.mark.slow
def test_every_record_of_a_small_run_is_mapped(softmax_run):
    _, run_dir = softmax_run
    assert {"init", "compute"} <= _all_records_mapped(_fixture("softmax"), run_dir)


@pytest.mark.slow
def test_hotspots_command_end_to_end(softmax_run):
    store, run_dir = softmax_run
    env = dict(os.environ, TVM_NUM_THREADS="2")
    proc = subprocess.run([sys.executable, "-m", "asight_lsp", "hotspots", str(FIXTURES / "softmax.py"),
                           "--run", run_dir, "--work-dir", str(store), "--json"],
                          capture_output=True, text=True, env=env, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(proc.stdout)
    part = result["parts"][0]
    assert "warning" not in part   # the match reads the record the profile measured (the re-measured choice)
    assert part["unattributed"] == [] and part["match"]["unmatched"] == []
    assert sorted(e["name"] for e in part["entries"]) == ["exp_sum", "normalize", "row_max"]
    assert sum(e["share"] for e in part["entries"]) == pytest.approx(1.0)
    assert all(e["us"] > 0 and e["range"] is not None for e in part["entries"])
    assert part["entries"][0]["us"] >= part["entries"][-1]["us"]
    # before → after per block: the profile's figure of each block in the untuned and the tuned program
    assert all(e["change"]["before_us"] > 0 and e["change"]["after_us"] > 0 for e in part["entries"])
    assert {c["name"] for c in part["changes"]} == {"exp_sum", "normalize", "row_max"}
    assert all(c["slower"] == (c["ratio"] >= 1.2) for c in part["changes"])
