"""Matching and hotspots on graphs recorded from the real worker (no TVM here).

RECORDED holds what ``asight_lsp.worker.graphs`` produced for: the best MetaSchedule record of a
128x128 matmul+bias+relu (bias_add inlined into relu by AutoInline, relu computed at matmul's
loops), a softmax record with both reductions rfactored, a conv2d record with a cache_write, and
the Relax CNN fixture.  Regenerate with ``tir_graph``/``relax_graph`` if the graph format changes.
"""
from __future__ import annotations

import copy
import json

import pytest

from asight_lsp.analysis import matching
from asight_lsp.analysis.hotspot_ranking import relax_hotspots, tir_hotspots

RECORDED = json.loads(r"""
{
"mbr_inline": {
  "source": {
    "kind": "tir",
    "nodes": [
      {"id":"param:A","kind":"param","name":"A","shape":[128,128],"dtype":"float32"},
      {"id":"param:B","kind":"param","name":"B","shape":[128,128],"dtype":"float32"},
      {"id":"param:bias","kind":"param","name":"bias","shape":[128],"dtype":"float32"},
      {"id":"matmul","kind":"block","name":"matmul","stage":0,"iter_kinds":"SSR","extents":[128,128,128],"ops":{"add":1,"mul":1},"op_mix":"add+mul","loads":3,"writes":[{"name":"C","shape":[128,128],"dtype":"float32","scope":"global"}],"reads":["A","B"],"init":true,"flops":4194304,"store_lines":[21],"init_lines":[20],"realize_lines":[17,21]},
      {"id":"bias_add","kind":"block","name":"bias_add","stage":1,"iter_kinds":"SS","extents":[128,128],"ops":{"add":1},"op_mix":"add","loads":2,"writes":[{"name":"E","shape":[128,128],"dtype":"float32","scope":"global"}],"reads":["C","bias"],"init":false,"flops":16384,"store_lines":[26],"init_lines":[],"realize_lines":[24,26]},
      {"id":"relu","kind":"block","name":"relu","stage":2,"iter_kinds":"SS","extents":[128,128],"ops":{"max":1},"op_mix":"max","loads":1,"writes":[{"name":"D","shape":[128,128],"dtype":"float32","scope":"global"}],"reads":["E"],"init":false,"flops":16384,"store_lines":[30],"init_lines":[],"realize_lines":[28,30]}
    ],
    "edges": [
      {"src":"param:A","dst":"matmul","buffer":"A"},
      {"src":"param:B","dst":"matmul","buffer":"B"},
      {"src":"matmul","dst":"bias_add","buffer":"C"},
      {"src":"param:bias","dst":"bias_add","buffer":"bias"},
      {"src":"bias_add","dst":"relu","buffer":"E"}
    ],
    "buffers": {"A":{"name":"A","shape":[128,128],"dtype":"float32","scope":"global","kind":"param"},"B":{"name":"B","shape":[128,128],"dtype":"float32","scope":"global","kind":"param"},"bias":{"name":"bias","shape":[128],"dtype":"float32","scope":"global","kind":"param"},"D":{"name":"D","shape":[128,128],"dtype":"float32","scope":"global","kind":"param"},"C":{"name":"C","shape":[128,128],"dtype":"float32","scope":"global","kind":"alloc"},"E":{"name":"E","shape":[128,128],"dtype":"float32","scope":"global","kind":"alloc"}},
    "outputs": ["D"],
    "stages": 3
  },
  "transformed": {
    "kind": "tir",
    "nodes": [
      {"id":"param:A","kind":"param","name":"A","shape":[128,128],"dtype":"float32"},
      {"id":"param:B","kind":"param","name":"B","shape":[128,128],"dtype":"float32"},
      {"id":"param:bias","kind":"param","name":"bias","shape":[128],"dtype":"float32"},
      {"id":"matmul_init","kind":"block","name":"matmul_init","stage":0,"iter_kinds":"SS","extents":[128,128],"ops":{},"op_mix":"const","loads":0,"writes":[{"name":"C","shape":[128,128],"dtype":"float32","scope":"global"}],"reads":[],"init":false,"flops":0,"store_lines":[20],"init_lines":[],"realize_lines":null},
      {"id":"matmul_update","kind":"block","name":"matmul_update","stage":0,"iter_kinds":"SSR","extents":[128,128,128],"ops":{"add":1,"mul":1},"op_mix":"add+mul","loads":3,"writes":[{"name":"C","shape":[128,128],"dtype":"float32","scope":"global"}],"reads":["A","B"],"init":false,"flops":4194304,"store_lines":[21],"init_lines":[],"realize_lines":[17,21]},
      {"id":"relu","kind":"block","name":"relu","stage":1,"iter_kinds":"SS","extents":[128,128],"ops":{"add":1,"max":1},"op_mix":"add+max","loads":2,"writes":[{"name":"D","shape":[128,128],"dtype":"float32","scope":"global"}],"reads":["C","bias"],"init":false,"flops":32768,"store_lines":[30],"init_lines":[],"realize_lines":[28,30]}
    ],
    "edges": [
      {"src":"param:A","dst":"matmul_update","buffer":"A"},
      {"src":"param:B","dst":"matmul_update","buffer":"B"},
      {"src":"matmul_init","dst":"relu","buffer":"C"},
      {"src":"matmul_update","dst":"relu","buffer":"C"},
      {"src":"param:bias","dst":"relu","buffer":"bias"}
    ],
    "buffers": {"A":{"name":"A","shape":[128,128],"dtype":"float32","scope":"global","kind":"param"},"B":{"name":"B","shape":[128,128],"dtype":"float32","scope":"global","kind":"param"},"bias":{"name":"bias","shape":[128],"dtype":"float32","scope":"global","kind":"param"},"D":{"name":"D","shape":[128,128],"dtype":"float32","scope":"global","kind":"param"},"C":{"name":"C","shape":[128,128],"dtype":"float32","scope":"global","kind":"alloc"}},
    "outputs": ["D"],
    "stages": 2
  }
},
"softmax_rfactor": {
  "source": {
    "kind": "tir",
    "nodes": [
      {"id":"param:A","kind":"param","name":"A","shape":[256,256],"dtype":"float32"},
      {"id":"row_max","kind":"block","name":"row_max","stage":0,"iter_kinds":"SR","extents":[256,256],"ops":{"max":1},"op_mix":"max","loads":2,"writes":[{"name":"row_max","shape":[256],"dtype":"float32","scope":"global"}],"reads":["A"],"init":true,"flops":65536,"store_lines":[15],"init_lines":[14],"realize_lines":[11,15]},
      {"id":"exp_sum","kind":"block","name":"exp_sum","stage":1,"iter_kinds":"SR","extents":[256,256],"ops":{"add":1,"exp":1,"sub":1},"op_mix":"add+exp+sub","loads":3,"writes":[{"name":"exp_sum","shape":[256],"dtype":"float32","scope":"global"}],"reads":["A","row_max"],"init":true,"flops":196608,"store_lines":[21],"init_lines":[20],"realize_lines":[17,21]},
      {"id":"normalize","kind":"block","name":"normalize","stage":2,"iter_kinds":"SS","extents":[256,256],"ops":{"div":1,"exp":1,"sub":1},"op_mix":"div+exp+sub","loads":3,"writes":[{"name":"S","shape":[256,256],"dtype":"float32","scope":"global"}],"reads":["A","row_max","exp_sum"],"init":false,"flops":196608,"store_lines":[25],"init_lines":[],"realize_lines":[23,25]}
    ],
    "edges": [
      {"src":"param:A","dst":"row_max","buffer":"A"},
      {"src":"param:A","dst":"exp_sum","buffer":"A"},
      {"src":"row_max","dst":"exp_sum","buffer":"row_max"},
      {"src":"param:A","dst":"normalize","buffer":"A"},
      {"src":"row_max","dst":"normalize","buffer":"row_max"},
      {"src":"exp_sum","dst":"normalize","buffer":"exp_sum"}
    ],
    "buffers": {"A":{"name":"A","shape":[256,256],"dtype":"float32","scope":"global","kind":"param"},"S":{"name":"S","shape":[256,256],"dtype":"float32","scope":"global","kind":"param"},"row_max":{"name":"row_max","shape":[256],"dtype":"float32","scope":"global","kind":"alloc"},"exp_sum":{"name":"exp_sum","shape":[256],"dtype":"float32","scope":"global","kind":"alloc"}},
    "outputs": ["S"],
    "stages": 3
  },
  "transformed": {
    "kind": "tir",
    "nodes": [
      {"id":"param:A","kind":"param","name":"A","shape":[256,256],"dtype":"float32"},
      {"id":"row_max_rf_init","kind":"block","name":"row_max_rf_init","stage":0,"iter_kinds":"SS","extents":[128,256],"ops":{},"op_mix":"const","loads":0,"writes":[{"name":"row_max.rf","shape":[256,128],"dtype":"float32","scope":"global"}],"reads":[],"init":false,"flops":0,"store_lines":[],"init_lines":[],"realize_lines":null},
      {"id":"row_max_rf_update","kind":"block","name":"row_max_rf_update","stage":0,"iter_kinds":"SSR","extents":[128,256,2],"ops":{"max":1},"op_mix":"max","loads":2,"writes":[{"name":"row_max.rf","shape":[256,128],"dtype":"float32","scope":"global"}],"reads":["A"],"init":false,"flops":65536,"store_lines":[],"init_lines":[],"realize_lines":null},
      {"id":"row_max_init","kind":"block","name":"row_max_init","stage":1,"iter_kinds":"S","extents":[256],"ops":{},"op_mix":"const","loads":0,"writes":[{"name":"row_max","shape":[256],"dtype":"float32","scope":"global"}],"reads":[],"init":false,"flops":0,"store_lines":[],"init_lines":[],"realize_lines":null},
      {"id":"row_max_update","kind":"block","name":"row_max_update","stage":1,"iter_kinds":"RS","extents":[128,256],"ops":{"max":1},"op_mix":"max","loads":2,"writes":[{"name":"row_max","shape":[256],"dtype":"float32","scope":"global"}],"reads":["row_max.rf"],"init":false,"flops":32768,"store_lines":[],"init_lines":[],"realize_lines":null},
      {"id":"exp_sum_rf_init","kind":"block","name":"exp_sum_rf_init","stage":2,"iter_kinds":"SS","extents":[1,256],"ops":{},"op_mix":"const","loads":0,"writes":[{"name":"exp_sum.rf","shape":[256,1],"dtype":"float32","scope":"global"}],"reads":[],"init":false,"flops":0,"store_lines":[],"init_lines":[],"realize_lines":null},
      {"id":"exp_sum_rf_update","kind":"block","name":"exp_sum_rf_update","stage":2,"iter_kinds":"SSR","extents":[1,256,256],"ops":{"add":1,"exp":1,"sub":1},"op_mix":"add+exp+sub","loads":3,"writes":[{"name":"exp_sum.rf","shape":[256,1],"dtype":"float32","scope":"global"}],"reads":["A","row_max"],"init":false,"flops":196608,"store_lines":[],"init_lines":[],"realize_lines":null},
      {"id":"exp_sum_init","kind":"block","name":"exp_sum_init","stage":2,"iter_kinds":"S","extents":[256],"ops":{},"op_mix":"const","loads":0,"writes":[{"name":"exp_sum","shape":[256],"dtype":"float32","scope":"global"}],"reads":[],"init":false,"flops":0,"store_lines":[],"init_lines":[],"realize_lines":null},
      {"id":"exp_sum_update","kind":"block","name":"exp_sum_update","stage":2,"iter_kinds":"RS","extents":[1,256],"ops":{"add":1},"op_mix":"add","loads":2,"writes":[{"name":"exp_sum","shape":[256],"dtype":"float32","scope":"global"}],"reads":["exp_sum.rf"],"init":false,"flops":256,"store_lines":[],"init_lines":[],"realize_lines":null},
      {"id":"normalize","kind":"block","name":"normalize","stage":3,"iter_kinds":"SS","extents":[256,256],"ops":{"div":1,"exp":1,"sub":1},"op_mix":"div+exp+sub","loads":3,"writes":[{"name":"S","shape":[256,256],"dtype":"float32","scope":"global"}],"reads":["A","row_max","exp_sum"],"init":false,"flops":196608,"store_lines":[25],"init_lines":[],"realize_lines":[23,25]}
    ],
    "edges": [
      {"src":"param:A","dst":"row_max_rf_update","buffer":"A"},
      {"src":"row_max_rf_init","dst":"row_max_update","buffer":"row_max.rf"},
      {"src":"row_max_rf_update","dst":"row_max_update","buffer":"row_max.rf"},
      {"src":"param:A","dst":"exp_sum_rf_update","buffer":"A"},
      {"src":"row_max_init","dst":"exp_sum_rf_update","buffer":"row_max"},
      {"src":"row_max_update","dst":"exp_sum_rf_update","buffer":"row_max"},
      {"src":"exp_sum_rf_init","dst":"exp_sum_update","buffer":"exp_sum.rf"},
      {"src":"exp_sum_rf_update","dst":"exp_sum_update","buffer":"exp_sum.rf"},
      {"src":"param:A","dst":"normalize","buffer":"A"},
      {"src":"row_max_init","dst":"normalize","buffer":"row_max"},
      {"src":"row_max_update","dst":"normalize","buffer":"row_max"},
      {"src":"exp_sum_init","dst":"normalize","buffer":"exp_sum"},
      {"src":"exp_sum_update","dst":"normalize","buffer":"exp_sum"}
    ],
    "buffers": {"A":{"name":"A","shape":[256,256],"dtype":"float32","scope":"global","kind":"param"},"S":{"name":"S","shape":[256,256],"dtype":"float32","scope":"global","kind":"param"},"row_max.rf":{"name":"row_max.rf","shape":[256,128],"dtype":"float32","scope":"global","kind":"alloc"},"row_max":{"name":"row_max","shape":[256],"dtype":"float32","scope":"global","kind":"alloc"},"exp_sum.rf":{"name":"exp_sum.rf","shape":[256,1],"dtype":"float32","scope":"global","kind":"alloc"},"exp_sum":{"name":"exp_sum","shape":[256],"dtype":"float32","scope":"global","kind":"alloc"}},
    "outputs": ["S"],
    "stages": 4
  }
},
"conv_cache_write": {
  "source": {
    "kind": "tir",
    "nodes": [
      {"id":"param:X","kind":"param","name":"X","shape":[1,14,14,16],"dtype":"float32"},
      {"id":"param:W","kind":"param","name":"W","shape":[3,3,16,32],"dtype":"float32"},
      {"id":"pad","kind":"block","name":"pad","stage":0,"iter_kinds":"SSSS","extents":[1,16,16,16],"ops":{"select":1},"op_mix":"select","loads":1,"writes":[{"name":"pad","shape":[1,16,16,16],"dtype":"float32","scope":"global"}],"reads":["X"],"init":false,"flops":4096,"store_lines":[13],"init_lines":[],"realize_lines":[11,14]},
      {"id":"conv","kind":"block","name":"conv","stage":1,"iter_kinds":"SSSSRRR","extents":[1,14,14,32,3,3,16],"ops":{"add":1,"mul":1},"op_mix":"add+mul","loads":3,"writes":[{"name":"Y","shape":[1,14,14,32],"dtype":"float32","scope":"global"}],"reads":["pad","W"],"init":true,"flops":1806336,"store_lines":[20],"init_lines":[19],"realize_lines":[16,20]}
    ],
    "edges": [
      {"src":"param:X","dst":"pad","buffer":"X"},
      {"src":"pad","dst":"conv","buffer":"pad"},
      {"src":"param:W","dst":"conv","buffer":"W"}
    ],
    "buffers": {"X":{"name":"X","shape":[1,14,14,16],"dtype":"float32","scope":"global","kind":"param"},"W":{"name":"W","shape":[3,3,16,32],"dtype":"float32","scope":"global","kind":"param"},"Y":{"name":"Y","shape":[1,14,14,32],"dtype":"float32","scope":"global","kind":"param"},"pad":{"name":"pad","shape":[1,16,16,16],"dtype":"float32","scope":"global","kind":"alloc"}},
    "outputs": ["Y"],
    "stages": 2
  },
  "transformed": {
    "kind": "tir",
    "nodes": [
      {"id":"param:X","kind":"param","name":"X","shape":[1,14,14,16],"dtype":"float32"},
      {"id":"param:W","kind":"param","name":"W","shape":[3,3,16,32],"dtype":"float32"},
      {"id":"pad","kind":"block","name":"pad","stage":0,"iter_kinds":"SSSS","extents":[1,16,16,16],"ops":{"select":1},"op_mix":"select","loads":1,"writes":[{"name":"pad","shape":[1,16,16,16],"dtype":"float32","scope":"global"}],"reads":["X"],"init":false,"flops":4096,"store_lines":[13],"init_lines":[],"realize_lines":[11,14]},
      {"id":"conv_init","kind":"block","name":"conv_init","stage":1,"iter_kinds":"SSSS","extents":[1,14,14,32],"ops":{},"op_mix":"const","loads":0,"writes":[{"name":"Y_global","shape":[1,14,14,32],"dtype":"float32","scope":"global"}],"reads":[],"init":false,"flops":0,"store_lines":[19],"init_lines":[],"realize_lines":null},
      {"id":"conv_update","kind":"block","name":"conv_update","stage":1,"iter_kinds":"SSSSRRR","extents":[1,14,14,32,3,3,16],"ops":{"add":1,"mul":1},"op_mix":"add+mul","loads":3,"writes":[{"name":"Y_global","shape":[1,14,14,32],"dtype":"float32","scope":"global"}],"reads":["pad","W"],"init":false,"flops":1806336,"store_lines":[20],"init_lines":[],"realize_lines":[16,20]},
      {"id":"Y_global","kind":"block","name":"Y_global","stage":1,"iter_kinds":"SSSS","extents":[1,14,14,32],"ops":{},"op_mix":"copy","loads":1,"writes":[{"name":"Y","shape":[1,14,14,32],"dtype":"float32","scope":"global"}],"reads":["Y_global"],"init":false,"flops":0,"store_lines":[],"init_lines":[],"realize_lines":null}
    ],
    "edges": [
      {"src":"param:X","dst":"pad","buffer":"X"},
      {"src":"pad","dst":"conv_update","buffer":"pad"},
      {"src":"param:W","dst":"conv_update","buffer":"W"},
      {"src":"conv_init","dst":"Y_global","buffer":"Y_global"},
      {"src":"conv_update","dst":"Y_global","buffer":"Y_global"}
    ],
    "buffers": {"X":{"name":"X","shape":[1,14,14,16],"dtype":"float32","scope":"global","kind":"param"},"W":{"name":"W","shape":[3,3,16,32],"dtype":"float32","scope":"global","kind":"param"},"Y":{"name":"Y","shape":[1,14,14,32],"dtype":"float32","scope":"global","kind":"param"},"pad":{"name":"pad","shape":[1,16,16,16],"dtype":"float32","scope":"global","kind":"alloc"},"Y_global":{"name":"Y_global","shape":[1,14,14,32],"dtype":"float32","scope":"global","kind":"alloc"}},
    "outputs": ["Y"],
    "stages": 2
  }
},
"relax_cnn": {
  "source": {
    "kind": "relax",
    "function": "main",
    "nodes": [
      {"id":"param:x","kind":"param","name":"x","shape":[1,16,32,32],"dtype":"float32"},
      {"id":"param:w1","kind":"param","name":"w1","shape":[16,16,3,3],"dtype":"float32"},
      {"id":"param:w2","kind":"param","name":"w2","shape":[16,16,3,3],"dtype":"float32"},
      {"id":"param:w3","kind":"param","name":"w3","shape":[16,10],"dtype":"float32"},
      {"id":"param:b3","kind":"param","name":"b3","shape":[10],"dtype":"float32"},
      {"id":"c1","kind":"binding","name":"c1","op":"relax.nn.conv2d","op_label":"conv2d","legal_op":"conv2d","pattern":4,"shape":[1,16,32,32],"dtype":"float32","flops":4737088,"lines":[15,15]},
      {"id":"r1","kind":"binding","name":"r1","op":"relax.nn.relu","op_label":"relu","legal_op":"relu","pattern":0,"shape":[1,16,32,32],"dtype":"float32","flops":16384,"lines":[16,16]},
      {"id":"c2","kind":"binding","name":"c2","op":"relax.nn.conv2d","op_label":"conv2d","legal_op":"conv2d","pattern":4,"shape":[1,16,32,32],"dtype":"float32","flops":4737088,"lines":[17,17]},
      {"id":"s","kind":"binding","name":"s","op":"relax.add","op_label":"add","legal_op":"add","pattern":0,"shape":[1,16,32,32],"dtype":"float32","flops":16384,"lines":[18,18]},
      {"id":"r2","kind":"binding","name":"r2","op":"relax.nn.relu","op_label":"relu","legal_op":"relu","pattern":0,"shape":[1,16,32,32],"dtype":"float32","flops":16384,"lines":[19,19]},
      {"id":"p","kind":"binding","name":"p","op":"relax.mean","op_label":"mean","legal_op":"mean","pattern":4,"shape":[1,16],"dtype":"float32","flops":16400,"lines":[20,20]},
      {"id":"d","kind":"binding","name":"d","op":"relax.matmul","op_label":"matmul","legal_op":"matmul","pattern":4,"shape":[1,10],"dtype":"float32","flops":320,"lines":[21,21]},
      {"id":"out","kind":"binding","name":"out","op":"relax.add","op_label":"add","legal_op":"add","pattern":0,"shape":[1,10],"dtype":"float32","flops":10,"lines":[22,22]}
    ],
    "edges": [
      {"src":"param:x","dst":"c1"},
      {"src":"param:w1","dst":"c1"},
      {"src":"c1","dst":"r1"},
      {"src":"r1","dst":"c2"},
      {"src":"param:w2","dst":"c2"},
      {"src":"c2","dst":"s"},
      {"src":"param:x","dst":"s"},
      {"src":"s","dst":"r2"},
      {"src":"r2","dst":"p"},
      {"src":"p","dst":"d"},
      {"src":"param:w3","dst":"d"},
      {"src":"d","dst":"out"},
      {"src":"param:b3","dst":"out"}
    ]
  },
  "transformed": {
    "kind": "relax",
    "function": "main",
    "nodes": [
      {"id":"param:x","kind":"param","name":"x","shape":[1,16,32,32],"dtype":"float32"},
      {"id":"param:w1","kind":"param","name":"w1","shape":[16,16,3,3],"dtype":"float32"},
      {"id":"param:w2","kind":"param","name":"w2","shape":[16,16,3,3],"dtype":"float32"},
      {"id":"param:w3","kind":"param","name":"w3","shape":[16,10],"dtype":"float32"},
      {"id":"param:b3","kind":"param","name":"b3","shape":[10],"dtype":"float32"},
      {"id":"0/c1","kind":"call","name":"c1","site":0,"function":"fused_conv2d_relu","op":"conv2d","op_label":"conv2d","pattern":4,"shape":[1,16,32,32],"dtype":"float32","flops":4737088},
      {"id":"0/gv","kind":"call","name":"gv","site":0,"function":"fused_conv2d_relu","op":"relu","op_label":"relu","pattern":0,"shape":[1,16,32,32],"dtype":"float32","flops":16384},
      {"id":"1/c2","kind":"call","name":"c2","site":1,"function":"fused_conv2d_add_relu","op":"conv2d","op_label":"conv2d","pattern":4,"shape":[1,16,32,32],"dtype":"float32","flops":4737088},
      {"id":"1/s","kind":"call","name":"s","site":1,"function":"fused_conv2d_add_relu","op":"add","op_label":"add","pattern":0,"shape":[1,16,32,32],"dtype":"float32","flops":16384},
      {"id":"1/gv","kind":"call","name":"gv","site":1,"function":"fused_conv2d_add_relu","op":"relu","op_label":"relu","pattern":0,"shape":[1,16,32,32],"dtype":"float32","flops":16384},
      {"id":"2/p","kind":"call","name":"p","site":2,"function":"mean","op":"mean","op_label":"mean","pattern":4,"shape":[1,16],"dtype":"float32","flops":16400},
      {"id":"3/d","kind":"call","name":"d","site":3,"function":"fused_matmul_add1","op":"matmul","op_label":"matmul","pattern":4,"shape":[1,10],"dtype":"float32","flops":320},
      {"id":"3/gv","kind":"call","name":"gv","site":3,"function":"fused_matmul_add1","op":"add1","op_label":"add","pattern":0,"shape":[1,10],"dtype":"float32","flops":10}
    ],
    "edges": [
      {"src":"param:x","dst":"0/c1"},
      {"src":"param:w1","dst":"0/c1"},
      {"src":"0/c1","dst":"0/gv"},
      {"src":"0/gv","dst":"1/c2"},
      {"src":"param:w2","dst":"1/c2"},
      {"src":"1/c2","dst":"1/s"},
      {"src":"param:x","dst":"1/s"},
      {"src":"1/s","dst":"1/gv"},
      {"src":"1/gv","dst":"2/p"},
      {"src":"2/p","dst":"3/d"},
      {"src":"param:w3","dst":"3/d"},
      {"src":"3/d","dst":"3/gv"},
      {"src":"param:b3","dst":"3/gv"}
    ],
    "sites": [
      {"site":0,"function":"fused_conv2d_relu","var":"lv","nodes":["0/c1","0/gv"],"flops":4753472},
      {"site":1,"function":"fused_conv2d_add_relu","var":"lv1","nodes":["1/c2","1/s","1/gv"],"flops":4769856},
      {"site":2,"function":"mean","var":"p","nodes":["2/p"],"flops":16400},
      {"site":3,"function":"fused_matmul_add1","var":"gv","nodes":["3/d","3/gv"],"flops":330}
    ]
  }
}
}
""")


