"""Why a tune measured fewer trials than asked (pure: no TVM, no disk).

MetaSchedule ends a task silently when its search proposes nothing: the evolutionary search logs
"Cannot sample enough initial population" when every sampled schedule was rejected by a
post-processor (on a GPU: ``VerifyGPUCode``), and a small space simply runs out of new schedules.
A build that times out or fails is stored as an ordinary failed trial.  The tuning job collects
the pieces (``worker/tune_job.py``): the failure groups (``analysis/failures.py``), where each
task's search ended (``worker/search.py``) and the post-processors' rejection counts from
MetaSchedule's task logs; ``summarise`` turns them into counts and one plain sentence that the CLI,
the lens and the panels show (``run.json`` ``extra.shortfall``).
"""
from __future__ import annotations

import re

SCHEMA = "asight.shortfall/1"
_POSTPROC = re.compile(r"Postproc #\d+ \[(?:[\w.]*\.)?(\w+)\]: (\d+) failure\(s\)")
_REPLAY = re.compile(r"Trace replay failures: (\d+) failure\(s\)")
_SAMPLING_FAILED = "Cannot sample enough initial population"


def rejections(log_text: str) -> dict:
    """``{postproc: count, "_replay": n, "_sampling_failed": bool}`` from one MetaSchedule task log.

    Each "Sample-Init-Population summary" holds running totals, so the largest count is the total."""
    counts: dict = {}
    for name, n in _POSTPROC.findall(log_text):
        counts[name] = max(counts.get(name, 0), int(n))
    replay = [int(n) for n in _REPLAY.findall(log_text)]
    out = {k: v for k, v in counts.items() if v > 0}
    if replay and max(replay) > 0:
        out["_replay"] = max(replay)
    if _SAMPLING_FAILED in log_text:
        out["_sampling_failed"] = True
    return out


def merge_rejections(per_task: list[dict]) -> dict:
    """Sum the rejection counts of several task logs (``_sampling_failed`` counts the tasks)."""
    total: dict = {}
    for counts in per_task:
        for key, value in counts.items():
            total[key] = total.get(key, 0) + int(value)
    return total


def _is_timeout(group: dict) -> bool:
    return group.get("stage") == "build" and "timeout" in group.get("reason", "").lower()


def summarise(requested: int, proposed: int, failed: int, groups: list[dict] | None = None,
              search_ends: list[dict] | None = None, rejected: dict | None = None) -> dict | None:
    """Counts and a sentence for a session that measured fewer valid trials than ``requested``.

    ``proposed``: candidates built and run this session; ``failed``: those without a latency;
    ``groups``: failure groups (``analysis/failures.group``); ``search_ends``: ``[{task, why,
    proposed}]`` where a task's search stopped early (why: ``"sampling"`` = the search had no
    candidate to offer, ``"repeats"`` = only schedules the database held); ``rejected``: merged
    post-processor rejections.  None when every asked trial was measured.
    """
    groups, search_ends, rejected = groups or [], search_ends or [], rejected or {}
    measured = max(proposed - failed, 0)
    if requested <= 0 or measured >= requested:
        return None
    timeouts = sum(g["count"] for g in groups if _is_timeout(g))
    counts = {
        "requested": requested, "measured": measured, "not_proposed": max(requested - proposed, 0),
        "build_timeout": timeouts,
        "build_failed": sum(g["count"] for g in groups if g.get("stage") == "build") - timeouts,
        "run_failed": sum(g["count"] for g in groups if g.get("stage") == "run"),
        "rejected": {k: v for k, v in rejected.items() if not k.startswith("_")},
        "search_ended": [dict(e) for e in search_ends],
    }
    return {"schema": SCHEMA, **counts, "reasons": reasons(counts, groups, rejected),
            "text": sentence(counts, groups, rejected)}


def reasons(counts: dict, groups: list[dict], rejected: dict) -> list[str]:
    """The causes, largest first, each one short clause with its count."""
    out = []
    if counts["not_proposed"]:
        out.append(_not_proposed(counts, rejected))
    crashed = [e for e in counts["search_ended"] if e.get("why") == "failed"]
    if crashed:
        out.append(f"the search of {len(crashed)} task(s) failed and stopped "
                   f"({crashed[0]['task']}: {crashed[0].get('error') or 'no message'})")
    if counts["build_timeout"]:
        out.append(f"{counts['build_timeout']} build(s) timed out")
    if counts["build_failed"]:
        top = next((g for g in groups if g.get("stage") == "build" and not _is_timeout(g)), None)
        out.append(f"{counts['build_failed']} build(s) failed" + (f" (most often: {top['reason']})" if top else ""))
    if counts["run_failed"]:
        top = next((g for g in groups if g.get("stage") == "run"), None)
        out.append(f"{counts['run_failed']} run(s) failed" + (f" (most often: {top['reason']})" if top else ""))
    return out


def _not_proposed(counts: dict, rejected: dict) -> str:
    n = counts["not_proposed"]
    named = sorted(((v, k) for k, v in rejected.items() if not k.startswith("_")), reverse=True)
    if named and (rejected.get("_sampling_failed") or not counts["measured"]):
        top = ", ".join(f"{k} rejected {v}" for v, k in named[:2])
        return (f"{n} never proposed: the design space produced no valid candidate (every sampled schedule "
                f"was rejected by a post-processor: {top})")
    whys = {e.get("why") for e in counts["search_ended"]}
    if whys == {"failed"}:
        return f"{n} never proposed"
    if "repeats" in whys:
        return f"{n} never proposed: the search offered only schedules the run already measured"
    return f"{n} never proposed: the design space produced no new candidates (the search ran out)"


def sentence(counts: dict, groups: list[dict], rejected: dict) -> str:
    """``measured 0 of 32 trials: 32 never proposed: ...; 3 build(s) timed out``."""
    causes = reasons(counts, groups, rejected) or ["the search ended early"]
    return f"measured {counts['measured']} of {counts['requested']} trials: " + "; ".join(causes)
