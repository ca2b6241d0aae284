"""Step 1 of TIR matching: fold derived blocks of the transformed graph into the blocks they serve.

``X_init`` into its update (decompose_reduction), an rfactor block into the block that finishes
its reduction, a cache copy into the block it serves (cache_read -> consumer, cache_write ->
producer); copy buffers become aliases of the buffers they cache.
"""
from __future__ import annotations

from .common import Unit, _is_copy, _is_init, _is_reduction, _sig, base_name


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


def _by_buffer(units: dict, alias: dict, access: str) -> dict:
    """Buffer (through its aliases) -> the units that ``access`` (``reads`` / ``writes``) it."""
    out: dict[str, list[str]] = {}
    for uid, unit in units.items():
        for b in getattr(unit, access):
            out.setdefault(alias_of(alias, b), []).append(uid)
    return out


def _writers(units: dict, alias: dict) -> dict:
    return _by_buffer(units, alias, "writes")


def _readers(units: dict, alias: dict) -> dict:
    return _by_buffer(units, alias, "reads")


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
