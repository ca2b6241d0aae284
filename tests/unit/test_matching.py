"""The matcher on small hand-built graphs (TVM-free): each normalisation rule and each fallback."""
from __future__ import annotations

import pytest

from asight_lsp.analysis import matching


def block(bid, iters, ops, writes, shape, reads=(), loads=None, lines=(), name=None, dtype="float32"):
    ops = dict.fromkeys(ops, 1) if not isinstance(ops, dict) else ops
    return {"id": bid, "kind": "block", "name": name or bid, "iter_kinds": iters, "ops": ops,
            "loads": len(reads) + (1 if "R" in iters else 0) if loads is None else loads,
            "writes": [{"name": writes, "shape": list(shape), "dtype": dtype, "scope": "global"}],
            "reads": list(reads), "store_lines": list(lines), "flops": 0}


def tir(*blocks, params=None):
    """A graph in block_graph's format: producer -> consumer edges through buffers, inputs as params."""
    params = params or {}
    writers = {}
    for b in blocks:
        writers.setdefault(b["writes"][0]["name"], []).append(b["id"])
    nodes, edges, seen = [], [], set()
    for b in blocks:
        for buf in b["reads"]:
            if buf in writers:
                edges += [{"src": w, "dst": b["id"], "buffer": buf} for w in writers[buf] if w != b["id"]]
            else:
                if buf not in seen:
                    seen.add(buf)
                    nodes.append({"id": f"param:{buf}", "kind": "param", "name": buf,
                                  "shape": list(params.get(buf, (64, 64))), "dtype": "float32"})
                edges.append({"src": f"param:{buf}", "dst": b["id"], "buffer": buf})
    buffers = {w["name"]: w for b in blocks for w in b["writes"]}
    buffers.update({n["name"]: n for n in nodes})
    return {"kind": "tir", "nodes": nodes + list(blocks), "edges": edges, "buffers": buffers}


def mapping(result):
    return {b: (sorted(v["source"]), v["role"]) for b, v in result["transformed"].items()}


MATMUL = block("C", "SSR", ["add", "mul"], "C", (64, 64), ["A", "B"], lines=[12])


@pytest.mark.parametrize("name, base", [("C_update", "C"), ("C_init", "C"), ("row_max.rf", "row_max"),
                                        ("row_max_rf_update", "row_max"), ("A_shared_local", "A"),
                                        ("Y_global", "Y"), ("relu", "relu")])
def test_base_name(name, base):
    assert matching.base_name(name) == base


def test_init_is_found_by_structure_not_name():
    source = tir(MATMUL)
    transformed = tir(block("b7", "SS", [], "C", (64, 64), [], loads=0),
                      block("b3", "SSR", ["add", "mul"], "C", (64, 64), ["A", "B"]))
    result = matching.match_tir(source, transformed)
    assert mapping(result) == {"b7": (["C"], "init"), "b3": (["C"], "compute")}
    assert result["source"]["C"]["match"] == matching.GRAPH


def test_a_copy_written_in_the_source_is_not_folded():
    source = tir(block("cp", "SS", [], "B", (64, 64), ["A"]), block("sq", "SS", ["mul"], "D", (64, 64), ["B"]))
    result = matching.match_tir(source, source)
    assert mapping(result) == {"cp": (["cp"], "compute"), "sq": (["sq"], "compute")}


def test_chained_cache_reads_serve_their_consumer():
    source = tir(MATMUL)
    transformed = tir(block("A_shared", "SS", [], "A_shared", (64, 64), ["A"]),
                      block("A_shared_local", "SS", [], "A_shared_local", (64, 64), ["A_shared"]),
                      block("C", "SSR", ["add", "mul"], "C", (64, 64), ["A_shared_local", "B"]))
    result = matching.match_tir(source, transformed)
    assert mapping(result) == {"A_shared": (["C"], "cache_read"), "A_shared_local": (["C"], "cache_read"),
                               "C": (["C"], "compute")}


