"""What "Apply best schedule" inserts into a user's file has a schedule's shape (analysis/schedule_text):
a record is data a repository can ship, and TVM prints a trace's strings unescaped (red team round 8)."""
from __future__ import annotations

import pytest

from asight_lsp.analysis.schedule_text import NotASchedule, require_script_function, require_trace_function

TRACE = '''# from tvm import s_tir
def apply_trace(sch: s_tir.Schedule) -> None:
  b0 = sch.get_sblock(name="matmul", func_name="main")
  sch.annotate(block_or_loop=b0, ann_key="meta_schedule.tiling_structure", ann_val="SSRSRS")
  l2, l3, l4 = sch.get_loops(block=b0)
  v5, v6 = sch.sample_perfect_tile(loop=l2, n=2, max_innermost_factor=64, decision=[1, -128])
  sch.transform_layout(block=b0, buffer=("read", 0), index_map=tvm.tirx.IndexMap.from_func(lambda i, j: (i // 16, j % 16, i * 2 + 1,), inverse_index_map=None), pad_value=None)
  v7 = sch.sample_categorical(candidates=[T.int64(0), T.Cast("int64", 16)], probs=[0.5, 0.5], decision=1)
  sch.enter_postproc()
  pass
'''

SCRIPT = '''# from tvm.script import ir as I
@I.ir_module
class Module:
    @T.prim_func(s_tir=True)
    def main(A: T.Buffer((4,), "float32")):
        T.func_attr({"global_symbol": "main"})
        for i in T.parallel(4):
            with T.sblock("b"):
                A[i] = T.float32(0)
'''


def test_real_shapes_pass():
    require_trace_function(TRACE)
    require_script_function(SCRIPT)
    require_script_function(SCRIPT.split("class Module:\n")[1].replace("\n    ", "\n").strip() + "\n")


@pytest.mark.parametrize("payload", [
    'sch.annotate(block_or_loop=b0, ann_key="k")\nimport os; os.system("touch x")\n#", ann_val=1)',
    'sch.annotate(block_or_loop=b0, ann_key="k")\n  __import__("os").system("touch x")\n  #", ann_val=1)',
    'sch.annotate(block_or_loop=b0, ann_key="k")\n  x = sch.__class__.__init__.__globals__\n  #", ann_val=1)',
    'sch.annotate(block_or_loop=b0, ann_key="k")\n  tvm.get_global_func("ffi.ModuleLoadFromFile")("e.so")\n  #", ann_val=1)',
    'sch.annotate(block_or_loop=b0, ann_key="k")\n  with open("x", "w"): pass\n  #", ann_val=1)',
    'sch.annotate(block_or_loop=b0, ann_key="k")\ndef second(): pass\n#", ann_val=1)',
    'sch.annotate(block_or_loop=b0, ann_key="k\\00"unterminated',
    # red team round 9: rebind sch to anything, then "sch.system(...)" reads like a primitive
    'sch.annotate(block_or_loop=b0, ann_key="k")\n  sch = T.builder.external_kernel.os\n  sch.system("x")\n  #", ann_val=1)',
    'sch.annotate(block_or_loop=b0, ann_key="k")\n  sch, b9 = sch.get_loops(b0)\n  #", ann_val=1)',
    'sch.annotate(block_or_loop=b0, ann_key="k")\n  x = T.builder\n  #", ann_val=1)',
    'sch.annotate(block_or_loop=b0, ann_key=(lambda sch: sch.system("x"))(1))',
    'sch.annotate(block_or_loop=b0, ann_key="k")\n  b0.x = sch.get_loops(b0)\n  #", ann_val=1)',
])
def test_an_injected_statement_is_refused(payload):
    text = TRACE.replace('sch.annotate(block_or_loop=b0, ann_key="meta_schedule.tiling_structure", ann_val="SSRSRS")',
                         payload)
    with pytest.raises(NotASchedule, match="it (holds|does not read)|not one schedule function"):
        require_trace_function(text)


@pytest.mark.parametrize("extra", ['import os\n', 'os.system("x")\n', '__import__("os")\n',
                                   'T.builder.external_kernel.os.system("x")\n', 'T.a.b.c("x")\n'])
def test_a_script_with_more_than_a_function_is_refused(extra):
    with pytest.raises(NotASchedule):
        require_script_function(SCRIPT + extra)
    with pytest.raises(NotASchedule):
        require_script_function(SCRIPT.replace('        T.func_attr', '        ' + extra + '        T.func_attr'))


def test_symbolic_variables_printed_before_a_module_pass():
    require_script_function('elem_offset = TypeVar("elem_offset")\n' + SCRIPT)
    with pytest.raises(NotASchedule):
        require_script_function('elem_offset = TypeVar(print("x"))\n' + SCRIPT)


@pytest.mark.parametrize("signature", [
    # red team round 10: a run folder's name ended the header comment and put a decorator above the def
    "@__import__('os').system('touch x') or (lambda f: f)\ndef apply_trace(sch: s_tir.Schedule) -> None:",
    "def apply_trace(sch=__import__('os').system('touch x')) -> None:",
    "def apply_trace(sch: print('x')) -> None:",
    "def apply_trace(sch) -> print('x'):",
    "def apply_trace(sch, *rest):",
    "def apply_trace(other):",
])
def test_a_trace_function_has_a_plain_signature(signature):
    text = TRACE.replace("def apply_trace(sch: s_tir.Schedule) -> None:", signature)
    with pytest.raises(NotASchedule, match="def f\\(sch\\)"):
        require_trace_function(text)
    require_trace_function(TRACE.replace("sch: s_tir.Schedule", 'sch: "s_tir.Schedule"'))


def test_an_annotation_that_pastes_source_into_the_kernel_is_not_inserted():
    """Red team round 10: a record's sch.annotate(..., "pragma_import_llvm", IR) passed as a schedule step;
    ASight refuses to build it, so it must not hand it to the user to build."""
    step = '  sch.annotate(block_or_loop=b0, ann_key="pragma_import_llvm", ann_val="declare i32 @system(ptr)")\n'
    with pytest.raises(NotASchedule, match="pragma_import"):
        require_trace_function(TRACE + step)
    attr = '                T.attr(0, "pragma_import_c", "int f() { return system(0); }")\n'
    with pytest.raises(NotASchedule, match="pragma_import"):
        require_script_function(SCRIPT + attr)
