"""An ``@I.ir_module`` class read member by member (``tvmscript/members.py``) gives the outline and
the gate verdict of the class parsed whole, and an edit re-reads only the method it touched (issue 14)."""
from __future__ import annotations

import ast
import textwrap
from unittest import mock

import pytest

from asight_lsp.tvmscript import members
from asight_lsp.tvmscript import outline as outline_module
from asight_lsp.tvmscript.members import split_class
from asight_lsp.tvmscript.outline import ChunkCache, build_outline
from asight_lsp.tvmscript.outline_cache import OutlineCache
from asight_lsp.tvmscript.pysource import source_lines
from tests.conftest import FIXTURES, fixture_text

HEAD = "from tvm.script import ir as I\nfrom tvm.script import relax as R\nfrom tvm.script import tirx as T\n\n\n"
BENIGN_TIR = '''\
@T.prim_func
def benign_add(A: T.Buffer((8,), "float32"), B: T.Buffer((8,), "float32")):
    for i in range(8):
        with T.sblock("add"):
            vi = T.axis.spatial(8, i)
            B[vi] = A[vi] + T.float32(1)
'''
BENIGN_RELAX = '''\
@R.function
def benign_main(x: R.Tensor((8,), "float32")) -> R.Tensor((8,), "float32"):
    y = R.add(x, x)
    return y
'''


def whole(text: str):
    """The outline with every class parsed at once (as before member-by-member reading)."""
    with mock.patch.object(outline_module, "split_class", lambda *args: None):
        return build_outline(text, chunks=ChunkCache())


def by_member(text: str):
    return build_outline(text, chunks=ChunkCache())


def module(*methods: str, name: str = "Mod") -> str:
    body = "\n".join(textwrap.indent(textwrap.dedent(m).strip("\n") + "\n", "    ") for m in methods)
    return HEAD + f"@I.ir_module\nclass {name}:\n" + body


def in_a_class(text: str) -> str:
    """A fixture's units as methods of one class between two benign ones (classes get one more method)."""
    tree, lines = ast.parse(text), source_lines(text)
    head = "\n".join(lines[:min([n.decorator_list[0].lineno for n in tree.body
                                 if getattr(n, "decorator_list", None)] or [len(lines) + 1]) - 1])
    parts = []
    for node in tree.body:
        if not getattr(node, "decorator_list", None):
            continue
        source = "\n".join(lines[node.decorator_list[0].lineno - 1:node.end_lineno])
        if isinstance(node, ast.ClassDef):
            return head + "\n" + source + "\n\n" + textwrap.indent(BENIGN_RELAX, "    ")
        parts.append(source)
    return head + "\n\n@I.ir_module\nclass Wrapped:\n" + "\n".join(
        textwrap.indent(p.rstrip("\n") + "\n", "    ") for p in [BENIGN_TIR, *parts, BENIGN_RELAX])


FILES = sorted(p.relative_to(FIXTURES).as_posix() for p in FIXTURES.glob("*.py")) + \
    sorted(p.relative_to(FIXTURES).as_posix() for p in FIXTURES.glob("printed/*.py") if p.name != "make.py")
HOSTILE = sorted(p.relative_to(FIXTURES).as_posix() for p in FIXTURES.glob("hostile/*.py"))


@pytest.mark.parametrize("name", FILES + HOSTILE)
def test_a_class_read_by_member_is_the_class_read_whole(name):
    text = fixture_text(name)
    for variant in (text, in_a_class(text)):
        lines = source_lines(variant)
        assert by_member(variant) == whole(variant), variant
    assert any(split_class(lines, u.start_line, len(lines) - 1) for u in whole(variant).units)  # the path was taken


def test_hostile_methods_stay_refused_inside_a_module():
    refused = 0
    gated = [n for n in HOSTILE if not n.startswith("hostile/text_")]   # comments for Python: nothing to refuse
    for name in gated:
        outline = by_member(in_a_class(fixture_text(name)))
        refused += any(u.problems for u in outline.units)
        assert not any(u.problems for u in by_member(module(BENIGN_TIR, BENIGN_RELAX)).units)
    assert refused >= len(gated) - 2, refused   # a route may need a top-level def (its own name)


def test_split_finds_each_method_with_its_decorators_and_trailing_statements():
    text = module('@T.prim_func(\n    private=True)\ndef a():\n    T.evaluate(0)\nx = 1\n',
                  '# a comment\n@R.function\ndef b(x: R.Tensor((2,), "float32")):\n    return x\n', "def c():\n    pass\n")
    lines = text.splitlines()
    split = split_class(lines, 5, len(lines) - 1)
    assert split.indent == "    " and split.class_line == 6
    starts = [lines[s].strip() for s, _ in split.members]
    assert starts == ["@T.prim_func(", "@R.function", "def c():"]
    assert "x = 1" in "\n".join(lines[split.members[0][0]:split.members[0][1] + 1])


