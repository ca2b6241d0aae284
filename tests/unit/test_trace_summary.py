"""trace_summary: what a MetaSchedule trace did to each source block, on real record lines.

The three record lines below are verbatim lines of ``database_tuning_record.json`` written by
MetaSchedule (TVM 0.27, llvm -mcpu=znver3, 16 trials): the best record of ``fixtures/matmul64.py``,
the best of ``fixtures/matmul_bias_relu.py`` and one of its records with a SampleComputeLocation.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from asight_lsp.analysis.trace_summary import block_headline, loop_choices, summarize_trace
from asight_lsp.analysis.trace_replay import source_blocks
from asight_lsp.analysis.traces import parse_trace_json
from asight_lsp.tvmscript.outline import build_outline

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"

MATMUL64_BEST = r'''[0,[[[["GetSBlock",[],["C","main"],["b0"]],["GetSBlock",[],["root","main"],["b1"]],["Annotate",["b0","\"SSRSRS\""],["meta_schedule.tiling_structure"],[]],["GetLoops",["b0"],[],["l2","l3","l4"]],["SamplePerfectTile",["l2"],[4,64],["v5","v6","v7","v8"]],["Split",["l2","v5","v6","v7","v8"],[1,0],["l9","l10","l11","l12"]],["SamplePerfectTile",["l3"],[4,64],["v13","v14","v15","v16"]],["Split",["l3","v13","v14","v15","v16"],[1,0],["l17","l18","l19","l20"]],["SamplePerfectTile",["l4"],[2,64],["v21","v22"]],["Split",["l4","v21","v22"],[1,0],["l23","l24"]],["Reorder",["l9","l17","l10","l18","l23","l11","l19","l24","l12","l20"],[],[]],["CacheWrite",["b0",[]],[0,"global"],["b25"]],["ReverseComputeAt",["b25","l17"],[1,-1],[]],["Annotate",["b1",32],["meta_schedule.parallel"],[]],["Annotate",["b1",64],["meta_schedule.vectorize"],[]],["SampleCategorical",[],[[0,16,64,512],[0.25,0.25,0.25,0.25]],["v26"]],["Annotate",["b1","v26"],["meta_schedule.unroll_explicit"],[]],["EnterPostproc",[],[],[]],["GetSBlock",[],["root","main"],["b27"]],["Unannotate",["b27"],["meta_schedule.parallel"],[]],["Unannotate",["b27"],["meta_schedule.vectorize"],[]],["Unannotate",["b27"],["meta_schedule.unroll_explicit"],[]],["GetChildBlocks",["b27"],[],["b28","b29"]],["GetLoops",["b28"],[],["l30","l31","l32","l33","l34","l35","l36","l37","l38","l39"]],["Fuse",["l30","l31"],[1],["l40"]],["Parallel",["l40"],[],[]],["Fuse",["l39"],[1],["l41"]],["Vectorize",["l41"],[],[]],["Annotate",["l40",512],["pragma_auto_unroll_max_step"],[]],["Annotate",["l40",1],["pragma_unroll_explicit"],[]],["GetLoops",["b29"],[],["l42","l43","l44"]],["Fuse",["l44"],[1],["l45"]],["Vectorize",["l45"],[],[]],["GetSBlock",[],["C","main"],["b46"]],["GetLoops",["b46"],[],["l47","l48","l49","l50","l51","l52","l53","l54","l55"]],["DecomposeReduction",["b46","l50"],[],["b56"]]],[[4,[16,1,4,1]],[6,[4,1,4,4]],[8,[2,32]],[15,3]]],[5.9159061838702091022e-06],{"keys":["cpu"],"kind":"llvm","mcpu":"znver3","num-cores":2,"tag":""},[["TENSOR","float32",[64,64]],["TENSOR","float32",[64,64]],["TENSOR","float32",[64,64]]]]]'''

MBR_BEST = r'''[0,[[[["GetSBlock",[],["matmul","main"],["b0"]],["GetSBlock",[],["root","main"],["b1"]],["Annotate",["b0","\"SSRSRS\""],["meta_schedule.tiling_structure"],[]],["GetLoops",["b0"],[],["l2","l3","l4"]],["SamplePerfectTile",["l2"],[4,64],["v5","v6","v7","v8"]],["Split",["l2","v5","v6","v7","v8"],[1,0],["l9","l10","l11","l12"]],["SamplePerfectTile",["l3"],[4,64],["v13","v14","v15","v16"]],["Split",["l3","v13","v14","v15","v16"],[1,0],["l17","l18","l19","l20"]],["SamplePerfectTile",["l4"],[2,64],["v21","v22"]],["Split",["l4","v21","v22"],[1,0],["l23","l24"]],["Reorder",["l9","l17","l10","l18","l23","l11","l19","l24","l12","l20"],[],[]],["GetConsumers",["b0"],[],["b25"]],["ReverseComputeAt",["b25","l18"],[1,-1],[]],["Annotate",["b1",32],["meta_schedule.parallel"],[]],["Annotate",["b1",64],["meta_schedule.vectorize"],[]],["SampleCategorical",[],[[0,16,64,512],[0.25,0.25,0.25,0.25]],["v26"]],["Annotate",["b1","v26"],["meta_schedule.unroll_explicit"],[]],["EnterPostproc",[],[],[]],["GetSBlock",[],["root","main"],["b27"]],["Unannotate",["b27"],["meta_schedule.parallel"],[]],["Unannotate",["b27"],["meta_schedule.vectorize"],[]],["Unannotate",["b27"],["meta_schedule.unroll_explicit"],[]],["GetChildBlocks",["b27"],[],["b28","b29","b30"]],["GetLoops",["b28"],[],["l31","l32","l33","l34","l35","l36","l37","l38","l39","l40"]],["Fuse",["l31","l32","l33","l34"],[1],["l41"]],["Parallel",["l41"],[],[]],["Fuse",["l40"],[1],["l42"]],["Vectorize",["l42"],[],[]],["Annotate",["l41",64],["pragma_auto_unroll_max_step"],[]],["Annotate",["l41",1],["pragma_unroll_explicit"],[]],["GetLoops",["b29"],[],["l43","l44","l45"]],["Fuse",["l45"],[1],["l46"]],["Vectorize",["l46"],[],[]],["GetLoops",["b30"],[],["l47","l48"]],["Fuse",["l47","l48"],[1],["l49"]],["Split",["l49","None",64],[1,0],["l50","l51"]],["Parallel",["l50"],[],[]],["Vectorize",["l51"],[],[]],["GetSBlock",[],["matmul","main"],["b52"]],["GetLoops",["b52"],[],["l53","l54","l55","l56","l57","l58","l59"]],["DecomposeReduction",["b52","l54"],[],["b60"]]],[[4,[4,1,4,8]],[6,[1,4,2,16]],[8,[4,32]],[15,2]]],[5.7810489208633093284e-05],{"keys":["cpu"],"kind":"llvm","mcpu":"znver3","num-cores":2,"tag":""},[["TENSOR","float32",[128,128]],["TENSOR","float32",[128,128]],["TENSOR","float32",[128]],["TENSOR","float32",[128,128]]]]]'''

MBR_COMPUTE_LOCATION = r'''[0,[[[["GetSBlock",[],["matmul","main"],["b0"]],["GetSBlock",[],["bias_add","main"],["b1"]],["GetSBlock",[],["root","main"],["b2"]],["Annotate",["b0","\"SSRSRS\""],["meta_schedule.tiling_structure"],[]],["GetLoops",["b0"],[],["l3","l4","l5"]],["SamplePerfectTile",["l3"],[4,64],["v6","v7","v8","v9"]],["Split",["l3","v6","v7","v8","v9"],[1,0],["l10","l11","l12","l13"]],["SamplePerfectTile",["l4"],[4,64],["v14","v15","v16","v17"]],["Split",["l4","v14","v15","v16","v17"],[1,0],["l18","l19","l20","l21"]],["SamplePerfectTile",["l5"],[2,64],["v22","v23"]],["Split",["l5","v22","v23"],[1,0],["l24","l25"]],["Reorder",["l10","l18","l11","l19","l24","l12","l20","l25","l13","l21"],[],[]],["Annotate",["b2",32],["meta_schedule.parallel"],[]],["Annotate",["b2",64],["meta_schedule.vectorize"],[]],["SampleCategorical",[],[[0,16,64,512],[0.25,0.25,0.25,0.25]],["v26"]],["Annotate",["b2","v26"],["meta_schedule.unroll_explicit"],[]],["SampleComputeLocation",["b1"],[],["l27"]],["ComputeAt",["b1","l27"],[1,-1],[]],["EnterPostproc",[],[],[]],["GetSBlock",[],["root","main"],["b28"]],["Unannotate",["b28"],["meta_schedule.parallel"],[]],["Unannotate",["b28"],["meta_schedule.vectorize"],[]],["Unannotate",["b28"],["meta_schedule.unroll_explicit"],[]],["GetChildBlocks",["b28"],[],["b29","b30","b31"]],["GetLoops",["b29"],[],["l32","l33","l34","l35","l36","l37","l38","l39","l40","l41"]],["Fuse",["l32","l33","l34"],[1],["l42"]],["Parallel",["l42"],[],[]],["Fuse",["l41"],[1],["l43"]],["Vectorize",["l43"],[],[]],["GetLoops",["b30"],[],["l44","l45"]],["Fuse",["l44","l45"],[1],["l46"]],["Split",["l46","None",64],[1,0],["l47","l48"]],["Parallel",["l47"],[],[]],["Vectorize",["l48"],[],[]],["GetLoops",["b31"],[],["l49","l50"]],["Fuse",["l49","l50"],[1],["l51"]],["Split",["l51","None",64],[1,0],["l52","l53"]],["Parallel",["l52"],[],[]],["Vectorize",["l53"],[],[]],["GetSBlock",[],["matmul","main"],["b54"]],["GetLoops",["b54"],[],["l55","l56","l57","l58","l59","l60","l61","l62"]],["DecomposeReduction",["b54","l57"],[],["b63"]]],[[5,[4,32,1,1]],[7,[2,8,2,4]],[9,[2,64]],[14,0],[16,-1]]],[0.00021297279729729729565],{"keys":["cpu"],"kind":"llvm","mcpu":"znver3","num-cores":2,"tag":""},[["TENSOR","float32",[128,128]],["TENSOR","float32",[128,128]],["TENSOR","float32",[128]],["TENSOR","float32",[128,128]]]]]'''


def blocks_of(fixture: str):
    outline = build_outline((FIXTURES / fixture).read_text())
    return source_blocks(outline.functions[0])


def summary_of(line: str, fixture: str) -> dict:
    insts, decisions = parse_trace_json(line)
    return summarize_trace(insts, decisions, blocks_of(fixture))


def test_source_blocks_flatten_grid_vars():
    (blk,) = blocks_of("matmul64.py")
    assert blk.name == "C" and blk.loop_vars == ["i", "j", "k"] and blk.extents == [64, 64, 64]
    assert blk.writes == ["C"]


def test_matmul64_splits_come_from_the_sampled_decisions():
    insts, decisions = parse_trace_json(MATMUL64_BEST)
    tiles = {idx: d for idx, d in decisions if isinstance(d, list)}
    c = summary_of(MATMUL64_BEST, "matmul64.py")["blocks"]["C"]
    assert list(c["splits"]) == ["i", "j", "k"]
    assert [c["splits"][v] for v in "ijk"] == [tiles[4], tiles[6], tiles[8]]
    for var, factors in c["splits"].items():
        prod = 1
        for f in factors:
            prod *= f
        assert prod == 64, (var, factors)
    assert c["order"] == ["i0", "j0", "i1", "j1", "k0", "i2", "j2", "k1", "i3", "j3"]
    assert c["tiling"] == "SSRSRS"


def test_matmul64_parallel_vectorize_unroll_cache_and_decomposition():
    summary = summary_of(MATMUL64_BEST, "matmul64.py")
    c = summary["blocks"]["C"]
    # post-processor: fuse(i0, j0) -> parallel; fuse(j3) -> vectorize; unroll pragma on the fused loop
    assert c["parallel"] == {"loops": ["i0", "j0"], "extent": 16 * 4}
    assert c["vectorize"] == {"loops": ["j3"], "extent": 4}
    assert c["unroll"]["max_step"] == 512 and c["unroll"]["explicit"] is True
    assert c["cache"] == [{"kind": "write", "buffer": "C", "scope": "global", "block": "C_global", "at": "j0"}]
    assert c["decompose_reduction"] == "k0"
    glob = summary["blocks"]["C_global"]
    assert glob["derived_from"] == "C"
    assert glob["compute_at"]["kind"] == "reverse_compute_at" and glob["compute_at"]["loop"] == "j0"
    assert summary["function"] == {"parallel_max": 32, "vectorize_max": 64, "unroll_max": 512}
    assert c["steps"][:2] == ["multi-level tiling SSRSRS", "split i → 16×1×4×1"]
    assert "cache write C → C_global (global)" in c["steps"]


def test_matmul_bias_relu_consumer_and_child_blocks_are_matched():
    blocks = summary_of(MBR_BEST, "matmul_bias_relu.py")["blocks"]
    matmul = blocks["matmul"]
    assert matmul["splits"] == {"i": [4, 1, 4, 8], "j": [1, 4, 2, 16], "k": [4, 32]}
    assert matmul["parallel"] == {"loops": ["i0", "j0", "i1", "j1"], "extent": 4 * 1 * 1 * 4}
    assert matmul["vectorize"] == {"loops": ["j3"], "extent": 16}
    # GetConsumers(matmul) is bias_add (it reads C), moved under matmul's j1 tile
    assert blocks["bias_add"]["compute_at"] == {"kind": "reverse_compute_at", "loop": "j1", "block": "matmul",
                                                "position": None}
    # relu: fuse(i, j), split by 64, parallel outer / vectorize inner; extents follow 128*128/64
    assert blocks["relu"]["parallel"] == {"loops": ["(i·j)0"], "extent": 256}
    assert blocks["relu"]["vectorize"] == {"loops": ["(i·j)1"], "extent": 64}


def test_compute_location_at_root_changes_nothing():
    blocks = summary_of(MBR_COMPUTE_LOCATION, "matmul_bias_relu.py")["blocks"]
    assert blocks["bias_add"]["compute_at"] is None  # decision -1: stays at the root
    assert blocks["bias_add"]["parallel"]["extent"] == 128 * 128 // 64
    assert blocks["matmul"]["splits"]["k"] == [2, 64]


def test_loop_choices_and_headline():
    c = summary_of(MATMUL64_BEST, "matmul64.py")["blocks"]["C"]
    assert loop_choices(c, "j") == {"factors": [4, 1, 4, 4], "parallel": ["j0"], "vectorize": ["j3"],
                                    "unroll": ["j0"]}
    assert loop_choices(c, "k")["parallel"] == []
    assert block_headline(c) == "parallel 64 · vector 4 · unroll 512 · cache C_global"
    relu = summary_of(MBR_BEST, "matmul_bias_relu.py")["blocks"]["relu"]
    assert loop_choices(relu, "i")["parallel"] == ["(i·j)0"]


def test_without_source_blocks_loops_keep_positional_names():
    insts, decisions = parse_trace_json(MATMUL64_BEST)
    c = summarize_trace(insts, decisions)["blocks"]["C"]
    assert list(c["splits"]) == ["loop0", "loop1", "loop2"]
    assert c["cache"][0]["block"] == "C_write_global"  # buffer unknown without the source


def test_parse_trace_json_accepts_a_database_line_or_a_trace():
    insts, decisions = parse_trace_json(MATMUL64_BEST)
    assert insts[0] == ["GetSBlock", [], ["C", "main"], ["b0"]]
    assert parse_trace_json(json.dumps([insts, decisions])) == (insts, decisions)
    with pytest.raises(ValueError):
        parse_trace_json("[1, 2]")


def test_inline_cache_read_bind_and_malformed_instructions():
    insts = [
        ["GetSBlock", [], ["bias_add", "main"], ["b0"]],
        ["ComputeInline", ["b0"], [], []],
        ["GetSBlock", [], ["relu", "main"], ["b1"]],
        ["CacheRead", ["b1", []], [0, "shared"], ["b2"]],
        ["GetLoops", ["b1"], [], ["l3", "l4"]],
        ["Fuse", ["l3", "l4"], [1], ["l5"]],
        ["Split", ["l5", "None", 32], [1, 0], ["l6", "l7"]],
        ["Bind", ["l6"], ["blockIdx.x"], []],
        ["Bind", ["l7"], ["threadIdx.x"], []],
        ["Split", ["l404"], [], []],           # unknown loop: skipped
        "garbage", ["Reorder"],               # malformed: skipped
        ["GetSBlock", [], ["matmul", "main"], ["b8"]],
        ["SampleComputeLocation", ["b8"], [], ["l9"]],
        ["ComputeAt", ["b8", "l9"], [1, -1], []],
    ]
    blocks = summarize_trace(insts, [[13, -2]], blocks_of("matmul_bias_relu.py"))["blocks"]
    assert blocks["bias_add"]["inline"] == "compute_inline"
    assert block_headline(blocks["bias_add"]) == "inlined"
    assert blocks["relu"]["cache"][0] == {"kind": "read", "buffer": "E", "scope": "shared", "block": "E_shared",
                                          "at": None}
    assert [b["thread"] for b in blocks["relu"]["bind"]] == ["blockIdx.x", "threadIdx.x"]
    assert blocks["relu"]["bind"][0]["extent"] == 128 * 128 // 32
    assert blocks["matmul"]["inline"] == "compute_inline"  # decision -2 = inline


def test_empty_and_garbage_traces():
    assert summarize_trace([], []) == {"blocks": {}, "function": {}}
    assert summarize_trace([["Split", None, None, None]], [["x", 1]])["blocks"] == {}


def test_gpu_stages_name_the_buffers_tvm_stages_and_their_loops_as_tvm_names_them():
    """Outside probe F1 (rest): the H100 run's trial 76 read "compute C_shared at C k0", "cache-read C",
    "C_shared: vectorize ()2", "fuse " (empty) where TVM built A_shared and B_shared over ax0, ax1."""
    from asight_lsp.analysis.traces import block_infos, sketch_tags
    from asight_lsp.store.runs import read_records
    fn = build_outline((FIXTURES / "gpu" / "matmul1024.py").read_text()).functions[0]
    record = read_records(FIXTURES / "gpu")[76]
    assert sketch_tags(record["insts"], block_infos(fn)) == [
        "thread binding", "cache-write C", "fuse C_local at C i2 j2", "cache-read A", "compute A_shared at C k0",
        "cache-read B", "compute B_shared at C k0"]
    summary = summarize_trace(record["insts"], record["decisions"], source_blocks(fn))
    derived = summary["blocks"]["C"]["derived_steps"]
    assert "A_shared: fuse ax0 ax1" in derived and "B_shared: bind (ax0·ax1)1 to threadIdx.x (64)" in derived
    assert "A_shared: vectorize (ax0·ax1)2 (width 4)" in derived
    assert not [step for step in derived if "()" in step or step.rstrip().endswith("fuse")]
    assert "bind i0 j0 to blockIdx.x (256)" in summary["blocks"]["C"]["steps"]      # extents in the hover's steps
