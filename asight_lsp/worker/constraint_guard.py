"""Guided search: design-principle constraints enforced inside MetaSchedule.

``PrincipleGuard`` is a MetaSchedule post-processor (``ms.postproc.PyPostproc``, one of its
official extension points).  MetaSchedule runs every post-processor on each sampled or mutated
schedule before it can be measured; a post-processor that returns False discards the candidate,
and the evolutionary search samples or mutates again.  The guard reads the schedule's trace as
JSON and rejects it when a sampled decision breaks a hard constraint, so a guided run never
measures such a candidate.  The check itself is the pure ``analysis.constraints``.
"""
from __future__ import annotations

from ..analysis.constraints import is_decision_constraint, trace_violations
from .compat import derived_object, ms


def _plain(value):
    """TVM FFI containers of a trace's JSON -> plain lists, ints, floats and strings."""
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    try:
        return [_plain(v) for v in value]
    except TypeError:
        return value


@derived_object
class PrincipleGuard(ms.postproc.PyPostproc):
    """Rejects schedules whose sampled decisions break any of ``constraints``."""

    def __init__(self, constraints: list[dict]):
        super().__init__()
        self.constraints = [c for c in constraints if is_decision_constraint(c)]
        self.checked = 0
        self.rejected = 0

    def _initialize_with_tune_context(self, context) -> None:
        return None

    def apply(self, sch) -> bool:
        if not self.constraints:
            return True
        insts, decisions = _plain(sch.trace.as_json(remove_postproc=True))
        self.checked += 1
        if trace_violations(insts, decisions, self.constraints):
            self.rejected += 1
            return False
        return True

    def clone(self):
        return PrincipleGuard(self.constraints)


def guided_space(target, constraints: list[dict]):
    """MetaSchedule's default design space for ``target`` plus the principle guard."""
    kind = "cuda" if target.kind.name == "cuda" else "llvm"
    return ms.space_generator.PostOrderApply(
        sch_rules=ms.schedule_rule.ScheduleRule.create(kind),
        postprocs=list(ms.postproc.Postproc.create(kind)) + [PrincipleGuard(constraints)],
        mutator_probs=ms.mutator.Mutator.create(kind))