def _mapping(result: dict) -> dict:
    return {b: (sorted(v["source"]), v["role"]) for b, v in result["transformed"].items()}


def scrambled(graph: dict) -> dict:
    """The transformed graph with every block and intermediate buffer renamed and spans dropped:
    only structure and labels are left."""
    g = copy.deepcopy(graph)
    params = {n["name"] for n in g["nodes"] if n["kind"] == "param"} | set(g.get("outputs") or [])
    buffers = {}

    def rename(buf):
        if buf in params:
            return buf
        return buffers.setdefault(buf, f"buf{len(buffers)}")
    blocks = {}
    for n in g["nodes"]:
        if n["kind"] != "block":
            continue
        blocks[n["id"]] = f"blk{len(blocks)}"
        n["id"] = n["name"] = blocks[n["id"]]
        n["store_lines"], n["realize_lines"] = [], None
        n["reads"] = [rename(b) for b in n["reads"]]
        for w in n["writes"]:
            w["name"] = rename(w["name"])
    for e in g["edges"]:
        e["src"], e["dst"] = blocks.get(e["src"], e["src"]), blocks.get(e["dst"], e["dst"])
    g["renamed"] = blocks
    return g


# --------------------------------------------------------------------------- TIR


def test_inlined_epilogue_of_a_tuned_matmul():
    case = RECORDED["mbr_inline"]
    result = matching.match_tir(case["source"], case["transformed"])
    assert _mapping(result) == {"matmul_init": (["matmul"], "init"), "matmul_update": (["matmul"], "compute"),
                                "relu": (["bias_add", "relu"], "compute")}
    assert result["source"]["bias_add"]["inlined_into"] == "relu"
    assert result["inlined"] == [{"block": "bias_add", "how": "compute_inline", "into": "relu"}]
    assert result["source"]["matmul"]["match"] == matching.GRAPH
    assert "span: store line 21" in result["source"]["matmul"]["evidence"]


