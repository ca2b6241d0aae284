"""TIR matching (``match_tir``): normalised transformed graph vs the source graph contracted by an
inline plan, by VF2 isomorphism; a per-block score where no consistent graph match exists."""
from __future__ import annotations

import itertools
from collections import Counter

import networkx as nx
from networkx.algorithms.isomorphism import DiGraphMatcher

from .common import (GRAPH, GRAPH_NAMES, GRAPH_RELAXED, LABEL, LINEAGE, MAX_INLINE_COMBOS, MAX_INLINE_TRIALS, MAX_ISOMORPHISMS, NAME, UNMATCHED, Unit, _is_reduction, _sig, base_name)
from .normalise import _writers, normalise_tir


def normalised_digraph(graph: dict, units: dict, alias: dict) -> nx.DiGraph:
    """Digraph of the units plus the input buffers (``param`` anchors)."""
    g = nx.DiGraph()
    writers = _writers(units, alias)
    params = {n["name"]: n for n in graph["nodes"] if n.get("kind") == "param"}
    for uid, unit in units.items():
        g.add_node(uid, **unit.label())
    for uid, unit in units.items():
        for buffer in unit.reads:
            producers = [p for p in writers.get(buffer, []) if p != uid]
            if producers:
                for p in producers:
                    g.add_edge(p, uid)
            else:
                _add_param(g, buffer, params.get(buffer))
                g.add_edge(f"param:{buffer}", uid)
    return g


def _add_param(g: nx.DiGraph, name: str, node: dict | None) -> None:
    if f"param:{name}" not in g:
        g.add_node(f"param:{name}", kind="param", name=name,
                   sig=(tuple((node or {}).get("shape") or ()), (node or {}).get("dtype") or ""))


# --------------------------------------------------------------------------- TIR: source side


def source_digraph(graph: dict) -> nx.DiGraph:
    """Digraph of source blocks (with merge bookkeeping) and input buffers."""
    g = nx.DiGraph()
    for n in graph["nodes"]:
        if n.get("kind") == "param":
            g.add_node(n["id"], kind="param", name=n["name"], sig=_sig(n))
        elif n.get("kind") == "block":
            g.add_node(n["id"], kind="block", ops=frozenset((n.get("ops") or {}).keys()),
                       iters=frozenset([n.get("iter_kinds") or ""]), reduction=_is_reduction(n),
                       sig=_sig(n), members=(n["id"],), names=(n.get("name") or n["id"],),
                       lines=frozenset(n.get("store_lines") or []), how=())
    for e in graph["edges"]:
        if e["src"] in g and e["dst"] in g and e["src"] != e["dst"]:
            g.add_edge(e["src"], e["dst"])
    return g


def contract(g: nx.DiGraph, plan: list[tuple[str, str]]) -> nx.DiGraph | None:
    """Apply inline steps ``[(block, "forward"|"reverse")]`` in order; None if a step is impossible."""
    g = g.copy()
    for node, direction in plan:
        if node not in g:
            return None
        attrs = g.nodes[node]
        preds = list(g.predecessors(node))
        succs = [s for s in g.successors(node)]
        if direction == "forward":
            targets = [s for s in succs if g.nodes[s]["kind"] == "block"]
            if not targets or len(targets) != len(succs):
                return None
            for t in targets:
                ta = g.nodes[t]
                ta["ops"] = ta["ops"] | attrs["ops"]
                ta["members"] = ta["members"] + attrs["members"]
                ta["names"] = ta["names"] + attrs["names"]
                ta["lines"] = ta["lines"] | attrs["lines"]
                ta["how"] = ta["how"] + attrs["how"] + ((node, "compute_inline", t),)
                for p in preds:
                    g.add_edge(p, t)
        else:
            block_preds = [p for p in preds if g.nodes[p]["kind"] == "block"]
            if len(block_preds) != 1 or g.nodes[block_preds[0]]["reduction"]:
                return None
            t = block_preds[0]
            ta = g.nodes[t]
            ta["ops"] = ta["ops"] | attrs["ops"]
            ta["sig"] = attrs["sig"]
            ta["members"] = ta["members"] + attrs["members"]
            ta["names"] = ta["names"] + attrs["names"]
            ta["lines"] = ta["lines"] | attrs["lines"]
            ta["how"] = ta["how"] + attrs["how"] + ((node, "reverse_compute_inline", t),)
            for p in preds:
                if p != t:
                    g.add_edge(p, t)
            for s in succs:
                g.add_edge(t, s)
        g.remove_node(node)
    return g


