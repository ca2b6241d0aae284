"""Modelled memory traffic and measured cache misses per source block (pure).

``memory_figures`` reads MetaSchedule's ``PerStoreFeature`` rows of one program (bytes and lines
touched per buffer, reuse; modelled from the loop nest, not measured); ``cachegrind_by_block``
sums valgrind cachegrind's simulated counters per TVMScript line into the source blocks.
"""
from __future__ import annotations

from ..tvmscript.model import Block
from . import featurelayout as fl
from .block_origin import innermost, match_block


def _round(value: float) -> float:
    """6 significant digits: feature values come back through log2/exp2 with float noise."""
    return float(f"{value:.6g}")


def memory_figures(features: dict, blocks: list[Block]) -> dict:
    """Modelled bytes moved and reuse per written buffer, from PerStoreFeature rows."""
    rows, stores = features.get("rows") or [], features.get("stores") or []
    out = []
    for i, row in enumerate(rows):
        raw = [float(v) for v in fl.unslog(row)]
        buffers = []
        for b in range(fl.N_BUFFERS):
            vals = {f: _round(raw[fl.INDEX[f"buf{b}_{f}"]]) for f in fl.BUFFER_FIELDS}
            if not any(vals[f] for f in ("read", "write", "readwrite")):
                continue
            access = "readwrite" if vals["readwrite"] else "write" if vals["write"] else "read"
            reuse = "loop" if vals["reuse_loop"] else "serial" if vals["reuse_serial"] else "none"
            buffers.append({"access": access, "bytes": vals["bytes"], "unique_bytes": vals["unique_bytes"],
                            "lines": vals["lines"], "unique_lines": vals["unique_lines"], "reuse": reuse,
                            "reuse_count": vals["reuse_ct"], "reuse_distance_bytes": vals["reuse_dis_bytes"],
                            "stride": vals["stride"]})
        flops = _round(sum(raw[j] for j in fl.FLOAT_OPS))
        moved = sum(b["bytes"] for b in buffers)
        unique = sum(b["unique_bytes"] for b in buffers)
        store = stores[i] if i < len(stores) else None
        src, _ = match_block(store, [], None, blocks) if store else (None, "")
        out.append({"store": store, "source": src.id if src else None, "flops": flops, "bytes": moved,
                    "unique_bytes": unique, "reuse": _round(moved / unique) if unique else None,
                    "intensity": _round(flops / unique) if unique else None, "buffers": buffers})
    return {"rows": out, "source": features.get("source", "MetaSchedule PerStoreFeature"),
            "note": "modelled by MetaSchedule from the loop nest (not measured); bytes = touched bytes, "
                    "reuse = touched / unique bytes"}


def cachegrind_by_block(data: dict, blocks: list[Block]) -> dict:
    """cachegrind counters per TVMScript line, and summed per source block."""
    per_block: dict[str, dict] = {}
    lines = []
    for entry in data["lines"]:
        blk = innermost(blocks, entry["line"] - 1) if entry["line"] > 0 else None
        line = dict(entry, block=blk.id if blk else None)
        lines.append(line)
        if blk is not None:
            agg = per_block.setdefault(blk.id, {"id": blk.id, "name": blk.name})
            for key, value in entry.items():
                if key != "line":
                    agg[key] = agg.get(key, 0) + value
    return {"lines": lines, "blocks": list(per_block.values()), "source": data.get("source"),
            "cache": data.get("cache"), "seconds": data.get("seconds")}
