"""The native-call rule (analysis/native_calls.py), on TVM's JSON form written by hand: which calls by
name a program may make before ASight builds and runs it."""
from __future__ import annotations

import json

from asight_lsp.analysis.native_calls import allowed, calls_in_ir_json, refusal_message, refused


def graph(*calls) -> str:
    """A ``save_json`` graph with one ``ir.Call`` per ``(op, [args], line)``; an arg is a string (an
    ``ir.StringImm``), ``"@sym"`` (a Relax ``ExternFunc``) or None (a computed value)."""
    nodes = [{"type": "None"}]

    def add(node) -> int:
        nodes.append(node)
        return len(nodes) - 1

    for op, args, line in calls:
        indices = []
        for arg in args:
            if arg is None:
                indices.append(add({"type": "ir.Var", "data": {"span": 0}}))
            elif arg.startswith("@"):
                symbol = add({"type": "ffi.String", "data": arg[1:]})
                indices.append(add({"type": "relax.expr.ExternFunc", "data": {"span": 0, "global_symbol": symbol}}))
            else:
                value = add({"type": "ffi.String", "data": arg})
                indices.append(add({"type": "ir.StringImm", "data": {"span": 0, "value": value}}))
        array = add({"type": "ffi.Array", "data": indices})
        span = add({"type": "ir.Span", "data": {"line": line, "column": 1}})
        if op.startswith("@"):        # R.call_packed: the callee itself is the ExternFunc
            symbol = add({"type": "ffi.String", "data": op[1:]})
            op_index = add({"type": "relax.expr.ExternFunc", "data": {"span": 0, "global_symbol": symbol}})
        else:
            op_index = add({"type": "ir.Op", "data": op})
        add({"type": "ir.Call", "data": {"span": span, "op": op_index, "args": array}})
    return json.dumps({"root": len(nodes) - 1, "nodes": nodes})


def test_a_c_function_is_found_with_its_line_and_refused_unless_it_is_math():
    calls = calls_in_ir_json(graph(("tirx.call_extern", ["system", "touch /tmp/x"], 10),
                                   ("tirx.call_pure_extern", ["expf", None], 11)))
    assert calls == [("tirx.call_extern", "system", 10), ("tirx.call_pure_extern", "expf", 11)]
    assert refused(calls) == [("tirx.call_extern", "system", 10)]
    message = refusal_message(calls)
    assert "the C function 'system' (tirx.call_extern, line 10)" in message and "expf" not in message


def test_packed_functions_every_spelling():
    calls = calls_in_ir_json(graph(("tirx.tvm_call_packed", ["ffi.ModuleLoadFromFile", "x.so"], 3),
                                   ("@ffi.ModuleLoadFromFile", ["x.so"], 4),                 # R.call_packed
                                   ("relax.call_pure_packed", ["@vm.builtin.copy", None], 5),
                                   ("relax.call_dps_packed", ["@runtime.SaveParams"], 6)))
    assert calls == [("relax.ExternFunc", "ffi.ModuleLoadFromFile", 4), ("relax.ExternFunc", "vm.builtin.copy", 5),
                     ("relax.ExternFunc", "runtime.SaveParams", 6),
                     ("tirx.tvm_call_packed", "ffi.ModuleLoadFromFile", 3)]
    assert [c[1] for c in refused(calls)] == ["ffi.ModuleLoadFromFile", "runtime.SaveParams",
                                              "ffi.ModuleLoadFromFile"]


def test_a_computed_name_an_unknown_calling_operator_and_python_callbacks_are_refused():
    calls = calls_in_ir_json(graph(("tirx.call_extern", [None], 2), ("tirx.call_something_new", ["expf"], 3),
                                   ("relax.call_py_func", ["f"], 4), ("relax.call_tir", [None], 5),
                                   ("tirx.call_llvm_pure_intrin", [None], 6)))
    assert [(op, symbol) for op, symbol, _ in refused(calls)] == [
        ("tirx.call_extern", None), ("tirx.call_something_new", "expf"), ("relax.call_py_func", "f")]
    assert "named by a computed value" in refusal_message(calls)


def test_the_lists():
    assert allowed("tirx.call_extern", "tanhf") and allowed("tirx.call_extern", "__nv_expf")
    assert not allowed("tirx.call_extern", "exit") and not allowed("tirx.call_extern", "dlopen")
    assert allowed("relax.ExternFunc", "vm.builtin.reshape") and allowed("relax.ExternFunc", "tvm.contrib.sort.topk")
    for name in ("vm.builtin.tensor_cache.load", "vm.builtin.call_py_func", "vm.builtin.register_py_func",
                 "ffi.ModuleLoadFromFile", "runtime.ModuleLoadFromFile", "ffi.System"):
        assert not allowed("relax.ExternFunc", name), name
    assert refusal_message([("tirx.call_extern", "sqrtf", 1)]) is None
    assert refusal_message([]) is None


def test_source_pasted_in_through_an_attribute_is_refused_with_its_line():
    nodes = [{"type": "None"}, {"type": "ffi.String", "data": "pragma_import_llvm"},
             {"type": "ffi.String", "data": "define float @__nv_pwn(float %x) { ... }"},
             {"type": "ir.Span", "data": {"line": 7, "column": 5}},
             {"type": "tirx.AttrStmt", "data": {"span": 3, "attr_key": 1, "value": 2, "node": 0, "body": 0}},
             {"type": "ffi.String", "data": "pragma_import_c"}]     # an annotation's key: no line
    calls = calls_in_ir_json(json.dumps({"root": 4, "nodes": nodes}))
    assert calls == [("pragma_import_llvm", None, 7), ("pragma_import_c", None, None)]
    message = refusal_message(calls)
    assert message.startswith("it pastes source code into the build through the 'pragma_import_llvm' attribute (line 7)")