def tir_node_match(strict: bool = True):
    """Node-match function for VF2: labels must agree (ops as sets, iterators unless rfactor)."""
    def match(s: dict, t: dict) -> bool:
        if s["kind"] != t["kind"]:
            return False
        if s["kind"] == "param":
            return s["name"] == t["name"] and (not s["sig"][0] or not t["sig"][0] or s["sig"] == t["sig"])
        if s["sig"] != t["sig"] or s["reduction"] != t["reduction"]:
            return False
        if strict and s["ops"] != t["ops"]:
            return False
        if not strict and not (s["ops"] <= t["ops"] or t["ops"] <= s["ops"]):
            return False
        return t["loose_iters"] or bool(s["iters"] & t["iters"]) or not strict
    return match


# --------------------------------------------------------------------------- TIR: search


def inline_plans(src: nx.DiGraph, k: int, target_sigs: Counter):
    """Candidate inline plans of k source blocks whose written signatures leave ``target_sigs``.

    Inlining a block forward (compute_inline) removes its written signature; inlining it backward
    (reverse_compute_inline) removes its producer's.  Only blocks whose removal takes away a surplus
    signature are tried, and at most ``MAX_INLINE_COMBOS`` subsets are looked at.
    """
    blocks = [n for n in nx.topological_sort(src) if src.nodes[n]["kind"] == "block"]
    base = Counter(src.nodes[n]["sig"] for n in blocks)
    surplus = base - target_sigs
    options = {}
    for n in blocks:
        if src.nodes[n]["reduction"]:
            continue
        opts = []
        if any(src.nodes[s]["kind"] == "block" for s in src.successors(n)) and src.nodes[n]["sig"] in surplus:
            opts.append("forward")
        preds = [p for p in src.predecessors(n) if src.nodes[p]["kind"] == "block"]
        if len(preds) == 1 and not src.nodes[preds[0]]["reduction"] and src.nodes[preds[0]]["sig"] in surplus:
            opts.append("reverse")
        if opts:
            options[n] = opts
    for examined, subset in enumerate(itertools.combinations(list(options), k)):
        if examined >= MAX_INLINE_COMBOS:
            return
        for directions in itertools.product(*(options[n] for n in subset)):
            plan = list(zip(subset, directions))
            if _sigs_after(src, base, plan) == target_sigs:
                yield plan


def _sigs_after(src: nx.DiGraph, base: Counter, plan: list) -> Counter:
    sigs = Counter(base)
    for node, direction in plan:
        if direction == "forward":
            sigs[src.nodes[node]["sig"]] -= 1
        else:
            pred = next(p for p in src.predecessors(node) if src.nodes[p]["kind"] == "block")
            sigs[src.nodes[pred]["sig"]] -= 1
    return +sigs


def _evidence_score(s: dict, t: dict) -> int:
    """Names and spans that agree (supporting evidence only)."""
    if s["kind"] == "param":
        return 0
    score = 0
    if set(base_name(n) for n in t["names"]) & set(s["names"]):
        score += 2
    if base_name(t["names"][0]) == s["names"][0]:
        score += 1      # the block that kept its identity is the one the others merged into
    if s["lines"] & t["lines"]:
        score += 2
    return score


def _isomorphisms(src_c: nx.DiGraph, tgt: nx.DiGraph, strict: bool) -> list[dict]:
    if src_c.number_of_nodes() != tgt.number_of_nodes() or src_c.number_of_edges() != tgt.number_of_edges():
        return []
    matcher = DiGraphMatcher(src_c, tgt, node_match=tir_node_match(strict))
    return list(itertools.islice(matcher.isomorphisms_iter(), MAX_ISOMORPHISMS))


def match_tir(source: dict, transformed: dict, lineage: dict[str, str] | None = None) -> dict:
    """Map every transformed block to the source block(s) it came from (see module docstring).

    ``lineage`` (derived block name → source block name, from replaying the trace: ``worker/lineage``)
    pairs the blocks the graph leaves unmatched, such as rfactor's ``row_max_rf_init``.
    """
    source_buffers = set(source.get("buffers") or {}) or {n["name"] for n in source["nodes"] if n.get("kind") == "param"} \
        | {w["name"] for n in source["nodes"] for w in n.get("writes") or []}
    units, alias, notes = normalise_tir(transformed, source_buffers)
    tgt = normalised_digraph(transformed, units, alias)
    src = source_digraph(source)
    solutions, trials = [], 0
    for strict in (True, False):
        solutions, trials = _search(src, tgt, strict)
        if solutions:
            break
    if solutions:
        result = _finish(_from_isomorphism(source, transformed, units, notes, solutions, strict))
    else:
        result = _fallback(source, transformed, units, notes)
    result["trials"] = trials
    return adopt_lineage(result, source, lineage or {})


