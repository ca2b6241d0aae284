"""GPU benchmark (issue 20): prints a table and writes JSON to bench/results/gpu.json.

On a machine with an NVIDIA GPU (nvidia-smi lists one) it runs, on the 1024^3 fp32 matmul of
``fixtures/gpu/matmul1024.py``:

(1) trials per minute of ``asight tune --target gpu`` vs raw ``ms.tune_tir`` with TVM's defaults
    (default ``LocalBuilder``: 30 s timeout, a fresh pool per batch, the CUDA tensor intrinsics
    imported by every builder worker), same budget, one after the other (``--no-raw`` skips raw);
(2) each run's headline: tuned vs DLight's default schedule (interleaved rounds, with its interval)
    and the vendor line (cuBLAS for the matmul, cuDNN for ``fixtures/gpu/conv_resnet.py``, the
    issue's ResNet-18 convolution), and which program the run keeps (``measurement.gpu``/``kept``);
(3) the measured contour's agreement with latency: counters the tuning job collected itself
    (``--counters-budget S``), or a given ``counters.jsonl`` (``--counters``): Spearman ρ per group.

Without a GPU it says so and prints the recorded H100 figures of ``fixtures/gpu`` instead (nothing
live is claimed): the probe's summary and the recorded counters' agreement, computed by the
product's own analysis.

Usage: ``python bench/gpu.py [--trials 64] [--counters-budget S] [--no-raw] [--timeout S] [--counters FILE.jsonl]
[--recorded]`` (``scripts/gpu-live-check.sh`` runs it small within a device lease, docs/gpu.md).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from asight_lsp.analysis import contour as ct  # noqa: E402
from asight_lsp.analysis import counters as cn  # noqa: E402
from asight_lsp.store.counters import parse_counters, read_counters  # noqa: E402
from asight_lsp.store.runs import RunStore, read_records  # noqa: E402

FIX = ROOT / "fixtures" / "gpu"
RESULTS = ROOT / "bench" / "results"

RAW = r'''
import sys, time
sys.path.insert(0, sys.argv[3])
import tvm
from tvm.s_tir import meta_schedule as ms
from asight_lsp.tvmscript.outline import build_outline
from asight_lsp.worker.parse import parse_unit
text = open(sys.argv[1]).read(); o = build_outline(text, sys.argv[1]); u = o.units[0]
mod = parse_unit(text.splitlines(), {"start_line": u.start_line, "end_line": u.end_line}, o.constants, o.aliases)
target = tvm.target.Target("nvidia/nvidia-h100" if len(sys.argv) < 6 else sys.argv[5], host="llvm")
t0 = time.perf_counter()
db = ms.tir_integration.tune_tir(mod, target, work_dir=sys.argv[2], max_trials_global=int(sys.argv[4]))
ok = [r for r in db.get_all_tuning_records() if r.run_secs and min(float(s) for s in r.run_secs) < 1e9]
print("RESULT", time.perf_counter() - t0, len(db.get_all_tuning_records()), len(ok))
'''


def has_gpu() -> bool:
    if not shutil.which("nvidia-smi"):
        return False
    return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0


def agreement_of(entries: list[dict], records: list[dict]) -> dict:
    """The measured contour's agreement with latency over the profiled candidates (the product's analysis)."""
    latency = {r["trial"]: r["latency_us"] for r in records if r["latency_us"] is not None}
    cands, baseline, tool = cn.by_candidate(entries)
    trials = np.array(sorted(t for t in cands if t in latency))
    gains, _ = cn.group_gains(cands, baseline, trials)
    agree = ct.agreement(gains, np.array([latency[t] for t in trials]))
    best = min(trials, key=lambda t: latency[t])
    return {"tool": tool, "profiled": len(trials), "rho": agree["rho"], "verdict": agree["verdict"],
            "per_group": {k: v["rho"] for k, v in agree["per_category"].items()},
            "best_trial": int(best), "best_us": latency[best], "best_words": (cn.limiter(cands[best]) or {}).get("text")}


def recorded() -> dict:
    summary = json.loads((FIX / "h100_matmul1024_summary.json").read_text())
    out = {"live": False, "device": summary["device"], "tvm": summary["tvm"],
           "tuned_best_us": summary["candidates"][0]["timed_us"], "cublas_fp32_us": summary["torch_tf32_False_us"],
           "cublas_tf32_us": summary["torch_tf32_True_us"], "tuned_vs_cublas": summary["best_vs_cublas_fp32"],
           "counters": agreement_of(read_counters(FIX), read_records(FIX)),
           "issue_figures": {"raw_ms_default_builder": "62 of 64 builds timed out (30 s)",
                             "raw_ms_timeout_180": "64 trials in 241 s (15.9 trials/min)",
                             "conv_tuned_dlight_cudnn_us": [14.8, 25.0, 27.1]}}
    return out


WORKLOADS = {"matmul1024": FIX / "matmul1024.py", "conv_resnet": FIX / "conv_resnet.py"}


def tune_one(src: Path, trials: int, store: str, counters_budget: float | None, timeout: float) -> dict:
    """``asight tune --target gpu`` of one workload: its pace, its headline (tuned vs DLight vs the vendor
    line, which program the run keeps) and, with ``counters_budget``, the counters the job collected."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "asight_lsp", "tune", str(src), "--target", "gpu", "--trials", str(trials),
           "--work-dir", store]
    if counters_budget:
        cmd += ["--counters-budget", str(counters_budget)]
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"asight tune did not finish in {timeout:.0f} s"}
    seconds = time.perf_counter() - t0
    run = RunStore(store).get("latest")
    meta = run.load()
    record = meta.measurement or {}
    out = {"rc": proc.returncode, "seconds": seconds, "trials_done": meta.trials_done,
           "trials_per_min": meta.trials_done / seconds * 60, "shortfall": meta.extra.get("shortfall"),
           "headline": (record.get("gpu") or {}).get("lines"), "vendor": record.get("vendor"),
           "kept": record.get("kept"), "counters": meta.extra.get("counters"), "stdout_tail": proc.stdout[-1500:],
           "stderr_tail": proc.stderr[-600:] if proc.returncode else ""}
    if (run.path / "counters.jsonl").exists():
        out["agreement"] = agreement_of(read_counters(run.path), read_records(run.path))
    return out


