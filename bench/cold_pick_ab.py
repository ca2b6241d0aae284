"""A/B of the cold lever (issue 21) on one finished model run: the same trials, each task's record picked
twice, by the warm re-measurement (5 candidates, ``ASIGHT_LEVERS_OFF=cold``) and by the cold one (8
candidates, inputs but the first flushed before each call), each pick exported (`asight export`) and
both libraries timed with onnxruntime in one process (``bench/model_levers.time_all``: interleaved
rounds, alternating order, a pause and an untimed call before each block; ratios to onnxruntime with
a bootstrap 95 % CI).  The search is not repeated, so the difference is the pick alone.

    python bench/cold_pick_ab.py MODEL_relax.py MODEL.onnx RUN_ID [--work-dir STORE] [--rounds 20]

Each pick is a copy of the run (``RUN_ID-warm``, ``RUN_ID-cold``) in the same store; the libraries are
written beside MODEL_relax.py.  Needs the machine to itself.
"""
from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import model_levers  # noqa: E402  (sets TVM_NUM_THREADS before TVM loads)

PICKS = {"warm": "cold", "cold": ""}     # pick -> ASIGHT_LEVERS_OFF


def repick(store: Path, run: str, pick: str) -> str:
    """A copy of ``run`` whose measurement's chosen/defaults are re-picked with the lever as ``pick``."""
    from asight_lsp.analysis.levers import levers_off
    from asight_lsp.worker import remeasure
    from asight_lsp.worker.metaschedule import resolve_target, stub_tensor_intrin
    from asight_lsp.worker.records import read_trials
    copy = f"{run}-{pick}"
    shutil.copytree(store / "runs" / run, store / "runs" / copy, dirs_exist_ok=True)
    meta_path = store / "runs" / copy / "run.json"
    meta = json.loads(meta_path.read_text())
    meta["id"], record = copy, meta["measurement"]
    stub_tensor_intrin()
    target, trials = resolve_target(None), read_trials(store / "runs" / copy)   # a run tuned on this host
    tasks = [(e["task"], trials.workloads[trials.hashes.index(e["workload_hash"])].mod)
             for e in record["chosen"] + (record.get("defaults") or [])]
    entries = remeasure.choose_tasks(trials, tasks, target, with_default=True, off=frozenset(levers_off(PICKS[pick])))
    record["chosen"], record["defaults"] = remeasure.split_defaults(entries)
    meta_path.write_text(json.dumps(meta))
    return copy


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("script")
    ap.add_argument("onnx")
    ap.add_argument("run")
    ap.add_argument("--work-dir", default=None, help="the run store (default: .asight beside the script)")
    ap.add_argument("--rounds", type=int, default=20)
    args = ap.parse_args()
    script = Path(args.script).resolve()
    store = Path(args.work_dir).resolve() if args.work_dir else script.parent / ".asight"
    libs = {}
    for pick in PICKS:
        copy = repick(store, args.run, pick)
        lib = script.parent / f"{script.stem}_{copy}.so"
        subprocess.run([sys.executable, "-m", "asight_lsp", "export", str(script), "-o", str(lib), "--run", copy,
                        "--work-dir", str(store)], check=True, cwd=script.parent, capture_output=True, text=True)
        libs[pick] = str(lib)
        print(f"{pick} pick exported: {lib}", flush=True)
    timed = model_levers.time_all(Path(args.onnx), libs, args.rounds)
    for name, c in timed["contenders"].items():
        ratio = c["vs_ort"]
        print(f"  {name:<12} {c['median_us'] / 1e3:7.2f} ms (p25-p75 {c['p25_us'] / 1e3:.2f}-{c['p75_us'] / 1e3:.2f})"
              f"  / onnxruntime {ratio['ratio']:.3f} (95% CI {ratio['ci95'][0]:.3f}-{ratio['ci95'][1]:.3f})"
              f"  outputs match: {c['outputs_match']}")
    print(f"{timed['rounds']} interleaved rounds x {timed['calls']} calls, {timed['threads']} threads, "
          f"load {timed['load'][0]:.1f} -> {timed['load'][1]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
