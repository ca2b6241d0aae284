"""A model built in code (ResNet-18 of torchvision's shapes, or one transformer encoder layer; seeded
random weights) through the product path -- `asight import`, `asight tune --trials B`, `asight
export` -- against onnxruntime on the same machine, interleaved in one run, outputs compared.

    python bench/model_vs_ort.py --budgets 0,200,800 [--size 224] [--rounds 15] [--out DIR]
                                 [--model resnet18|encoder|gelu_encoder|tiny_resnet] [--seq 128 --dim 256 --heads 4 --ffn 1024]
                                 [--library NAME=old.so ...]   # earlier builds, timed in the same rounds

Per tuned budget three TVM contenders share the rounds with onnxruntime: the run's *headline build*
(rebuilt here from the run's chosen records, as the tuning job measured it), the *exported library*
(`asight export`'s .so, loaded as a deployment loads it), and the headline figure run.json recorded
when tuning ended (printed beside, not re-timed: another moment, other load).

Budget 0 is TVM's untuned build (default schedules).  onnxruntime is installed by this script
(pip) when missing: it is not a dependency of asight.  Each round times every contender once with
`--calls` back-to-back calls (mean per call), contenders in alternating order, each block after
the process went quiet (the other runtime's threads spin ~35-110 ms after a call) and one untimed
call; the figure per contender is the median over rounds with its p25-p75, and each ratio (TVM /
onnxruntime) is the median of per-round ratios with a bootstrap 95% CI.  The machine's load during the timing is
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

from asight_lsp.analysis.versus import ratio_interval

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "fixtures" / "models"))


def ensure_onnxruntime():
    try:
        import onnxruntime  # noqa: F401
    except ImportError:
        subprocess.run([sys.executable, "-m", "pip", "install", "-q", "onnxruntime"], check=True)
    import onnxruntime
    return onnxruntime


def asight(*args: str, cwd: Path, ok: tuple = (0,)) -> str:
    started = time.perf_counter()
    out = subprocess.run([sys.executable, "-m", "asight_lsp", *args], cwd=cwd, capture_output=True, text=True)
    if out.returncode not in ok:
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


def headline_runner(script: Path, run_dir: Path, meta: dict):
    """The build the run's headline measured: its chosen records applied to the program it tuned
    (the deployable module, or the weights as parameters for a run from before), in this process."""
    import tvm
    from tvm import relax
    from asight_lsp.worker.compat import ms
    from asight_lsp.worker.model_export import headline_program
    from asight_lsp.worker.programs import measuring_target
    from asight_lsp.worker.records import chosen_database, read_trials
    from asight_lsp.worker.relax_pipeline import load_weights
    lines = script.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("@I.ir_module"))
    weights = str(script.with_suffix("")) + ".weights.npz"
    build = "deployable" if (meta.get("extra") or {}).get("build") else "parameters"
    program = headline_program(tvm.script.from_source("\n".join(lines[start:])), "main", build, weights)
    database = chosen_database(read_trials(run_dir), meta["measurement"]["chosen"])
    vm = relax.VirtualMachine(ms.relax_integration.compile_relax(database, program, measuring_target(meta.get("target")),
                                                                 params=None), tvm.cpu())
    known = load_weights(weights)
    rest = [tvm.runtime.tensor(known[p.name]) for p in program["main"].params[1:]]
    return lambda x: vm["main"](tvm.runtime.tensor(x), *rest).numpy()


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
    """Per contender: per-round mean µs per call, by the product's method (``asight model
    --compare-onnx``: alternating order, each block after the process went quiet and one untimed call)."""
    from asight_lsp.worker.onnx_compare import interleaved as product_interleaved
    bound = {n: (lambda fn=fn: fn(x)) for n, fn in contenders.items()}
    return product_interleaved(bound, rounds, 0.0, calls=calls)[0]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budgets", default="0,200", help="comma-separated trial budgets (0 = untuned)")
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "model_vs_ort"))
    ap.add_argument("--model", choices=("resnet18", "encoder", "gelu_encoder", "tiny_resnet"), default="resnet18",
                    help="tiny_resnet: the tests' model (stem + 2 blocks, width 4; --size 8 as the tests); encoder: "
                    "post-norm ReLU FFN (bench/model_levers.py's); gelu_encoder: pre-norm Erf GELU (issue 24's)")
    ap.add_argument("--seq", type=int, default=128, help="encoder: sequence length")
    ap.add_argument("--dim", type=int, default=256, help="encoder: model width")
    ap.add_argument("--heads", type=int, default=4, help="encoder: attention heads")
    ap.add_argument("--ffn", type=int, default=1024, help="encoder: feed-forward width")
    ap.add_argument("--library", action="append", default=[], metavar="NAME=PATH",
                    help="also time a library built earlier (e.g. by another version), interleaved with the rest")
    args = ap.parse_args()
    ort = ensure_onnxruntime()
    import onnx_build
    work = Path(args.out)
    work.mkdir(parents=True, exist_ok=True)
    which = args.model
    model = work / f"{which}.onnx"
    if which in ("encoder", "gelu_encoder"):
        build = onnx_build.encoder_layer if which == "encoder" else onnx_build.gelu_encoder_layer
        onnx_build.save(build(seed=0, seq=args.seq, dim=args.dim, heads=args.heads, ffn=args.ffn), model)
        shape, label = (1, args.seq, args.dim), f"{which} layer 1x{args.seq}x{args.dim}, {args.heads} heads, ffn {args.ffn}"
    elif which == "tiny_resnet":
        onnx_build.save(onnx_build.tiny_resnet(seed=3, size=args.size, width=4), model)
        shape, label = (1, 3, args.size, args.size), f"tiny ResNet (width 4) 1x3x{args.size}x{args.size}"
    else:
        onnx_build.save(onnx_build.resnet18(seed=0, size=args.size), model)
        shape, label = (1, 3, args.size, args.size), f"ResNet-18 1x3x{args.size}x{args.size}"
    script = work / f"{which}_relax.py"
    if not script.exists():
        asight("import", str(model), "-o", str(script), cwd=work)
    threads = int(os.environ.get("TVM_NUM_THREADS") or os.cpu_count())
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    session = ort.InferenceSession(str(model), opts, providers=["CPUExecutionProvider"])
    contenders = {"onnxruntime": lambda x: session.run(None, {"input": x})[0]}
    tuning_s, budget_of, recorded = {}, {}, {}
    for budget in [int(b) for b in args.budgets.split(",")]:
        lib = work / f"{which}_{budget}.so"
        if budget == 0:
            untuned_library(script, lib)
            contenders["tvm untuned"] = tvm_runner(lib)
            budget_of["tvm untuned"] = 0
            continue
        started = time.perf_counter()
        meta = json.loads(asight("tune", str(script), "--trials", str(budget), "--new", "--work-dir",
                                 str(work / ".asight"), "--json", cwd=work))
        tuning_s[budget] = time.perf_counter() - started
        reply = json.loads(asight("export", str(script), "-o", str(lib), "--work-dir", str(work / ".asight"),
                                  "--json", cwd=work, ok=(0, 1)))
        if reply.get("status") == "refused":   # a budget below the kernels: time what the user would accept
            print(f"  budget {budget}: export refused ({reply['message'].splitlines()[0]}); timing --allow-untuned")
            reply = json.loads(asight("export", str(script), "-o", str(lib), "--work-dir", str(work / ".asight"),
                                      "--json", "--allow-untuned", cwd=work, ok=(0, 1)))
        applied = reply["applied"]
        recorded[budget] = {"headline_us": meta["measurement"]["tuned"]["median_us"], "run": meta["id"],
                            "kernels": applied["kernels"], "from_records": len(applied["from_records"]),
                            "missing": applied["missing"], "folded": applied["folded"], "tasks": len(meta["tasks"]),
                            "export_measured": (reply.get("measured") or {}).get("verdict_export")}
        print(f"  budget {budget}: {len(meta['tasks'])} tasks tuned; export: {len(applied['from_records'])} of "
              f"{applied['kernels']} kernels from records, missing {applied['missing'] or 'none'}, folded "
              f"{applied['folded'] or 'none'}; export's own check: {recorded[budget]['export_measured']}", flush=True)
        for kind, runner in (("headline build", headline_runner(script, Path(meta["run_dir"]), meta)),
                             ("exported library", tvm_runner(lib))):
            contenders[f"{kind} {budget}"] = runner
            budget_of[f"{kind} {budget}"] = budget
    for spec in args.library:
        name, _, path = spec.partition("=")
        contenders[name] = tvm_runner(Path(path))
    x = np.random.default_rng(1).standard_normal(shape).astype("float32")
    reference = contenders["onnxruntime"](x)
    agree = {n: bool(np.allclose(fn(x), reference, rtol=1e-3, atol=1e-3)) for n, fn in contenders.items()}
    before = load_avg()
    per = interleaved(contenders, x, args.rounds, args.calls)
    result = {"machine": {"cores": os.cpu_count(), "threads": threads, "loadavg_before": before,
                          "loadavg_after": load_avg()}, "model": label, "size": args.size, "rounds": args.rounds,
              "calls": args.calls, "contenders": {}, "runs": recorded}
    print(f"\n{label}, {threads} threads, load {before:.2f} -> {load_avg():.2f}")
    print(f"{'contender':<22} {'median ms':>10} {'p25-p75 ms':>16} {'vs onnxruntime':>22} {'tuning':>8} outputs")
    for name, values in per.items():
        med, p25, p75 = np.median(values), np.percentile(values, 25), np.percentile(values, 75)
        ratio = ratio_interval(values, per["onnxruntime"])
        r, (lo, hi) = ratio["ratio"], ratio["ci95"]
        budget = budget_of.get(name)
        tune = f"{tuning_s[budget] / 60:.0f} min" if budget in tuning_s else "-"
        print(f"{name:<22} {med / 1e3:>10.3f} {p25 / 1e3:>7.3f}-{p75 / 1e3:<7.3f} {r:>8.2f}x [{lo:.2f}-{hi:.2f}] "
              f"{tune:>8} {'match' if agree[name] else 'DIFFER'}")
        result["contenders"][name] = {"median_us": med, "p25_us": p25, "p75_us": p75, "ratio_vs_ort": r,
                                      "ratio_ci95": [lo, hi], "tuning_s": tuning_s.get(budget), "outputs_match": agree[name]}
    for budget, run in recorded.items():
        print(f"  {budget} trials: run {run['run']} recorded headline {run['headline_us'] / 1e3:.3f} ms when tuning "
              f"ended (its own rounds, not these)")
    out = ROOT / "bench" / "results" / f"model_vs_ort{'' if which == 'resnet18' else '_' + which}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    print(f"(ratio > 1: slower than onnxruntime)  -> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
