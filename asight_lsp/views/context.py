"""What every view of a run starts from (``RunData``: the run, its metadata, candidate table and
source function, loaded by ``services.run_data.load_run``) and the helpers every payload shares."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..analysis.candidates import CandidateTable
from ..store.index import chosen_entry
from ..store.record import UNMEASURED, measured_headline
from ..store.runs import Run, RunMeta
from ..tvmscript.model import Function
from .measured import measurement_stamp
from .text import headline_text


@dataclass
class RunData:
    run: Run
    meta: RunMeta
    table: CandidateTable
    function: Function | None
    notes: list[str] = field(default_factory=list)
    task: str | None = None                      # the task shown (runs of several tasks: one at a time)
    tasks: list[str] = field(default_factory=list)
    text: str | None = None                      # the source text the function was read from
    counters: list | None = None                 # the run's counters.jsonl entries (store/counters.py), if any
    counters_refused: str | None = None          # why the run's counters.jsonl is not used (its bad line), if so
    on_device: bool = False                      # its target runs on a GPU (engine.targets.runs_on_device)
    view: Any = None                             # the catalogue's ``RunView`` of the run (services/catalogue.py)


def run_info(data: RunData) -> dict:
    """The run summary every payload carries: the headline is the run's measurement record; the
    fastest latency seen while tuning (MetaSchedule's runner) is kept apart, labelled."""
    m = data.meta
    lat = data.table.latency_us
    ok = np.isfinite(lat)
    tuning_best = float(np.nanmin(lat)) if ok.any() else None
    shown = measured_headline(m) or UNMEASURED
    return clean({"id": data.run.id or m.id, "file": m.file, "function": m.function, "state": m.state,
                  "target": m.target_label or (m.target if isinstance(m.target, str) else None),
                  "trials": len(lat), "measured": int(ok.sum()), "failed": int((~ok).sum()),
                  "baseline_us": shown.untuned_us, "best_us": shown.tuned_us,
                  "speedup": shown.speedup_estimate, "verdict": shown.verdict,
                  "headline": headline_text(shown.raw, tuning_best, m.extra), "tuning_best_us": tuning_best,
                  "tuning_source": (m.extra.get("tuning") or {}).get("source"),
                  "measured_by": shown.by, "noisy": shown.busy,
                  "task": data.task, "tasks": data.tasks or None,
                  "failures": [{k: g.get(k) for k in ("reason", "count", "stage", "log")}
                               for g in m.extra.get("failures") or []] or None,
                  "shortfall": m.shortfall.text if m.shortfall else None,
                  "measurement": measurement_stamp(shown.raw),
                  "status": data.view.status if data.view is not None else None,
                  "reasons": list(data.view.reasons) if data.view is not None and data.view.reasons else None})


def best_candidate(data: RunData) -> tuple[int | None, dict | None]:
    """(index in ``data.table``, the measurement's ``chosen`` entry or None) of the run's best
    candidate: the record its measurement chose by re-measurement for the workload shown
    (``store.index.chosen_entry``, the rule hovers and the code view follow), else the fastest while
    tuning (entry None).  (None, None) when nothing was measured."""
    table = data.table
    fastest = table.best_index()
    if fastest is None:
        return None, None
    measured = data.meta.measured
    entry = chosen_entry(measured.chosen if measured else None, int(table.workload[fastest]))
    picked = np.flatnonzero((table.trials == entry["trial"]) & table.valid) if entry else []
    return (int(picked[0]), entry) if len(picked) else (fastest, None)


def best_words(data: RunData, index: int | None, entry: dict | None) -> dict:
    """Which trial is the run's best and how it was picked; the fastest while tuning named apart
    when it is another trial (``trial``, ``chosen_by``, ``fastest_trial``)."""
    if index is None:
        return {}
    out = {"trial": int(data.table.trials[index]),
           "chosen_by": "re-measurement" if entry else "fastest while tuning"}
    fastest = data.table.best_index()
    if entry and fastest != index:
        out["fastest_trial"] = int(data.table.trials[fastest])
    return out


def clean(value: Any, digits: int = 6) -> Any:
    """JSON-safe copy: NaN/inf -> None, numpy scalars -> Python, floats rounded to ``digits``."""
    if isinstance(value, dict):
        return {str(k): clean(v, digits) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [clean(v, digits) for v in value]
    if isinstance(value, np.ndarray):
        return clean(value.tolist(), digits)
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        value = float(value)
        if not math.isfinite(value):
            return None
        return round(value, digits) if digits is not None else value
    if isinstance(value, np.bool_):
        return bool(value)
    return value
