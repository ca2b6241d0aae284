"""Search constraints from design principles, and whether a trace honours them (pure, no TVM).

A constraint is the machine-readable form of a principle (``analysis.principles.constraint``)::

    {"block": "C", "inst": "SamplePerfectTile", "loop": 2, "index": 3, "n": 4, "max": 4}
    {"block": "C", "inst": "SampleCategorical", "annotation": "meta_schedule.unroll_explicit", "in": [64]}
    {"block": "C", "inst": "SampleComputeLocation", "in": [-1]}

``max``/``min`` bound a tile factor (``index`` of the ``n`` factors of the tile of loop ``loop``)
or a numeric decision; ``in`` lists allowed values.  A candidate that has no decision the
constraint names (another sketch, another block) is not constrained by it.  The tuning job
applies the same check inside MetaSchedule (``worker/constraint_guard.py``), so a guided run can never
measure a candidate that violates a hard constraint.
"""
from __future__ import annotations

from typing import Any, Iterable

from .traces import Decision, parse_decisions

BOUND_KEYS = ("max", "min", "in")


def is_decision_constraint(constraint: dict) -> bool:
    """True for constraints on a sampled decision (sketch-level ones are not enforced)."""
    return bool(constraint.get("inst")) and any(k in constraint for k in BOUND_KEYS)


def _applies(constraint: dict, decision: Decision) -> bool:
    if decision.inst != constraint.get("inst") or decision.block != constraint.get("block"):
        return False
    if constraint.get("loop") is not None and decision.loop != constraint["loop"]:
        return False
    if constraint.get("annotation") and decision.annotation != constraint["annotation"]:
        return False
    if constraint.get("n") is not None and isinstance(decision.value, list) and len(decision.value) != constraint["n"]:
        return False
    return True


def _value(constraint: dict, decision: Decision) -> Any:
    value = decision.value
    if isinstance(value, list):
        index = constraint.get("index")
        if index is None or not -len(value) <= index < len(value):
            return None
        return value[index]
    return value


def _within(constraint: dict, value: Any) -> bool:
    if value is None:
        return True
    if "in" in constraint:
        return value in constraint["in"]
    try:
        number = float(value)
    except (TypeError, ValueError):
        return True
    if "max" in constraint and number > float(constraint["max"]):
        return False
    if "min" in constraint and number < float(constraint["min"]):
        return False
    return True


def violations(decisions: Iterable[Decision], constraints: list[dict]) -> list[dict]:
    """The constraints a candidate's decisions break (empty = it honours them all)."""
    broken = []
    decisions = list(decisions)
    for constraint in constraints:
        if not is_decision_constraint(constraint):
            continue
        for decision in decisions:
            if _applies(constraint, decision) and not _within(constraint, _value(constraint, decision)):
                broken.append(constraint)
                break
    return broken


def trace_violations(insts: list, decisions: list, constraints: list[dict]) -> list[dict]:
    """``violations`` of a trace given as JSON (``[insts, decisions]`` of a tuning record)."""
    return violations(parse_decisions(insts, decisions), constraints)


def describe(constraint: dict) -> str:
    """A one-line reading of a constraint, e.g. ``C: tile factor 3/4 of loop 2 <= 4``."""
    if "sketch" in constraint:
        return f"sketch = {constraint['sketch']}"
    what = constraint.get("inst", "?")
    if constraint.get("inst") == "SamplePerfectTile":
        what = f"tile factor {constraint.get('index')}/{constraint.get('n')} of loop {constraint.get('loop')}"
    elif constraint.get("annotation"):
        what = constraint["annotation"]
    bounds = [f"{'<=' if k == 'max' else '>=' if k == 'min' else 'in'} {constraint[k]}"
              for k in BOUND_KEYS if k in constraint]
    return f"{constraint.get('block')}: {what} {' '.join(bounds)}"
