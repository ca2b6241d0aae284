"""Nsight Compute counters of a GPU run's programs: ``python -m asight_lsp.worker.counters RUN_DIR BUDGET_S``.

A process of its own (like the tuning job; it starts ``ncu``, which the sandboxed parsing worker may
not): the baseline (DLight's default schedule, ``worker/baseline.py``) and the run's measured
candidates, fastest first (the best always), each built, exported and run once under
``ncu --csv --metrics …`` in a child Python, until ``BUDGET_S`` is spent.  Each program becomes one
line of ``<run>/counters.jsonl`` (``store/counters.py``; several kernels are merged by
``analysis/ncu.program_metrics``).  Prints one JSON line: ``{status, profiled, skipped, message}``.
Without a CUDA device or without ncu, or when ncu may not read the counters, it writes nothing and
says why (the views keep the model, labelled as a model).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..analysis import ncu
from ..errors import AsightError
from ..store.counters import COUNTERS
from ..store.files import write_atomic
from ..store.runs import Run, read_json_lines, read_records

RUNNER = """
import sys, numpy as np, tvm
lib = tvm.runtime.load_module(sys.argv[1])
dev = tvm.cuda(0)
shapes = [tuple(s) for s in {shapes!r}]
dtypes = {dtypes!r}
args = [tvm.runtime.tensor(np.random.rand(*s).astype(d), dev) for s, d in zip(shapes, dtypes)]
lib["{entry}"](*args)
dev.sync()
"""


def programs(run_dir: Path, target):
    """``[(candidate, scheduled module)]``: the baseline, then the measured records fastest first."""
    from .baseline import dlight_default
    from .compat import ms, s_tir
    from .compat import hoist_root_allocs
    from .records import fresh_copy
    workloads = [ms.database.Workload.from_json(row) for row in read_json_lines(run_dir / "database_workload.json")]
    records = sorted((r for r in read_records(run_dir) if r["latency_us"] is not None), key=lambda r: r["latency_us"])
    if not records:
        return []
    base = hoist_root_allocs(workloads[records[0]["workload"]].mod)
    out = [("baseline", dlight_default(base, target))]
    for rec in records:
        record = ms.database.TuningRecord.from_json(
            [[rec["insts"], rec["decisions"]], rec["run_secs"], rec["target"], rec["args_info"]],
            workloads[rec["workload"]])
        sch = s_tir.Schedule(fresh_copy(workloads[rec["workload"]].mod))
        record.trace.apply_to_schedule(sch, remove_postproc=False)
        out.append((rec["trial"], sch.mod))
    return out


def profile_one(mod, target, folder: Path, tool: str) -> tuple[dict | None, str | None]:
    """(metrics, problem) of one program run once under ncu."""
    from .compat import tvm
    from .programs import buffer_specs, entry_name
    from .parse import checked_for_build
    lib = folder / "p.so"
    tvm.compile(checked_for_build(mod, target, "the program"), target=target).export_library(str(lib))
    specs = buffer_specs(mod["main"])
    runner = folder / "run.py"
    runner.write_text(RUNNER.format(shapes=[list(s) for _, s, _ in specs], dtypes=[d for _, _, d in specs],
                                    entry=entry_name(mod)))
    proc = subprocess.run([tool, "--csv", "--metrics", ",".join(ncu.METRICS), sys.executable, str(runner), str(lib)],
                          capture_output=True, text=True, timeout=300, cwd=folder)   # ncu reads config.ncu-cfg from its cwd
    why = ncu.problem(proc.stdout, proc.stderr, proc.returncode)
    return (None, why) if why else (ncu.program_metrics(ncu.parse_csv(proc.stdout)), None)


SKIP_DEVICE_CHECK = "ASIGHT_COUNTERS_SKIP_DEVICE_CHECK"   # tests only: a replaying fake ncu stands in for the GPU


def cuda_present() -> bool:
    """A CUDA device TVM can run on (``ASIGHT_COUNTERS_SKIP_DEVICE_CHECK=1``: assumed, for the tests
    that put a fake ``ncu`` replaying recorded CSV on PATH; nothing is run on a device then)."""
    if os.environ.get(SKIP_DEVICE_CHECK) == "1":
        return True
    from .compat import tvm
    return bool(tvm.cuda(0).exist)


MODEL_LABEL = "model (MetaSchedule features)"
MEASURED_LABEL = "measured (Nsight Compute)"


def error_line(err: Exception) -> str:
    """One line for an error: the product's own sentence as it is (not "AsightError: run R: …"),
    another's with its type."""
    first = (str(err).splitlines() or [""])[0]
    return first if isinstance(err, AsightError) else f"{type(err).__name__}: {first}"


