"""Ablation of the model-tuning levers of issue 21 (twins, budget, default candidate) and trial
curves, on ResNet-18 and a transformer encoder layer built as ONNX in code, against onnxruntime.

    python bench/model_levers.py [--scale tiny|full] [--budgets 128,256,512] [--models resnet18,encoder]
                                 [--configs all,none,-twins,-budget,-default] [--rounds 15] [--out DIR]

Per model, per configuration, per budget: `asight tune --new --trials B` with the levers of the
configuration (``ASIGHT_LEVERS_OFF``: ``none`` = all off, the code before issue 21 apart from the
peak; ``-twins`` = all on but twins), then `asight export`.  All libraries of a model and
onnxruntime on the same ONNX file are then timed in one process, in interleaved rounds (alternating
order, the same seeded input), each library's ratio to onnxruntime the median of per-round ratios
with a bootstrap 95 % CI (``analysis/versus.py``), outputs compared with onnxruntime's (allclose 1e-3).
A lever's share = the end-to-end time with it off / with all on (per budget).

``--scale tiny`` (the default) uses the test-sized models (tiny ResNet 1x3x16x16 width 8; encoder
seq 8, dim 32).  ``--scale full`` is ResNet-18 1x3x224x224 and an encoder layer seq 128 dim 256
(4-17 minutes per configuration on 2 quiet cores; docs/models.md has the figures).
``layout`` is the weight prepack (``worker/relax_pipeline.prepacks``), ``nhwc`` the channels-last
conversion (``relax_pipeline.converted``), ``cold`` the cold re-measurement that picks each task's
record (``worker/remeasure.choose_tasks``), ``winograd`` the Winograd convolutions
(``worker/winograd.py``); ``--plan all@512,none@512`` runs just those.  Timing is
``worker/onnx_compare.interleaved`` (what ``asight model --compare-onnx`` does: a pause and an untimed
call before each timed block) with ``TVM_NUM_THREADS`` set before TVM loads (else TVM's runtime runs
one thread here).  The bench needs the machine to itself: a test run beside it slowed a 1,024-trial
run's search and every timing 3x.  Each run is kept in ``OUT/<model>_<scale>_runs.json`` as it ends, so a rerun
resumes.  Results: bench/results/model_levers.json.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# TVM's runtime sizes its thread pool once, from this, at first use; without it TVM ran one thread
# here beside onnxruntime's two (the libraries measured 2x their own jobs' figures)
os.environ.setdefault("TVM_NUM_THREADS", str(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
                                             else os.cpu_count() or 1))
sys.path.insert(0, str(ROOT / "fixtures" / "models"))

CONFIGS = {"all": "", "none": "twins,budget,default,layout,nhwc,cold,winograd", "-twins": "twins", "-budget": "budget",
           "-default": "default", "-layout": "layout", "-nhwc": "nhwc", "-cold": "cold", "-winograd": "winograd",
           "before-nhwc": "nhwc,cold,winograd"}


def models(scale: str) -> dict:
    import onnx_build
    if scale == "full":
        return {"resnet18": lambda: onnx_build.resnet18(seed=0, size=224),
                "encoder": lambda: onnx_build.encoder_layer(seed=0, seq=128, dim=256, heads=4, ffn=1024)}
    return {"resnet18": lambda: onnx_build.tiny_resnet(seed=0, size=16, width=8),
            "encoder": lambda: onnx_build.encoder_layer(seed=0, seq=8, dim=32, heads=2, ffn=64)}


def asight(args: list[str], cwd: Path, env: dict | None = None) -> tuple[str, float]:
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "asight_lsp", *args], cwd=cwd, capture_output=True, text=True,
                         env={**os.environ, **(env or {})})
    if out.returncode != 0:
        raise SystemExit(f"asight {' '.join(args)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return out.stdout, time.perf_counter() - started


def run_id(stdout: str) -> str:
    line = next(line for line in stdout.splitlines() if line.startswith("run "))
    return line.split()[1]


def tune_and_export(script: Path, config: str, budget: int, work: Path) -> dict:
    env = {"ASIGHT_LEVERS_OFF": CONFIGS[config]}
    store = work / ".asight"
    stdout, tune_s = asight(["tune", str(script), "--trials", str(budget), "--new", "--work-dir", str(store)],
                            work, env)
    rid = run_id(stdout)
    lib = work / f"{script.stem}_{config}_{budget}.so"
    _, export_s = asight(["export", str(script), "-o", str(lib), "--run", rid, "--work-dir", str(store)], work, env)
    meta = json.loads((store / "runs" / rid / "run.json").read_text())
    record = meta.get("measurement") or {}
    curve = [(e["trials_done"], e.get("best_us")) for e in map(json.loads, (store / "runs" / rid / "events.jsonl")
                                                               .read_text().splitlines())
             if e.get("type") == "progress" and e.get("best_us")]
    print(f"  {script.stem} {config:<8} {budget:>5} trials: tuned {tune_s:.0f} s, export {export_s:.0f} s, "
          f"run {rid}", flush=True)
    return {"library": str(lib), "run": rid, "tune_s": tune_s, "curve_runner_us": curve,
            "job_tuned_us": (record.get("tuned") or {}).get("median_us"),
            "job_untuned_us": (record.get("untuned") or {}).get("median_us"),
            "defaults_kept": [d["task"] for d in record.get("defaults") or []],
            "transfers": len(((meta.get("extra") or {}).get("twins") or {}).get("transfers") or [])}


def plan(args, budgets: list[int], configs: list[str]) -> list[tuple[str, int]]:
    if args.plan:
        return [(key.split("@")[0], int(key.split("@")[1])) for key in args.plan.split(",")]
    return [(cfg, b) for b in budgets for cfg in configs]


def tune_plan(script: Path, runs: list[tuple[str, int]], saved: Path) -> dict:
    """Every run of the plan, each kept in ``saved`` as it ends: a rerun of the bench resumes (a run
    whose library is there is not tuned again)."""
    done = json.loads(saved.read_text()) if saved.exists() else {}
    for cfg, budget in runs:
        key = f"{cfg}@{budget}"
        if key not in done or not Path(done[key]["library"]).exists():
            done[key] = tune_and_export(script, cfg, budget, saved.parent)
            saved.write_text(json.dumps(done, indent=2))
    return {f"{cfg}@{b}": done[f"{cfg}@{b}"] for cfg, b in runs}


def time_all(onnx_path: Path, libs: dict, rounds: int, seed: int = 1) -> dict:
    import onnxruntime as ort
    import tvm
    from tvm import relax
    from asight_lsp.analysis.versus import ratio_interval
    from asight_lsp.worker.onnx_compare import interleaved
    threads = int(os.environ["TVM_NUM_THREADS"])
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    session = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
    spec = session.get_inputs()[0]
    x = np.random.default_rng(seed).standard_normal(spec.shape).astype("float32")
    contenders = {"onnxruntime": lambda: session.run(None, {spec.name: x})[0]}
    for name, lib in libs.items():
        vm = relax.VirtualMachine(tvm.runtime.load_module(lib), tvm.cpu())
        arg = tvm.runtime.tensor(x)
        contenders[name] = (lambda vm=vm, arg=arg: vm["main"](arg).numpy())
    reference = contenders["onnxruntime"]()
    agree = {n: bool(np.allclose(fn(), reference, rtol=1e-3, atol=1e-3)) for n, fn in contenders.items()}
    load = os.getloadavg()[0]
    per, calls = interleaved(contenders, rounds, budget_s=rounds * 1.0)   # the product's method (--compare-onnx)
    out = {"threads": threads, "calls": calls, "rounds": rounds, "load": [load, os.getloadavg()[0]], "contenders": {}}
    for name, values in per.items():
        ratio = ratio_interval(values, per["onnxruntime"])
        out["contenders"][name] = {"median_us": float(np.median(values)), "p25_us": float(np.percentile(values, 25)),
                                   "p75_us": float(np.percentile(values, 75)), "vs_ort": ratio,
                                   "outputs_match": agree[name]}
    return out


def report(name: str, timed: dict, runs: dict, budgets: list[int], configs: list[str]) -> None:
    c = timed["contenders"]
    print(f"\n{name}: {timed['threads']} threads, {timed['rounds']} interleaved rounds x {timed['calls']} calls, "
          f"load {timed['load'][0]:.1f} -> {timed['load'][1]:.1f}")
    print(f"{'contender':<22} {'median':>10} {'p25-p75':>20} {'TVM/ort (95% CI)':>24} {'tune s':>7} outputs")
    for key, row in c.items():
        lo, hi = row["vs_ort"]["ci95"]
        tune = runs.get(key, {}).get("tune_s")
        print(f"{key:<22} {row['median_us']:>8.1f}µs {row['p25_us']:>9.1f}-{row['p75_us']:<9.1f} "
              f"{row['vs_ort']['ratio']:>8.2f} ({lo:.2f}-{hi:.2f}) {'' if tune is None else f'{tune:7.0f}'} "
              f"{'match' if row['outputs_match'] else 'DIFFER'}")
    for budget in budgets:
        base = c.get(f"all@{budget}")
        if not base:
            continue
        shares = [f"{cfg}: {c[f'{cfg}@{budget}']['median_us'] / base['median_us']:.2f}x"
                  for cfg in configs if cfg != "all" and f"{cfg}@{budget}" in c]
        if shares:
            print(f"  {budget} trials, time with the lever off / all on: " + ", ".join(shares))
    print("  curves (runner's weighted best while tuning, µs):")
    for key, run in runs.items():
        points = " ".join(f"{t}:{b:.0f}" for t, b in run["curve_runner_us"])
        print(f"    {key}: " + (points or "none (the runner's model figure needs every task measured)")
              + f"; job's own untuned -> tuned {run['job_untuned_us'] or 0:.0f} -> {run['job_tuned_us'] or 0:.0f} us"
              + f"; transfers {run['transfers']}; defaults kept {len(run['defaults_kept'])}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--scale", choices=["tiny", "full"], default="tiny")
    ap.add_argument("--budgets", default="16")
    ap.add_argument("--models", default="resnet18,encoder")
    ap.add_argument("--configs", default="all,none,-twins,-budget,-default")
    ap.add_argument("--plan", default="", help="explicit runs CFG@TRIALS,... (instead of every config x budget)")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "model_levers"))
    args = ap.parse_args()
    budgets = [int(b) for b in args.budgets.split(",")]
    configs = args.configs.split(",")
    if args.plan:
        budgets = sorted({b for _, b in plan(args, [], [])})
        configs = list(dict.fromkeys(cfg for cfg, _ in plan(args, [], [])))
    work = Path(args.out)
    work.mkdir(parents=True, exist_ok=True)
    result = {"scale": args.scale, "budgets": budgets, "configs": configs, "machine": {"cores": os.cpu_count()},
              "models": {}}
    build = models(args.scale)
    for name in args.models.split(","):
        import onnx_build
        onnx_path = Path(onnx_build.save(build[name](), work / f"{name}_{args.scale}.onnx"))
        script = work / f"{name}_{args.scale}_relax.py"
        if not script.exists():
            asight(["import", str(onnx_path), "-o", str(script)], work)
        runs = tune_plan(script, plan(args, budgets, configs), work / f"{name}_{args.scale}_runs.json")
        timed = time_all(onnx_path, {k: r["library"] for k, r in runs.items()}, args.rounds)
        result["models"][name] = {"runs": runs, "timed": timed}
        report(name, timed, runs, budgets, configs)
    out = ROOT / "bench" / "results" / "model_levers.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"(ratio > 1: slower than onnxruntime)  -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
