"""The safety gate: hostile files are refused statically; real TVMScript passes (docs/safety.md)."""
from __future__ import annotations

import textwrap

import pytest

from asight_lsp.tvmscript.diagnostics import check_text
from asight_lsp.tvmscript.outline import build_outline
from asight_lsp.tvmscript.safety import code_string_problem
from tests.conftest import FIXTURES, fixture_text

HOSTILE = sorted(p.name for p in (FIXTURES / "hostile").glob("*.py"))
# Its shape string is computed at parse time: the worker's guard refuses it (tests/worker/test_gate.py).
RUNTIME_ONLY = {"annot_computed_shape_string.py"}
# Their payload is comment text for Python: nothing to refuse once every reader splits lines as Python
# does (tests/unit/test_source_lines.py).
ONE_TEXT = {p.name for p in (FIXTURES / "hostile").glob("text_*.py")}
CLEAN = ["matmul.py", "matmul64.py", "matmul_bias_relu.py", "conv2d_nhwc.py", "depthwise_conv2d.py",
         "batch_matmul.py", "softmax.py", "relax_cnn.py", "three_kernels.py", "matmul_space.py", "pagebreak.py",
         "module_macro.py", "module_constants.py"]
HEAD = "from tvm.script import ir as I\nfrom tvm.script import relax as R\nfrom tvm.script import tirx as T\n\n"


def unit_of(text: str, index: int = 0):
    return build_outline(HEAD + textwrap.dedent(text)).units[index]


def refusals(text: str) -> list[str]:
    return [d["message"] for d in unit_of(text).problems]


def tir(body: str, sig: str = 'A: T.Buffer((8,), "float32")') -> str:
    return f"@T.prim_func\ndef f({sig}):\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n"


def relax(body: str, sig: str = 'x: R.Tensor((8,), "float32")') -> str:
    return f"@R.function\ndef main({sig}):\n" + textwrap.indent(textwrap.dedent(body).strip("\n"), "    ") + "\n"


@pytest.mark.parametrize("name", HOSTILE)
def test_hostile_file_is_refused_statically(name):
    text = fixture_text(f"hostile/{name}")
    assert text.startswith("# If executed, this creates the file ASIGHT_PWNED")
    result = check_text(text)
    assert result.outline.units and result.outline.functions, "the unit is still found and outlined"
    if name in RUNTIME_ONLY | ONE_TEXT:
        assert all(u.safe for u in result.outline.units)
        return
    refusals = [d for d in result.diagnostics if d["source"] == "safety"]
    assert refusals and all(d["message"].startswith("not evaluated:") for d in refusals)
    assert not any(u.safe for u in result.outline.units)


def test_the_corpus_covers_the_three_bypass_classes_and_other_routes():
    classes = [fixture_text(f"hostile/{n}").splitlines()[1] for n in HOSTILE if n.split("_")[0] in
               ("chain", "later", "annot", "route")]
    counts = {kind: sum(kind in line for line in classes) for kind in
              ("namespace attribute chain", "bound later", "Relax annotation", "other route")}
    assert len(HOSTILE) >= 50 and counts["other route"] >= 10, counts
    assert sum(v for k, v in counts.items() if k != "other route") >= 30 and min(counts.values()) >= 10, counts


def test_computed_shape_strings_are_refused_by_the_parse_time_check():
    assert code_string_problem("__import__('os').system('touch ASIGHT_PWNED') + 8", {"R": "R"})
    assert code_string_problem("n * 2 + m", {"R": "R"}) is None
    assert "namespace" in code_string_problem("R.nn", {"R": "R"})
    assert code_string_problem("tvm.os", {}) and code_string_problem("x = 1", {})


@pytest.mark.parametrize("name", CLEAN)
def test_fixtures_pass_the_gate(name):
    units = build_outline(fixture_text(name)).units
    assert units and all(u.safe and not u.notes for u in units)