def adopt_lineage(result: dict, source: dict, lineage: dict[str, str]) -> dict:
    """Pair the still unmatched transformed blocks with their source block by the trace's lineage
    (match kind ``LINEAGE``): what a trace instruction reported, never a guess from names."""
    by_name = {n.get("name"): n["id"] for n in source["nodes"] if n.get("kind") == "block"}
    for block in list(result["unmatched"]):
        sid = by_name.get(lineage.get(block))
        if sid is None:
            continue
        result["transformed"][block] = {"source": [sid], "role": "derived", "unit": None, "match": LINEAGE}
        entry = result["source"].setdefault(sid, {"transformed": [], "match": LINEAGE, "evidence": [],
                                                  "inlined_into": None})
        entry["transformed"].append({"block": block, "role": "derived"})
        if entry["match"] == UNMATCHED:
            entry["match"] = LINEAGE
        result["unmatched"].remove(block)
        if sid in result["unmatched_source"]:
            result["unmatched_source"].remove(sid)
    return result


def _search(src: nx.DiGraph, tgt: nx.DiGraph, strict: bool) -> tuple[list, int]:
    """(contracted source, plan, mapping) solutions: the anchored plan first, else enumerated plans."""
    n_src = sum(1 for n in src if src.nodes[n]["kind"] == "block")
    n_tgt = sum(1 for n in tgt if tgt.nodes[n]["kind"] == "block")
    k = n_src - n_tgt
    if k < 0:
        return [], 0
    params_needed = {n for n in tgt if tgt.nodes[n]["kind"] == "param"}
    plan = derive_plan(src, tgt, strict)
    if plan is not None and len(plan) == k:
        solutions = _solutions(src, tgt, plan, strict, params_needed)
        if solutions:
            return solutions, 1
    target_sigs = Counter(tgt.nodes[n]["sig"] for n in tgt if tgt.nodes[n]["kind"] == "block")
    solutions, trials = [], 1
    for plan in inline_plans(src, k, target_sigs):
        trials += 1
        if trials > MAX_INLINE_TRIALS:
            break
        solutions += _solutions(src, tgt, plan, strict, params_needed)
        if len(solutions) >= MAX_ISOMORPHISMS:
            break
    return solutions, trials


def _solutions(src, tgt, plan, strict, params_needed) -> list:
    src_c = contract(src, plan)
    if src_c is None:
        return []
    src_c.remove_nodes_from([n for n in list(src_c) if src_c.nodes[n]["kind"] == "param"
                             and n not in params_needed and src_c.degree(n) == 0])
    return [(src_c, plan, mapping) for mapping in _isomorphisms(src_c, tgt, strict)]


def derive_plan(src: nx.DiGraph, tgt: nx.DiGraph, strict: bool) -> list | None:
    """The inline plan implied by the dataflow, found without enumeration.

    Units are visited in topological order, so their inputs are already placed.  A unit's
    source counterpart is a block ``r`` writing what the unit writes plus every block ``U`` between
    ``r`` and the unit's (placed) inputs; ``{r} + U`` must read exactly those inputs and carry the
    unit's op mix.  ``U`` was inlined: forward into ``r`` (compute_inline), or ``r`` backward into
    one of them (reverse_compute_inline) when that one has the unit's iterators.  Returns None when
    some unit has no such counterpart (the caller then enumerates).
    """
    placed: dict[str, str] = {}
    claimed: set = set()
    plan: list = []
    for t in nx.topological_sort(tgt):
        attrs = tgt.nodes[t]
        if attrs["kind"] == "param":
            if t not in src:
                return None
            placed[t] = t
            continue
        if any(p not in placed for p in tgt.predecessors(t)):
            return None
        anchors = {placed[p] for p in tgt.predecessors(t)}
        candidates = [c for r in src if r not in claimed and src.nodes[r]["kind"] == "block"
                      for c in _counterparts(src, r, anchors, attrs, claimed, strict)]
        if not candidates:
            return None
        score, r, members, steps = max(candidates, key=lambda c: c[0])
        claimed |= {r} | {m for m in members if m != r and not _shared_inline(src, m)}
        placed[t] = r
        plan += [step for step in steps if step not in plan]
    return plan