def test_inline_chain_collapses_into_the_last_block():
    source = tir(block("e1", "SS", ["add"], "B", (64, 64), ["A"]),
                 block("e2", "SS", ["mul"], "C", (64, 64), ["B"]),
                 block("e3", "SS", ["max"], "D", (64, 64), ["C"]))
    transformed = tir(block("e3", "SS", ["add", "mul", "max"], "D", (64, 64), ["A"]))
    result = matching.match_tir(source, transformed)
    assert result["method"] == "isomorphism"
    assert result["transformed"]["e3"]["source"][0] == "e3"
    assert sorted(result["transformed"]["e3"]["source"]) == ["e1", "e2", "e3"]
    assert {i["block"] for i in result["inlined"]} == {"e1", "e2"}
    assert result["source"]["e1"]["inlined_into"] == "e3"


def test_symmetric_blocks_without_evidence_are_flagged_ambiguous():
    source = tir(block("left", "SS", ["mul"], "B1", (64, 64), ["A"]),
                 block("right", "SS", ["mul"], "B2", (64, 64), ["A"]))
    transformed = tir(block("x1", "SS", ["mul"], "B1", (64, 64), ["A"]),
                      block("x2", "SS", ["mul"], "B2", (64, 64), ["A"]))
    result = matching.match_tir(source, transformed)
    assert result["isomorphisms"] == 2 and result["ambiguous"]
    assert result["source"]["left"]["match"] == matching.GRAPH_NAMES
    named = tir(block("left", "SS", ["mul"], "B1", (64, 64), ["A"]),
                block("right", "SS", ["mul"], "B2", (64, 64), ["A"]))
    result = matching.match_tir(source, named)
    assert not result["ambiguous"] and mapping(result)["left"] == (["left"], "compute")


def test_op_mix_and_iterators_must_agree():
    source = tir(MATMUL)
    wrong_ops = tir(block("C", "SSR", ["add", "sub"], "C", (64, 64), ["A", "B"]))
    assert matching.match_tir(source, wrong_ops)["method"] == "per-block"
    wrong_shape = tir(block("C", "SSR", ["add", "mul"], "C", (32, 64), ["A", "B"]))
    result = matching.match_tir(source, wrong_shape)
    assert result["method"] == "per-block" and result["source"]["C"]["match"] == matching.NAME


def test_nothing_in_common_is_unmatched():
    source = tir(MATMUL)
    transformed = tir(block("zz", "SS", ["exp"], "Q", (3, 3), ["P"]), params={"P": (3, 3)})
    result = matching.match_tir(source, transformed)
    assert result["unmatched"] == ["zz"] and result["unmatched_source"] == ["C"]
    assert result["source"]["C"]["match"] == matching.UNMATCHED


# --------------------------------------------------------------------------- Relax


def relax_source(bindings, params=("x",)):
    nodes = [{"id": f"param:{p}", "kind": "param", "name": p, "shape": [1, 8], "dtype": "float32"} for p in params]
    edges = []
    for name, op, args, shape in bindings:
        nodes.append({"id": name, "kind": "binding", "name": name, "op": f"relax.{op}", "op_label": op,
                      "legal_op": op, "pattern": None, "shape": list(shape), "dtype": "float32", "flops": 10,
                      "lines": [1, 1]})
        edges += [{"src": a if not a.startswith("@") else f"param:{a[1:]}", "dst": name} for a in args]
    return {"kind": "relax", "nodes": nodes, "edges": edges}


def relax_tasks(sites, params=("x",)):
    """``sites``: [(function, [(inner name, op, args, shape)])]; args name inner nodes of earlier sites as
    ``site/inner`` and params as ``@x``."""
    nodes = [{"id": f"param:{p}", "kind": "param", "name": p, "shape": [1, 8], "dtype": "float32"} for p in params]
    edges, out = [], []
    for k, (function, inner) in enumerate(sites):
        ids = []
        for name, op, args, shape in inner:
            nid = f"{k}/{name}"
            nodes.append({"id": nid, "kind": "call", "name": name, "site": k, "function": function, "op": op,
                          "op_label": op, "pattern": None, "shape": list(shape), "dtype": "float32", "flops": 10})
            for a in args:
                edges.append({"src": f"param:{a[1:]}" if a.startswith("@") else (a if "/" in a else f"{k}/{a}"),
                              "dst": nid})
            ids.append(nid)
        out.append({"site": k, "function": function, "nodes": ids})
    return {"kind": "relax", "nodes": nodes, "edges": edges, "sites": out}


TWO_BRANCHES = relax_source([("ca", "conv2d", ["@x"], (1, 8)), ("ra", "relu", ["ca"], (1, 8)),
                             ("cb", "conv2d", ["@x"], (1, 8)), ("rb", "relu", ["cb"], (1, 8)),
                             ("out", "add", ["ra", "rb"], (1, 8))])


