"""Issue 22's evaluation gaps, modelled as TVM 0.27's parser has them (docs/safety.md):

* Relax binds a variable's *name hint* after a dataflow block and an ``if``, not the script's name;
* TVM's ``eval_assign`` runs an assignment target with empty globals (``exec(code, {}, locals)``);
* a module constant named like a builtin is the builtin wherever TVM does not look at its table.

A builtin's or parser global's name (``SHADOWING``) bound only through a name hint, or as a module
constant, is never counted on."""
from __future__ import annotations

import pytest

from asight_lsp.tvmscript.namespaces import SAFE_BUILTINS, SHADOWING
from asight_lsp.tvmscript.outline import build_outline
from tests.unit.test_safety import HEAD, refusals, relax, tir, unit_of


def test_the_names_not_counted_on_through_a_hint_are_every_builtin_and_parser_global_but_the_harmless_ones():
    assert {"exec", "eval", "open", "getattr", "__import__", "input", "tvm", "T", "R", "relax"} <= SHADOWING
    assert not SHADOWING & SAFE_BUILTINS and {"range", "len", "max"} <= SAFE_BUILTINS


@pytest.mark.parametrize("snippet", [
    # a name bound by I.meta_var is the variable it names (hint lv), not a variable of that name
    relax("with R.dataflow():\n    lv = R.add(x, x)\n    y = I.meta_var(lv)\n    R.output(y)\ngv = R.add(y, y)\nreturn gv"),
    # an if binds the name of each branch's last *emitted* variable: a meta_var or a type emits none
    relax("if c:\n    lv = R.add(x, x)\n    y = I.meta_var(lv)\nelse:\n    lv = R.add(x, x)\n    y = I.meta_var(lv)\n"
          "return y", sig='x: R.Tensor((8,), "float32"), c: R.Prim("bool")'),
    relax("if c:\n    lv = R.add(x, x)\n    y = R.Tensor((8,), 'float32')\nelse:\n    lv = R.add(x, x)\n"
          "    y = R.Tensor((8,), 'float32')\nreturn y", sig='x: R.Tensor((8,), "float32"), c: R.Prim("bool")'),
])
def test_a_name_relax_binds_by_another_hint_is_not_bound_after_its_block(snippet):
    assert any("name 'y' is used where it is not bound" in m for m in refusals(snippet)), refusals(snippet)


@pytest.mark.parametrize("snippet", [
    relax("with R.dataflow():\n    lv = R.add(x, x)\n    y = R.multiply(lv, lv)\n    R.output(y)\nreturn y"),
    relax("if c:\n    y = R.add(x, x)\nelse:\n    y = R.multiply(x, x)\nreturn y",
          sig='x: R.Tensor((8,), "float32"), c: R.Prim("bool")'),
    relax("with R.dataflow():\n    y = I.meta_var(x)\n    y = R.add(y, y)\n    R.output(y)\nreturn y"),
    relax("with R.dataflow():\n    @R.function\n    def y(a: R.Tensor((8,), 'float32')):\n        return a\n"
          "    R.output(y)\nz = y(x)\nreturn z"),
])
def test_a_name_relax_emits_under_that_name_is_bound_after_its_block(snippet):
    assert refusals(snippet) == []


@pytest.mark.parametrize("snippet", [
    tir("for A.dtype in T.serial(8):\n    pass"),                               # a parameter
    tir("k = T.int32(0)\nwith T.sblock('b') as k.dtype:\n    pass"),          # a local
    tir("A.dtype: T.int32 = 0"),
    relax("lv, x.shape = (x, x)\nreturn x"),
    relax("[lv, *x.shape] = (x, x)\nreturn x"),
    tir("A.data = T.int32(0)"),
])
def test_a_name_an_assignment_target_reads_is_a_builtin_there(snippet):
    found = refusals(snippet)
    assert any("in an assignment target" in m for m in found), found


def test_a_buffer_store_reads_its_indices_with_the_var_table():
    assert refusals(tir("for i in range(8):\n    A[i] = T.float32(0)")) == []


