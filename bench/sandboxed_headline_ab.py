"""A/B: a run's headline re-measurement in-process (as the tuning job timed it before 2026-11-27:
unsandboxed, TVM pins its threads) vs in the sandboxed worker (now: TVM_BIND_THREADS=0), same run, same
chosen records, alternating A B A B ... (docs/sandbox.md; figures in that session's closing note).

    TVM_NUM_THREADS=2 python bench/sandboxed_headline_ab.py FILE.py RUN_DIR      # AB_N pairs (default 3)

Set TVM_NUM_THREADS as the job does: unset, the in-process side runs one thread."""
import sys, json, time, glob, os
from asight_lsp.worker.compat import tvm, save_ir
from asight_lsp.worker import metaschedule as tuning, remeasure
from asight_lsp.worker.relax_pipeline import deployable
from asight_lsp.worker.tune_plan import request_levers
from asight_lsp.worker.parse import parse_unit, sandboxed_worker
from asight_lsp.tvmscript.outline import build_outline
from asight_lsp.tvmscript.pysource import source_lines
from asight_lsp.engine.wire import REMEASURE, weights_beside
src, run = sys.argv[1], sys.argv[2]
text = open(src).read(); o = build_outline(text, src); u = o.units[0]
parsed = parse_unit(source_lines(text), {"start_line": u.start_line, "end_line": u.end_line}, o.constants, o.aliases)
weights = weights_beside(src)
module, _ = deployable(parsed, None, weights)
target = tuning.resolve_target(None)
off = request_levers(run)     # the run's levers, as the sandboxed worker decides them from run_dir
plan = tuning.plan_for(module, None, target, off=off)
chosen = json.load(open(run + "/run.json"))["measurement"]["chosen"]
def inproc():
    return remeasure.measure_run(plan.kind, [(t.name, t.mod) for t in plan.tasks], run, target, "ab", program=plan.program, entry=plan.entry, chosen=chosen, weights=weights, off=off)
def sandboxed():
    # the same request the job sends, but with the chosen records fixed (no top-k re-measurement)
    params = {"kind": plan.kind, "tasks": [[t.name, save_ir(t.mod)] for t in plan.tasks], "program": save_ir(plan.program),
              "entry": plan.entry, "run_dir": run, "target": tuning.target_json(target), "by": "ab", "weights": weights, "chosen": chosen}
    return sandboxed_worker().request(REMEASURE, params, timeout=3600)["record"]
rows = []
for i in range(int(os.environ.get("AB_N", "3"))):
    for name, fn in (("in-process", inproc), ("sandboxed", sandboxed)):
        r = fn()
        rows.append((name, r["untuned"]["median_us"], r["tuned"]["median_us"], r["speedup"]["estimate"], r["speedup"]["ci"], (r.get("load") or {}).get("busy")))
        print(rows[-1], flush=True)