def test_relax_symmetric_branches_use_names_then_flag_ambiguity():
    def tasks(a, b, c, d):
        return relax_tasks([("fused_conv2d_relu", [(a, "conv2d", ["@x"], (1, 8)), (b, "relu", [a], (1, 8))]),
                            ("fused_conv2d_relu1", [(c, "conv2d", ["@x"], (1, 8)), (d, "relu", [c], (1, 8))]),
                            ("add", [("gv", "add", ["0/" + b, "1/" + d], (1, 8))])])
    named = matching.match_relax(TWO_BRANCHES, tasks("ca", "ra", "cb", "rb"))
    assert [s["bindings"] for s in named["sites"]] == [["ca", "ra"], ["cb", "rb"], ["out"]]
    assert named["sites"][0]["match"] == matching.GRAPH_NAMES
    blind = matching.match_relax(TWO_BRANCHES, tasks("l1", "l2", "l3", "l4"))
    assert sorted(map(tuple, (s["bindings"] for s in blind["sites"][:2]))) == [("ca", "ra"), ("cb", "rb")]
    assert "ambiguous" in blind["sites"][0]["evidence"]
    assert blind["unmatched"] == [] and blind["unmatched_source"] == []


def test_relax_chain_of_identical_blocks_is_placed_by_anchors():
    chain, sites, prev_src, prev_tgt = [], [], "@x", "@x"
    for i in range(6):
        chain += [(f"c{i}", "conv2d", [prev_src], (1, 8)), (f"r{i}", "relu", [f"c{i}"], (1, 8))]
        sites.append((f"fused_conv2d_relu{i}", [("a", "conv2d", [prev_tgt], (1, 8)), ("gv", "relu", ["a"], (1, 8))]))
        prev_src, prev_tgt = f"r{i}", f"{i}/gv"
    result = matching.match_relax(relax_source(chain), relax_tasks(sites))
    assert [s["bindings"] for s in result["sites"]] == [[f"c{i}", f"r{i}"] for i in range(6)]
    assert all(s["match"] == matching.GRAPH for s in result["sites"])


def test_relax_unknown_op_names_fall_back_to_relaxed_labels():
    source = relax_source([("y", "nn.adaptive_avg_pool2d", ["@x"], (1, 4))])
    tasks = relax_tasks([("adaptive_pool", [("y", "adaptive_pool", ["@x"], (1, 4))])])
    result = matching.match_relax(source, tasks)
    assert result["sites"][0]["bindings"] == ["y"] and result["sites"][0]["match"] == matching.GRAPH_RELAXED


def test_relax_names_only_and_unmatched():
    source = relax_source([("y", "relu", ["@x"], (1, 8))])
    renamed_shape = relax_tasks([("relu", [("y", "relu", ["@x"], (2, 8))])])
    result = matching.match_relax(source, renamed_shape)
    assert result["sites"][0]["match"] == matching.NAME and result["sites"][0]["bindings"] == ["y"]
    nothing = relax_tasks([("exp", [("z", "exp", ["@x"], (9, 9))])])
    result = matching.match_relax(source, nothing)
    assert result["sites"][0]["match"] == matching.UNMATCHED
    assert result["unmatched"] == ["0/z"] and result["unmatched_source"] == ["y"]


def test_long_inline_chain_is_placed_without_enumeration():
    """30 elementwise blocks of one shape, fused three by three: the dataflow fixes the plan."""
    ops = ["add", "mul", "sub", "max", "min", "exp"]
    source = tir(*[block(f"e{i}", "SS", [ops[i % 6]], f"B{i + 1}", (64, 64), [f"B{i}"]) for i in range(30)])
    fused = [block(f"t{g}", "SS", {ops[(3 * g + j) % 6] for j in range(3)}, f"B{3 * g + 3}", (64, 64), [f"B{3 * g}"])
             for g in range(10)]
    result = matching.match_tir(source, tir(*fused))
    assert result["method"] == "isomorphism" and result["trials"] == 1
    assert all(sorted(result["transformed"][f"t{g}"]["source"]) == sorted(f"e{3 * g + j}" for j in range(3))
               for g in range(10))
    assert result["transformed"]["t4"]["source"][0] == "e14"
