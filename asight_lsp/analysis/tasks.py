"""The tasks of a run (pure): which workload index of the JSON database is which task, and which
task a view shows by default.  A Relax run has one task per fused kernel; latencies of different
tasks are different kernels and never share a scale (honeycomb, loop view, principles, best)."""
from __future__ import annotations


def task_workloads(tasks: list[dict], hashes: list[str], chosen: list[dict] | None = None) -> dict[str, int]:
    """Task name -> workload index: by the workload hash recorded with each task at tuning time,
    else (older runs) by the measurement's chosen records, which name both."""
    index = {str(h): i for i, h in enumerate(hashes)}
    out = {t["name"]: index[str(t["workload_hash"])] for t in tasks
           if t.get("workload_hash") is not None and str(t["workload_hash"]) in index}
    for entry in chosen or []:
        if entry.get("task") not in out and entry.get("workload") is not None:
            out[entry["task"]] = int(entry["workload"])
    return out


def default_task(tasks: list[dict], workloads: dict[str, int], records: list[dict],
                 chosen: list[dict] | None = None) -> str | None:
    """The task taking most of the tuned time (chosen latency x calls), else the one with most trials."""
    weight = {t["name"]: float(t.get("weight") or 1.0) for t in tasks}
    timed = {c["task"]: (c.get("measured_us") or c.get("tuning_us") or 0.0) * weight.get(c["task"], 1.0)
             for c in chosen or [] if c.get("task") in workloads}
    if timed:
        return max(timed, key=timed.get)
    counts = {name: sum(1 for r in records if r["workload"] == w) for name, w in workloads.items()}
    return max(counts, key=counts.get) if counts else None


def pick_task(tasks: list[dict], workloads: dict[str, int], records: list[dict], chosen: list[dict] | None,
              wanted: str | None) -> str | None:
    """The task a view of the run shows: ``wanted`` (checked), else the default one for a run of
    several tasks, else None (a single-task run needs no choice)."""
    if wanted is not None:
        if wanted not in workloads:
            names = ", ".join(sorted(workloads)) or "none recorded"
            raise ValueError(f"no task '{wanted}' in this run (tasks: {names})")
        return wanted
    if len({r["workload"] for r in records}) <= 1:
        return None
    return default_task(tasks, workloads, records, chosen)


def ordered_tasks(tasks: list[dict], workloads: dict[str, int], records: list[dict],
                  chosen: list[dict] | None = None) -> list[str]:
    """The tasks a picker offers: only those with trials (a task never tried has no candidate to
    show), the largest share of the tuned time first (chosen latency x calls), then by trials."""
    weight = {t["name"]: float(t.get("weight") or 1.0) for t in tasks}
    timed = {c["task"]: (c.get("measured_us") or c.get("tuning_us") or 0.0) * weight.get(c["task"], 1.0)
             for c in chosen or [] if c.get("task") in workloads}
    counts = {name: sum(1 for r in records if r["workload"] == w) for name, w in workloads.items()}
    tried = [name for name in workloads if counts[name] > 0]
    return sorted(tried, key=lambda n: (-timed.get(n, 0.0), -counts[n], n))
