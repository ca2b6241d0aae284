"""Match a tuned (transformed) program to its source by labelled dataflow graphs (no TVM).

Input is the plain graph data of ``asight_lsp.worker.tir_graphs`` / ``relax_graphs``: nodes with labels (iterator kinds,
op mix, written buffer shape/dtype, op pattern) and evidence (names, TVMScript lines), edges
producer → consumer.  Output says, for every source block or binding, which transformed blocks or
kernel calls came from it and how that was decided.

TIR (``match_tir``)
    1. *Normalise* the transformed graph: fold each ``X_init`` into its update (decompose_reduction),
       each rfactor block into the block that finishes its reduction, and each cache copy into the
       block it serves (cache_read → its consumer, cache_write → its producer).  Copy buffers become
       aliases of the buffers they cache, so the edges are the source's again.
    2. *Explain inlining*: compute_inline / reverse_compute_inline remove blocks and merge their ops
       into a neighbour.  With k = (source blocks) − (normalised blocks), try sets of k spatial source
       blocks contracted into their consumer (or producer), cheapest label check first.
    3. *VF2*: ``DiGraphMatcher`` finds the isomorphisms between the contracted source and the
       normalised transformed graph; input buffers are anchor nodes.  Names (``C_update`` ~ ``C``)
       and store spans (TVMScript lines that survive scheduling) only rank several isomorphisms.
    4. Anything still unexplained falls back to a per-block label/name/span score.

Relax (``match_relax``)
    Each kernel call site is a small graph of legalized calls; in execution order, it is matched
    with VF2 (induced subgraph) against the still-unmatched source bindings, anchored on the source
    nodes its inputs were already matched to.  Variable names break ties; LegalizeOps drops spans.
"""
from __future__ import annotations

import itertools
import re
from collections import Counter
from dataclasses import dataclass, field

import networkx as nx
from networkx.algorithms.isomorphism import DiGraphMatcher

MAX_INLINE_TRIALS = 2000      # enumerated inline plans tried when the anchored plan fails
MAX_INLINE_COMBOS = 20000     # subsets of inlinable source blocks looked at
MAX_ISOMORPHISMS = 64         # isomorphisms ranked by evidence
_SUFFIXES = re.compile(r"(_init|_update|_rf|_global|_local|_shared|_wmma\.\w+|\.rf|_pad|_reindex)+$")

# match kinds, strongest first
GRAPH = "graph"                    # the only structural match
GRAPH_NAMES = "graph+names"        # several structural matches; names/spans chose
GRAPH_RELAXED = "graph-relaxed"    # structural match with looser labels (op names or in-degree ignored)
LABEL = "label"                    # per-node label score (no consistent graph match)
NAME = "name"                      # name only
UNMATCHED = "unmatched"


# --------------------------------------------------------------------------- helpers


def base_name(name: str) -> str:
    """``matmul_update`` -> ``matmul``; ``row_max.rf`` -> ``row_max``; ``Y_global`` -> ``Y``."""
    return _SUFFIXES.sub("", name or "") or (name or "")


def _sig(node: dict) -> tuple:
    """(shape, dtype) of what a node produces."""
    if node.get("kind") == "param":
        return tuple(node.get("shape") or ()), node.get("dtype") or ""
    writes = node.get("writes") or [{}]
    if "shape" in node and not node.get("writes"):
        return tuple(node.get("shape") or ()), node.get("dtype") or ""
    return tuple(writes[0].get("shape") or ()), writes[0].get("dtype") or ""


def _is_reduction(node: dict) -> bool:
    return "R" in (node.get("iter_kinds") or "")


def _is_copy(node: dict) -> bool:
    return node.get("kind") == "block" and not node.get("ops") and node.get("loads") == 1 \
        and not _is_reduction(node) and len(node.get("reads") or []) == 1


def _is_init(node: dict) -> bool:
    return node.get("kind") == "block" and not node.get("ops") and node.get("loads") == 0 and not _is_reduction(node)


# --------------------------------------------------------------------------- TIR: normalise