def _shared_inline(src: nx.DiGraph, node: str) -> bool:
    """A producer inlined into several consumers may appear in several units."""
    return sum(1 for s in src.successors(node) if src.nodes[s]["kind"] == "block") > 1


def _counterparts(src: nx.DiGraph, r: str, anchors: set, t: dict, claimed: set, strict: bool) -> list:
    """(score, r, members, plan steps) for every way ``r`` plus its private ancestors can be unit ``t``."""
    ra = src.nodes[r]
    if ra["sig"] != t["sig"] or ra["reduction"] != t["reduction"]:
        return []
    ancestors = nx.ancestors(src, r)
    if not anchors <= ancestors:
        return []
    upstream = set(anchors).union(*(nx.ancestors(src, a) for a in anchors)) if anchors else set()
    between = [u for u in nx.topological_sort(src.subgraph(ancestors - upstream))]
    if any(src.nodes[u]["kind"] != "block" or src.nodes[u]["reduction"] or u in claimed for u in between):
        return []
    members = [r] + between
    ext = {p for m in members for p in src.predecessors(m) if p not in members}
    ops = frozenset().union(*(src.nodes[m]["ops"] for m in members))
    if ext != anchors or (strict and ops != t["ops"]) or (not strict and not t["ops"] <= ops):
        return []
    names = {base_name(n) for n in t["names"]}
    out = []
    if t["loose_iters"] or src.nodes[r]["iters"] & t["iters"] or not strict:
        score = 3 * (ra["names"][0] in names) + 2 * bool(ra["lines"] & t["lines"])
        out.append((score, r, members, [(u, "forward") for u in between]))
    preds = [p for p in src.predecessors(r) if src.nodes[p]["kind"] == "block"]
    if len(preds) == 1 and preds[0] in between and (src.nodes[preds[0]]["iters"] & t["iters"] or t["loose_iters"]):
        host = preds[0]
        score = 3 * (src.nodes[host]["names"][0] in names) + 2 * bool(src.nodes[host]["lines"] & t["lines"])
        out.append((score, r, members, [(u, "forward") for u in between if u != host] + [(r, "reverse")]))
    return out


def _assignment(sol, units) -> tuple:
    """What a solution says, independent of how the source was contracted: unit -> source blocks."""
    src_c, _, mapping = sol
    return tuple(sorted((t, frozenset(src_c.nodes[s]["members"])) for s, t in mapping.items() if t in units))


def _from_isomorphism(source, transformed, units, notes, solutions, strict) -> dict:
    def score(sol):
        src_c, _, mapping = sol
        return sum(_evidence_score(src_c.nodes[s], _tgt_label(units, t)) for s, t in mapping.items()
                   if t in units)
    ranked = sorted(solutions, key=score, reverse=True)
    best = ranked[0]
    tied = {_assignment(s, units) for s in ranked if score(s) == score(best)}
    distinct = {_assignment(sol, units) for sol in solutions}
    kind = GRAPH if len(distinct) == 1 else GRAPH_NAMES
    if not strict:
        kind = GRAPH_RELAXED
    src_c, plan, mapping = best
    result = _empty_result(source, transformed, notes)
    result["method"] = "isomorphism"
    result["isomorphisms"] = len(distinct)
    result["ambiguous"] = len(tied) > 1
    result["inlined"] = [{"block": n, "how": how, "into": into}
                         for node in src_c for (n, how, into) in src_c.nodes[node].get("how", ())]
    for s_node, t_node in mapping.items():
        if t_node not in units:
            continue
        attrs = src_c.nodes[s_node]
        _record(result, units[t_node], list(attrs["members"]), kind,
                _evidence(attrs, _tgt_label(units, t_node), units[t_node], kind))
    _share_copies(result, units)
    return result


def _share_copies(result: dict, units: dict) -> None:
    """A cache_read copy read by several blocks serves all of them: list every one as its source."""
    for unit in units.values():
        for copy in unit.node.get("shared_copies") or []:
            entry = result["transformed"].get(copy["block"])
            if entry is None:
                continue
            for other in copy["with"]:
                for sid in (result["transformed"].get(other) or {}).get("source", [])[:1]:
                    if sid not in entry["source"]:
                        entry["source"].append(sid)
                    src_entry = result["source"].get(sid)
                    if src_entry is not None:
                        item = {"block": copy["block"], "role": "cache_read (shared)"}
                        if item not in src_entry["transformed"]:
                            src_entry["transformed"].append(item)


def _tgt_label(units: dict, uid: str) -> dict:
    return units[uid].label()


