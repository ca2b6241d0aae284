"""The model view (``asight.model/1``, pure): per task of a tuned Relax model, its calls (each with
its own bindings and lines), untuned and tuned latency, share of the tuned kernel time, trials and
failures.  Built from a run's profile (``services/profiling``: per-call VM timings of the untuned
and the tuned build) and its measurement record (the end-to-end headline)."""
from __future__ import annotations

from ..analysis import twins as twin_rules
from ..analysis.attribution import SLOWER_RATIO
from ..protocol import SCHEMA_MODEL
from .context import clean

SHARE_NOTE = ("per-call times come from the VM instrument hook (one timed pass per call); shares are of the "
              "tuned build's kernel time, the end-to-end headline is the measurement record")


def _untuned_by_var(relax: dict) -> dict[str, float]:
    """µs of the untuned build's call computing each binding (its kernels are unfused: one each)."""
    calls = ((relax.get("tasks") or {}).get("baseline") or {}).get("tasks") or []
    return {v: c["us"] for c in calls for v in c.get("vars") or []}


def _call(call: dict, untuned: dict[str, float]) -> dict:
    before = [untuned[v] for v in call.get("vars") or [] if v in untuned]
    return {"call": call.get("call", 0), "bindings": call.get("vars") or [], "lines": call.get("lines"),
            "tunedUs": call.get("us"), "untunedUs": sum(before) if before else None}


def _slower(tuned_us: float, untuned_us: float | None, record: dict) -> bool:
    """Tuning made this task slower: it had trials, and its calls take ≥ ``SLOWER_RATIO`` × untuned.

    A task with no trial runs the default schedule in both builds, so a difference there is the noise
    of one timed pass per call, never a verdict (ResNet-18 at 64 trials showed 0-trial tasks at 1.8×).
    """
    if not record.get("trials") or not untuned_us or not tuned_us:
        return False
    return tuned_us >= SLOWER_RATIO * untuned_us


def twin_rows(tuning: dict | None) -> dict[str, dict]:
    """Per task: its twins and siblings and what the schedules transferred between them gave
    (run.json ``extra.twins``, ``analysis/twins.summary``)."""
    kept = (tuning or {}).get("twins") or {}
    if not kept.get("relations"):
        return {}
    return twin_rules.summary(kept["relations"], kept.get("transfers") or [])


def model_view(profile: dict, run: dict | None = None, tuning: dict | None = None) -> dict:
    """The payload from a profile of a Relax run (``unavailable`` for anything else); ``tuning`` is
    the run's ``extra`` (twins and transfers, budget outlook) when the caller has it."""
    relax = (profile or {}).get("relax")
    if not isinstance(relax, dict):
        return {"schema": SCHEMA_MODEL, "status": "unavailable", "run": run,
                "message": "the model view needs a profile of a tuned Relax model (asight profile FILE)"}
    tuned_calls = ((relax.get("tasks") or {}).get("tuned") or {}).get("tasks") or []
    untuned = _untuned_by_var(relax)
    records = relax.get("task_records") or {}
    total = sum(c.get("us") or 0.0 for c in tuned_calls) or None
    tasks: dict[str, dict] = {}
    for call in tuned_calls:
        entry = tasks.setdefault(call["task"], {"task": call["task"], "calls": []})
        entry["calls"].append(_call(call, untuned))
    rows = []
    for name, entry in tasks.items():
        rec = records.get(name) or {}
        tuned = sum(c["tunedUs"] or 0.0 for c in entry["calls"])
        before = [c["untunedUs"] for c in entry["calls"]]
        untuned_us = sum(before) if None not in before else None
        rows.append({**entry, "tunedUs": tuned, "untunedUs": untuned_us, "slower": _slower(tuned, untuned_us, rec),
                     "share": tuned / total if total else None, "trials": rec.get("trials"),
                     "failed": rec.get("failed"), "tuned": rec.get("tuned", False), "recordUs": rec.get("best_us")})
    related = twin_rows(tuning)
    outlook = {r["task"]: r for r in ((tuning or {}).get("budget") or {}).get("outlook") or []}
    kept = {d["task"]: d for d in ((profile.get("measurement") or {}).get("defaults") or []) if d.get("task")}
    for row in rows:
        if row["task"] in related:
            row["twins"] = related[row["task"]]
        if row["task"] in outlook:
            row["nextTrials"] = outlook[row["task"]]
        if row["task"] in kept:   # no trial beat the default schedule: the tuned build keeps it
            row["defaultKept"] = {"defaultUs": kept[row["task"]].get("default_us"),
                                  "bestTrialUs": kept[row["task"]].get("measured_us")}
    rows.sort(key=lambda r: -(r["tunedUs"] or 0.0))
    untried = sorted(n for n, r in records.items() if n not in tasks)
    return clean({"schema": SCHEMA_MODEL, "status": "ok", "run": run, "function": relax.get("function"),
                  "headline": {"untunedUs": (relax.get("baseline") or {}).get("median_us"),
                               "tunedUs": (relax.get("tuned") or {}).get("median_us"), "speedup": relax.get("speedup")},
                  "tasks": rows, "kernelUs": total, "notTimed": untried, "notes": [SHARE_NOTE],
                  "twinGroups": twin_rules.groups({k: v for k, v in related.items()})})
