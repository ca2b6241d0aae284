"""What both matchers share: match kinds, search limits, derived-name suffixes, node predicates."""
from __future__ import annotations

import re
from dataclasses import dataclass, field


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


LINEAGE = "lineage"                # no graph pairing; the trace says which source block it was made from


UNMATCHED = "unmatched"


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
