"""Which source block a generated (scheduled) block comes from: by spans and names, and by the trace (pure).

Spans survive MetaSchedule on the statements that came from the source (docs/tvm.md), so a
generated block's stores or realize point at source lines; derived names (``C_init``,
``C_update``, ``C_global``) fall back to the longest source name that prefixes them
(``match_block``, used by profiling's attribution).

``lineage`` is the trace's own account, used by the code view: TVM replays the trace and reports,
per instruction, the blocks it acted on and the blocks it returned (``worker/lineage.py``); this
module turns that into "``sum_rf_init`` comes from ``sum``: rfactor partial, init" without
looking at how names read (docs/codeview.md, lineage).
"""
from __future__ import annotations

from ..tvmscript.model import Block


def _contains(block: Block, line0: int) -> bool:
    return block.range["start"]["line"] <= line0 <= block.range["end"]["line"]


def innermost(blocks: list[Block], line0: int) -> Block | None:
    inside = [b for b in blocks if _contains(b, line0)]
    return min(inside, key=lambda b: b.range["end"]["line"] - b.range["start"]["line"]) if inside else None


def match_block(name: str, store_lines: list[int], realize_lines: list[int] | None,
                blocks: list[Block]) -> tuple[Block | None, str]:
    """The source block a (possibly transformed) block comes from, and the evidence.

    Lines are TVMScript's 1-based span lines.  Order: a store statement's span (spans survive
    MetaSchedule, docs/tvm.md §1), the block realize's span, the exact name, then the longest source
    name that prefixes it (``C_init``/``C_update``/``C_global``/``C_local`` -> ``C``).
    """
    for line in store_lines or []:
        found = innermost(blocks, line - 1)
        if found is not None:
            return found, "store span"
    if realize_lines:
        found = innermost(blocks, realize_lines[0] - 1)
        if found is not None:
            return found, "block span"
    exact = [b for b in blocks if b.name == name]
    if exact:
        return exact[0], "name"
    prefixed = [b for b in blocks if name.startswith(b.name + "_")]
    if prefixed:
        return max(prefixed, key=lambda b: len(b.name)), "name prefix"
    return None, "unmatched"


# --------------------------------------------------------------------------- lineage from the trace

#: Instructions whose block outputs are blocks that already existed (lookups, not derivations).
LOOKUPS = frozenset({"GetSBlock", "GetBlock", "GetChildBlocks", "GetConsumers", "GetProducers",
                     "GetOutputBlocks", "GetLoops", "SampleComputeLocation"})

#: The derivation step an instruction adds to the blocks it creates (``outputs``) and to the
#: block it rewrites in place (``input``); None = no step for that side.
STEPS = {
    "RFactor": ("rfactor partial", "rfactor combine"),
    "DecomposeReduction": ("init", "update"),
    "CacheRead": ("cache read", None), "ReindexCacheRead": ("cache read", None),
    "CacheWrite": ("cache write", None), "ReindexCacheWrite": ("cache write", None),
    "CacheInplace": ("cache in place", None), "CacheIndex": ("cache index", None),
    "Blockize": ("blockize", None), "Tensorize": (None, "tensorize"),
    "ComputeAt": (None, "compute-at"), "ReverseComputeAt": (None, "reverse-compute-at"),
    "DecomposePadding": ("padding init", None),
}
INLINES = frozenset({"ComputeInline", "ReverseComputeInline"})


def lineage(events: list[dict], sources: list[str]) -> list[dict]:
    """Which source block every derived block comes from, and how, from the replayed trace.

    ``events`` come from replaying a trace on TVM (``worker/lineage.py``), one per instruction:
    ``{"kind", "inputs": [[block names]...], "after": [[block names]...], "outputs": [block names]}``
    — per input, the block it names (a block input) or the blocks under it (a loop input), before
    and after the instruction ran; ``outputs`` the names of the blocks it returned.  So every link
    is what TVM reported for that instruction: nothing is inferred from how names look.

    Returns ``[{"block", "source", "derivation": [steps], "label"}]`` for the blocks that a trace
    instruction created or rewrote (``sum_rf`` → ``sum``, "rfactor partial"), in order of creation;
    blocks that were inlined away are left out.
    """
    origin: dict[str, tuple[str, list[str]]] = {name: (name, []) for name in sources}
    gone: set[str] = set()
    order: list[str] = []

    def touch(name: str, step: str | None, src: tuple[str, list[str]] | None = None) -> None:
        base = src or origin.get(name)
        if base is None:
            return
        steps = list(base[1])
        if step and (not steps or steps[-1] != step):
            steps.append(step)
        origin[name] = (base[0], steps)
        gone.discard(name)
        if name not in order:
            order.append(name)

    for event in events:
        kind = event.get("kind") or ""
        inputs = [list(names or []) for names in event.get("inputs") or []]
        after = [list(names or []) for names in event.get("after") or []]
        if kind in LOOKUPS:
            continue
        known = [n for names in inputs for n in names if n in origin]
        sources_in = {origin[n][0] for n in known}
        out_step, in_step = STEPS.get(kind, (kind.lower() or None, None))
        for before, now in zip(inputs, after):          # renamed in place (decompose: X -> X_update)
            if len(before) == 1 and len(now) == 1 and before[0] != now[0] and before[0] in origin:
                origin[now[0]] = origin.pop(before[0])
                known = [now[0] if n == before[0] else n for n in known]
        if kind in INLINES:
            gone.update(known[:1])
            continue
        base = origin[known[0]] if len(sources_in) == 1 and known else None
        for name in event.get("outputs") or []:
            if name and base is not None and name not in known:
                touch(name, out_step, base)
        if in_step and (kind == "Tensorize" or (inputs and len(inputs[0]) == 1)):
            for name in known if kind == "Tensorize" else known[:1]:
                touch(name, in_step)
    return [{"block": name, "source": origin[name][0], "derivation": origin[name][1],
             "label": derivation_label(origin[name][0], origin[name][1])}
            for name in order if name not in gone and name in origin and origin[name][1]]


def derivation_label(source: str, steps: list[str]) -> str:
    """``"sum — rfactor partial, init"``: the source block, then the steps that made the block."""
    return f"{source} — {', '.join(steps)}" if steps else source


def span_role(steps: list[str], in_init: bool) -> str:
    """Which source statement a derived block's statement that lost its span is tied to.

    ``"init"`` (the source block's ``T.init()`` store) for an init block or an init part;
    ``"header"`` (the ``with T.sblock`` line) for copies a cache instruction made, whose stores
    compute nothing of the source's; ``"update"`` (the source's own store) otherwise.
    """
    if any(step.startswith("cache") or step == "blockize" for step in steps):
        return "header"
    if in_init or (steps and steps[-1] in ("init", "padding init")):
        return "init"
    return "update"
