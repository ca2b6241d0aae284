"""Nsight Compute's CSV (``ncu --csv --metrics ...``) as counters.jsonl metrics (pure).

``ncu --csv`` prints ``==PROF==`` lines, then one row per (kernel launch, metric):
``"ID","Process ID",…,"Kernel Name",…,"Block Size","Grid Size",…,"Metric Name","Metric Unit","Metric Value"``
with thousands separators in the values (``"216,768"``).  A program of several kernels is one
counters line: durations summed, shares of peak and rates weighted by each kernel's duration,
launch descriptors (registers, shared memory) the largest.
"""
from __future__ import annotations

import csv
import io

METRICS = ["gpu__time_duration.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
           "sm__throughput.avg.pct_of_peak_sustained_elapsed", "sm__warps_active.avg.pct_of_peak_sustained_active",
           "l1tex__t_sector_hit_rate.pct", "lts__t_sector_hit_rate.pct",
           "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active", "launch__registers_per_thread",
           "launch__shared_mem_per_block_static", "launch__occupancy_limit_registers",
           "smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct",
           "smsp__warp_issue_stalled_barrier_per_warp_active.pct"]
DURATION = "gpu__time_duration.sum"
PERMISSION = "ERR_NVGPUCTRPERM"


def _number(text: str):
    try:
        return float(text.replace(",", ""))
    except ValueError:
        return None


def parse_csv(text: str) -> list[dict]:
    """Kernel launches in ID order: ``[{id, kernel, block, grid, metrics: {name: number}}]``."""
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    head = next((i for i, r in enumerate(rows) if r[0] == "ID"), None)
    if head is None:
        return []
    col = {name: i for i, name in enumerate(rows[head])}
    launches: dict = {}
    for row in rows[head + 1:]:
        if len(row) < len(col) or not row[col["ID"]].isdigit():
            continue
        launch = launches.setdefault(int(row[col["ID"]]), {
            "id": int(row[col["ID"]]), "kernel": row[col["Kernel Name"]], "block": row[col.get("Block Size", 0)],
            "grid": row[col.get("Grid Size", 0)], "metrics": {}})
        value = _number(row[col["Metric Value"]])
        if value is not None:
            launch["metrics"][row[col["Metric Name"]]] = value
    return [launches[k] for k in sorted(launches)]


def program_metrics(launches: list[dict]) -> dict:
    """One program's metrics from its kernel launches (see module doc)."""
    if len(launches) == 1:
        return dict(launches[0]["metrics"])
    weights = [l["metrics"].get(DURATION) or 0.0 for l in launches]
    total = sum(weights) or float(len(launches))
    weights = [w or (total / len(launches)) for w in weights]
    names = sorted({k for l in launches for k in l["metrics"]})
    out = {}
    for name in names:
        values = [(l["metrics"][name], w) for l, w in zip(launches, weights) if name in l["metrics"]]
        if name == DURATION:
            out[name] = sum(v for v, _ in values)
        elif name.startswith("launch__"):
            out[name] = max(v for v, _ in values)
        else:
            out[name] = sum(v * w for v, w in values) / sum(w for _, w in values)
    return out


def problem(stdout: str, stderr: str, returncode: int) -> str | None:
    """Why ncu gave no counters, in one line (None when it did)."""
    text = f"{stdout}\n{stderr}"
    if PERMISSION in text:
        return ("ncu is not permitted to read this GPU's performance counters (ERR_NVGPUCTRPERM): run it as an "
                "administrator or allow profiling (NVreg_RestrictProfilingToAdminUsers=0)")
    if returncode != 0 and not parse_csv(stdout):
        last = [ln for ln in text.splitlines() if ln.strip()][-1:] or [f"exit code {returncode}"]
        return f"ncu failed: {last[0][:200]}"
    if not parse_csv(stdout):
        return "ncu profiled no kernel"
    return None
