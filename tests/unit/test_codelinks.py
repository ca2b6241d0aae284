"""Pure line-link parsing of generated code (no TVM): tagged TVMScript, LLVM IR, assembly, shares."""
from asight_lsp.analysis.codelinks import (asm_links, attach_line_counts, attach_shares, by_source, drop_parallel, llvm_links, strip_tags)
from asight_lsp.engine.wire import tag

TAGGED = f"""\
        C = T.alloc_buffer((128, 128))  # {tag(14, 14, False)}
        for k_0 in range(32):
            for j in T.vectorized(8):
                # {tag(17, 21, True)}
                with T.sblock("matmul_update"):
                    vi = T.axis.spatial(128, k_0)
                    T.reads(C[vi, j])
                    C[vi, j] = C[vi, j] + A[vi, j]  # {tag(21, 21, False)}
            for ax0 in range(32):
                E[ax0] = C[ax0, 0]  # {tag(26, 26, False)}
"""


def test_strip_tags_links_statements_and_block_bodies():
    text, links = strip_tags(TAGGED)
    lines = text.splitlines()
    assert "asight:" not in text and len(lines) == 9
    got = {lines[link["line"]].strip(): link["sourceLine"] + 1 for link in links}
    assert got["C = T.alloc_buffer((128, 128))"] == 14
    assert got['with T.sblock("matmul_update"):'] == 17
    assert got["vi = T.axis.spatial(128, k_0)"] == 17          # block body inherits the block's line
    assert got["C[vi, j] = C[vi, j] + A[vi, j]"] == 21          # own tag wins
    assert got["E[ax0] = C[ax0, 0]"] == 26
    assert "for ax0 in range(32):" not in got                    # the block ended at the dedent
    assert "for k_0 in range(32):" not in got                    # new loops: no link


def test_llvm_links_follow_dbg_to_dilocation():
    ir = "\n".join([
        "define i32 @main(ptr %a) !dbg !5 {",
        "  %1 = load float, ptr %a, align 4, !dbg !72",
        "  %2 = fadd float %1, 1.0, !dbg !79, !tbaa !3",
        "  ret i32 0, !dbg !15",
        "}",
        "!15 = !DILocation(line: 0, scope: !5)",
        "!72 = !DILocation(line: 20, column: 21, scope: !44)",
        "!79 = distinct !DILocation(line: 21, column: 17, scope: !44)",
    ])
    assert llvm_links(ir) == [{"line": 1, "sourceLine": 19}, {"line": 2, "sourceLine": 20}]


def test_asm_links_follow_loc_until_the_next():
    asm = "\n".join([
        '\t.file\t"TVMMod"',
        '\t.file\t1 "." "IRModule.CodeGenLLVM"',
        "main:",
        "\t.loc\t1 0 0",
        "\tpushq\t%rbp",
        "\t.loc\t1 21 17 prologue_end",
        "\tvmovups\t(%rax), %ymm0",
        ".LBB0_2:",
        "\tvfmadd231ps\t%ymm1, %ymm2, %ymm0",
        "\t.loc\t1 26 3",
        "\tvaddps\t%ymm0, %ymm3, %ymm3",
        "\t.cfi_endproc",
        "\tretq",
    ])
    links = asm_links(asm)
    assert links == [{"line": 6, "sourceLine": 20}, {"line": 8, "sourceLine": 20}, {"line": 10, "sourceLine": 25}]
    assert by_source(links) == {20: [6, 8], 25: [10]}


def test_shares_come_from_the_innermost_block():
    links = [{"line": 0, "sourceLine": 20}, {"line": 1, "sourceLine": 25}, {"line": 2, "sourceLine": 40}]
    blocks = [{"name": "matmul", "share": 0.9, "us": 90.0, "start": 16, "end": 21},
              {"name": "bias_add", "share": 0.1, "us": 10.0, "start": 23, "end": 26},
              {"name": "unknown", "share": None, "start": 0, "end": 50}]
    out = attach_shares(links, blocks)
    assert out[0]["block"] == "matmul" and out[0]["share"] == 0.9
    assert out[1]["block"] == "bias_add" and out[1]["us"] == 10.0
    assert "share" not in out[2]


