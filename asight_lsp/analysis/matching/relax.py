"""Relax matching (``match_relax``): each kernel call site, a small graph of legalized calls, is
matched in execution order by VF2 (induced subgraph) against the still-unmatched source bindings,
anchored on the source nodes its inputs were already matched to; variable names break ties."""
from __future__ import annotations

import itertools

import networkx as nx
from networkx.algorithms.isomorphism import DiGraphMatcher

from .common import GRAPH, GRAPH_NAMES, GRAPH_RELAXED, MAX_ISOMORPHISMS, NAME, UNMATCHED


def _relax_digraph(graph: dict) -> nx.DiGraph:
    g = nx.DiGraph()
    for n in graph["nodes"]:
        g.add_node(n["id"], **n)
    for e in graph["edges"]:
        if e["src"] in g and e["dst"] in g:
            g.add_edge(e["src"], e["dst"])
    return g


def _relax_label(n: dict) -> str | None:
    return n.get("legal_op") or n.get("op_label")


def relax_node_match(level: int):
    """Level 0: op, pattern, shape/dtype, in-degree and anchors; 1: no op names; 2: shape/dtype only."""
    def match(s: dict, t: dict) -> bool:
        if s.get("kind") == "param" or t.get("kind") == "param":
            return False
        if tuple(s.get("shape") or ()) != tuple(t.get("shape") or ()) or s.get("dtype") != t.get("dtype"):
            return False
        if not t["_need"] <= s["_preds"]:
            return False
        if level <= 1 and s.get("pattern") is not None and t.get("pattern") is not None \
                and s["pattern"] != t["pattern"]:
            return False
        if level == 0:
            if _relax_label(s) != t.get("op_label") and s.get("op_label") != t.get("op_label"):
                return False
            if s["_indeg"] != t["_indeg"]:
                return False
        return True
    return match


def match_relax(source: dict, transformed: dict) -> dict:
    """Map every kernel call site (a fused task's call) to the source bindings it computes."""
    src = _relax_digraph(source)
    tgt = _relax_digraph(transformed)
    for n in src:
        src.nodes[n]["_preds"] = frozenset(src.predecessors(n))
        src.nodes[n]["_indeg"] = src.in_degree(n)
    mapping: dict[str, str] = {}
    for n in tgt:
        if tgt.nodes[n].get("kind") == "param" and n in src:
            mapping[n] = n
    result = {"kind": "relax", "sites": [], "source": {}, "transformed": {}, "unmatched": [],
              "unmatched_source": []}
    taken: set = set(mapping.values())
    for site in transformed.get("sites") or []:
        entry = _match_site(src, tgt, site, mapping, taken)
        result["sites"].append(entry)
        for t_node, s_node in entry["nodes"].items():
            result["transformed"][t_node] = {"source": s_node, "site": site["site"], "match": entry["match"]}
            if s_node is not None:
                result["source"][s_node] = {"site": site["site"], "function": site["function"],
                                            "transformed": t_node, "match": entry["match"],
                                            "evidence": entry["evidence"]}
    result["unmatched"] = [t for t, v in result["transformed"].items() if v["source"] is None]
    result["unmatched_source"] = [n["id"] for n in source["nodes"]
                                  if n.get("kind") == "binding" and n["id"] not in result["source"]]
    return result


def _match_site(src: nx.DiGraph, tgt: nx.DiGraph, site: dict, mapping: dict, taken: set) -> dict:
    pattern = tgt.subgraph(site["nodes"]).copy()
    for p in pattern:
        ext = [x for x in tgt.predecessors(p) if x not in pattern]
        pattern.nodes[p]["_need"] = frozenset(mapping[x] for x in ext if x in mapping)
        pattern.nodes[p]["_indeg"] = tgt.in_degree(p)
    region = _region(src, pattern, taken)
    for level, kind in ((0, GRAPH), (1, GRAPH_RELAXED), (2, GRAPH_RELAXED)):
        found = _site_isomorphisms(src.subgraph(region), pattern, level)
        if found:
            best, tied, distinct = _rank_site(found, src, pattern)
            k = kind if distinct == 1 or kind != GRAPH else GRAPH_NAMES
            return _commit(site, best, k, mapping, taken, src, pattern,
                           [f"{k}: {distinct} candidate subgraph(s)"] + (["ambiguous"] if tied > 1 else []))
    by_name = {src.nodes[n].get("name"): n for n in src if n not in taken and src.nodes[n].get("kind") == "binding"}
    guess = {p: by_name.get(pattern.nodes[p].get("name")) for p in pattern}
    if any(guess.values()):
        return _commit(site, {v: k for k, v in guess.items() if v}, NAME, mapping, taken, src, pattern,
                       ["name: variable names only (no graph match)"])
    return _commit(site, {}, UNMATCHED, mapping, taken, src, pattern, [])


def _region(src: nx.DiGraph, pattern: nx.DiGraph, taken: set) -> list:
    """Unmatched source bindings near the site's anchors (all of them when it has none)."""
    free = [n for n in src if n not in taken and src.nodes[n].get("kind") != "param"]
    anchors = set().union(*(pattern.nodes[p]["_need"] for p in pattern)) if len(pattern) else set()
    if not anchors:
        return free
    near, frontier = set(), set(anchors)
    for _ in range(len(pattern) + 1):
        nxt = {s for a in frontier for s in src.successors(a) if s not in taken and s not in near}
        near |= nxt
        frontier = nxt
    return [n for n in free if n in near]


def _site_isomorphisms(region: nx.DiGraph, pattern: nx.DiGraph, level: int) -> list[dict]:
    matcher = DiGraphMatcher(region, pattern, node_match=relax_node_match(level))
    return list(itertools.islice(matcher.subgraph_isomorphisms_iter(), MAX_ISOMORPHISMS))


def _rank_site(found: list[dict], src: nx.DiGraph, pattern: nx.DiGraph):
    def score(m):
        return sum(2 * (src.nodes[s].get("name") == pattern.nodes[t].get("name")) for s, t in m.items())
    ranked = sorted(found, key=score, reverse=True)
    top = score(ranked[0])
    tied = sum(1 for m in ranked if score(m) == top)
    return ranked[0], tied, len(found)


def _commit(site, iso: dict, kind: str, mapping: dict, taken: set, src, pattern, evidence: list) -> dict:
    """Record a site's node mapping (``iso`` is source -> pattern)."""
    nodes = {p: None for p in pattern}
    for s, p in iso.items():
        nodes[p] = s
        mapping[p] = s
        taken.add(s)
    names = [pattern.nodes[p].get("name") for p in pattern]
    agree = sum(1 for p, s in nodes.items() if s is not None and src.nodes[s].get("name") == pattern.nodes[p].get("name"))
    if kind not in (UNMATCHED, NAME) and names:
        evidence = evidence + [f"names agree on {agree}/{len(names)}"]
    order = {n: i for i, n in enumerate(src)}
    bindings = sorted((s for s in nodes.values() if s is not None), key=lambda s: order.get(s, 0))
    return {"site": site["site"], "function": site["function"], "bindings": bindings, "nodes": nodes,
            "match": kind, "evidence": evidence}
