"""A/B of the layout lever (issue 21) on one task of an imported model: the same fused kernel tuned with
and without ``layout_free_buffers`` (same trials, same seed, back to back), then the two bests timed
in interleaved rounds (weights already packed, as the builder and the library run them); the ratio is
the median of per-round ratios with a bootstrap 95 % CI.

    python bench/layout_ab.py MODEL_relax.py TASK [TRIALS]     (the weights file beside MODEL_relax.py)

e.g. after ``asight import resnet18.onnx`` (bench/model_levers.py --scale full writes one).
"""
import os, sys, time, json
import numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
os.environ.setdefault("TVM_NUM_THREADS", "2")
import tvm
from tvm.script import ir as I, relax as R, tirx as T
from asight_lsp.worker import relax_pipeline as rp
from asight_lsp.worker.compat import ms, RemoveWeightLayoutRewriteBlock
from asight_lsp.worker.metaschedule import make_builder, stub_tensor_intrin
MODEL, TASK = sys.argv[1], sys.argv[2]
TRIALS = int(sys.argv[3]) if len(sys.argv) > 3 else 64
src = open(MODEL).read()
ns = {"I": I, "R": R, "T": T}
import importlib.util, tempfile
f = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False)
f.write("from tvm.script import ir as I, relax as R, tirx as T\n" + src); f.close()
spec = importlib.util.spec_from_file_location("m", f.name); m = importlib.util.module_from_spec(spec); sys.modules["m"] = m; spec.loader.exec_module(m)
mod, _ = rp.deployable(m.Module, "main", os.path.splitext(MODEL)[0] + ".weights.npz")
from asight_lsp.worker.metaschedule import resolve_target
target = resolve_target(None)
stub_tensor_intrin()
fused = rp.fuse(mod, target)    # marked (layout on by default)
marked = tvm.IRModule({"main": fused[TASK]})
plain = tvm.IRModule({"main": fused[TASK].without_attr("layout_free_buffers")})
best = {}
for label, w in (("layout", marked), ("plain", plain)):
    t0 = time.time()
    wd = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"layout_ab_{label}_{TASK}_{TRIALS}")
    if os.path.exists(wd + "/database_tuning_record.json"):
        db = ms.database.JSONDatabase(work_dir=wd)
    else:
        db = ms.tune_tir(w, target, wd, max_trials_global=TRIALS, num_trials_per_iter=16, builder=make_builder(), seed=1)
    recs = [r for r in db.get_all_tuning_records() if r.run_secs and float(r.run_secs[0]) < 1e9]
    rec = min(recs, key=lambda r: float(sum(float(x) for x in r.run_secs) / len(r.run_secs)))
    from tvm import s_tir
    sch = s_tir.Schedule(rec.workload.mod)
    rec.trace.apply_to_schedule(sch, remove_postproc=False)
    best[label] = RemoveWeightLayoutRewriteBlock(skip_tensor_rewrite=True)(sch.mod)
    print(label, "tuned in", round(time.time() - t0), "s", flush=True)
dev = tvm.cpu()
fns = {}
for label, b in best.items():
    rt = tvm.tirx.build(b, target=target)
    from asight_lsp.worker.remeasure import prim_inputs, entry_name
    args = [tvm.runtime.tensor(a) for a in prim_inputs(b)[1]]
    fns[label] = (rt.time_evaluator(entry_name(b), dev, number=20, repeat=1), args)
per = {k: [] for k in fns}
for r in range(30):
    for k in (list(fns) if r % 2 == 0 else list(fns)[::-1]):
        ev, args = fns[k]; per[k].append(ev(*args).mean * 1e6)
ratios = np.array(per["layout"]) / np.array(per["plain"])
rng = np.random.default_rng(0)
boots = [np.median(rng.choice(ratios, len(ratios))) for _ in range(2000)]
print(f"{TASK}: layout {np.median(per['layout']):.1f} us, plain {np.median(per['plain']):.1f} us, "
      f"layout/plain {np.median(ratios):.2f} (95% CI {np.percentile(boots,2.5):.2f}-{np.percentile(boots,97.5):.2f}), load {os.getloadavg()[0]:.1f}")