@pytest.mark.parametrize("case, expected", [
    ("mbr_inline", {"matmul_init": (["matmul"], "init"), "matmul_update": (["matmul"], "compute"),
                    "relu": (["bias_add", "relu"], "compute")}),
    ("softmax_rfactor", {"row_max_rf_init": (["row_max"], "init"), "row_max_rf_update": (["row_max"], "rfactor"),
                         "row_max_init": (["row_max"], "init"), "row_max_update": (["row_max"], "compute"),
                         "exp_sum_rf_init": (["exp_sum"], "init"), "exp_sum_rf_update": (["exp_sum"], "rfactor"),
                         "exp_sum_init": (["exp_sum"], "init"), "exp_sum_update": (["exp_sum"], "compute"),
                         "normalize": (["normalize"], "compute")}),
    ("conv_cache_write", {"pad": (["pad"], "compute"), "conv_init": (["conv"], "init"),
                          "conv_update": (["conv"], "compute"), "Y_global": (["conv"], "cache_write")}),
])
def test_structure_alone_recovers_the_mapping(case, expected):
    """Names and spans removed from the tuned program: the same answer from labels and edges."""
    data = RECORDED[case]
    plain = matching.match_tir(data["source"], data["transformed"])
    assert _mapping(plain) == expected
    blind = scrambled(data["transformed"])
    result = matching.match_tir(data["source"], blind)
    assert result["method"] == "isomorphism" and result["unmatched"] == []
    back = {new: old for old, new in blind["renamed"].items()}
    assert {back[b]: v for b, v in _mapping(result).items()} == expected