def collect_for_job(run_dir: Path, budget_s: float) -> dict:
    """``collect`` as the tuning job records it in ``extra.counters``: ``{status, message, budget_s,
    contour, text, profiled?, skipped?, failed?}``; never raises (a failure is said, the run stays done)."""
    try:
        result = collect(Path(run_dir), budget_s)
    except Exception as err:  # noqa: BLE001 - the tuned records stay; the counters say why they are missing
        import traceback
        traceback.print_exc()
        result = {"status": "error", "message": error_line(err)}
    ok = result.get("status") == "ok"
    contour = MEASURED_LABEL if ok else MODEL_LABEL
    text = (f"{result['message']} (budget {budget_s:.0f} s): the contour is {contour}" if ok else
            f"not collected: {result['message']}; the contour stays the {contour}")
    return {**result, "budget_s": budget_s, "contour": contour, "text": text}


def collect(run_dir: Path, budget_s: float) -> dict:
    from .metaschedule import resolve_target
    meta = Run(run_dir).load()
    spec = meta.target if isinstance(meta.target, str) else json.dumps(meta.target or {})
    target = resolve_target(spec)
    if target.kind.name != "cuda":
        return {"status": "unavailable", "message": f"counters are Nsight Compute's: the run's target is "
                                                      f"{target.kind.name}, not a CUDA GPU"}
    if not cuda_present():
        return {"status": "unavailable", "message": "no CUDA device on this machine: collect the counters where the "
                "run was tuned (asight counters there) and bring them with asight adopt --counters"}
    tool = shutil.which("ncu")
    if tool is None:
        return {"status": "unavailable", "message": "Nsight Compute (ncu) is not installed: the contour stays the "
                "model, labelled as a model"}
    started, lines, skipped, failed = time.perf_counter(), [], 0, []
    todo = programs(run_dir, target)
    with tempfile.TemporaryDirectory() as tmp:
        for k, (candidate, mod) in enumerate(todo):
            if k > 1 and time.perf_counter() - started > budget_s:   # the baseline and the best always
                skipped = len(todo) - k
                break
            try:
                metrics, why = profile_one(mod, target, Path(tmp), tool)
            except Exception as err:  # noqa: BLE001 - a program that does not build or run is skipped, said
                failed.append({"candidate": candidate, "error": f"{type(err).__name__}: {str(err).splitlines()[:1]}"})
                continue
            if why:
                return {"status": "unavailable", "message": why}
            lines.append({"candidate": candidate, "tool": f"ncu ({tool})", "metrics": metrics})
    path = run_dir / COUNTERS
    write_atomic(path, "".join(json.dumps(line) + "\n" for line in lines))
    return {"status": "ok", "profiled": len(lines), "skipped": skipped, "failed": failed,
            "seconds": time.perf_counter() - started,
            "message": f"{len(lines)} programs profiled (baseline included)"
                       + (f"; {skipped} left out by the {budget_s:.0f} s budget" if skipped else "")
                       + (f"; {len(failed)} did not build or run" if failed else "")}


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2:
        print("usage: python -m asight_lsp.worker.counters RUN_DIR BUDGET_S", file=sys.stderr)
        return 2
    try:
        result = collect(Path(argv[0]), float(argv[1]))
    except Exception as err:  # noqa: BLE001 - one line for the CLI, the traceback for the log
        import traceback
        traceback.print_exc()
        result = {"status": "error", "message": error_line(err)}
    print(json.dumps(result))
    return 0 if result["status"] == "ok" else 2


if __name__ == "__main__":
    sys.exit(main())