def test_refusal_points_at_the_offending_expression_on_the_reported_line():
    result = check_text(fixture_text("hostile/decorator_call.py"))
    first = [d for d in result.diagnostics if d["source"] == "safety"][0]
    line = fixture_text("hostile/decorator_call.py").splitlines()[first["range"]["start"]["line"]]
    assert line.startswith("def evil(")  # TVM reports a decorator's failure at the def line
    assert "call of 'open'" in first["message"]


@pytest.mark.parametrize("snippet", [
    tir("A[0] = T.float32(len([x for x in range(4)]))"),
    tir("A[0] = T.float32(min(1, 2))"),
    tir("A[0] = T.float32(**{'value': 1})"),
    tir("""
        for i in range(8):
            with T.sblock("b"):
                vi = T.axis.spatial(8, i)
                A[vi] = A[vi] + T.float32(vi)"""),
    tir("B = T.alloc_buffer((8,), scope='shared.dyn')\nA[0] = B[0] + T.float32(A.shape[0])"),
    tir("n = T.int32(4)\nfor i in T.serial(n):\n    A[i] = T.float32(0)"),
    tir("x = T.comm_reducer(lambda a, b: a + b, [T.float32(0)])"),
    tir("T.evaluate(T.int32(sum(i for i in range(3))))"),
    tir("T.evaluate(n)", sig='a: T.handle, n: T.int32'),
    tir("A[0] = T.float32(0)", sig='A: T.Buffer(("n",), "float32"), n: T.int32'),
    "N = 8\n" + tir("A[0] = T.float32(0)", sig='A: T.Buffer((N,), "float32"), B: T.Buffer((N,), "float32")'),
    relax("return x", sig='x: R.Tensor(("n", "m * 2"), "float32")'),
    relax("return f(x)", sig='x: R.Tensor((8,), "float32"), f: R.Callable((R.Tensor((8,), "float32"),), '
                             'R.Tensor((8,), "float32"))'),
    relax("""
        @R.function
        def inner(y: R.Tensor((8,), "float32")) -> R.Tensor((8,), "float32"):
            return y

        z = inner(x)
        return z"""),
    relax("""
        with R.dataflow():
            lv = R.add(x, x)
            gv = R.nn.relu(lv)
            R.output(gv)
        return gv"""),
    relax("""
        if c:
            a = R.add(x, x)
            y = R.add(a, x)
        else:
            y = R.multiply(x, x)
        return y""", sig='x: R.Tensor((8,), "float32"), c: R.Tensor((), "bool")'),
    relax("return x", sig='x: R.Tensor((8,), "float32"), n: R.Prim("int64"), y: R.Tensor((8,), "float32")'),
    relax("""
        if c:
            with R.dataflow():
                t = R.add(x, x)
                out = R.multiply(t, x)
                R.output(out)
        else:
            with R.dataflow():
                out = R.add(x, x)
                R.output(out)
        return out""", sig='x: R.Tensor((8,), "float32"), c: R.Prim("bool")'),
    tir("mask = T.cuda.__activemask()\nT.evaluate(T.cuda.__shfl_sync(mask, 0, 0, 32))"),
    tir("B = T.alloc_shared((8,), 'float32')\nB[0] = A[0]"),
])
def test_tvmscript_constructs_pass(snippet):
    unit = unit_of(snippet)
    assert unit.problems == [], unit.problems


def test_construct_of_an_ir_module_pass():
    module = """
    @I.ir_module
    class Mod:
        I.module_attrs({"x": 1})

        @T.prim_func(private=True)
        def add(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
            for i in range(8):
                with T.sblock("b"):
                    vi = T.axis.spatial(8, i)
                    B[vi] = A[vi] + T.float32(1)

        @R.function
        def main(x: R.Tensor((8,), "float32")):
            cls = Mod
            y = R.call_tir(cls.add, (x,), out_ty=R.Tensor((8,), "float32"))
            z = R.call_tir(Mod.add, (y,), out_ty=R.Tensor((8,), "float32"))
            return z
    """
    assert unit_of(module).problems == []
    assert any("not a function of the module" in m for m in refusals(module.replace("cls.add", "cls.nope")))