def _evidence(s_attrs: dict, t_label: dict, unit: Unit, kind: str) -> list[str]:
    ev = [f"{kind}: {unit.iter_kinds or '-'} {'+'.join(sorted(unit.ops)) or 'copy'} -> "
          f"{t_label['sig'][1]}{list(t_label['sig'][0])}"]
    names = set(base_name(n) for n in t_label["names"]) & set(s_attrs["names"])
    if names:
        ev.append(f"name: {', '.join(sorted(names))}")
    lines = sorted(s_attrs["lines"] & t_label["lines"])
    if lines:
        ev.append(f"span: store line {', '.join(map(str, lines))}")
    for block, role in unit.members:
        if role != "compute":
            ev.append(f"{role}: {block}")
    for inl, how, into in s_attrs.get("how", ()):
        ev.append(f"{how}: {inl} into {into}")
    return ev


def _empty_result(source: dict, transformed: dict, notes: list) -> dict:
    return {"kind": "tir", "method": None, "notes": notes, "source": {}, "transformed": {},
            "inlined": [], "unmatched": [], "unmatched_source": [], "isomorphisms": 0, "ambiguous": False,
            "source_blocks": [n["id"] for n in source["nodes"] if n.get("kind") == "block"],
            "transformed_blocks": [n["id"] for n in transformed["nodes"] if n.get("kind") == "block"]}


def _record(result: dict, unit: Unit, src_ids: list, kind: str, evidence: list) -> None:
    """Write one unit -> source-blocks match into both directions of the result."""
    for block, role in unit.members:
        result["transformed"][block] = {"source": list(src_ids), "role": role, "unit": unit.id, "match": kind}
    for i, sid in enumerate(src_ids):
        entry = result["source"].setdefault(sid, {"transformed": [], "match": kind, "evidence": [],
                                                  "inlined_into": None})
        entry["transformed"] += [{"block": b, "role": r} for b, r in unit.members
                                 if {"block": b, "role": r} not in entry["transformed"]]
        entry["evidence"] += [e for e in evidence if e not in entry["evidence"]]
        if i > 0 and len(src_ids) > 1:
            entry["inlined_into"] = src_ids[0]


def _finish(result: dict) -> dict:
    result["unmatched"] = [b for b in result["transformed_blocks"] if b not in result["transformed"]]
    result["unmatched_source"] = [s for s in result["source_blocks"] if s not in result["source"]]
    for sid in result["unmatched_source"]:
        result["source"][sid] = {"transformed": [], "match": UNMATCHED, "evidence": [], "inlined_into": None}
    return result


# --------------------------------------------------------------------------- TIR: fallback


def _fallback(source: dict, transformed: dict, units: dict, notes: list) -> dict:
    """No consistent isomorphism: per unit, the best-scoring unclaimed source block(s)."""
    result = _empty_result(source, transformed, notes)
    result["method"] = "per-block"
    src_blocks = [n for n in source["nodes"] if n.get("kind") == "block"]
    claimed: set = set()
    for uid, unit in units.items():
        scored = sorted(((_fallback_score(b, unit), b["id"]) for b in src_blocks if b["id"] not in claimed),
                        reverse=True)
        if not scored or scored[0][0] <= 0:
            continue
        best_score, sid = scored[0]
        claimed.add(sid)
        node = next(b for b in src_blocks if b["id"] == sid)
        extra = [b["id"] for b in src_blocks if b["id"] not in claimed and b["id"] != sid and not _is_reduction(b)
                 and set((b.get("ops") or {}).keys()) and set(b["ops"]) <= unit.ops - set(node.get("ops") or {})]
        kind = LABEL if best_score >= 3 and _sig(node) == unit.sig else NAME
        _record(result, unit, [sid] + extra, kind, [f"{kind}: score {best_score}"] +
                [f"{r}: {b}" for b, r in unit.members if r != "compute"])
        claimed.update(extra)
    return _finish(result)


def _fallback_score(node: dict, unit: Unit) -> int:
    score = 0
    ops = set((node.get("ops") or {}).keys())
    if _sig(node) == unit.sig:
        score += 2
    if ops == unit.ops:
        score += 2
    elif ops and ops <= unit.ops:
        score += 1
    if node.get("iter_kinds") == unit.iter_kinds:
        score += 1
    if base_name(unit.id) == node.get("name") or node.get("name") in {base_name(n) for n in unit.names}:
        score += 3
    if set(node.get("store_lines") or []) & unit.lines:
        score += 3
    return score


# --------------------------------------------------------------------------- Relax