def test_drop_parallel_renumbers_decisions():
    insts = [["GetSBlock", [], ["C", "main"], ["b0"]], ["SamplePerfectTile", ["l1"], [2, 64], ["v2", "v3"]],
             ["EnterPostproc", [], [], []], ["Parallel", ["l4"], [], []], ["SampleCategorical", [], [[0, 16], [0.5, 0.5]], ["v5"]],
             ["Vectorize", ["l6"], [], []]]
    kept, decisions = drop_parallel(insts, [[1, [8, 8]], [4, 1]])
    assert [i[0] for i in kept] == ["GetSBlock", "SamplePerfectTile", "EnterPostproc", "SampleCategorical", "Vectorize"]
    assert decisions == [[1, [8, 8]], [3, 1]]


def test_line_counts_give_per_source_line_shares():
    links = [{"line": 0, "sourceLine": 20}, {"line": 1, "sourceLine": 20}, {"line": 2, "sourceLine": 25},
             {"line": 3, "sourceLine": 7}]
    counts = [{"line": 21, "Ir": 300}, {"line": 26, "Ir": 100}, {"line": 0, "Ir": 999}, {"line": 21, "Ir": 100}]
    out = attach_line_counts(links, counts)
    assert [link.get("lineShare") for link in out] == [0.8, 0.8, 0.2, None]
    assert attach_line_counts(links, []) == links


def test_cuda_lines_link_to_the_source_lines_of_the_buffers_they_store():
    from asight_lsp.analysis.codelinks import cuda_links
    cuda = "\n".join([
        'extern "C" __global__ void main_kernel(float* __restrict__ A, float* __restrict__ C) {',
        "  float C_local_ptr[4];",
        "  C_local_ptr[0] = 0x0p+0f/*0.000000e+00*/;",
        "  for (int k = 0; k < 16; ++k) {",
        "    *(float4*)(A_shared_ptr + (((int)threadIdx.x) * 4)) = *(float4*)(A_ptr + ((int)threadIdx.x));",
        "    C_local_ptr[0] = (C_local_ptr[0] + (A_shared_ptr[k] * B_shared_ptr[k]));",
        "    if (C_local_ptr[0] == 0) { }",
        "  }",
        "  C_ptr[((int)threadIdx.x)] = C_local_ptr[0];",
        "}"])
    stores = [["C_local", 17, True], ["C_local", 18, False], ["A_shared", 14, False], ["C", 14, False]]
    assert cuda_links(cuda, stores) == [{"line": 2, "sourceLine": 16}, {"line": 4, "sourceLine": 13},
                                        {"line": 5, "sourceLine": 17}, {"line": 8, "sourceLine": 13}]


def test_a_task_kernel_links_each_block_to_the_binding_of_every_call():
    from asight_lsp.analysis.codelinks import task_links
    text = "\n".join([
        "@T.prim_func",
        "def main(a, b):",
        "    for i in range(4):",
        '        with T.sblock("conv2d_nchw_init"):',
        "            v = T.axis.spatial(4, i)",
        '        with T.sblock("conv2d_nchw_update"):',
        "            v = T.axis.spatial(4, i)",
        '    with T.sblock("T_add"):',
        "        pass",
    ])
    sites = [{"call": 0, "blockVars": {"conv2d_nchw": ["lv4", 17], "T_add": ["lv6", 19]}},
             {"call": 1, "blockVars": {"conv2d_nchw": ["lv13", 26], "T_add": ["lv15", 28]}}]
    links = task_links(text, sites, lineage=[])
    assert {(l["line"], l["sourceLine"], l["binding"]) for l in links if l["line"] == 3} == {(3, 16, "lv4"), (3, 25, "lv13")}
    assert {l["block"] for l in links if l["line"] in (5, 6)} == {"conv2d_nchw"}      # decomposed init/update
    assert {l["sourceLine"] for l in links if l["line"] == 8} == {18, 27}
    assert not [l for l in links if l["line"] in (0, 1, 2)]                           # the loop line: no block


def test_a_tasks_stage_times_per_block():
    from asight_lsp.analysis.attribution import task_stage_blocks
    timed = {"stages": [{"index": 0, "us": 3.0, "blocks": [{"name": "pad_temp"}]},
                        {"index": 1, "us": 1.0, "blocks": [{"name": "conv2d_nchw_init"}, {"name": "compute"}]}]}
    blocks = task_stage_blocks(timed)["blocks"]
    assert blocks["pad_temp"]["us"] == 3.0 and blocks["pad_temp"]["share"] == 0.75
    assert blocks["compute"]["shared_with"] == ["conv2d_nchw_init"] and blocks["compute"]["us"] == 1.0
