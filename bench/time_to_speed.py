"""Minutes of tuning to a model faster than onnxruntime, with and without the schedule library (issue 41).

    python bench/time_to_speed.py [--plan resnet18:10,resnet18:1,resnet50:5] [--rounds 11] [--out DIR]

Each step of ``--plan`` (``model:minutes``, in order) is the product path a user takes: ``asight import``
(once per model), ``asight tune --minutes M --new`` with one schedule library shared by the whole plan
(``$ASIGHT_LIBRARY`` = ``DIR/library``, empty at the start: the first step starts from nothing, a later
one from what the earlier ones fed), ``asight export``, then the exported library timed against
onnxruntime interleaved (the product's method, ``worker/onnx_compare.interleaved``: alternating order,
each block after the process went quiet; ratio = median of per-round ratios with a bootstrap 95% CI).

The curve per step: the tuning job's own estimate of the model's time (``best_us`` of each progress
event: each task's best from MetaSchedule's runner, weighted by calls; no cold in-model correction)
against the minutes since the job started, and the measured end-to-end time of the exported library at
the end; ``minutes to parity`` / ``to 0.8x`` read that estimate against onnxruntime's measured time.
Models: ``resnet18`` (bench/model_vs_ort.py's, BatchNorm folded) and ``resnet50`` (the corpus's, its
own BatchNormalization nodes, fixtures/models/zoo.py), 224x224, seeded weights.  Results:
``bench/results/time_to_speed.json`` and ``time_to_speed.png``.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
# TVM's runtime in this process runs the exported libraries with the threads onnxruntime gets and the tuning
# job measured with (the usable cores), as asight export's load snippet sets them; TVM's own default can be
# fewer (one thread on a 2-vCPU host)
os.environ.setdefault("TVM_NUM_THREADS", str(len(os.sched_getaffinity(0))))
sys.path.insert(0, str(ROOT / "fixtures" / "models"))
sys.path.insert(0, str(ROOT / "bench"))

from model_vs_ort import asight, ensure_onnxruntime, interleaved, load_avg, tvm_runner  # noqa: E402

from asight_lsp.analysis.versus import ratio_interval  # noqa: E402


def build(model: str, path: Path) -> None:
    if model == "resnet18":
        import onnx_build
        onnx_build.save(onnx_build.resnet18(seed=0, size=224), path)
    else:
        import zoo
        zoo.save(zoo.resnet50("full", "new", seed=0), path)


def curve(run_dir: Path) -> list[tuple[float, float]]:
    """(minutes since the job started, the job's estimate of the model's µs) per progress event."""
    events = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines() if line.strip()]
    start = next(e["time"] for e in events if e["type"] == "started")
    meta = json.loads((run_dir / "run.json").read_text())
    began = meta.get("started") or start
    return [((e["time"] - began) / 60, e["best_us"]) for e in events
            if e["type"] == "progress" and e.get("best_us") is not None]


def first_below(points: list, limit_us: float) -> float | None:
    return next((m for m, us in points if us <= limit_us), None)


def step(model: str, minutes: float, work: Path, onnx_path: Path, script: Path) -> dict:
    started = time.perf_counter()
    meta = json.loads(asight("tune", str(script), "--minutes", str(minutes), "--new", "--no-profile", "--work-dir",
                             str(work / ".asight"), "--json", cwd=work))
    wall = time.perf_counter() - started
    lib = work / f"{model}_{meta['id']}.so"
    reply = json.loads(asight("export", str(script), "-o", str(lib), "--work-dir", str(work / ".asight"), "--json",
                              "--allow-untuned", cwd=work, ok=(0, 1)))
    library = meta["extra"].get("library") or {}
    return {"model": model, "minutes": minutes, "run": meta["id"], "wall_s": wall, "trials": meta["trials_done"],
            "tasks": len(meta["tasks"]), "deadline_hit": meta["extra"]["tuning"].get("deadline_hit"),
            "headline_us": meta["measurement"]["tuned"]["median_us"],
            "library_hits": len(library.get("hits") or []), "library_fed": library.get("fed"),
            "levers_refused": meta["extra"].get("levers_refused") or [],
            "export": reply.get("status"), "library": str(lib), "curve": curve(Path(meta["run_dir"]))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", default="resnet18:10,resnet18:1,resnet50:5")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "time_to_speed"))
    ap.add_argument("--retime", action="store_true", help="time the libraries of the last run's steps again "
                    "(bench/results/time_to_speed.json), without tuning")
    args = ap.parse_args()
    ort = ensure_onnxruntime()
    work = Path(args.out)
    work.mkdir(parents=True, exist_ok=True)
    os.environ["ASIGHT_LIBRARY"] = str(work / "library")
    threads = int(os.environ.get("TVM_NUM_THREADS") or os.cpu_count())
    steps, sessions = [], {}
    if args.retime:
        steps = json.loads((ROOT / "bench" / "results" / "time_to_speed.json").read_text())["steps"]
        for model in dict.fromkeys(s["model"] for s in steps):
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            sessions[model] = ort.InferenceSession(str(work / f"{model}.onnx"), opts, providers=["CPUExecutionProvider"])
    for spec in [] if args.retime else args.plan.split(","):
        model, minutes = spec.split(":")
        onnx_path, script = work / f"{model}.onnx", work / f"{model}_relax.py"
        if model not in sessions:
            build(model, onnx_path)
            if not script.exists():
                asight("import", str(onnx_path), "-o", str(script), "--no-check", cwd=work)
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = threads
            sessions[model] = ort.InferenceSession(str(onnx_path), opts, providers=["CPUExecutionProvider"])
        steps.append(step(model, float(minutes), work, onnx_path, script))
        print(f"  {model} {minutes} min: {steps[-1]['trials']} trials, {steps[-1]['library_hits']} of "
              f"{steps[-1]['tasks']} tasks from the library", flush=True)
    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype("float32")
    rows = []
    for model, session in sessions.items():
        contenders = {"onnxruntime": lambda x, s=session: s.run(None, {"input": x})[0]}
        for k, s in enumerate(steps):
            if s["model"] == model:
                contenders[f"step {k}"] = tvm_runner(Path(s["library"]))
        reference = contenders["onnxruntime"](x)
        agree = {n: bool(np.allclose(fn(x), reference, rtol=1e-3, atol=1e-3 * max(1.0, float(np.abs(reference).max()))))
                 for n, fn in contenders.items()}
        before = load_avg()
        per = interleaved(contenders, x, args.rounds, args.calls)
        ort_us = float(np.median(per["onnxruntime"]))
        for name, values in per.items():
            if name == "onnxruntime":
                continue
            s = steps[int(name.split()[1])]
            ratio = ratio_interval(values, per["onnxruntime"])
            s.update({"library_us": float(np.median(values)), "onnxruntime_us": ort_us, "ratio": ratio["ratio"],
                      "ratio_ci95": list(ratio["ci95"]), "outputs_match": agree[name], "load": [before, load_avg()],
                      "minutes_to_parity_est": first_below(s["curve"], ort_us),
                      "minutes_to_0.8_est": first_below(s["curve"], 0.8 * ort_us)})
            rows.append(s)
    print(f"\n{'step':<22} {'trials':>6} {'from lib':>8} {'library ms':>10} {'ort ms':>8} {'ratio [95% CI]':>20} "
          f"{'parity (est.)':>13} {'0.8x (est.)':>11}")
    for k, s in enumerate(steps):
        fmt = lambda m: f"{m:.1f} min" if m is not None else "-"   # noqa: E731
        print(f"{s['model'] + ' ' + str(s['minutes']) + ' min':<22} {s['trials']:>6} {s['library_hits']:>3}/{s['tasks']:<4} "
              f"{s['library_us'] / 1e3:>10.2f} {s['onnxruntime_us'] / 1e3:>8.2f} {s['ratio']:>7.2f} "
              f"[{s['ratio_ci95'][0]:.2f}-{s['ratio_ci95'][1]:.2f}] {fmt(s['minutes_to_parity_est']):>13} "
              f"{fmt(s['minutes_to_0.8_est']):>11} {'match' if s['outputs_match'] else 'DIFFER'}")
    out = ROOT / "bench" / "results" / "time_to_speed.json"
    out.write_text(json.dumps({"threads": threads, "cores": os.cpu_count(), "steps": steps}, indent=2))
    plot(steps, ROOT / "bench" / "results" / "time_to_speed.png")
    print(f"-> {out}")
    return 0


def plot(steps: list, path: Path) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(8, 4.5))
    for k, s in enumerate(steps):
        if not s["curve"]:
            continue
        m, us = zip(*s["curve"])
        line, = ax.plot(m, [u / 1e3 for u in us], label=f"{s['model']} {s['minutes']:g} min "
                        f"({s['library_hits']}/{s['tasks']} from library): estimate")
        ax.scatter([s["minutes"]], [s["library_us"] / 1e3], color=line.get_color(), marker="o")
        ax.axhline(s["onnxruntime_us"] / 1e3, color=line.get_color(), linestyle=":", linewidth=0.8)
    ax.set_xlabel("minutes since the tuning job started")
    ax.set_ylabel("model time, ms")
    ax.set_title("line: the job's estimate; dot: the exported library measured; dotted: onnxruntime", fontsize=9)
    ax.set_yscale("log")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


if __name__ == "__main__":
    sys.exit(main())