@dataclass
class Unit:
    """A normalised transformed block: one computation and the blocks that serve it."""
    id: str
    node: dict
    members: list = field(default_factory=list)      # [(block id, role)]
    ops: set = field(default_factory=set)
    iter_kinds: str = ""
    loose_iters: bool = False                          # rfactor changes the iterator list
    reads: list = field(default_factory=list)
    writes: list = field(default_factory=list)         # buffer names (aliased)
    sig: tuple = ((), "")
    lines: set = field(default_factory=set)
    names: list = field(default_factory=list)

    def label(self) -> dict:
        return {"kind": "block", "ops": frozenset(self.ops), "iters": frozenset([self.iter_kinds]),
                "loose_iters": self.loose_iters, "reduction": "R" in self.iter_kinds or self.loose_iters,
                "sig": self.sig, "names": tuple(self.names), "lines": frozenset(self.lines)}


def normalise_tir(graph: dict, source_buffers: set | None = None) -> tuple[dict, dict, list]:
    """Fold init, rfactor and cache-copy blocks into the blocks they serve.

    Returns ``(units, alias, notes)``: units by id, the buffer alias map (cache → cached buffer) and
    human-readable notes on every fold.
    """
    blocks = [n for n in graph["nodes"] if n.get("kind") == "block"]
    units = {b["id"]: _unit(b) for b in blocks}
    owner = {b["id"]: b["id"] for b in blocks}       # block id -> unit id
    alias: dict[str, str] = {}
    notes: list[str] = []
    _fold_inits(units, owner, notes)
    changed = True
    while changed:
        changed = _fold_rfactor(units, owner, alias, notes) or _fold_copy(units, owner, alias, source_buffers, notes)
    for unit in units.values():
        unit.reads = _dedup(alias_of(alias, b) for b in unit.reads)
        unit.writes = _dedup(alias_of(alias, b) for b in unit.writes)
        unit.reads = [b for b in unit.reads if b not in unit.writes]
    return units, alias, notes


def _unit(node: dict) -> Unit:
    return Unit(node["id"], node, [(node["id"], "compute")], set((node.get("ops") or {}).keys()),
                node.get("iter_kinds") or "", False, list(node.get("reads") or []),
                [w["name"] for w in node.get("writes") or []], _sig(node),
                set(node.get("store_lines") or []), [node.get("name") or node["id"]])


def _dedup(items) -> list:
    out = []
    for x in items:
        if x not in out:
            out.append(x)
    return out


def alias_of(alias: dict, buffer: str) -> str:
    seen = set()
    while buffer in alias and buffer not in seen:
        seen.add(buffer)
        buffer = alias[buffer]
    return buffer


def _absorb(units: dict, owner: dict, into: str, gone: str, role: str) -> None:
    """Move unit ``gone`` into unit ``into``; its own members keep their roles, its main gets ``role``."""
    src = units.pop(gone)
    dst = units[into]
    for block, r in src.members:
        dst.members.append((block, role if r == "compute" else r))
        owner[block] = into
    dst.lines |= src.lines
    dst.names += [n for n in src.names if n not in dst.names]


def _writers(units: dict, alias: dict) -> dict:
    out: dict[str, list[str]] = {}
    for uid, unit in units.items():
        for b in unit.writes:
            out.setdefault(alias_of(alias, b), []).append(uid)
    return out


def _readers(units: dict, alias: dict) -> dict:
    out: dict[str, list[str]] = {}
    for uid, unit in units.items():
        for b in unit.reads:
            out.setdefault(alias_of(alias, b), []).append(uid)
    return out


def _fold_inits(units: dict, owner: dict, notes: list) -> None:
    """``X_init`` (a constant store, spatial only) joins the reduction that writes the same buffer."""
    for uid in [u for u, unit in units.items() if _is_init(unit.node)]:
        buffer = units[uid].writes[0] if units[uid].writes else None
        partners = [v for v, unit in units.items() if v != uid and buffer in unit.writes and unit.ops]
        partners.sort(key=lambda v: (not _is_reduction(units[v].node), base_name(v) != base_name(uid)))
        if partners:
            _absorb(units, owner, partners[0], uid, "init")
            notes.append(f"{uid}: init of {partners[0]} (decompose_reduction)")


