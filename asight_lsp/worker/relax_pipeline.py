"""The Relax pipeline MetaSchedule tunes and the VM runs: legalize -> annotate -> fold -> fuse.

One definition for tuning (task extraction), profiling (call sites, per-call latency) and graphs
(hotspot matching), so every part sees the same fused kernels.  ``library_dispatch_passes`` come
first, as in ``relax.build``'s default pipeline (none on CPU).
"""
from __future__ import annotations

from .compat import relax, tvm


def legalize(mod, target):
    """Operators lowered to PrimFuncs (each binding keeps its name), with op patterns annotated."""
    return tvm.transform.Sequential([*relax.pipeline.library_dispatch_passes(target), relax.transform.LegalizeOps(),
                                     relax.transform.AnnotateTIROpPattern()])(mod)


def group(mod, target):
    """``legalize`` + FoldConstant + FuseOps: fused groups as Relax functions (names inside kept)."""
    return tvm.transform.Sequential([relax.transform.FoldConstant(), relax.transform.FuseOps()])(legalize(mod, target))


def fuse(mod, target):
    """``group`` + FuseTIR: one PrimFunc per fused group, named as MetaSchedule names the tasks."""
    return relax.transform.FuseTIR()(group(mod, target))


def bindings(func) -> list:
    """The bindings of a Relax function, in order, across its dataflow blocks."""
    return [b for block in func.body.blocks for b in block.bindings]