@pytest.mark.parametrize("text", [
    module(BENIGN_TIR),                                                 # one method: nothing to gain
    module(BENIGN_TIR, BENIGN_RELAX) + "x = 1\n",                       # code after the class in the chunk
    module('@T.prim_func\ndef a():\n    s = 1', BENIGN_RELAX).replace("s = 1", 's = """\n"""'),  # text at column 0
    module('@T.prim_func\ndef a():\n    """doc\n    def b():\n    """\n    T.evaluate(0)', BENIGN_RELAX),  # a "method" in a string
    module('@T.prim_func\ndef a():\n    x = 1 + \\\n        2', BENIGN_RELAX),                   # a continued line
])
def test_a_class_that_cannot_be_cut_safely_is_read_whole(text):
    lines = text.splitlines()
    assert split_class(lines, 5, len(lines) - 1) is None
    assert by_member(text) == whole(text)


def test_tabs_in_indentation_keep_their_width():
    text = module(BENIGN_TIR, BENIGN_RELAX).replace("            vi = T.axis", "        \t    vi = T.axis")
    assert by_member(text) == whole(text)
    broken = module(BENIGN_TIR, BENIGN_RELAX).replace("            vi = T.axis", "          \t  vi = T.axis")
    assert by_member(broken) == whole(broken) and whole(broken).syntax_errors   # 10 spaces + tab: column 16


def test_a_string_across_methods_is_read_whole():
    text = module('@T.prim_func\ndef a():\n    s = """', '    @T.prim_func\n    def b():\n    """\n    T.evaluate(0)\n',
                  BENIGN_RELAX)
    assert by_member(text) == whole(text)


def big_module(count: int = 40) -> str:
    method = fixture_text("matmul_bias_relu.py").split("class MatmulBiasRelu:\n", 1)[1]
    return HEAD + "@I.ir_module\nclass Big:\n" + "\n".join(
        method.replace("def main(", f"def main{n}(") for n in range(count))


def test_an_edit_in_one_method_reparses_that_method_only():
    cache, text = OutlineCache(), big_module()
    cache.build(text)
    parsed = []
    real = members.parse_member
    with mock.patch.object(members, "parse_member", lambda *a: parsed.append(a[1]) or real(*a)):
        edited = text.replace("bias[vj]", "bias[vj] + T.float32(1)", 1)
        got = cache.build(edited)
        assert len(parsed) == 1
        edited = edited.replace("    @T.prim_func(s_tir=True)\n    def main3(", "\n    @T.prim_func(s_tir=True)\n    def main3(")
        got = cache.build(edited)   # Enter above a method: the blank line ends the method above (parsed
        assert len(parsed) == 2     # again); the 37 methods below move and are not
    assert got.outline == whole(edited)
    assert [f.range["start"]["line"] for f in got.outline.functions] == \
           [f.range["start"]["line"] for f in whole(edited).functions]


def test_a_half_typed_method_stands_in_for_the_module_at_once():
    cache, text = OutlineCache(), big_module()
    cache.build(text)
    broken = text.replace("bias[vj]", "bias[vj] + (", 1)
    got = cache.build(broken)
    assert got.fallback == {"Big"} and len(got.outline.functions) == 40
    assert got.outline.syntax_errors and got.outline.syntax_errors[0]["range"]["start"]["line"] == \
           next(i for i, line in enumerate(broken.splitlines()) if "+ (" in line)


CALLER = '''\
@R.function
def main(x: R.Tensor((8,), "float32")) -> R.Tensor((8,), "float32"):
    cls = Mod
    y = R.call_tir(cls.add, (x,), out_sinfo=R.Tensor((8,), "float32"))
    return y
'''
ADD = BENIGN_TIR.replace("benign_add", "add")


@pytest.mark.parametrize("edit", [
    (ADD, ADD.replace("def add(", "def add2(")),                         # a method's name: Mod.add is gone
    (BENIGN_RELAX, BENIGN_RELAX.replace("y = R.add(x, x)", "y = R.add(x, x)\n    z = y")),  # a new name bound
])
def test_an_edit_elsewhere_regates_a_method_whose_answer_changed(edit):
    before, after = edit
    user = BENIGN_RELAX.replace("benign_main", "uses").replace("R.add(x, x)", "R.add(x, z)")
    cache, messages = OutlineCache(), []
    for text in (module(CALLER, before, user), module(CALLER, after, user), module(CALLER, before, user)):
        got = cache.build(text).outline
        assert got == whole(text)
        messages.append([d["message"] for d in got.units[0].problems])
    assert messages[0] != messages[1]   # the edit changed another method's verdict
    assert messages[2] == messages[0]
