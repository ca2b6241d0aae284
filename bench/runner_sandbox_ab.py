"""A/B: what the tuning runner's sandbox costs (docs/sandbox.md, "Building and running a file").

A = now: candidates exported as shared libraries by the builder (``metaschedule.export_shared``) and
run by a sandboxed worker that answers over the msgpack pipe (``candidate_runner.SandboxedRunner``;
TVM_BIND_THREADS=0 there).  B = before 2026-11-27: MetaSchedule's tar export (the runner links it)
and its ``LocalRunner`` without any sandbox.  Same builder code (``fast_build`` in a pool), same candidates (the
first K records of a recorded run, their traces replayed), same evaluator.  Rounds alternate A B / B A;
each round starts a fresh builder pool and runner (as one tuning run does).  Printed per round: the
build and run wall time of the batch; then medians, the per-round ratio A/B and the candidates'
median run_secs on both sides (the sandbox must not change what a kernel measures).

    python bench/runner_sandbox_ab.py [RUN_DIR] [--k 32] [--rounds 4]
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from asight_lsp.worker.compat import PopenPoolExecutor, builder_job, ms  # noqa: E402
from asight_lsp.worker import metaschedule as tuning  # noqa: E402
from asight_lsp.worker.records import apply_record  # noqa: E402


def candidates(run_dir: str, k: int) -> list:
    db = ms.database.JSONDatabase(work_dir=run_dir, allow_missing=False)
    records = [r for r in db.get_all_tuning_records() if r.run_secs and float(r.run_secs[0]) < 1e9][:k]
    return [apply_record(r.workload.mod, r).mod for r in records]


def build(mods: list, target, export) -> tuple[list[str], float]:
    started = time.perf_counter()
    pool = PopenPoolExecutor(max_workers=tuning.cores(), timeout=120)
    inputs = [ms.builder.BuilderInput(m, target) for m in mods]
    jobs = [builder_job(tuning.fast_build, item, export) for item in inputs]
    paths = [outcome.value for outcome in pool.map_with_error_catching(lambda job: job[0](*job[1]), jobs)]
    pool.shutdown()
    return paths, time.perf_counter() - started


def run(paths: list[str], mods: list, contained: bool) -> tuple[list[float], float]:
    started = time.perf_counter()
    runner = tuning.make_runner(contained=contained)
    inputs = [ms.runner.RunnerInput(p, "cpu", ms.arg_info.ArgInfo.from_prim_func(m["main"])) for p, m in zip(paths, mods)]
    results = [f.result() for f in runner.run(inputs)]
    if hasattr(runner, "close"):
        runner.close()            # its worker: started and closed within the timed span, as in a run
    wall = time.perf_counter() - started
    errors = [r.error_msg for r in results if r.error_msg]
    if errors:
        raise SystemExit(f"{len(errors)} candidates failed: {errors[0][:300]}")
    return [statistics.median(float(s) for s in r.run_secs) * 1e6 for r in results], wall


def side(name: str, mods: list, target) -> dict:
    export = tuning.export_shared if name == "A" else None
    paths, build_s = build(mods, target, export)
    us, run_s = run(paths, mods, contained=(name == "A"))
    # (MetaSchedule's task scheduler removes each candidate's folder; here the bench does)
    for p in paths:
        shutil.rmtree(os.path.dirname(p), ignore_errors=True)
    return {"build_s": build_s, "run_s": run_s, "us": us}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", nargs="?", default=str(ROOT / "fixtures" / "runs" / "mbr128"))
    ap.add_argument("--k", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=4)
    args = ap.parse_args()
    # as the tuning job does (tune_job.main): unset, the plain runner's process ran TVM on one thread
    os.environ.setdefault("TVM_NUM_THREADS", str(tuning.cores()))
    work = tempfile.mkdtemp(prefix="asight-bench-")
    shutil.copytree(args.run_dir, work, dirs_exist_ok=True)
    target = tuning.resolve_target(None)
    mods = candidates(work, args.k)
    print(f"{len(mods)} candidates of {args.run_dir}, target {target}, {tuning.cores()} cores, "
          f"load {os.getloadavg()[0]:.1f}", flush=True)
    rows = {"A": [], "B": []}
    for r in range(args.rounds):
        for name in ("A", "B") if r % 2 == 0 else ("B", "A"):
            row = side(name, mods, target)
            rows[name].append(row)
            print(f"round {r} {name}: build {row['build_s']:.2f} s, run {row['run_s']:.2f} s, "
                  f"load {os.getloadavg()[0]:.1f}", flush=True)
    for phase in ("build_s", "run_s"):
        a = [x[phase] for x in rows["A"]]
        b = [x[phase] for x in rows["B"]]
        ratios = [x / y for x, y in zip(a, b)]
        print(f"{phase}: A median {statistics.median(a):.2f} s, B median {statistics.median(b):.2f} s; "
              f"A/B per round {', '.join(f'{x:.2f}' for x in ratios)} (median {statistics.median(ratios):.2f})")
    per = [statistics.median(x) for x in zip(*(row["us"] for row in rows["A"]))]
    base = [statistics.median(x) for x in zip(*(row["us"] for row in rows["B"]))]
    kernel = sorted(x / y for x, y in zip(per, base))
    print(f"kernel run_secs A/B over {len(kernel)} candidates: median {statistics.median(kernel):.3f}, "
          f"p10 {kernel[len(kernel) // 10]:.3f}, p90 {kernel[9 * len(kernel) // 10]:.3f}")
    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