@pytest.mark.parametrize("text,kind", [
    ("import tvm\n@tvm.script.ir_module\nclass M:\n    @T.prim_func\n    def f(A: T.Buffer((8,), 'float32')):\n"
     "        A[0] = T.float32(0)\n", "ir_module"),
    ("import tvm\n@tvm.script.tirx.prim_func\ndef f(A: T.Buffer((8,), 'float32')):\n    A[0] = T.float32(0)\n",
     "prim_func"),
    ("import tvm\n@tvm.script.relax.function\ndef f(x: R.Tensor((8,), 'float32')):\n    return x\n",
     "relax_function"),
    ("@T.prim_func(check_well_formed=False)\ndef f(A: T.Buffer((8,), 'float32')):\n    A[0] = T.float32(0)\n",
     "prim_func"),
])
def test_decorator_spellings_tvm_accepts_are_units(text, kind):
    unit = unit_of(text)
    assert unit.kind == kind and unit.safe


def test_tile_namespace_alias():
    text = ("from tvm.script.tirx import tile as Tx\n" + HEAD
            + tir("Tx.fill(A, T.float32(0))"))
    outline = build_outline(text)
    assert outline.aliases["Tx"] == "Tx" and outline.units[0].safe
    assert not build_outline(text.replace("Tx.fill", "Tx.functools.reduce")).units[0].safe


@pytest.mark.parametrize("snippet,expected", [
    # 1. attribute chains: only listed members, never the modules a namespace imports
    (tir("A[0] = T.float32(T.entry.inspect.os.getpid())"), "'T.entry.inspect.os.getpid' is not part of TVMScript"),
    (tir("A[0] = T.float32(T.grd(1))"), "'T.grd' is not part of TVMScript"),
    (relax("y = R.nn\nreturn x"), "the namespace 'R.nn' used as a value"),
    (tir("x = T\nA[0] = T.float32(0)"), "the namespace 'T' used as a value"),
    (tir("A[0] = T.float32(A.script())"), "attribute '.script'"),
    ("R = 'x'\n" + relax("y = R.Tensor\nreturn x"), "attribute '.Tensor'"),  # a constant wins, as in the worker
    (tir("A[0] = T.float32(A.__class__)"), "dunder attribute"),
    (tir("A[0] = T._ffi_api"), "private or dunder attribute"),
    (tir("A[0] = T.cuda.__class__"), "private or dunder attribute"),
    (tir("A[0] = T.cuda.__activemask.__globals__"), "private or dunder attribute"),
    (tir("T.prim_func(A)"), "'T.prim_func' is used only as a decorator"),
    (tir("A[0] = T.float32(len('a'.join(['b'])))"), "attribute '.join'"),
    # 2. binding order: a name is bound after its binding, inside its frame
    (tir("A[0] = T.float32(k)\nk = T.int32(1)"), "name 'k' is used where it is not bound"),
    (tir("for k in range(2):\n    A[k] = T.float32(0)\nA[0] = T.float32(k)"), "name 'k' is used where it is not bound"),
    (tir("A[0] = T.float32(len([k for k in range(2)]) + k)"), "name 'k' is used where it is not bound"),
    (tir("with T.launch_thread('threadIdx.x', 1) as k:\n    A[0] = T.float32(0)\nA[1] = T.float32(k)"),
     "name 'k' is used where it is not bound"),
    (tir("A[0] = T.float32(0)", sig='A: T.Buffer((k,), "float32"), k: T.int32'),
     "name 'k' is used where it is not bound"),
    (tir("A[0] = T.float32(f)"), "name 'f' is used where it is not bound"),
    (tir("A[0] = T.float32(tvm)"), "name 'tvm' is not TVMScript"),
    (tir("T.evaluate(open('x'))"), "call of 'open'"),
    (relax("with R.dataflow():\n    k = R.add(x, x)\n    gv = R.add(x, x)\n    R.output(gv)\nreturn k"),
     "name 'k' is used where it is not bound"),
    (relax("return y", sig='x: R.Tensor((8,), "float32"), y: R.Tensor((x.shape[0],), "float32")'),
     "name 'x' is used where it is not bound"),
    # 3. annotations, shape strings, decorators, defaults, lambdas: the same rules
    (relax("return x", sig='x: R.Tensor(("open(1)",), "float32")'), "in the shape string"),
    (tir("A[0] = T.float32(0)", sig='A: T.Buffer(("tvm.x",), "float32")'), "in the shape string"),
    (relax("return x", sig='x: R.Tensor((R.ir.builtins.len(),), "float32")'), "not part of TVMScript"),
    (tir("A[0] = T.float32((lambda q: q + z)(1))"), "name 'z'"),
    (tir("A[0] = T.float32(0)").replace("@T.prim_func", "@T.prim_func(private=open('x'))"), "call of 'open'"),
    (tir("@T.inline\ndef g(B, d=open('x')):\n    B[0] = T.float32(0)\ng(A)"), "call of 'open'"),
    (tir("T.evaluate(T.int32(len(f'{open(1)}')))"), "call of 'open'"),
    (tir("x = (y := 1)"), "assignment expressions"),
    (tir("import os"), "import statements"),
    (tir("try:\n    A[0] = T.float32(0)\nexcept Exception:\n    pass"), "try statements"),
])
def test_refused(snippet, expected):
    found = refusals(snippet)
    assert any(expected in m for m in found), found


