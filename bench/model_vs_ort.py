"""ResNet-18 (torchvision's shapes, seeded random weights, built as ONNX in code) through the
product path -- `asight import`, `asight tune --trials B`, `asight export` -- against onnxruntime on
the same machine, interleaved in one run, outputs compared.

    python bench/model_vs_ort.py --budgets 0,200,800 [--size 224] [--rounds 15] [--out DIR]

Budget 0 is TVM's untuned build (default schedules).  onnxruntime is installed by this script
(pip) when missing: it is not a dependency of asight.  Each round times every contender once with
`--calls` back-to-back calls (mean per call), contenders in alternating order; the figure per
contender is the median over rounds with its p25-p75, and each ratio (TVM / onnxruntime) is the
median of per-round ratios with a bootstrap 95% CI.  The machine's load during the timing is
printed.  Results: bench/results/model_vs_ort.json.
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
sys.path.insert(0, str(ROOT / "fixtures" / "models"))


def ensure_onnxruntime():
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "onnxruntime"], check=True)
    import onnxruntime
    return onnxruntime


def asight(*args: str, cwd: Path) -> str:
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "asight_lsp", *args], cwd=cwd, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"asight {' '.join(args)} failed ({out.returncode}):\n{out.stderr}")
    print(f"  asight {' '.join(args)}: {time.perf_counter() - started:.0f} s", flush=True)
    return out.stdout


def load_avg() -> float:
    return os.getloadavg()[0]


def tvm_runner(lib: Path):
    import tvm
    from tvm import relax
    vm = relax.VirtualMachine(tvm.runtime.load_module(str(lib)), tvm.cpu())
    return lambda x: vm["main"](tvm.runtime.tensor(x)).numpy()


def untuned_library(script: Path, out: Path) -> Path:
    """Budget 0: TVM's default schedules, weights bound as `asight export` binds them."""
    import tvm
    from asight_lsp.worker.compat import host_target
    from asight_lsp.worker.model_export import bind_weights
    lines = script.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("@I.ir_module"))
    mod = tvm.script.from_source("\n".join(lines[start:]))
    mod, _ = bind_weights(mod, "main", str(script.with_suffix("")) + ".weights.npz")
    tvm.compile(mod, target=host_target()).export_library(str(out))
    return out


def interleaved(contenders: dict, x: np.ndarray, rounds: int, calls: int) -> dict:
    """Per contender: per-round mean µs per call (alternating order each round)."""
    names = list(contenders)
    per = {n: [] for n in names}
    for fn in contenders.values():
        fn(x)                                      # warm up
    for r in range(rounds):
        for n in (names if r % 2 == 0 else names[::-1]):
            t0 = time.perf_counter()
            for _ in range(calls):
                contenders[n](x)
            per[n].append((time.perf_counter() - t0) / calls * 1e6)
    return per


def ratio_ci(a: list[float], b: list[float], seed: int = 0) -> tuple[float, float, float]:
    r = np.asarray(a) / np.asarray(b)
    rng = np.random.default_rng(seed)
    boots = [np.median(rng.choice(r, r.size)) for _ in range(2000)]
    return float(np.median(r)), float(np.percentile(boots, 2.5)), float(np.percentile(boots, 97.5))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budgets", default="0,200", help="comma-separated trial budgets (0 = untuned)")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "model_vs_ort"))
    args = ap.parse_args()
    ort = ensure_onnxruntime()
    import onnx_build
    work = Path(args.out)
    work.mkdir(parents=True, exist_ok=True)
    model = work / "resnet18.onnx"
    onnx_build.save(onnx_build.resnet18(seed=0, size=args.size), model)
    script = work / "resnet18_relax.py"
    if not script.exists():
        asight("import", str(model), "-o", str(script), cwd=work)
    threads = int(os.environ.get("TVM_NUM_THREADS") or os.cpu_count())
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    contenders = {"onnxruntime": lambda x: session.run(None, {"input": x})[0]}
    tuning_s, budget_of = {}, {}
    for budget in [int(b) for b in args.budgets.split(",")]:
        lib = work / f"resnet18_{budget}.so"
        if budget == 0:
            untuned_library(script, lib)
        else:
            started = time.perf_counter()
            asight("tune", str(script), "--trials", str(budget), "--new", "--work-dir", str(work / ".asight"), cwd=work)
            tuning_s[budget] = time.perf_counter() - started
            asight("export", str(script), "-o", str(lib), "--work-dir", str(work / ".asight"), cwd=work)
        name = f"tvm {budget} trials" if budget else "tvm untuned"
        contenders[name] = tvm_runner(lib)
        budget_of[name] = budget
    x = np.random.default_rng(1).standard_normal((1, 3, args.size, args.size)).astype("float32")
    reference = contenders["onnxruntime"](x)
    agree = {n: bool(np.allclose(fn(x), reference, rtol=1e-3, atol=1e-3)) for n, fn in contenders.items()}
    before = load_avg()
    per = interleaved(contenders, x, args.rounds, args.calls)
    result = {"machine": {"cores": os.cpu_count(), "threads": threads, "loadavg_before": before,
                          "loadavg_after": load_avg()}, "size": args.size, "rounds": args.rounds,
              "calls": args.calls, "contenders": {}}
    print(f"\nResNet-18 1x3x{args.size}x{args.size}, {threads} threads, load {before:.2f} -> {load_avg():.2f}")
    print(f"{'contender':<18} {'median ms':>10} {'p25-p75 ms':>16} {'vs onnxruntime':>22} {'tuning':>8} outputs")
    for name, values in per.items():
        med, p25, p75 = np.median(values), np.percentile(values, 25), np.percentile(values, 75)
        r, lo, hi = ratio_ci(values, per["onnxruntime"])
        budget = budget_of.get(name)
        tune = f"{tuning_s[budget] / 60:.0f} min" if budget in tuning_s else "-"
        print(f"{name:<18} {med / 1e3:>10.2f} {p25 / 1e3:>7.2f}-{p75 / 1e3:<7.2f} {r:>8.2f}x [{lo:.2f}-{hi:.2f}] "
              f"{tune:>8} {'match' if agree[name] else 'DIFFER'}")
        result["contenders"][name] = {"median_us": med, "p25_us": p25, "p75_us": p75, "ratio_vs_ort": r,
                                      "ratio_ci95": [lo, hi], "tuning_s": tuning_s.get(budget), "outputs_match": agree[name]}
    out = ROOT / "bench" / "results" / "model_vs_ort.json"
    out.write_text(json.dumps(result, indent=2))
    print(f"(ratio > 1: slower than onnxruntime)  -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