def raw_defaults(trials: int, tmp: str, timeout: float) -> dict:
    """Raw ``ms.tune_tir`` with TVM's defaults on the matmul, same budget (its builder's 30 s timeout)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        raw = subprocess.run([sys.executable, "-c", RAW, str(WORKLOADS["matmul1024"]), f"{tmp}/raw", str(ROOT),
                              str(trials)], capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"raw tune_tir did not finish in {timeout:.0f} s"}
    line = next((ln for ln in raw.stdout.splitlines() if ln.startswith("RESULT")), None)
    raw_s, raw_n, raw_ok = (float(x) for x in line.split()[1:]) if line else (None, 0, 0)
    return {"seconds": raw_s, "records": raw_n, "built_and_ran": raw_ok,
            "trials_per_min": (raw_ok / raw_s * 60) if raw_s else None, "rc": raw.returncode,
            "stderr_tail": raw.stderr[-400:]}


def live(trials: int, counters: str | None, counters_budget: float | None = None, raw: bool = True,
         timeout: float = 240.0) -> dict:
    """Each workload tuned on this GPU (tuned vs DLight vs cuBLAS/cuDNN, counters by the tuning job),
    then raw MetaSchedule with its defaults on the matmul; one after the other, never at once."""
    name = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                          text=True).stdout.strip()
    out = {"live": True, "device": name, "trials": trials, "counters_budget_s": counters_budget}
    with tempfile.TemporaryDirectory() as tmp:
        for key, src in WORKLOADS.items():
            out[key] = tune_one(src, trials, f"{tmp}/{key}", counters_budget, timeout)
        if raw:
            out["raw_ms_defaults"] = raw_defaults(trials, tmp, timeout)
        if counters:
            run = RunStore(f"{tmp}/matmul1024").get("latest")
            out["counters_given"] = agreement_of(parse_counters(Path(counters).read_text(), counters),
                                                 read_records(run.path))
    return out


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--trials", type=int, default=64)
    p.add_argument("--counters", help="counters.jsonl of the live run's candidates (optional)")
    p.add_argument("--recorded", action="store_true", help="print the recorded H100 figures even on a GPU machine")
    p.add_argument("--counters-budget", type=float, help="seconds for the tuning job's Nsight Compute counters "
                   "(asight tune --counters-budget) of each workload")
    p.add_argument("--no-raw", action="store_true", help="skip raw tune_tir with TVM's defaults")
    p.add_argument("--timeout", type=float, default=240.0, help="seconds each tuning may take (default 240)")
    args = p.parse_args()
    gpu = has_gpu() and not args.recorded
    if not gpu:
        print("no NVIDIA GPU on this machine (nvidia-smi lists none): the figures below are the RECORDED H100 run "
              "of fixtures/gpu, not measured here")
    result = live(args.trials, args.counters, args.counters_budget, not args.no_raw, args.timeout) if gpu else recorded()
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "gpu.json").write_text(json.dumps(result, indent=1, default=str))
    print(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
