"""Which source block a generated (scheduled) block comes from, by spans and names (pure).

Spans survive MetaSchedule on the statements that came from the source (docs/tvm.md), so a
generated block's stores or realize point at source lines; derived names (``C_init``,
``C_update``, ``C_global``) fall back to the longest source name that prefixes them.
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
