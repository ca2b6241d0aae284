"""The corpus (fixtures/models/zoo.py) through the product path, one table: per model and exporter
style, `asight import`'s worker steps (import seconds; the output check against onnxruntime: max
abs / rel difference and the tolerance), the number of kernels the tuning job would tune, and where
asked a fixed tuning budget, `asight export`, and the library against onnxruntime timed interleaved.

    python bench/zoo.py [--size full|small] [--models resnet50,...] [--styles old,new]
                        [--tune N --tune-models vgg_block,...] [--rounds 7] [--out bench/results/zoo.json]

Each step that fails is recorded for that model (one line) and the bench goes on.  Import and check
run in this process (`fixtures/models/zoo_check.py`); tune and export are the CLI's (`asight tune`,
`asight export`), in a work folder per model; the library is loaded as a deployment loads it and timed
against onnxruntime with the product's interleaved method (`worker/onnx_compare.interleaved`, the same
threads each).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "fixtures" / "models"))
sys.path.insert(0, str(ROOT))
import zoo  # noqa: E402
from zoo_check import import_and_check  # noqa: E402


def kernels(script: str, weights: str) -> int:
    """Kernels of the deployable build the tuning job extracts tasks from (fused PrimFuncs, the
    reshapes the VM runs without a kernel left out)."""
    from asight_lsp.worker.compat import parse_script, tirx
    from asight_lsp.worker.programs import measuring_target
    from asight_lsp.worker.relax_pipeline import deployable, fuse, is_reshape
    from asight_lsp.worker.tune_plan import env_levers
    text = Path(script).read_text()
    mod, _ = deployable(parse_script(text[text.index("@I.ir_module"):]), "main", weights)
    fused = fuse(mod, measuring_target(None), off=env_levers())     # as a new run's job, with ASIGHT_LEVERS_OFF
    return sum(isinstance(f, tirx.PrimFunc) and not is_reshape(f) for _, f in fused.functions_items())


def cli(*args: str, cwd: Path, timeout: float) -> None:
    done = subprocess.run([sys.executable, "-m", "asight_lsp", *args], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout)
    if done.returncode != 0:
        raise RuntimeError((done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1])


def library_vs_onnxruntime(model: Path, library: Path, rounds: int) -> dict:
    """The exported library and onnxruntime on the same seeded inputs, interleaved (product method)."""
    import tvm
    from tvm import relax
    from asight_lsp.analysis import versus
    from asight_lsp.worker.import_check import session
    from asight_lsp.worker.onnx_compare import _inputs, interleaved
    import onnxruntime as ort
    options = ort.SessionOptions()
    options.intra_op_num_threads = int(os.environ.get("TVM_NUM_THREADS") or os.cpu_count() or 1)
    reference = ort.InferenceSession(str(model), options, providers=["CPUExecutionProvider"])
    inputs = _inputs(session(ort, str(model)), [], 0)
    vm = relax.VirtualMachine(tvm.runtime.load_module(str(library)), tvm.cpu())
    args = [tvm.runtime.tensor(a) for _, a in inputs]
    feed = dict(inputs)
    per, calls = interleaved({"library": lambda: vm["main"](*args), "onnxruntime": lambda: reference.run(None, feed)},
                             rounds, 10.0)
    out = versus.summary("library", "onnxruntime", per["library"], per["onnxruntime"])
    return {"library_ms": out["library"]["median_us"] / 1e3, "onnxruntime_ms": out["onnxruntime"]["median_us"] / 1e3,
            "ratio": out["ratio"]["ratio"], "ci95": out["ratio"]["ci95"], "calls": calls, "rounds": rounds}


def step(row: dict, name: str, fn) -> tuple[bool, object]:
    """Run one column; a failure is recorded as its one line (the row goes on without what needs it)."""
    started = time.perf_counter()
    try:
        value = fn()
    except Exception as err:  # noqa: BLE001 - the bench records every failure and continues
        words = str(err).strip().splitlines()
        row.setdefault("failed", {})[name] = f"{type(err).__name__}: {words[0] if words else ''}"
        return False, None
    row[f"{name}_s"] = round(time.perf_counter() - started, 2)
    return True, value


def outputs(checked: dict) -> dict:
    if "check" not in checked:
        return {"skipped": checked["skipped"]}
    c = checked["check"]
    return {"ok": c["ok"], "max_abs": max(b["max_abs_err"] for b in c["buffers"]),
            "max_rel": max(b["max_rel_err"] for b in c["buffers"]), "rtol": c["rtol"], "atol": c["atol"],
            "check_s": round(checked["seconds"], 2)}


def tune_and_export(row: dict, base: Path, model: Path, script: Path, trials: int, rounds: int) -> None:
    """`asight tune` a fixed budget, `asight export`, the library against onnxruntime; stops at a failure."""
    work, library = base / f"{script.stem}.asight", base / f"{script.stem}.so"
    steps = [("tune", lambda: cli("tune", script.name, "--trials", str(trials), "--work-dir", str(work),
                                  cwd=base, timeout=3600)),
             ("export", lambda: cli("export", script.name, "-o", library.name, "--work-dir", str(work),
                                    "--allow-untuned", cwd=base, timeout=3600)),
             ("versus", lambda: library_vs_onnxruntime(model, library, rounds))]
    for name, fn in steps:
        ok, value = step(row, name, fn)
        if name == "tune":
            row["levers_refused"] = levers_refused(work)
        if not ok:
            return
        if value is not None:
            row[name] = value


def levers_refused(work: Path) -> list:
    """The levers the tuning run skipped, with TVM's reasons (run.json ``extra.levers_refused``)."""
    found = []
    for meta in sorted((work / "runs").glob("*/run.json")):
        found += (json.loads(meta.read_text()).get("extra") or {}).get("levers_refused") or []
    return found


def one(base: Path, name: str, style: str, size: str, trials: int, rounds: int) -> dict:
    row = {"model": name, "style": style, "size": size}
    model = base / f"{name}_{style}.onnx"
    zoo.save(zoo.CORPUS[name](size, style), model)
    row["onnx_mb"] = round(model.stat().st_size / 2**20, 1)
    ok, done = step(row, "import_check", lambda: import_and_check(model, base / f"{name}_{style}_relax.py"))
    if not ok:
        return row
    reply, checked = done
    row["params"], row["outputs"] = reply["params"], outputs(checked)
    row["kernels"] = step(row, "kernels", lambda: kernels(reply["script"], reply["weights"]))[1]
    if trials:
        tune_and_export(row, base, model, Path(reply["script"]), trials, rounds)
    return row


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--size", choices=("full", "small"), default="full")
    p.add_argument("--models", default=",".join(zoo.CORPUS))
    p.add_argument("--styles", default=",".join(zoo.STYLES))
    p.add_argument("--tune", type=int, default=0, help="trials per tuned model (0: import, check and kernels only)")
    p.add_argument("--tune-models", default="", help="the models to tune (default: all of --models)")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--out", default=str(ROOT / "bench" / "results" / "zoo.json"))
    args = p.parse_args()
    tuned = set((args.tune_models or args.models).split(","))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            for style in args.styles.split(","):
                trials = args.tune if name in tuned else 0
                rows.append(one(Path(tmp), name, style, args.size, trials, args.rounds))
                print(json.dumps(rows[-1]), flush=True)
                Path(args.out).parent.mkdir(parents=True, exist_ok=True)
                Path(args.out).write_text(json.dumps({"rows": rows, "load": os.getloadavg(),
                                                      "threads": os.environ.get("TVM_NUM_THREADS")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