def test_a_problem_in_a_multi_line_statement_is_reported_at_its_first_line():
    text = HEAD + tir("""
        A[0] = T.float32(
            T.max(
                T.float32(1),
                bogus,
            )
        )""")
    [diag] = build_outline(text).units[0].problems
    line = text.splitlines()[diag["range"]["start"]["line"]]
    assert line.strip().startswith("A[0] = T.float32(") and "`bogus`" in diag["message"]


def test_a_problem_in_an_annotation_is_reported_at_the_def_line():
    text = HEAD + "@T.prim_func\ndef f(\n    A: T.Buffer((8,), 'float32'),\n    B: T.Buffer((bogus,), 'float32'),\n):\n" \
                  "    A[0] = T.float32(0)\n"
    [diag] = build_outline(text).units[0].problems
    assert text.splitlines()[diag["range"]["start"]["line"]].startswith("def f(")


@pytest.mark.parametrize("name,severity,blocks", [
    ("model_params.py", "warning", False),        # only the "params" attribute: dropped by the worker
    ("model_consts.py", "error", True),           # the program needs the constants
    ("model_params_meta.py", None, False),
    ("model_consts_meta.py", None, False),
    ("symbolic.py", None, False),
])
def test_printed_modules(name, severity, blocks):
    result = check_text(fixture_text(f"printed/{name}"))
    [unit] = result.outline.units
    assert unit.kind == "ir_module" and result.outline.functions
    assert unit.safe is not blocks
    metadata = [d for d in result.diagnostics if d["source"] == "metadata"]
    if severity is None:
        assert result.diagnostics == []
    else:
        assert [d["severity"] for d in metadata] == [severity] and len(result.diagnostics) == 1
        assert "show_meta=True" in metadata[0]["message"] or "show_meta" in metadata[0]["message"]


def test_a_metadata_section_that_is_not_ir_data_is_not_used():
    text = fixture_text("printed/model_consts_meta.py").replace('\\"ffi.Tensor\\"', '\\"ffi.Function\\"', 1)
    assert "ffi.Function" in text
    result = check_text(text)
    [diag] = [d for d in result.diagnostics if d["source"] == "metadata"]
    assert "ffi.Function" in diag["message"] and diag["severity"] == "error"
