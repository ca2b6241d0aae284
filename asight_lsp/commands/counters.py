"""``asight counters --run R [--budget-s S] [--work-dir D]``: Nsight Compute counters of a GPU run's
baseline and candidates (the best always) into the run's counters.jsonl (``services/counters.py``)."""
from __future__ import annotations

from ..errors import AsightError


def add_parser(sub):
    p = sub.add_parser("counters", help="Nsight Compute counters of a GPU run's programs (into counters.jsonl)")
    p.add_argument("--run", dest="run_ref", default="latest", help="run id, id prefix, run directory or 'latest'")
    p.add_argument("--work-dir", help="where runs are stored (default ./.asight)")
    p.add_argument("--budget-s", type=float, default=120.0,
                   help="time for profiling, a finite number of seconds >= 0 (default 120 s); the baseline and "
                   "the best are always profiled (0: only they)")
    p.add_argument("--python", help="interpreter for the collector (default: this one)")
    return p


def run(args) -> int:
    from ..services.counters import budget_seconds, collect
    from ..store.runs import RunStore
    budget_seconds(args.budget_s, "--budget-s")   # refused before the run is looked up or anything starts
    run = RunStore(args.work_dir).get(args.run_ref)
    result = collect(run, args.budget_s, args.python)
    if result.get("status") != "ok":
        raise AsightError(f"counters of run {run.id} not collected: {result.get('message')}")
    print(f"counters {run.path / 'counters.jsonl'}: {result['message']}")
    return 0
