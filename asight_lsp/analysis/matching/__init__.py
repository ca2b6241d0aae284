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

from .common import GRAPH, GRAPH_NAMES, GRAPH_RELAXED, LABEL, NAME, UNMATCHED, base_name
from .relax import match_relax
from .tir import match_tir

__all__ = ["match_tir", "match_relax", "base_name", "GRAPH", "GRAPH_NAMES", "GRAPH_RELAXED", "LABEL", "NAME", "UNMATCHED"]
