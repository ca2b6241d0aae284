"""Guided re-tune (TVM-free side): principles of a finished run become constraints of a new one.

``plan_guidance`` reads the design principles of run R (``views.principles``), keeps those that go
with *lower* latency (plus any the user passes as JSON), and returns the constraints the tuning
job enforces through MetaSchedule's post-processor hook (``worker/constraint_guard.py``).  The guided run
starts from R's measured records (copied into its own database), so the evolutionary search is
seeded with R's best candidates and R's trials count toward the guided run's total budget: a
guided run of ``N`` new trials after R is compared with plain MetaSchedule given ``len(R) + N``.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

from ..analysis.constraints import describe, is_decision_constraint
from ..errors import AsightError
from ..store.runs import DB_RECORDS, DB_WORKLOADS, Run, RunStore, read_records

MAX_PRINCIPLES = 4


def load_user_principles(path: str) -> list[dict]:
    """Principles or bare constraints from a JSON file (a list, or a principles payload)."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise AsightError(f"no such principles file: {path}") from None
    except json.JSONDecodeError as err:
        raise AsightError(f"{path} is not valid JSON ({err.msg} at line {err.lineno})") from None
    items = data.get("principles", data.get("constraints")) if isinstance(data, dict) else data
    if not isinstance(items, list):
        raise AsightError(f"{path}: expected a list of principles or constraints")
    out = []
    for item in items:
        constraint = item.get("constraint", item) if isinstance(item, dict) else None
        if not isinstance(constraint, dict) or not is_decision_constraint(constraint):
            raise AsightError(f"{path}: not a decision constraint: {json.dumps(item)[:80]}")
        out.append({"constraint": constraint, "text": item.get("text") or describe(constraint), "source": "user"})
    return out


def faster_principles(payload: dict, limit: int = MAX_PRINCIPLES, kind: str = "principles") -> list[dict]:
    """The principles of a payload (or, ``kind="tentative"``, its tentative ranges) that go with
    lower latency, strongest first, one per decision."""
    chosen, keys = [], set()
    source = "mined" if kind == "principles" else "tentative"
    for principle in sorted(payload.get(kind) or [], key=lambda p: p.get("effect", 0)):
        constraint = principle.get("constraint") or {}
        if principle.get("effect", 0) >= 0 or not is_decision_constraint(constraint):
            continue
        key = (constraint.get("block"), constraint.get("inst"), constraint.get("loop"), constraint.get("index"),
               constraint.get("annotation"))
        if key in keys:
            continue
        keys.add(key)
        text = principle.get("text") or describe(constraint)
        if source == "tentative":
            text += " [tentative: not significant after the FDR correction]"
        chosen.append({"constraint": constraint, "text": text, "effect": principle.get("effect"),
                       "n": principle.get("n"), "source": source})
        if len(chosen) == limit:
            break
    return chosen


def plan_guidance(store: RunStore, guided_by: str, function: str, principles_file: str | None = None,
                  worker=None, aliases: tuple = ()) -> dict:
    """Constraints and provenance for a run guided by run ``guided_by``.

    ``aliases`` are other names of the same selection (a one-function module's function id).
    Raises ``AsightError`` when the base run is of another function or yields no usable principle.
    """
    base = store.get(guided_by)
    meta = base.load()
    if meta.function != function and meta.function not in aliases:
        raise AsightError(f"run {base.id} tuned {meta.function}, not {function}: guide a run of the same function")
    if not read_records(base.path):
        raise AsightError(f"run {base.id} has no records to learn principles from")
    chosen = load_user_principles(principles_file) if principles_file else []
    if not chosen:
        from .run_data import build_view as build
        payload = build("principles", base.path, worker=worker)
        # A short base run seldom proves a principle; steer by its tentative ranges then, labelled.
        chosen = faster_principles(payload) or faster_principles(payload, kind="tentative")
        if not chosen:
            why = payload.get("message") or "no sampled decision went with lower latency with enough evidence"
            raise AsightError(f"run {base.id} gives no design principle to guide by ({why}); "
                              "tune it longer, or pass --principles FILE")
    return {"guided_by": base.id, "principles": chosen, "constraints": [p["constraint"] for p in chosen],
            "base_dir": str(base.path), "base_records": len(read_records(base.path))}


def seed_from(base_dir: str | Path, run: Run) -> int:
    """Copy the base run's database into the new run's; returns how many records it holds."""
    for name in (DB_WORKLOADS, DB_RECORDS):
        source = Path(base_dir) / name
        if source.exists():
            shutil.copyfile(source, run.path / name)
    return len(read_records(run.path))


def _best_us(records: list[dict], limit: int | None = None) -> float | None:
    values = [r["latency_us"] for r in records[:limit] if r["latency_us"] is not None]
    return min(values) if values else None


def compare_with_plain(store: RunStore, run: Run) -> dict | None:
    """A guided run against plain MetaSchedule at the same total trial budget.

    Rows: the base run (its own trials), the guided run (base + guided trials), and, when the
    store holds an unguided run of the same function, source and target with at least as many
    trials, that run's best within the same number of trials (trial order).  None for a plain run.
    """
    meta = run.load()
    guidance = meta.extra.get("guidance")
    if not guidance:
        return None
    records = run.records()
    budget = len(records)
    rows = [{"arm": f"base run {guidance['guided_by']} (plain)", "trials": meta.extra.get("seeded_records", 0),
             "best_us": _best_us(records, meta.extra.get("seeded_records", 0))},
            {"arm": "guided (base + guided trials)", "trials": budget, "best_us": _best_us(records)}]
    plain = None
    for other in reversed(store.all()):
        try:
            other_meta = other.load()
        except AsightError:
            continue
        if (other_meta.guided_by or other_meta.function != meta.function or other.id == run.id
                or other_meta.source_hashes != meta.source_hashes or other_meta.target_label != meta.target_label):
            continue
        other_records = other.records()
        if len(other_records) >= budget:
            plain = {"arm": f"plain MetaSchedule, run {other.id}", "trials": budget,
                     "best_us": _best_us(other_records, budget)}
            break
    if plain:
        rows.append(plain)
    gain = (plain["best_us"] / rows[1]["best_us"] - 1) if plain and plain["best_us"] and rows[1]["best_us"] else None
    return {"guided_by": guidance["guided_by"], "principles": guidance["principles"], "budget": budget,
            "rows": rows, "guided_faster": gain,
            "note": None if plain else (f"no unguided run with {budget} or more trials of this function yet: "
                                        f"tune it with --trials {budget} --new to compare")}
