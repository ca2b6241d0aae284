"""Outline of every fixture, asserted against what the files contain (no TVM)."""
from __future__ import annotations

import pytest

from asight_lsp.tvmscript.outline import build_outline
from tests.conftest import fixture_text

EXPECTED = {
    # file: {function id: (blocks, [(loop vars, extents, kind)], {buffer: (shape, dtype, kind)})}
    "matmul.py": {"Matmul.main": (["C"], [(["i", "j", "k"], [256, 256, 256], "grid")],
                                  {"A": ([256, 256], "float32", "param"), "C": ([256, 256], "float32", "param")})},
    "matmul64.py": {"matmul64": (["C"], [(["i", "j", "k"], [64, 64, 64], "grid")],
                                 {"B": ([64, 64], "float32", "param")})},
    "matmul_bias_relu.py": {"MatmulBiasRelu.main": (
        ["matmul", "bias_add", "relu"],
        [(["i", "j", "k"], [128, 128, 128], "grid"), (["i"], [128], "serial"), (["j"], [128], "serial"),
         (["i", "j"], [128, 128], "grid")],
        {"bias": ([128], "float32", "param"), "C": ([128, 128], "float32", "alloc"),
         "E": ([128, 128], "float32", "alloc")})},
    "conv2d_nhwc.py": {"conv2d_nhwc": (
        ["pad", "conv"], [(["n", "h", "w", "c"], [1, 16, 16, 16], "grid"),
                          (["n", "h", "w", "co", "rh", "rw", "ci"], [1, 14, 14, 32, 3, 3, 16], "grid")],
        {"W": ([3, 3, 16, 32], "float32", "param"), "pad": ([1, 16, 16, 16], "float32", "alloc")})},
    "depthwise_conv2d.py": {"depthwise_conv2d": (
        ["pad", "depthwise"], [(["n", "c", "h", "w"], [1, 32, 30, 30], "grid"),
                               (["n", "c", "h", "w", "rh", "rw"], [1, 32, 28, 28, 3, 3], "grid")],
        {"W": ([32, 1, 3, 3], "float32", "param")})},
    "batch_matmul.py": {"batch_matmul": (["bmm"], [(["b", "i", "j", "k"], [8, 64, 64, 64], "grid")],
                                         {"C": ([8, 64, 64], "float32", "param")})},
    "softmax.py": {"softmax": (["row_max", "exp_sum", "normalize"],
                               [(["i", "k"], [256, 256], "grid")] * 2 + [(["i", "j"], [256, 256], "grid")],
                               {"row_max": ([256], "float32", "alloc")})},
    "relax_cnn.py": {"Net.main": ([], [], {"x": ([1, 16, 32, 32], "float32", "param"),
                                           "w3": ([16, 10], "float32", "param")})},
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_outline(name):
    outline = build_outline(fixture_text(name), name)
    assert not outline.syntax_errors
    assert all(u.safe for u in outline.units), [u.problems for u in outline.units]
    assert {f.id for f in outline.functions} == set(EXPECTED[name])
    for fid, (blocks, loops, buffers) in EXPECTED[name].items():
        fn = outline.function(fid)
        assert [b.name for b in fn.blocks] == blocks
        assert [(lp.vars, lp.extents, lp.kind) for lp in fn.loops] == loops
        found = {b.name: (b.shape, b.dtype, b.kind) for b in fn.buffers}
        for buf, spec in buffers.items():
            assert found[buf] == spec


def test_ranges_are_zero_based_and_exact():
    text = fixture_text("matmul_bias_relu.py")
    lines = text.splitlines()
    fn = build_outline(text).function("MatmulBiasRelu.main")
    relu = next(b for b in fn.blocks if b.name == "relu")
    start = relu.range["start"]
    assert lines[start["line"]][start["character"]:].startswith('with T.sblock("relu")')
    assert lines[relu.range["end"]["line"]].strip().startswith("D[vi, vj] = T.max")
    name = relu.name_range
    assert lines[name["start"]["line"]][name["start"]["character"]:name["end"]["character"]] == '"relu"'
    assert lines[fn.name_range["start"]["line"]][fn.name_range["start"]["character"]:].startswith("main(")


def test_ids_and_block_facts():
    fn = build_outline(fixture_text("matmul_bias_relu.py")).function("main")
    matmul = fn.blocks[0]
    assert matmul.id == "MatmulBiasRelu.main/matmul"
    assert matmul.iter_kinds == "SSR" and matmul.iter_vars == ["vi", "vj", "vk"]
    assert set(matmul.reads) == {"A", "B"} and matmul.writes == ["C"]     # as TVM infers a reduction's reads
    assert matmul.flops == 2 * 128 ** 3  # one mult + one add per iteration (init excluded)
    assert matmul.bytes == 3 * 128 * 128 * 4
    assert matmul.loops == ["MatmulBiasRelu.main/matmul/i.j.k"]
    bias = fn.blocks[1]
    assert bias.loops == ["MatmulBiasRelu.main/bias_add/i", "MatmulBiasRelu.main/bias_add/i.j"]
    assert fn.blocks[2].ops == {"max": 1}


def test_softmax_reduction_ops():
    fn = build_outline(fixture_text("softmax.py")).function("softmax")
    kinds = {b.name: b.iter_kinds for b in fn.blocks}
    assert kinds == {"row_max": "SR", "exp_sum": "SR", "normalize": "SS"}
    assert fn.blocks[1].ops == {"add": 1, "sub": 1, "exp": 1}


def test_relax_bindings():
    fn = build_outline(fixture_text("relax_cnn.py")).function("Net.main")
    assert fn.kind == "relax_function"
    assert [(b.name, b.op) for b in fn.bindings] == [
        ("c1", "R.nn.conv2d"), ("r1", "R.nn.relu"), ("c2", "R.nn.conv2d"), ("s", "R.add"), ("r2", "R.nn.relu"),
        ("p", "R.mean"), ("d", "R.matmul"), ("out", "R.add")]
    assert fn.bindings[3].args == ["c2", "x"]
    lines = fixture_text("relax_cnn.py").splitlines()
    assert lines[fn.bindings[0].range["start"]["line"]].strip().startswith("c1 = R.nn.conv2d")


def test_loop_kinds_and_symbolic_extents():
    text = '''from tvm.script import tirx as Tx
M = 4 * 8

@Tx.prim_func
def f(A: Tx.Buffer((M, 16), "float16"), n: Tx.int32):
    for i in Tx.parallel(M):
        for j in Tx.vectorized(16):
            for k in Tx.unroll(2, 6):
                for t in Tx.thread_binding(32, thread="threadIdx.x"):
                    for s in Tx.serial(n):
                        with Tx.sblock("b"):
                            A[i, j] = Tx.float16(0)
'''
    fn = build_outline(text).function("f")
    assert [(lp.kind, lp.extents) for lp in fn.loops] == [
        ("parallel", [32]), ("vectorized", [16]), ("unrolled", [4]), ("thread_binding", [32]), ("serial", ["n"])]
    assert fn.loops[3].thread == "threadIdx.x"
    assert fn.buffers[0].shape == [32, 16] and fn.buffers[0].dtype == "float16"


def test_one_broken_function_keeps_the_others():
    outline = build_outline(fixture_text("broken/one_of_two_broken.py"))
    assert [f.name for f in outline.functions] == ["good"]
    assert outline.function("good").blocks[0].name == "copy"
    [err] = outline.syntax_errors
    assert err["range"]["start"]["line"] == 16 and "never closed" in err["message"]


@pytest.mark.parametrize("text", ["", "\n\n", "x = (", "@T.prim_func\n", "@T.prim_func\ndef f(", "class X:\n  pass",
                                  "\x00\x01\x02binary", "def f():\n    return 1\n"])
def test_garbage_never_raises(text):
    outline = build_outline(text)
    assert outline.functions == [] or all(f.name for f in outline.functions)


def test_binary_bytes_and_huge_and_deep_input():
    binary = bytes(range(256)) * 100
    assert "NUL" in build_outline(binary).syntax_errors[0]["message"]
    deep = "@T.prim_func\ndef f(A: T.Buffer((8,), 'float32')):\n    A[0] = " + "(" * 5000 + "1" + ")" * 5000 + "\n"
    errors = build_outline(deep).syntax_errors
    assert errors and errors[0]["severity"] == "error"
    huge = "N = 1\n" * (5 * 1024 * 1024 // 6 + 10)
    assert "too large" in build_outline(huge).syntax_errors[0]["message"]


def test_half_typed_block_yields_what_is_known():
    text = fixture_text("matmul64.py") + '\n\n@T.prim_func\ndef wip(A: T.Buffer((4,), "float32")):\n    for i in T.gri'
    outline = build_outline(text)
    assert outline.function("matmul64").blocks[0].name == "C"
    assert outline.syntax_errors


def test_incremental_outline_equals_a_fresh_one():
    from asight_lsp.tvmscript import outline as sourcemap

    base = fixture_text("matmul64.py") + "\n\n" + fixture_text("softmax.py").split("\n", 1)[1]
    build_outline(base)
    edits = [base.replace("T.grid(64, 64, 64)", "T.grid(64, 64, 64)  # edited"),
             base.replace("from tvm.script import tirx as T\n", "from tvm.script import tirx as T\n\n\nK = 3\n", 1),
             base.replace('with T.sblock("C"):', 'with T.sblock("C"):\n            T.evaluate(0)')]
    for text in edits:
        warm = build_outline(text).to_dict()
        sourcemap._CHUNK_CACHE.clear()
        assert build_outline(text).to_dict() == warm
    shifted = build_outline(edits[1]).function("softmax").blocks[0].range["start"]["line"]
    assert shifted == build_outline(base).function("softmax").blocks[0].range["start"]["line"] + 3