def _fold_rfactor(units: dict, owner: dict, alias: dict, notes: list) -> bool:
    """An rfactor block (partial reductions into a buffer with one more dimension) joins the block
    that reduces its result into the original buffer."""
    writers, readers = _writers(units, alias), _readers(units, alias)
    for wid, w in list(units.items()):
        if not _is_reduction(w.node):
            continue
        for buffer in w.reads:
            producers = writers.get(alias_of(alias, buffer), [])
            if len(producers) != 1 or producers[0] == wid:
                continue
            rid = producers[0]
            r = units[rid]
            rank_ok = len(r.sig[0]) == len(w.sig[0]) + 1 and r.sig[1] == w.sig[1]
            if (_is_reduction(r.node) and rank_ok and set(readers.get(alias_of(alias, buffer), [])) == {wid}
                    and w.ops <= r.ops):
                w.ops = set(r.ops)
                w.loose_iters = True
                w.reads = [b for b in w.reads if b != buffer] + [b for b in r.reads if b not in w.reads]
                _absorb(units, owner, wid, rid, "rfactor")
                notes.append(f"{rid}: rfactor of {wid}")
                return True
    return False


def _is_copy_unit(unit: Unit) -> bool:
    return len(unit.members) == 1 and _is_copy(unit.node) and bool(unit.writes) and bool(unit.reads)


def _chain_end(units: dict, alias: dict, uid: str, upstream: bool) -> tuple[str, list]:
    """Follow a copy chain up (producers) or down (consumers) to the computations at its end.

    Returns ``("compute", [unit ids])`` or ``("boundary", [buffer])`` (an input with no producer,
    an output nobody reads).
    """
    writers, readers = _writers(units, alias), _readers(units, alias)
    seen, current = set(), uid
    while current not in seen:
        seen.add(current)
        unit = units[current]
        buffer = alias_of(alias, unit.reads[0] if upstream else unit.writes[0])
        nxt = [u for u in (writers if upstream else readers).get(buffer, []) if u != current]
        if not nxt:
            return "boundary", [buffer]
        copies = [u for u in nxt if _is_copy_unit(units[u])]
        if len(nxt) == 1 and copies:
            current = copies[0]
            continue
        return "compute", [u for u in nxt if u not in copies] or nxt
    return "boundary", []


def _fold_copy(units: dict, owner: dict, alias: dict, source_buffers: set | None, notes: list) -> bool:
    """A copy block created by cache_read/cache_write (or reindex) joins the block it serves.

    A chain of copies (``A -> A_shared -> A_shared_local``) serves the computation at its far end.
    """
    for cid, c in list(units.items()):
        if not _is_copy_unit(c):
            continue
        src_buf, dst_buf = alias_of(alias, c.reads[0]), alias_of(alias, c.writes[0])
        if source_buffers is not None and src_buf in source_buffers and dst_buf in source_buffers:
            continue  # both buffers exist in the source: a copy the user wrote
        up_kind, up = _chain_end(units, alias, cid, upstream=True)
        down_kind, down = _chain_end(units, alias, cid, upstream=False)
        kind = _copy_kind(up_kind, up, down_kind, down, src_buf, source_buffers, units)
        if kind == "cache_write":
            alias[src_buf] = dst_buf
            served = up[0]
            units[served].writes = [dst_buf if alias_of(alias, b) == dst_buf else b for b in units[served].writes]
            _absorb(units, owner, served, cid, "cache_write")
            notes.append(f"{cid}: cache_write twin of {served} ({src_buf} -> {dst_buf})")
            return True
        if kind == "cache_read":
            alias[dst_buf] = src_buf
            served, shared = down[0], down[1:]
            _absorb(units, owner, served, cid, "cache_read")
            if shared:
                units[served].node = dict(units[served].node)
                units[served].node.setdefault("shared_copies", []).append({"block": cid, "with": shared})
            notes.append(f"{cid}: cache_read copy for {served} ({src_buf} -> {dst_buf})"
                         + (f", shared with {', '.join(shared)}" if shared else ""))
            return True
    return False


def _copy_kind(up_kind, up, down_kind, down, src_buf, source_buffers, units) -> str | None:
    """``cache_write`` (serves the computation upstream), ``cache_read`` (downstream) or None."""
    if up_kind == "boundary" and down_kind == "compute":
        return "cache_read"
    if up_kind == "compute" and down_kind == "boundary":
        return "cache_write"
    if up_kind == "compute" and down_kind == "compute":
        # between two computations: a cache_write twin copies from a buffer the schedule created
        if source_buffers is not None:
            return "cache_read" if src_buf in source_buffers else "cache_write"
        return "cache_write" if len(up) == 1 else "cache_read"
    return None


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


def match_tir(source: dict, transformed: dict) -> dict:
    """Map every transformed block to the source block(s) it came from (see module docstring)."""
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
