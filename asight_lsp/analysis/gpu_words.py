"""What a GPU schedule did, in plain words (pure): thread and block binding with extents, shared and
local memory, registers a thread, achieved occupancy and what limits the kernel.

Two sources, each named where it is used:

* the schedule itself — MetaSchedule's ``PerStoreFeature`` rows of the candidate carry the launch
  extents of each store (``blockIdx_x_len`` … ``vthread_len``, ``analysis/featurelayout.py``) and the
  trace's cache stages name the buffers placed in shared and local memory;
* measured counters (``analysis/counters.py``), when the run has them for that candidate: registers a
  thread, static shared memory a block, achieved occupancy and the limiting factor.
"""
from __future__ import annotations

import numpy as np

from . import counters as cn
from . import featurelayout as fl
from .trace_summary import bound_text

AXES = [("blockIdx.x", "blockIdx_x_len"), ("blockIdx.y", "blockIdx_y_len"), ("blockIdx.z", "blockIdx_z_len"),
        ("threadIdx.x", "threadIdx_x_len"), ("threadIdx.y", "threadIdx_y_len"), ("threadIdx.z", "threadIdx_z_len"),
        ("vthread", "vthread_len")]


def launch(rows: np.ndarray | None) -> dict:
    """``{axis: extent}`` of the candidate's launch (the largest extent any store reports; axes of
    extent 1 left out); {} for a CPU program (``is_gpu`` = 0) or without rows."""
    if rows is None or not len(rows):
        return {}
    raw = fl.unslog(np.asarray(rows)[:, [fl.INDEX["is_gpu"]] + [fl.INDEX[name] for _, name in AXES]])
    if raw[:, 0].max() < 0.5:
        return {}
    out = {}
    for k, (axis, _) in enumerate(AXES):
        extent = int(round(float(raw[:, k + 1].max())))
        if extent > 1:
            out[axis] = extent
    return out


def memory_scopes(buffers: list[str]) -> dict:
    """``{"shared": [...], "local": [...]}`` from the scheduled program's buffer names (MetaSchedule's
    cache stages are named ``<buffer>_shared`` / ``<buffer>_local``; ``.dyn`` and ``_wmma`` kept)."""
    out: dict = {"shared": [], "local": []}
    for name in buffers:
        for scope in out:
            if f"_{scope}" in name and name not in out[scope]:
                out[scope].append(name)
    return out


def binding_text(axes: dict) -> str:
    """``blockIdx.x 1024 × threadIdx.x 64 · vthread 2 (65,536 threads)``."""
    blocks = [bound_text(a, n) for a, n in axes.items() if a.startswith("blockIdx")]
    threads = [bound_text(a, n) for a, n in axes.items() if a.startswith("threadIdx")]
    per_block = int(np.prod([n for a, n in axes.items() if a.startswith("threadIdx")] or [1]))
    grid = int(np.prod([n for a, n in axes.items() if a.startswith("blockIdx")] or [1]))
    text = " × ".join(blocks + threads) or "no thread binding"
    if "vthread" in axes:
        text += f" · {bound_text('vthread', axes['vthread'])}"
    return f"{text} ({grid:,} blocks of {per_block} threads)"


# the launch figures the views say, each with the counter it is read from
LAUNCH_WORDS = [(cn.REGISTERS, "registers a thread", lambda v: f"{v:.0f} registers a thread"),
                (cn.SHARED, "shared memory a block", lambda v: f"{v:,.0f} B shared memory a block"),
                (cn.OCCUPANCY, "achieved occupancy", lambda v: f"achieved occupancy {v:.0f} %")]
NO_COUNTERS = "registers, occupancy, limiting factor: not measured (no counters for this candidate)"


def refused_counters(why: str) -> str:
    """The candidate line of a run whose counters.jsonl was refused (its bad line): the file has
    counters, they are not used."""
    return f"registers, occupancy, limiting factor: not measured (the run's counters.jsonl is not used: {why})"


def measured_lines(metrics: dict | None, refused: str | None = None) -> list[str]:
    """The measured launch figures and the limiting factor of one candidate, in words, each figure
    the counters lack said with the metric it needs (an ncu run with fewer ``--metrics``); the loop
    view, the report and the hover all say these lines.  ``refused``: why the run's counters file
    is not used."""
    if not metrics:
        return [refused_counters(refused) if refused else NO_COUNTERS]
    lines = []
    have = [say(metrics[name]) for name, _, say in LAUNCH_WORDS if metrics.get(name) is not None]
    lack = [(name, word) for name, word, _ in LAUNCH_WORDS if metrics.get(name) is None]
    if have:
        lines.append("launch (measured): " + ", ".join(have))
    if lack:
        lines.append(f"{', '.join(word for _, word in lack)}: not measured "
                     f"(the counters lack {', '.join(name for name, _ in lack)})")
    limit = cn.limiter(metrics)
    lines.append(limit["text"] if limit else "limiting factor: not measured (the counters lack "
                 f"{', '.join(name for name in cn.LIMITER_METRICS if metrics.get(name) is None)})")
    return lines


def short_words(metrics: dict | None) -> str:
    """The limiting factor in short for an inlay hint: ``latency-bound, occupancy 6 %``; the
    occupancy alone without the throughput counters; '' without counters."""
    limit = cn.limiter(metrics) if metrics else None
    if limit:
        return limit["short"]
    occupancy = (metrics or {}).get(cn.OCCUPANCY)
    return f"occupancy {occupancy:.0f} %" if occupancy is not None else ""


def gpu_words(rows: np.ndarray | None, buffers: list[str], metrics: dict | None = None,
              refused: str | None = None) -> dict | None:
    """The words for one candidate (None for a CPU program): ``{binding, axes, threads_per_block,
    blocks, shared, local, registers, occupancy_pct, shared_bytes, limiter, lines, sources}``."""
    axes = launch(rows)
    if not axes:
        return None
    scopes = memory_scopes(buffers)
    out = {"axes": axes, "binding": binding_text(axes),
           "threads_per_block": int(np.prod([n for a, n in axes.items() if a.startswith("threadIdx")] or [1])),
           "blocks": int(np.prod([n for a, n in axes.items() if a.startswith("blockIdx")] or [1])),
           "shared": scopes["shared"], "local": scopes["local"],
           "sources": {"binding": "the schedule (MetaSchedule PerStoreFeature launch extents)",
                       "memory": "the schedule (cache stages' buffers)"}}
    lines = [f"threads: {out['binding']}"]
    if scopes["shared"] or scopes["local"]:
        lines.append("memory: " + "; ".join(f"{scope} {', '.join(names)}" for scope, names in scopes.items() if names))
    if metrics:
        out.update(registers=metrics.get(cn.REGISTERS), occupancy_pct=metrics.get(cn.OCCUPANCY),
                   shared_bytes=metrics.get(cn.SHARED), limiter=cn.limiter(metrics))
        out["sources"]["launch"] = "measured counters (counters.jsonl)"
    measured = measured_lines(metrics, refused)
    out["not_measured"] = [line for line in measured if ": not measured" in line]
    out["lines"] = lines + measured
    return out