@pytest.mark.parametrize("snippet", [
    # TVM binds these as written (its var table; Python for lambdas and comprehensions)
    tir("A[0] = T.float32(input)", sig='A: T.Buffer((8,), "float32"), input: T.int32'),
    relax("y = R.add(input, input)\nreturn y", sig='input: R.Tensor((8,), "float32")'),
    tir("for open in range(8):\n    A[open] = T.float32(0)"),
    tir("A[0] = T.float32(len([eval for eval in range(2)]))"),
    relax("with R.dataflow():\n    vars = R.add(x, x)\n    gv = R.add(vars, vars)\n    R.output(gv)\nreturn gv"),
])
def test_a_builtins_name_tvm_binds_as_written_is_bound(snippet):
    assert refusals(snippet) == []


@pytest.mark.parametrize("snippet,name", [
    # bound after the block / if only through a name hint: never counted on, whatever it emitted
    (relax("with R.dataflow():\n    exec = R.add(x, x)\n    R.output(exec)\ngv = exec(x)\nreturn x"), "exec"),
    (relax("if c:\n    tvm = R.add(x, x)\nelse:\n    tvm = R.add(x, x)\nreturn tvm",
           sig='x: R.Tensor((8,), "float32"), c: R.Prim("bool")'), "tvm"),
    (relax("with R.dataflow():\n    T = R.add(x, x)\n    R.output(T)\nreturn T"), "T"),
])
def test_a_builtins_name_bound_through_a_name_hint_is_refused_where_used(snippet, name):
    found = refusals(snippet)
    assert any(f"name '{name}' after a Relax dataflow block or if" in m for m in found), found


def test_a_module_constant_named_like_a_builtin_is_refused_where_it_is_used():
    used = "exec = 8\n" + tir("A[0] = T.float32(exec)")
    [message] = refusals(used)
    assert "the module constant 'exec'" in message and "rename it" in message
    assert refusals("exec = 8\nN = 8\n" + tir("A[0] = T.float32(N)")) == []   # unused: harmless
    assert refusals("input = 8\n" + tir("for input.dtype in T.serial(8):\n    pass"))


def test_the_unit_still_outlines():
    outline = build_outline(HEAD + "exec = 8\n" + tir("A[0] = T.float32(exec)"))
    assert outline.functions and not outline.units[0].safe
    assert unit_of("exec = 8\n" + tir("A[0] = T.float32(exec)")).problems


def test_module_constants_as_python_assigns_them():
    import ast

    from asight_lsp.tvmscript.pysource import module_constants
    tree = ast.parse('M, N = 16, 32\nN, M = M, N\nC = {"n": 4, "s": "f32"}\nK = C["n"] * 2\nx = y = 3\n'
                     'P = (1, 2)[-1]\nI = {1: 2}\nJ = I[1]\na, *b = 1, 2\nZ = 1\nZ += 1\nQ = f()\nQ2 = C["nope"]\n')
    assert module_constants(tree) == {"M": 32, "N": 16, "C": {"n": 4, "s": "f32"}, "K": 8, "x": 3, "y": 3, "P": 2,
                                      "J": 2}   # {1: 2} would reach the worker as {"1": 2}: only J is kept
    assert module_constants(ast.parse("L = N * 2"), {"N": 4}) == {"L": 8}   # an earlier chunk's constant


MACRO = ('@T.macro\ndef zero(buf, i):\n    buf[i] = T.float32({value})\n\n\n'
         + tir("for i in range(8):\n    zero(A, i)"))


def test_a_hygienic_module_macro_is_callable_and_checked():
    assert refusals(MACRO.format(value="0")) == []
    [message] = refusals(MACRO.format(value="open('x')"))
    assert message.startswith("not evaluated: the macro 'zero' is refused: call of 'open'")
    assert refusals(MACRO.format(value="0").replace("def zero(buf, i)", "def zero(buf, i, d=open('x'))"))
    assert refusals(MACRO.format(value="0").replace("def zero(buf, i)", "def zero(buf, i, *, exec=exec)"))
    [message] = refusals(MACRO.format(value="0").replace("@T.macro", "@T.macro(hygienic=False)"))
    assert "not hygienic" in message
    assert refusals(MACRO.format(value="0").replace("@T.macro", "@T.prim_func\n@T.macro"))
    assert refusals(MACRO.format(value="open('x')").replace("zero(A, i)", "A[i] = T.float32(0)")) == []  # unused


def test_r_rewriter_which_parses_the_class_it_is_given_is_not_listed():
    found = refusals(relax("y = R.rewriter(R.Tensor)\nreturn x"))
    assert any("'R.rewriter' is not part of TVMScript" in m for m in found), found
