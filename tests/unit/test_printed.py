"""Printed modules read statically (printed.py) and the generated TVMScript API (namespaces.py)."""
from __future__ import annotations

import ast

import pytest

from asight_lsp.tvmscript import namespaces as api
from asight_lsp.tvmscript import tvmscript_api
from asight_lsp.tvmscript.outline import build_outline
from asight_lsp.tvmscript.printed import blank_metadata_params, json_problem, metadata_section, type_var_names
from tests.conftest import fixture_text


@pytest.mark.parametrize("first", [True, False])
def test_blanking_the_params_entry_keeps_every_line_and_column(first):
    entries = ['"num_input": 1', '"params": [metadata["ffi.Tensor"][0],\n        metadata["ffi.Tensor"][1]]']
    entries = entries[::-1] if first else entries
    text = "R.func_attr({" + ", ".join(entries) + '})\nlv = R.add(x, metadata["ffi.Tensor"][2])\n'
    out = blank_metadata_params(text)
    assert "params" not in out and "num_input" in out and 'metadata["ffi.Tensor"][2]' in out
    assert [len(line) for line in out.split("\n")] == [len(line) for line in text.split("\n")]
    assert out.index("lv = R.add") == text.index("lv = R.add")
    call = ast.parse(out).body[0].value
    assert [k.value for k in call.args[0].keys] == ["num_input"]


def test_params_with_other_values_are_kept():
    text = 'R.func_attr({"params": [metadata["ffi.Tensor"][0], w]})\n'
    assert blank_metadata_params(text) == text


def test_metadata_json_must_be_ir_data():
    section = metadata_section(ast.parse(fixture_text("printed/model_params_meta.py")))
    assert section is not None and section.problem is None and section.line == 0
    assert json_problem('{"root_index": 0, "nodes": [{"type": "ffi.Function"}]}') == \
        "it holds a 'ffi.Function' object, which is not IR data"
    assert json_problem('{"root_index": 0, "nodes": [{"type": "ir.EnvFunc"}]}')
    assert json_problem("[1, 2]") == "its JSON is not a TVM object graph"
    assert json_problem("{") .startswith("its JSON does not parse")
    hostile = metadata_section(ast.parse('metadata = tvm.ir.load_json(open("x").read())\n'))
    assert hostile.problem == "it is not tvm.ir.load_json of a string literal"


def test_the_metadata_code_follows_the_json():
    text = fixture_text("printed/model_params_meta.py")
    one = build_outline(text).aliases["metadata"]
    changed = text.replace("P6G0", "P6G1", 1)  # one byte of the first weight
    assert changed != text
    two = build_outline(changed).aliases["metadata"]
    assert one.startswith("metadata:") and two.startswith("metadata:") and one != two


def test_printed_type_vars_are_module_symbols():
    assert type_var_names(ast.parse('n = TypeVar("n")\nm = TypeVar("k")\nq = typing.TypeVar("q")\n')) == ["n", "q"]
    aliases = build_outline(fixture_text("printed/symbolic.py")).aliases
    assert aliases["n"] == aliases["m"] == "TypeVar"


def test_the_api_lists_no_module_and_nothing_behind_one():
    listed = tvmscript_api.MEMBERS | tvmscript_api.PREFIXES | tvmscript_api.CHAINS
    for path in ("T.entry", "T.external_kernel", "T.tile", "T.parser", "Tx.functools", "R.parser", "R.ir",
                 "R.nn.nn", "I.entry", "T.call_kernel", "T.prim_func", "R.function"):
        assert path not in listed, path
    assert not any(p.startswith(("T.entry.", "T.external_kernel.", "R.distributed.")) for p in listed)
    assert {"T.axis.spatial", "T.Buffer", "R.Tensor", "R.nn.conv2d", "I.module_attrs", "Tx.copy"} <= listed
    assert api.path_kind("R.nn") == "prefix" and api.path_kind("T.prim_func") == "decorator"
    assert api.longest_listed("T", ["ptx", "cp", "async_", "bulk"]) == (4, "chain")
    assert api.decorator_of("tvm.script.ir_module") == "ir_module"
    underscored = {path for path in listed for name in path.split(".") if name.startswith("_")}
    assert underscored and all(p.startswith("T.cuda.__") and not p.endswith("__") for p in underscored), underscored
    assert "tvm" in api.RESERVED and "open" in api.RESERVED and "range" in api.SAFE_BUILTINS


def test_value_attributes_build_no_strings_and_reach_no_registry():
    for name in ("join", "format", "replace", "mro", "show", "script", "get_attr", "set_attr"):
        assert not api.is_value_attribute(name), name
    for name in ("shape", "dtype", "data", "vload", "access_ptr", "value"):
        assert api.is_value_attribute(name), name