def test_unexplained_block_falls_back_per_block():
    data = copy.deepcopy(RECORDED["conv_cache_write"])
    stray = {"id": "mystery", "kind": "block", "name": "mystery", "stage": 3, "iter_kinds": "SSSS",
             "extents": [1, 7, 7, 32], "ops": {"exp": 1}, "op_mix": "exp", "loads": 1,
             "writes": [{"name": "Z", "shape": [1, 7, 7, 32], "dtype": "float32", "scope": "global"}],
             "reads": ["Y"], "init": False, "flops": 1568, "store_lines": [], "init_lines": [], "realize_lines": None}
    data["transformed"]["nodes"].append(stray)
    data["transformed"]["edges"].append({"src": "Y_global", "dst": "mystery", "buffer": "Y"})
    result = matching.match_tir(data["source"], data["transformed"])
    assert result["method"] == "per-block"
    assert result["unmatched"] == ["mystery"]
    assert result["transformed"]["conv_update"]["source"] == ["conv"]
    assert result["transformed"]["pad"]["source"] == ["pad"]
    assert result["source"]["conv"]["match"] in (matching.LABEL, matching.NAME)


def test_tir_hotspots_split_fused_stage_by_flops():
    data = RECORDED["mbr_inline"]
    result = matching.match_tir(data["source"], data["transformed"])
    stages = [{"index": 0, "us": 100.0, "blocks": [{"name": "matmul_init"}, {"name": "matmul_update"}]},
              {"index": 1, "us": 10.0, "blocks": ["relu"]}]
    hot = tir_hotspots(data["source"], result, stages)
    by = {e["id"]: e for e in hot["entries"]}
    assert [e["id"] for e in hot["entries"]][0] == "matmul"
    assert by["matmul"]["us"] == pytest.approx(100.0) and by["matmul"]["split"] == "whole"
    # relu and the bias_add inlined into it have equal FLOPs (128*128 each): an even split
    assert by["relu"]["us"] == pytest.approx(5.0) and by["bias_add"]["us"] == pytest.approx(5.0)
    assert by["relu"]["split"] == "flops" and by["bias_add"]["shared_with"] == ["relu"]
    assert sum(e["share"] for e in hot["entries"]) == pytest.approx(1.0)
    assert hot["unattributed"] == []
    assert "FLOPs" in hot["split_rule"]


