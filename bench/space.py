"""Search-space analytics at scale: time and peak memory of the payloads for 100, 1k, 5k and 20k candidates.

Synthetic runs (``asight_lsp.analysis.synthetic``: MetaSchedule-shaped records of a tiled matmul and
the feature cache the worker would write) are written to a temporary run directory, then timed:

* ``load``        — reading the run from disk: JSON records + ``features.msgpack`` -> candidate table;
* ``searchSpace`` — the honeycomb + contour payload from the table (the issue's goal: <= 2 s, <= 500 MB
  at 20k);
* ``loopView``, ``principles`` — the other payloads, for reference.

Each size runs in a **fresh process** (``--one N``), as a language server or a CLI would meet it:
``first_*`` are the first load and the first payload of that process (what a user waits for, imports
included), then the best of ``--repeat`` warm runs (wall and CPU time: the box is shared, CPU time is
the steadier figure); memory is the peak of Python/numpy allocations during one more run
(tracemalloc, which would slow the timed runs) plus the process's peak RSS.  The machine's load
average is printed with every row.  Results go to stdout and, as JSON, to
``bench/results/space.json``.  Usage: ``python bench/space.py [--sizes 100 1000 5000 20000] [--repeat 3]``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from asight_lsp.store.caches import write_feature_cache  # noqa: E402
from asight_lsp.analysis.synthetic import SOURCE, synthetic_run  # noqa: E402
from asight_lsp.store.runs import Run, RunMeta  # noqa: E402
from asight_lsp.views.loops import loop_view
from asight_lsp.views.principles import principles
from asight_lsp.views.searchspace import search_space  # noqa: E402
from asight_lsp.services.run_data import load_run  # noqa: E402

GOAL_S, GOAL_MB = 2.0, 500.0


def write_run(n: int, root: Path) -> Run:
    """A run directory of n synthetic candidates (records, feature cache, run.json, source)."""
    records, cache = synthetic_run(n, seed=n)
    run_dir = root / f"syn{n}"
    run_dir.mkdir()
    (root / "mm.py").write_text(SOURCE)
    with (run_dir / "database_tuning_record.json").open("w") as out:
        for r in records:
            out.write(json.dumps([0, [[r["insts"], r["decisions"]], r["run_secs"], r["target"], r["args_info"]]]) + "\n")
    write_feature_cache(run_dir, cache)
    run = Run(run_dir)
    run.save(RunMeta(id=run_dir.name, file=str(root / "mm.py"), function="mm", state="done", baseline_us=60000.0,
                     target={"kind": "llvm", "mcpu": "znver3", "num-cores": 2}, trials_done=n))
    return run


def timed(fn, repeat: int) -> tuple[float, float, float, object]:
    """(best wall s, best cpu s over ``repeat`` plain runs, peak traced MB of one more run, result).

    Memory is traced in a separate run: tracemalloc slows allocation-heavy Python several-fold."""
    walls, cpus, result = [], [], None
    for _ in range(repeat):
        w0, c0 = time.perf_counter(), time.process_time()
        result = fn()
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
    tracemalloc.start()
    fn()
    peak = tracemalloc.get_traced_memory()[1] / 2 ** 20
    tracemalloc.stop()
    return min(walls), min(cpus), peak, result


def rss_peak_mb() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def bench(n: int, repeat: int, run: Run) -> dict:
    try:
        from asight_lsp.services.run_data import warm_imports
    except ImportError:    # an older checkout (before/after comparisons)
        warm_imports = lambda: None  # noqa: E731
    w0, c0 = time.perf_counter(), time.process_time()
    warm_imports()   # as services.run_data.build_view does for a searchSpace request
    data = load_run(run, extract=False)
    first_load, first_load_cpu = time.perf_counter() - w0, time.process_time() - c0
    w0, c0 = time.perf_counter(), time.process_time()
    search_space(data, seed=0)
    first_space, first_space_cpu = time.perf_counter() - w0, time.process_time() - c0
    first_rss = rss_peak_mb()
    load_s, load_cpu, load_mb, data = timed(lambda: load_run(run, extract=False), repeat)
    space_s, space_cpu, space_mb, payload = timed(lambda: search_space(data, seed=0), repeat)
    loops_s, _, loops_mb, _ = timed(lambda: loop_view(data), 1)
    princ_s, _, princ_mb, found = timed(lambda: principles(data, seed=0), 1)
    space_stages = search_space(data, seed=0)["timings"]
    return {"candidates": n, "cells": len(payload["cells"]), "k": payload["clustering"]["k"],
            "first_load_s": round(first_load, 3), "first_load_cpu_s": round(first_load_cpu, 3),
            "first_searchSpace_s": round(first_space, 3), "first_searchSpace_cpu_s": round(first_space_cpu, 3),
            "rss_after_first_mb": first_rss,
            "load_s": round(load_s, 3), "load_cpu_s": round(load_cpu, 3), "load_peak_mb": round(load_mb, 1),
            "searchSpace_s": round(space_s, 3), "searchSpace_cpu_s": round(space_cpu, 3),
            "searchSpace_peak_mb": round(space_mb, 1), "searchSpace_stages_s": space_stages,
            "payload_json_mb": round(len(json.dumps(payload)) / 2 ** 20, 2),
            "loopView_s": round(loops_s, 3), "loopView_peak_mb": round(loops_mb, 1),
            "principles_s": round(princ_s, 3), "principles_peak_mb": round(princ_mb, 1),
            "principles_found": len(found["principles"]),
            "rss_peak_mb": rss_peak_mb(),
            "load_avg": [round(x, 2) for x in os.getloadavg()]}


def one(n: int, repeat: int, run_dir: str) -> dict:
    """One size in this (fresh) process, from a run directory the parent wrote (so that generating
    the synthetic run does not count in this process's memory)."""
    return bench(n, repeat, Run(run_dir))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 5000, 20000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--one", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--run-dir", help=argparse.SUPPRESS)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "space.json"))
    args = ap.parse_args()
    if args.one:
        print(json.dumps(one(args.one, args.repeat, args.run_dir)))
        return 0
    rows = []
    for n in args.sizes:
        with tempfile.TemporaryDirectory() as tmp:
            run = write_run(n, Path(tmp))
            done = subprocess.run([sys.executable, __file__, "--one", str(n), "--repeat", str(args.repeat),
                                   "--run-dir", str(run.path)], capture_output=True, text=True, check=True)
        rows.append(json.loads(done.stdout.strip().splitlines()[-1]))
        r = rows[-1]
        print(f"{n:>6} candidates: first load {r['first_load_s']:.2f} s (cpu {r.get('first_load_cpu_s', float('nan')):.2f}), "
              f"first searchSpace {r['first_searchSpace_s']:.2f} s (cpu {r.get('first_searchSpace_cpu_s', float('nan')):.2f})"
              f" | warm: load {r['load_s']:.2f} s ({r['load_peak_mb']:.0f} MB traced), searchSpace {r['searchSpace_s']:.2f} s "
              f"(cpu {r['searchSpace_cpu_s']:.2f} s, peak {r['searchSpace_peak_mb']:.0f} MB), loopView {r['loopView_s']:.2f} s,"
              f" principles {r['principles_s']:.2f} s | {r['cells']} cells, k={r['k']}, payload {r['payload_json_mb']} MB"
              f" | RSS peak after the first payload {r['rss_after_first_mb']:.0f} MB, at the end {r['rss_peak_mb']:.0f} MB"
              f" | load avg {r['load_avg']}", flush=True)
    big = max(rows, key=lambda r: r["candidates"])
    verdict = {"goal": f"<= {GOAL_S} s and <= {GOAL_MB} MB at {big['candidates']}",
               "met": big["searchSpace_s"] <= GOAL_S and big["searchSpace_peak_mb"] <= GOAL_MB}
    result = {"bench": "space", "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                                            "load_avg": os.getloadavg()}, "rows": rows, "verdict": verdict}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2))
    print(json.dumps(verdict))
    return 0


if __name__ == "__main__":
    sys.exit(main())
