"""``asight counters``: measured Nsight Compute counters of a GPU run (TVM-free orchestration).

Starts ``asight_lsp.worker.counters RUN_DIR BUDGET_S`` isolated like every product process (``engine/spawn``) (a process of its own: it runs
``ncu``) and returns its one-line answer; the counters land in ``<run>/counters.jsonl``, where the
search-space view finds them (docs/analytics.md, "Measured counters").
"""
from __future__ import annotations

import json
import math
import subprocess

from ..engine.client import worker_env
from ..engine.spawn import NEUTRAL_CWD, module_argv
from ..errors import AsightError
from ..store.runs import Run


# The collector's wait beyond its budget; a budget past a week waits as long as a week does.
_GRACE_S, _LONGEST_WAIT_S = 900, 7 * 24 * 3600


def budget_seconds(value, name: str) -> float:
    """The one check of a counters budget (``asight counters --budget-s``, ``asight tune --counters-budget``,
    the editor's ``countersBudget`` and ``countersBudgetSeconds``): a finite number of seconds >= 0, else
    AsightError naming ``name`` (nan, inf or -5 would be an internal error or a dumped command line).
    0 profiles only what is always profiled (the baseline and the best); the tuning callers read 0 as no counters."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        raise AsightError(f"{name} must be a finite number of seconds >= 0 (got {value!r})")
    return float(value)


def collect(run: Run, budget_s: float = 120.0, python: str | None = None) -> dict:
    """``{status, message, profiled?, skipped?}``; AsightError when the budget is not a finite number of
    seconds >= 0 (before anything starts) or when the process gives no answer."""
    budget_s = budget_seconds(budget_s, "--budget-s")
    proc = subprocess.run(module_argv("asight_lsp.worker.counters", str(run.path.resolve()), repr(budget_s),
                                      python=python), capture_output=True, text=True, env=worker_env(),
                          cwd=NEUTRAL_CWD, timeout=min(budget_s, _LONGEST_WAIT_S) + _GRACE_S)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        raise AsightError(f"counters: the collector gave no answer ({tail})")
    return json.loads(lines[-1])
