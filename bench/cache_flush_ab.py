"""A/B of tuning with a cold cache (issue 21): one fused kernel of an imported model (channels-last,
weights layout-free, as the model levers build it) tuned twice with the same trials and seed, once
by a runner that times warm calls (``number=3, min_repeat_ms=20``: the weights stay in cache between
calls) and once by one that flushes the kernel's inputs but the first from the cache before each
call (``enable_cpu_cache_flush``: in a whole model the weights of a kernel were evicted by the other
kernels' weights since its last call).  The two bests are then timed both ways, cold and warm, in
interleaved rounds; ratios are medians of per-round ratios with a bootstrap 95 % CI.

    python bench/cache_flush_ab.py MODEL_relax.py TASK [TRIALS]   (the weights file beside MODEL_relax.py)
"""
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nhwc_ab  # noqa: E402  (sets TVM_NUM_THREADS, imports tvm)
from nhwc_ab import fused_with, load  # noqa: E402
import tvm  # noqa: E402
from asight_lsp.analysis.versus import ratio_interval  # noqa: E402
from asight_lsp.worker.compat import ms  # noqa: E402
from asight_lsp.worker.harness import COLD  # noqa: E402
from asight_lsp.worker.metaschedule import resolve_target, stub_tensor_intrin  # noqa: E402
from asight_lsp.worker.remeasure import entry_name, prim_inputs  # noqa: E402

RUNNERS = {"warm": dict(number=3, repeat=1, min_repeat_ms=20, enable_cpu_cache_flush=False),
           "cold": dict(number=1, repeat=3, min_repeat_ms=0, enable_cpu_cache_flush=True)}


def best_of(func, target, label: str, trials: int):
    runner = ms.runner.LocalRunner(evaluator_config=ms.runner.EvaluatorConfig(**RUNNERS[label.split("_")[0]]))
    return nhwc_ab.best_of(func, target, label, trials, runner=runner, prefix="flush_ab")


def ratio_text(per: dict, a: str, b: str) -> str:
    r = ratio_interval(per[a], per[b])
    return (f"{a} {np.median(per[a]):.1f} µs, {b} {np.median(per[b]):.1f} µs, {a}/{b} {r['ratio']:.3f} "
            f"(95% CI {r['ci95'][0]:.3f}-{r['ci95'][1]:.3f})")


def time_both(best: dict, target, rounds: int = 30) -> None:
    dev = tvm.cpu()
    fns = {}
    for label, built in best.items():
        rt = tvm.tirx.build(built, target=target)
        args = [tvm.runtime.tensor(x) for x in prim_inputs(built)[1]]
        name = entry_name(built)
        fns[label] = {"warm": rt.time_evaluator(name, dev, number=20, repeat=1),
                      "cold": rt.time_evaluator(name, dev, number=1, repeat=20,
                                                f_preproc=COLD)}, args
    for how in ("cold", "warm"):
        per = {k: [] for k in fns}
        for r in range(rounds):
            for k in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
                evs, args = fns[k]
                res = evs[how](*args)
                per[k].append(float(np.median(res.results)) * 1e6 if how == "cold" else res.mean * 1e6)
        print(f"timed {how}: tuned-cold vs tuned-warm: " + ratio_text(per, "cold", "warm")
              + f"; {rounds} interleaved rounds x 20 calls, load {os.getloadavg()[0]:.1f}", flush=True)


def main() -> int:
    model, task = sys.argv[1], sys.argv[2]
    trials = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    target = resolve_target(None)
    stub_tensor_intrin()
    fused = fused_with(load(model), target, "")
    best = {}
    for label in ("warm", "cold"):
        started = time.time()
        best[label] = best_of(fused[task], target, f"{label}_{task}", trials)
        print(label, "tuned in", round(time.time() - started), "s", flush=True)
    time_both(best, target)
    return 0


if __name__ == "__main__":
    sys.exit(main())
