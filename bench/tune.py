"""Tuning benchmarks (issue 3); prints a table and writes JSON to bench/results/.

(1a) trials/s of ``asight tune`` (our job: spawn, parse, baseline, tuning) vs a plain
     ``ms.tune_tir`` call with TVM's defaults (default builder and runner, 64 trials per batch),
     same function (256^3 fp32 matmul), same budget, same host target;
(1b) the same vs plain ``ms.tune_tir`` given the very builder, runner, batch size and search
     settings we use (what our job adds: its overhead) — goal >= 0.95x;
(2)  a 1024^3 fp32 matmul tuned with <= 512 trials vs numpy's matmul measured in the same process
     — goal >= 0.7x numpy's speed;
(3)  peak memory (RSS summed over the process tree, sampled every 0.1 s) of each tuning process.

Usage: ``python bench/tune.py [--trials 32] [--big-trials 512] [--quick] [--skip-big] [--only 1a,1b,2]``.
The machine is small (2 vCPU) and may be shared: figures carry the load average seen.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from asight_lsp.services.tuning import TuneRequest, start_tune  # noqa: E402
from asight_lsp.engine.client import worker_env  # noqa: E402

RESULTS = ROOT / "bench" / "results"

PLAIN = r'''
import json, sys, time
t0 = time.perf_counter()
mode, src, wd, trials = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
from asight_lsp.tvmscript.outline import build_outline
from asight_lsp.worker.parse import parse_unit
from asight_lsp.worker import metaschedule as tu
from asight_lsp.worker.compat import ms, stub_tensor_intrin
text = open(src).read(); outline = build_outline(text); unit = outline.units[0]
mod = parse_unit(text.splitlines(), {"start_line": unit.start_line, "end_line": unit.end_line},
                 outline.constants, outline.aliases)
target = tu.resolve_target(None)
t1 = time.perf_counter()
if mode == "defaults":          # what a user gets from the documented one-liner
    ms.tune_tir(mod, target, wd, max_trials_global=trials, seed=0)
else:                           # our builder/runner/batch/search settings, no job around it
    stub_tensor_intrin()
    per_iter = tu.trials_per_iter(trials)
    builder = tu.make_builder()
    ms.tune_tir(mod, target, wd, max_trials_global=trials, num_trials_per_iter=per_iter, builder=builder,
                runner=tu.make_runner(), cost_model=ms.cost_model.XGBModel(num_tuning_cores=tu.cores(),
                tree_method="auto"), strategy=tu.search_strategy(per_iter), num_tuning_cores=tu.cores(), seed=0)
    builder.shutdown()
t2 = time.perf_counter()
from asight_lsp.store.runs import read_records
records = read_records(wd)
ok = [r["latency_us"] for r in records if r["latency_us"] is not None]
print(json.dumps({"setup_s": t1 - t0, "tune_s": t2 - t1, "records": len(records),
                  "failed": len(records) - len(ok), "best_us": min(ok) if ok else None}))
'''

VS_NUMPY = r'''
import json, sys, time, timeit
import numpy as np
run_dir, src = sys.argv[1], sys.argv[2]
from asight_lsp.tvmscript.outline import build_outline
from asight_lsp.worker.parse import parse_unit
from asight_lsp.worker.compat import ms, tvm
from asight_lsp.worker import metaschedule as tu
text = open(src).read(); outline = build_outline(text); unit = outline.units[0]
mod = parse_unit(text.splitlines(), {"start_line": unit.start_line, "end_line": unit.end_line},
                 outline.constants, outline.aliases)
meta = json.load(open(run_dir + "/run.json"))
target = tvm.target.Target(meta["target"])
db = ms.database.JSONDatabase(work_dir=run_dir, allow_missing=False)
sch = ms.tir_integration.compile_tir(db, mod["main"], target)
lib = tvm.compile(sch.mod, target=target).jit()
dev = tvm.cpu()
n = 1024
rng = np.random.default_rng(0)
a = rng.standard_normal((n, n), dtype="float32"); b = rng.standard_normal((n, n), dtype="float32")
A, B, C = (tvm.runtime.tensor(x, dev) for x in (a, b, np.zeros((n, n), "float32")))
lib["main"](A, B, C)
np.testing.assert_allclose(C.numpy(), a @ b, rtol=1e-3, atol=1e-2)
tvm_s = [float(x) for x in lib.time_evaluator("main", dev, number=5, repeat=7)(A, B, C).results]
np_s = [t / 5 for t in timeit.repeat(lambda: a @ b, number=5, repeat=7)]
print(json.dumps({"tvm_us": sorted(tvm_s)[3] * 1e6, "numpy_us": sorted(np_s)[3] * 1e6,
                  "tvm_min_us": min(tvm_s) * 1e6, "numpy_min_us": min(np_s) * 1e6,
                  "numpy_threads": __import__("os").environ.get("OPENBLAS_NUM_THREADS")}))
'''


class TreeMemory:
    """Peak memory of a process and all its descendants, sampled every ``period`` s.

    RSS summed over the tree counts shared pages (the TVM library, ~150 MiB) once per process;
    PSS splits shared pages among the processes sharing them, so its sum is the tree's real share.
    """

    def __init__(self, pid: int, period: float = 0.2):
        self.pid, self.period = pid, period
        self.peak_rss = self.peak_pss = self.peak_main = self.peak_procs = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                root = psutil.Process(self.pid)
                procs = [root] + root.children(recursive=True)
            except psutil.Error:
                procs = []
            rss = pss = 0
            for i, proc in enumerate(procs):
                try:
                    info = proc.memory_full_info()
                except psutil.Error:
                    continue
                rss, pss = rss + info.rss, pss + getattr(info, "pss", info.rss)
                if i == 0:
                    self.peak_main = max(self.peak_main, info.rss)
            self.peak_rss, self.peak_pss = max(self.peak_rss, rss), max(self.peak_pss, pss)
            self.peak_procs = max(self.peak_procs, len(procs))
            self._stop.wait(self.period)

    def stop(self) -> dict:
        self._stop.set()
        self._thread.join()
        mib = 2 ** 20
        return {"peak_tree_mib": round(self.peak_rss / mib, 1), "peak_tree_pss_mib": round(self.peak_pss / mib, 1),
                "peak_main_mib": round(self.peak_main / mib, 1), "max_processes": self.peak_procs}


def run_ours(src: Path, trials: int, store: Path) -> dict:
    started = time.perf_counter()
    job = start_tune(TuneRequest(file=str(src), trials=trials, store_root=str(store), resume=False, seed=0))
    memory = TreeMemory(job.pid)
    meta = job.wait(None)
    wall = time.perf_counter() - started
    mem = memory.stop()
    if meta.state != "done":
        raise SystemExit(f"our tuning run ended {meta.state}: {meta.error}")
    from asight_lsp.store.runs import read_records
    failed = sum(r["latency_us"] is None for r in read_records(job.run.path))
    return {"wall_s": wall, "tune_s": meta.extra.get("tune_seconds"), "records": meta.trials_done,
            "failed": failed, "best_us": meta.best_us, "baseline_us": meta.baseline_us, "run_dir": str(job.run.path),
            "trials_per_s": meta.trials_done / wall, "valid_trials_per_s": (meta.trials_done - failed) / wall,
            "memory": mem}


def run_plain(mode: str, src: Path, trials: int, work: Path) -> dict:
    wd = Path(tempfile.mkdtemp(prefix=f"plain-{mode}-", dir=work))
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-c", PLAIN, mode, str(src), str(wd), str(trials)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=worker_env())
    memory = TreeMemory(proc.pid)
    out, _ = proc.communicate()
    wall = time.perf_counter() - started
    mem = memory.stop()
    if proc.returncode != 0:
        raise SystemExit(f"plain tune_tir ({mode}) failed with exit code {proc.returncode}")
    data = json.loads(out.strip().splitlines()[-1])
    return {**data, "wall_s": wall, "trials_per_s": data["records"] / wall,
            "valid_trials_per_s": (data["records"] - data["failed"]) / wall, "memory": mem}


def make_matmul(n: int, work: Path) -> Path:
    src = work / f"matmul{n}.py"
    src.write_text((ROOT / "fixtures" / "matmul.py").read_text().replace("N = 256", f"N = {n}"))
    return src


def bench_speed(args, work: Path, out: dict) -> None:
    """Ours and plain-with-our-settings alternate ``--repeat`` times (the box is shared, load drifts);
    the TVM-defaults run is slow (19 s tensor-intrinsics import per builder worker), so it runs once."""
    src = make_matmul(256, work)
    names = ["ours"] + (["same_settings"] if "1b" in args.only else [])
    runs: dict[str, list] = {name: [] for name in names}
    for i in range(args.repeat):
        for name in (names if i % 2 == 0 else names[::-1]):
            runs[name].append(_one(name, src, args.trials, work))
    if "1a" in args.only:
        runs["defaults"] = [_one("defaults", src, args.trials, work)]
    summary = {name: _median_run(items) for name, items in runs.items()}
    out["speed"] = {"workload": "256x256x256 fp32 matmul", "trials": args.trials, "repeat": args.repeat,
                    **summary, "runs": runs}
    ours = summary["ours"]["trials_per_s"]
    if "defaults" in summary:
        out["speed"]["1a_ratio_vs_tvm_defaults"] = ours / summary["defaults"]["trials_per_s"]
        valid = summary["defaults"]["valid_trials_per_s"]
        out["speed"]["1a_ratio_valid_trials"] = (summary["ours"]["valid_trials_per_s"] / valid) if valid else None
    if "same_settings" in summary:
        out["speed"]["1b_ratio_vs_same_settings"] = ours / summary["same_settings"]["trials_per_s"]
        pairs = [a["trials_per_s"] / b["trials_per_s"] for a, b in zip(runs["ours"], runs["same_settings"])]
        out["speed"]["1b_ratio_per_pair"] = pairs


def _one(name: str, src: Path, trials: int, work: Path) -> dict:
    print(f"  running {name} ({trials} trials, 256^3 matmul) ...", flush=True)
    result = run_ours(src, trials, work / "store") if name == "ours" else run_plain(name, src, trials, work)
    result["load"] = os.getloadavg()[0]
    print(f"    {name}: {result['records']} trials in {result['wall_s']:.1f} s wall "
          f"({result['trials_per_s']:.3f} trials/s), best {result['best_us']}, load {result['load']:.1f}", flush=True)
    return result


def _median_run(items: list[dict]) -> dict:
    """The run with the median trials/s (its other figures come along)."""
    return sorted(items, key=lambda r: r["trials_per_s"])[len(items) // 2]


def bench_vs_numpy(args, work: Path, out: dict) -> None:
    src = make_matmul(1024, work)
    print(f"  tuning 1024^3 matmul with {args.big_trials} trials ...", flush=True)
    ours = run_ours(src, args.big_trials, work / "store")
    print(f"    {ours['records']} trials in {ours['wall_s']:.0f} s, best record {ours['best_us']:.0f} us", flush=True)
    env = {**worker_env(), "OPENBLAS_NUM_THREADS": worker_env()["TVM_NUM_THREADS"]}
    proc = subprocess.run([sys.executable, "-c", VS_NUMPY, ours["run_dir"], str(src)], capture_output=True,
                          text=True, env=env, timeout=900)
    if proc.returncode != 0:
        raise SystemExit(f"measuring against numpy failed: {proc.stderr.strip().splitlines()[-1]}")
    data = json.loads(proc.stdout.strip().splitlines()[-1])
    data["ratio_vs_numpy"] = data["numpy_us"] / data["tvm_us"]      # > 1: faster than numpy
    out["vs_numpy"] = {"workload": "1024x1024x1024 fp32 matmul", "trials": args.big_trials, "tuning": ours, **data}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=32)
    parser.add_argument("--big-trials", type=int, default=512)
    parser.add_argument("--quick", action="store_true", help="16 trials for (1), 64 for (2)")
    parser.add_argument("--only", default="1a,1b,2", help="comma list of 1a,1b,2")
    parser.add_argument("--repeat", type=int, default=3, help="alternating repeats of ours vs same settings")
    args = parser.parse_args()
    if args.quick:
        args.trials, args.big_trials, args.repeat = 16, 64, 1
    args.only = set(args.only.split(","))
    os.environ.setdefault("TVM_NUM_THREADS", str(len(os.sched_getaffinity(0))))
    out = {"host": {"cpus": len(os.sched_getaffinity(0)), "load_before": os.getloadavg()},
           "started": time.strftime("%Y-%m-%d %H:%M:%S")}
    with tempfile.TemporaryDirectory(prefix="asight-bench-") as tmp:
        work = Path(tmp)
        if args.only & {"1a", "1b"}:
            print("(1) trials per second", flush=True)
            bench_speed(args, work, out)
        if "2" in args.only:
            print("(2) tuned 1024^3 matmul vs numpy", flush=True)
            bench_vs_numpy(args, work, out)
    out["host"]["load_after"] = os.getloadavg()
    report(out)
    RESULTS.mkdir(parents=True, exist_ok=True)
    path = RESULTS / f"tune-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(out, indent=2, default=str))
    print(f"wrote {path}")
    return 0


def report(out: dict) -> None:
    print()
    speed = out.get("speed")
    if speed:
        for name in ("ours", "same_settings", "defaults"):
            if name in speed:
                r = speed[name]
                print(f"{name:14s} {r['records']:4d} trials ({r['failed']} failed)  {r['wall_s']:7.1f} s  "
                      f"{r['trials_per_s']:.3f} trials/s"
                      f"  best {r['best_us'] or float('nan'):8.1f} us  peak tree {r['memory']['peak_tree_mib']} MiB RSS"
                      f" / {r['memory']['peak_tree_pss_mib']} MiB PSS")
        if "1a_ratio_vs_tvm_defaults" in speed:
            valid = speed.get("1a_ratio_valid_trials")
            print(f"(1a) asight tune vs tune_tir with TVM defaults: {speed['1a_ratio_vs_tvm_defaults']:.2f}x trials/s"
                  + (f", {valid:.2f}x successful trials/s" if valid else ", TVM defaults measured no trial"))
        if "1b_ratio_vs_same_settings" in speed:
            print(f"(1b) asight tune vs tune_tir with our settings: {speed['1b_ratio_vs_same_settings']:.2f}x "
                  "trials/s (goal >= 0.95)")
    big = out.get("vs_numpy")
    if big:
        print(f"(2) 1024^3 matmul, {big['tuning']['records']} trials: TVM {big['tvm_us']:.0f} us vs numpy "
              f"{big['numpy_us']:.0f} us (medians) -> {big['ratio_vs_numpy']:.2f}x numpy's speed (goal >= 0.7)")
        mem = big["tuning"]["memory"]
        print(f"(3) peak memory of the 1024 tuning job tree: {mem['peak_tree_mib']} MiB RSS summed, "
              f"{mem.get('peak_tree_pss_mib')} MiB PSS (main process {mem['peak_main_mib']} MiB)")
    if speed:
        mem = speed["ours"]["memory"]
        print(f"(3) peak memory of the 256 tuning job tree: {mem['peak_tree_mib']} MiB RSS summed, "
              f"{mem['peak_tree_pss_mib']} MiB PSS (main process {mem['peak_main_mib']} MiB)")
    print(f"load average before/after: {out['host']['load_before']} / {out['host'].get('load_after')}")


if __name__ == "__main__":
    sys.exit(main())
