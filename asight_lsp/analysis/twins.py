"""Twins and siblings among a model's tasks (pure), and what a schedule transferred between them gave.

A ResNet has convolutions that appear in two fused kernels, one with the residual add and one
without (``fused_conv2d3_add3_relu2`` / ``fused_conv2d3_add3_add4_relu2``): MetaSchedule tunes them
as separate tasks, each from nothing (issue 21).  The worker (``worker/twins.signature``) reports
each task's *main computation*: its reduction block's name (the operator, e.g. ``conv2d_nchw``),
iteration kinds and extents, and the shapes and dtypes it reads and writes.

* **twins**: the same main computation (operator, extents, shapes, dtypes = the same layout);
  they differ only in fused epilogues, so one's schedule fits the other as it is;
* **siblings**: the same operator and iteration structure, other extents; a sibling's schedule
  keeps its structure, and its tile sizes that no longer divide are re-sampled.

Tasks without a reduction (reshape, transpose, elementwise) have no signature and no relation.
"""
from __future__ import annotations

import math

MAX_SIBLINGS = 2   # donors of other shapes per task, nearest first


def same_computation(a: dict | None, b: dict | None) -> bool:
    """Twins: the same operator on the same extents, shapes and dtypes."""
    if not a or not b:
        return False
    return all(a.get(k) == b.get(k) for k in ("op", "iters", "reads", "writes"))


def same_operator(a: dict | None, b: dict | None) -> bool:
    """Siblings (or twins): the same operator with the same iteration kinds, in the same order."""
    if not a or not b or a.get("op") != b.get("op"):
        return False
    return [k for k, _ in a.get("iters") or []] == [k for k, _ in b.get("iters") or []]


def distance(a: dict, b: dict) -> float:
    """How far two shapes of one operator are: the sum of |log ratio| of their extents."""
    return sum(abs(math.log(max(x, 1) / max(y, 1))) for (_, x), (_, y) in zip(a["iters"], b["iters"]))


def relate(signatures: dict[str, dict | None], max_siblings: int = MAX_SIBLINGS) -> dict[str, dict]:
    """Per task with a signature: its twins (task order kept) and its nearest siblings."""
    out = {}
    for name, sig in signatures.items():
        if not sig:
            continue
        twins = [o for o, s in signatures.items() if o != name and same_computation(sig, s)]
        others = [o for o, s in signatures.items()
                  if o != name and o not in twins and same_operator(sig, s)]
        others.sort(key=lambda o: distance(sig, signatures[o]))
        out[name] = {"op": sig["op"], "twins": twins, "siblings": others[:max_siblings]}
    return out


def donors(name: str, relations: dict[str, dict]) -> list[tuple[str, str]]:
    """The tasks whose best schedule ``name`` tries, as (task, "twin"|"sibling"), twins first."""
    rel = relations.get(name) or {}
    return [(t, "twin") for t in rel.get("twins", [])] + [(t, "sibling") for t in rel.get("siblings", [])]


def groups(relations: dict[str, dict]) -> list[list[str]]:
    """Twin groups of two or more tasks, each sorted, in the order of their first task."""
    seen, out = set(), []
    for name, rel in relations.items():
        if name in seen or not rel["twins"]:
            continue
        group = [name] + [t for t in rel["twins"] if t not in seen]
        seen.update(group)
        out.append(group)
    return out


def summary(relations: dict[str, dict], transfers: list[dict]) -> dict[str, dict]:
    """Per task: its twins and siblings, and what the transfers gave.

    ``transfers`` has one entry per transferred candidate measured: ``{task, donor, relation,
    latency_us (None: failed to build or run), own_best_us (the task's best before it, None when it had
    none), resampled (decisions re-sampled)}``.  ``gain`` = own best before / transferred latency
    (> 1: the transfer beat what the task had found); ``adopted`` when it was faster than the task's best
    (a task with nothing measured yet *starts from* its transfers: not counted as adopted)."""
    out = {}
    for name, rel in relations.items():
        mine = [t for t in transfers if t.get("task") == name]
        rows = []
        for t in mine:
            lat, own = t.get("latency_us"), t.get("own_best_us")
            gain = own / lat if lat and own else None
            rows.append({"from": t.get("donor"), "relation": t.get("relation"), "latencyUs": lat, "ownBestUs": own,
                         "gain": gain, "adopted": bool(lat and own and lat < own),
                         "resampled": t.get("resampled", 0)})
        gains = [r["gain"] for r in rows if r["gain"]]
        out[name] = {"op": rel["op"], "twins": rel["twins"], "siblings": rel["siblings"], "transfers": rows,
                     "bestGain": max(gains) if gains else None, "adopted": sum(r["adopted"] for r in rows)}
    return out


def describe(task: str, entry: dict) -> str | None:
    """One line for the model view: who the task's twins are and what the transfer gave."""
    if not entry.get("twins") and not entry.get("siblings"):
        return None
    who = []
    if entry["twins"]:
        who.append("twin of " + ", ".join(entry["twins"]))
    if entry["siblings"]:
        who.append("sibling of " + ", ".join(entry["siblings"]))
    rows = entry.get("transfers") or []
    if not rows:
        return f"{task}: {'; '.join(who)}; no transfer measured"
    ok = [r for r in rows if r["latencyUs"]]
    best = min(ok, key=lambda r: r["latencyUs"]) if ok else None
    if best is None:
        got = f"{len(rows)} transferred schedule(s), none built and ran"
    elif best["gain"]:
        got = (f"best transfer from {best['from']} ({best['relation']}) {best['latencyUs']:.1f} µs vs its own "
               f"{best['ownBestUs']:.1f} µs then ({best['gain']:.2f}x)")
    else:
        got = f"started from {best['from']} ({best['relation']}): {best['latencyUs']:.1f} µs"
    return f"{task}: {'; '.join(who)}; {len(rows)} transfer(s), {entry['adopted']} adopted; {got}"
