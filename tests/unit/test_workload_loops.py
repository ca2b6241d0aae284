"""Loop names of a Relax task's kernel from MetaSchedule's serialized workload, without TVM, and
the axes the source's layout names (issue 23: "n, c, h, w", not "loop loop1")."""
from __future__ import annotations

import base64
import json
import struct

from asight_lsp.analysis.workload_loops import block_loop_vars, layout_of, named_axes
from asight_lsp.store.database import workload_graph


def _graph() -> dict:
    """for nn: for ff: with block conv2d_nchw  +  a SeqStmt with a second block under the same loops."""
    nodes = [
        {"type": "None"},
        {"type": "tirx.PrimFunc", "data": {"body": 2}},
        {"type": "tirx.For", "data": {"loop_var": 3, "body": 5}},
        {"type": "ir.Var", "data": {"name": 4}},
        {"type": "ffi.String", "data": "nn"},
        {"type": "tirx.For", "data": {"loop_var": 6, "body": 8}},
        {"type": "ir.Var", "data": {"name": 7}},
        {"type": "ffi.String", "data": "ff"},
        {"type": "tirx.SeqStmt", "data": {"seq": 9}},
        {"type": "ffi.Array", "data": [10, 13]},
        {"type": "s_tir.SBlockRealize", "data": {"block": 11}},
        {"type": "s_tir.SBlock", "data": {"name_hint": 12, "body": 0}},
        {"type": "ffi.String", "data": "conv2d_nchw"},
        {"type": "s_tir.SBlockRealize", "data": {"block": 14}},
        {"type": "s_tir.SBlock", "data": {"name_hint": 15, "body": 0}},
        {"type": "ffi.String", "data": "T_add"},
    ]
    return {"root_index": 1, "nodes": nodes}


def test_block_loops_from_the_serialized_workload():
    blob = json.dumps(_graph()).encode()
    row = ["123", base64.b64encode(struct.pack("<Q", len(blob)) + blob).decode()]
    graph = workload_graph(row)
    assert block_loop_vars(graph) == {"conv2d_nchw": ["nn", "ff"], "T_add": ["nn", "ff"]}
    assert workload_graph(["1", "not base64!"]) is None and workload_graph("x") is None


def test_axes_named_by_the_source_layout():
    text = 'lv4 = R.nn.conv2d(lv3, w, data_layout="NCHW", kernel_layout="OIHW")\nlv6 = R.add(lv4, b)\n'
    assert layout_of(text, 0) == "NCHW" and layout_of(text, 1) is None and layout_of(text, 9) is None
    assert named_axes(["nn", "ff", "yy", "xx", "rc", "ry", "rx"], "NCHW") == ["n", "c", "h", "w", "rc", "ry", "rx"]
    assert named_axes(["i0", "i1"], "NCHW") == ["i0", "i1"]          # fewer loops than letters: the kernel's names
    assert named_axes(["ax0", "ax1"], None) == ["ax0", "ax1"]
