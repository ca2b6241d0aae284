"""A/B of the channels-last lever (issue 21) on one convolution of an imported model: the fused kernel
as the model's layout gives it (NCHW) and as ``ConvertLayout`` gives it (NHWC activations), each tuned
with the same trials and seed (weights layout-free in both, as the layout lever marks them), then the
two bests timed in interleaved rounds (weights already packed); the ratio is the median of per-round
ratios with a bootstrap 95 % CI.  A layout transform the conversion adds between kernels is not
counted here (the whole-model bench counts it).

    python bench/nhwc_ab.py MODEL_relax.py TASK [TRIALS]     (the weights file beside MODEL_relax.py)
"""
import importlib.util
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("TVM_NUM_THREADS", "2")
import tvm  # noqa: E402
from asight_lsp.analysis.levers import levers_off  # noqa: E402
from asight_lsp.analysis.versus import ratio_interval  # noqa: E402
from asight_lsp.worker import relax_pipeline as rp  # noqa: E402
from asight_lsp.worker.compat import ms, RemoveWeightLayoutRewriteBlock  # noqa: E402
from asight_lsp.worker.metaschedule import make_builder, make_runner, resolve_target, stub_tensor_intrin  # noqa: E402
from asight_lsp.worker.remeasure import entry_name, prim_inputs  # noqa: E402


def load(path: str):
    src = open(path).read()
    f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False)
    f.write("from tvm.script import ir as I, relax as R, tirx as T\n" + src)
    f.close()
    spec = importlib.util.spec_from_file_location("m", f.name)
    m = importlib.util.module_from_spec(spec)
    sys.modules["m"] = m
    spec.loader.exec_module(m)
    return rp.deployable(m.Module, "main", os.path.splitext(path)[0] + ".weights.npz")[0]


def fused_with(mod, target, off: str):
    """The fused module without the levers ``off`` names (an ``ASIGHT_LEVERS_OFF`` value)."""
    return rp.fuse(mod, target, off=frozenset(levers_off(off)))


def best_of(func, target, label: str, trials: int, runner=None, prefix: str = "nhwc_ab"):
    """The best record of ``func`` tuned ``trials`` trials (seed 1; ``runner``: MetaSchedule's default),
    its weight re-layout removed as the builder times it; a tuning kept in TMPDIR is reused."""
    wd = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"{prefix}_{label}_{trials}")
    if os.path.exists(wd + "/database_tuning_record.json"):
        db = ms.database.JSONDatabase(work_dir=wd)
    else:
        db = ms.tune_tir(tvm.IRModule({"main": func}), target, wd, max_trials_global=trials,
                         num_trials_per_iter=16, builder=make_builder(), runner=runner or make_runner(), seed=1)
    recs = [r for r in db.get_all_tuning_records() if r.run_secs and float(r.run_secs[0]) < 1e9]
    rec = min(recs, key=lambda r: float(sum(float(x) for x in r.run_secs) / len(r.run_secs)))
    from tvm import s_tir
    sch = s_tir.Schedule(rec.workload.mod)
    rec.trace.apply_to_schedule(sch, remove_postproc=False)
    return RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(sch.mod)


def time_ab(best: dict, target, a: str, b: str, rounds: int = 30) -> str:
    """The two built kernels ``best[a]``, ``best[b]`` timed in interleaved rounds of 20 calls each
    (alternating order): medians and the median per-round ratio a/b with a bootstrap 95 % CI."""
    dev = tvm.cpu()
    fns = {}
    for label, built in best.items():
        rt = tvm.tirx.build(built, target=target)
        args = [tvm.runtime.tensor(x) for x in prim_inputs(built)[1]]
        fns[label] = (rt.time_evaluator(entry_name(built), dev, number=20, repeat=1), args)
    per = {k: [] for k in fns}
    for r in range(rounds):
        for k in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
            ev, args = fns[k]
            per[k].append(ev(*args).mean * 1e6)
    r = ratio_interval(per[a], per[b])
    return (f"{a} {np.median(per[a]):.1f} µs, {b} {np.median(per[b]):.1f} µs, {a}/{b} {r['ratio']:.2f} "
            f"(95% CI {r['ci95'][0]:.2f}-{r['ci95'][1]:.2f}), {rounds} interleaved "
            f"rounds x 20 calls, load {os.getloadavg()[0]:.1f}")


def main() -> int:
    model, task = sys.argv[1], sys.argv[2]
    trials = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    target = resolve_target(None)
    stub_tensor_intrin()
    mod = load(model)
    sides = {"nchw": fused_with(mod, target, "nhwc"), "nhwc": fused_with(mod, target, "")}
    for label, fused in sides.items():
        if task not in [gv.name_hint for gv in fused.get_global_vars()]:
            names = sorted(gv.name_hint for gv in fused.get_global_vars() if "conv" in gv.name_hint)
            raise SystemExit(f"{task} is not a kernel of the {label} module: {', '.join(names)}")
    best = {}
    for label, fused in sides.items():
        started = time.time()
        best[label] = best_of(fused[task], target, f"{label}_{task}", trials)
        print(label, "tuned in", round(time.time() - started), "s", flush=True)
    print(f"{task} at {trials} trials: " + time_ab(best, target, "nhwc", "nchw"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
