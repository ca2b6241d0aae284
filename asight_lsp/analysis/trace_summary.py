"""What a MetaSchedule trace did to each source block, per block (no TVM): ``summarize_trace`` runs
the symbolic replay (``trace_replay.py``) and folds what derived blocks did into their source block;
``block_headline`` and ``loop_choices`` read the result for hovers, hints and the loop view."""
from __future__ import annotations

import re
from typing import Iterable

from .trace_replay import SourceBlock, _Replay


def summarize_trace(insts: list, decisions: list, blocks: Iterable[SourceBlock] | None = None) -> dict:
    """What a trace did, per block.

    Parameters
    ----------
    insts, decisions
        The trace as stored in MetaSchedule's JSON database (``runs.read_records`` gives them).
    blocks
        The function's source blocks in program order (``source_blocks(fn)``): they name the
        loops (``i``, ``j``, ``k``) and say which buffer a cache read/write copies.

    Returns
    -------
    dict
        ``{"blocks": {name: summary}, "function": {"parallel_max", "vectorize_max", "unroll_max"}}``
        where a block summary holds ``splits`` ({loop var: factors}), ``order``, ``parallel`` /
        ``vectorize`` ({loops, extent}), ``unroll`` ({loops, max_step, explicit}), ``cache``,
        ``compute_at``, ``inline``, ``decompose_reduction``, ``bind``, ``tiling``,
        ``derived_from``, ``steps`` (one human-readable line per transformation, in order) and
        ``all_steps`` (the same plus the post-processor's fuse/split of parallel/vector loops).
    """
    replay = _Replay(insts or [], decisions or [], list(blocks or []))
    replay.run()
    _fold_derived(replay.blocks)
    return {"blocks": replay.blocks, "function": replay.function}


def _fold_derived(blocks: dict) -> None:
    """Tell a source block what happened to the blocks derived from it (init, cache copies)."""
    for name, summary in blocks.items():
        origin = summary.get("derived_from")
        if origin and origin in blocks and name != origin:
            for step in summary["steps"]:
                if not step.startswith(("decompose", "cache")):
                    blocks[origin].setdefault("derived_steps", []).append(f"{name}: {step}")


def loop_choices(summary: dict, var: str) -> dict:
    """The choices of one source loop var inside a block summary: factors and annotated tiles.

    Returns ``{"factors": [..] | None, "parallel": [tile labels], "vectorize": [..], "unroll": [..]}``.
    """
    def tiles(entry: dict | None) -> list[str]:
        if not entry:
            return []
        return [lab for lab in entry.get("loops", [])
                if re.fullmatch(re.escape(var) + r"\d*", lab) or var in re.split(r"[^\w]+", lab)]
    return {"factors": summary.get("splits", {}).get(var),
            "parallel": tiles(summary.get("parallel")),
            "vectorize": tiles(summary.get("vectorize")),
            "unroll": tiles(summary.get("unroll"))}


def block_headline(summary: dict) -> str:
    """A one-line description of a block's schedule: ``∥64 · vec 4 · unroll 16 · cache C_global``."""
    parts = []
    if summary.get("inline"):
        return "inlined" if summary["inline"] == "compute_inline" else "inlined into producer"
    par = summary.get("parallel")
    if par:
        parts.append(f"parallel {par['extent']}" if par.get("extent") else "parallel")
    vec = summary.get("vectorize")
    if vec:
        parts.append(f"vector {vec['extent']}" if vec.get("extent") else "vectorized")
    unroll = summary.get("unroll")
    if unroll and unroll.get("max_step"):
        parts.append(f"unroll {unroll['max_step']}")
    for cache in summary.get("cache", []):
        parts.append(f"cache {cache['block']}")
    if summary.get("compute_at"):
        where = summary["compute_at"]
        of = f" of {where['block']}" if where.get("block") else ""
        parts.append(f"at {where['loop']}{of}" if where.get("loop") else "computed inside another block")
    for bind in summary.get("bind", []):
        parts.append(bound_text(bind["thread"], bind.get("extent")))
    return " · ".join(parts)


def bound_text(thread: str, extent=None) -> str:
    """A thread binding with its extent as the GPU views say it: ``threadIdx.x 64``, ``vthread 8``
    (MetaSchedule binds ``vthread.x``; the launch has one virtual-thread axis); the name alone when
    the extent is not known."""
    name = "vthread" if thread.startswith("vthread") else thread
    return f"{name} {extent}" if isinstance(extent, int) and not isinstance(extent, bool) else name
