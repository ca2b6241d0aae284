"""``asight counters``: measured Nsight Compute counters of a GPU run (TVM-free orchestration).

Starts ``asight_lsp.worker.counters RUN_DIR BUDGET_S`` isolated like every product process (``engine/spawn``) (a process of its own: it runs
``ncu``) and returns its one-line answer; the counters land in ``<run>/counters.jsonl``, where the
search-space view finds them (docs/analytics.md, "Measured counters").
"""
from __future__ import annotations

import json
import subprocess

from ..engine.client import worker_env
from ..engine.spawn import NEUTRAL_CWD, module_argv
from ..errors import AsightError
from ..store.runs import Run


def collect(run: Run, budget_s: float = 120.0, python: str | None = None) -> dict:
    """``{status, message, profiled?, skipped?}``; AsightError when the process gives no answer."""
    proc = subprocess.run(module_argv("asight_lsp.worker.counters", str(run.path.resolve()), str(budget_s),
                                      python=python),
                          capture_output=True, text=True, env=worker_env(), cwd=NEUTRAL_CWD, timeout=budget_s + 900)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    if not lines:
        tail = (proc.stderr.strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
        raise AsightError(f"counters: the collector gave no answer ({tail})")
    return json.loads(lines[-1])