def test_tir_hotspots_keeps_unknown_stage_time_visible():
    data = RECORDED["conv_cache_write"]
    result = matching.match_tir(data["source"], data["transformed"])
    stages = [{"index": 0, "us": 3.0, "blocks": ["pad"]},
              {"index": 1, "us": 50.0, "blocks": ["conv_init", "conv_update", "Y_global"]},
              {"index": 2, "us": 1.0, "blocks": ["not_in_this_program"]}]
    hot = tir_hotspots(data["source"], result, stages, total_us=60.0)
    by = {e["id"]: e for e in hot["entries"]}
    assert by["conv"]["us"] == pytest.approx(50.0) and by["pad"]["us"] == pytest.approx(3.0)
    assert by["conv"]["share"] == pytest.approx(50 / 60)
    assert hot["unattributed"] == [{"stage": 2, "us": 1.0, "blocks": ["not_in_this_program"]}]
    assert {t["role"] for t in by["conv"]["transformed"]} == {"compute", "init", "cache_write"}


# --------------------------------------------------------------------------- Relax


def test_relax_sites_and_hotspots():
    data = RECORDED["relax_cnn"]
    result = matching.match_relax(data["source"], data["transformed"])
    assert [s["bindings"] for s in result["sites"]] == [["c1", "r1"], ["c2", "s", "r2"], ["p"], ["d", "out"]]
    calls = [{"task": "fused_conv2d_relu", "call": 0, "us": 36.0},
             {"task": "fused_conv2d_add_relu", "call": 0, "us": 44.0},
             {"task": "mean", "call": 0, "us": 3.3}, {"task": "fused_matmul_add1", "call": 0, "us": 1.5}]
    hot = relax_hotspots(data["source"], data["transformed"], result, calls)
    by = {e["id"]: e for e in hot["entries"]}
    conv_flops, relu_flops = 4737088, 16384
    assert by["c1"]["us"] == pytest.approx(36.0 * conv_flops / (conv_flops + relu_flops))
    assert by["c2"]["us"] > by["c1"]["us"] > by["p"]["us"]
    assert by["r1"]["calls"] == ["fused_conv2d_relu#0"] and by["r1"]["split"] == "flops"
    assert by["p"]["split"] == "whole" and by["p"]["lines"] == [20, 20]
    assert hot["total_us"] == pytest.approx(84.8)


def test_relax_call_of_an_unknown_kernel_is_reported():
    data = RECORDED["relax_cnn"]
    result = matching.match_relax(data["source"], data["transformed"])
    hot = relax_hotspots(data["source"], data["transformed"], result,
                         [{"task": "fused_conv2d_relu", "call": 1, "us": 5.0}])
    assert hot["unattributed"] == [{"task": "fused_conv2d_relu", "call": 1, "us": 5.0}]
    assert all(e["us"] == 0 for e in hot["entries"])
