"""PyTorch models no one here wrote, through both import paths to a tuned, exported library, timed
against PyTorch's own CPU time and onnxruntime in one interleaved run (issue 43).

    python bench/torch_zoo.py [--models bert,gpt2,llama,vit,resnet50,mobilenetv2] [--size full|small]
                              [--trials 400] [--tune-onnx] [--rounds 15] [--calls 3] [--out DIR]

Models (seeded random weights, nothing downloaded): Hugging Face `transformers`' `BertModel`,
`GPT2Model` (`use_cache=False`), `LlamaModel` (a small configuration) and `ViTModel`, built from a
config; a ResNet-50 and a MobileNetV2 written as `torch.nn` modules (fixtures/models/torch_build.py).
`--size small` shrinks every one (two layers, narrow) for a quick pass on a busy machine.

Per model: `torch.export` -> `torch.export.save` -> `asight import m.pt2` (its check against PyTorch),
and `torch.onnx.export` -> `asight import m.onnx`; `asight tune` the `.pt2` import (and the ONNX one with
`--tune-onnx`), `asight export`; then PyTorch eager, onnxruntime and each exported library are timed in
the same process by the product's method (`worker/onnx_compare.interleaved`: alternating order, each
block after the process went quiet, one untimed call, the same thread count), outputs compared with
PyTorch's (first output, allclose rtol 1e-3, atol 1e-3).  Needs `transformers` for the Hugging Face
models (pip install transformers torch==2.13.0).  Results: bench/results/torch_zoo.json.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

from model_vs_ort import ROOT, asight, ensure_onnxruntime, interleaved, load_avg, untuned_library

sys.path.insert(0, str(ROOT / "fixtures" / "models"))

SEQ = 128      # tokens for the language models; images 224x224


def hf_models(size: str) -> dict:
    """name -> (module builder, example input builder) for the Hugging Face models."""
    import torch
    import transformers as hf
    small = size == "small"
    layers = dict(num_hidden_layers=2) if small else {}
    seq = 16 if small else SEQ
    ids = lambda vocab: (torch.randint(0, vocab, (1, seq), generator=torch.Generator().manual_seed(0)),)  # noqa: E731
    bert = hf.BertConfig(**layers, **(dict(hidden_size=128, num_attention_heads=2, intermediate_size=512) if small else {}))
    gpt2 = hf.GPT2Config(use_cache=False, **(dict(n_layer=2, n_embd=128, n_head=2) if small else {}))
    llama = hf.LlamaConfig(vocab_size=32000, hidden_size=128 if small else 768, intermediate_size=344 if small else 2048,
                           num_hidden_layers=2 if small else 12, num_attention_heads=2 if small else 12,
                           num_key_value_heads=2 if small else 4, max_position_embeddings=2048, use_cache=False)
    vit = hf.ViTConfig(**layers, **(dict(hidden_size=128, num_attention_heads=2, intermediate_size=512, image_size=64)
                                    if small else {}))
    image = (torch.randn(1, 3, vit.image_size, vit.image_size, generator=torch.Generator().manual_seed(0)),)
    return {"bert": (lambda: hf.BertModel(bert), lambda: ids(bert.vocab_size)),
            "gpt2": (lambda: hf.GPT2Model(gpt2), lambda: ids(gpt2.vocab_size)),
            "llama": (lambda: hf.LlamaModel(llama), lambda: ids(llama.vocab_size)),
            "vit": (lambda: hf.ViTModel(vit), lambda: image)}


def nn_models(size: str) -> dict:
    import torch
    import torch_build as tb
    side = 64 if size == "small" else 224
    image = lambda: (torch.randn(1, 3, side, side, generator=torch.Generator().manual_seed(0)),)  # noqa: E731
    return {"resnet50": (lambda: tb.seeded(tb.ResNet((1, 1, 1, 1), 16) if size == "small" else tb.ResNet()), image),
            "mobilenetv2": (lambda: tb.seeded(tb.MobileNetV2(0.25 if size == "small" else 1.0)), image)}


def first_tensor(value):
    import torch.utils._pytree as pytree
    return next(t for t in pytree.tree_leaves(value) if hasattr(t, "detach")).detach().numpy()


def tvm_library(lib: Path):
    import tvm
    from tvm import relax
    from asight_lsp.worker.remeasure import flatten
    vm = relax.VirtualMachine(tvm.runtime.load_module(str(lib)), tvm.cpu())
    return lambda x: flatten(vm["main"](tvm.runtime.tensor(x)))[0]


def flat_outputs(module):
    """The model called with its input alone, returning its output's tensors as a tuple: the TorchScript
    ONNX exporter passes keyword arguments twice to `transformers` 5's forward ("got multiple values for
    argument 'use_cache'") and cannot return a `ModelOutput`.  The `.pt2` keeps the model as it is."""
    import torch
    import torch.utils._pytree as pytree

    class Flat(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = module

        def forward(self, x):
            return tuple(pytree.tree_leaves(self.inner(x)))
    return Flat().eval()      # the exporter restores the wrapper's mode on every child: a new module is training


def exported(name: str, module, example: tuple, work: Path) -> dict:
    """``{kind: error}`` for each exporter that failed (the other path still runs)."""
    import torch
    import torch_build as tb
    failed = {}
    exporters = {"pt2": lambda: tb.export_pt2(module, example, work / f"{name}.pt2"),
                 "onnx": lambda: torch.onnx.export(flat_outputs(module), example, str(work / f"{name}.onnx"),
                                                   input_names=["input"], dynamo=False, opset_version=17)}
    for kind, export in exporters.items():
        (work / f"{name}.{kind}").unlink(missing_ok=True)       # never a file of an earlier run
        try:
            export()
        except Exception as err:  # noqa: BLE001 - an exporter's refusal is a result
            failed[kind] = f"{'torch.export' if kind == 'pt2' else 'torch.onnx.export'}: {type(err).__name__}: " \
                           f"{str(err).splitlines()[0] if str(err) else ''}"
    return failed


def import_both(name: str, module, example: tuple, work: Path) -> dict:
    """`.pt2` and `.onnx` of ``module`` through `asight import`; what each said."""
    failed = exported(name, module, example, work)
    out = {}
    for kind in ("pt2", "onnx"):
        script = work / f"{name}_{kind}_relax.py"
        started = time.perf_counter()
        try:
            if kind in failed:
                raise SystemExit(failed[kind])
            reply = json.loads(asight("import", str(work / f"{name}.{kind}"), "-o", str(script), "--force", "--json",
                                      cwd=work))
            out[kind] = {"script": str(script), "import_s": time.perf_counter() - started, "check": reply.get("check"),
                         "params": reply["params"], "weight_mib": reply["weight_bytes"] / 2**20}
        except SystemExit as refused:     # asight() raises SystemExit with the command's stderr
            out[kind] = {"error": str(refused).strip().splitlines()[-1]}
        print(f"  {name} {kind}: {out[kind].get('error') or _check_words(out[kind]['check'])}", flush=True)
    return out


def _check_words(check: dict | None) -> str:
    if not check:
        return "imported (no PyTorch check: the ONNX path)"
    if check.get("ok") is None:
        return f"imported, not compared ({check.get('skipped')})"
    worst = max((b["max_abs_err"] for b in check.get("buffers", [])), default=float("nan"))
    return f"imported, outputs vs PyTorch {'match' if check['ok'] else 'DIFFER'} (max abs error {worst:.2g})"


def tune_export(script: Path, trials: int, work: Path) -> dict:
    started = time.perf_counter()
    meta = json.loads(asight("tune", str(script), "--trials", str(trials), "--new", "--work-dir", str(work / ".asight"),
                             "--json", cwd=work))
    tuned_s = time.perf_counter() - started
    lib = script.with_suffix(".so")
    reply = json.loads(asight("export", str(script), "-o", str(lib), "--work-dir", str(work / ".asight"), "--json",
                              "--allow-untuned", cwd=work, ok=(0, 1)))
    return {"library": str(lib), "tuned_min": tuned_s / 60, "tasks": len(meta["tasks"]), "run": meta["id"],
            "headline_us": meta["measurement"]["tuned"]["median_us"], "status": reply.get("status")}


def built(entry: dict, kind: str, trials: int, work: Path) -> dict:
    """``{label: library}`` of one import: tuned and exported (``trials``), or TVM's default schedules."""
    script = Path(entry["script"])
    if not trials:               # TVM's default schedules, weights bound
        return {f"untuned via {kind}": str(untuned_library(script, script.with_suffix(".so")))}
    entry["tuned"] = tune_export(script, trials, work)
    print(f"  {kind}: tuned {entry['tuned']['tuned_min']:.1f} min, export {entry['tuned']['status']}", flush=True)
    return {f"library via {kind}": entry["tuned"]["library"]}


def time_all(name: str, module, example: tuple, work: Path, libraries: dict, rounds: int, calls: int) -> dict:
    """PyTorch eager, onnxruntime and the libraries, interleaved; outputs vs PyTorch's."""
    import torch
    ort = ensure_onnxruntime()
    threads = int(os.environ.get("TVM_NUM_THREADS") or os.cpu_count())
    torch.set_num_threads(threads)
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
    x = example[0].numpy()

    def eager(a):
        with torch.no_grad():
            return first_tensor(module(torch.from_numpy(a)))
    contenders = {"PyTorch eager": eager}
    if (work / f"{name}.onnx").is_file():
        session = ort.InferenceSession(str(work / f"{name}.onnx"), opts, providers=["CPUExecutionProvider"])
        feed = session.get_inputs()[0].name
        contenders["onnxruntime"] = lambda a: session.run(None, {feed: a})[0]
    contenders.update({label: tvm_library(Path(lib)) for label, lib in libraries.items()})
    reference = eager(x)
    agree = {n: bool(np.allclose(fn(x), reference, rtol=1e-3, atol=1e-3)) for n, fn in contenders.items()}
    before = load_avg()
    per = interleaved(contenders, x, rounds, calls)
    return {"threads": threads, "load": [before, load_avg()], "outputs_match_pytorch": agree,
            "median_ms": {n: float(np.median(v)) / 1e3 for n, v in per.items()},
            "vs_pytorch": {n: float(np.median(np.array(v) / np.array(per["PyTorch eager"]))) for n, v in per.items()},
            "vs_onnxruntime": {n: float(np.median(np.array(v) / np.array(per["onnxruntime"]))) if "onnxruntime" in per
                               else None for n, v in per.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="bert,gpt2,llama,vit,resnet50,mobilenetv2")
    ap.add_argument("--size", choices=("full", "small"), default="full")
    ap.add_argument("--trials", type=int, default=400,
                    help="tuning budget per model (0: no tuning; both imports built untuned and timed)")
    ap.add_argument("--tune-onnx", action="store_true", help="also tune and export the ONNX import")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=3)
    ap.add_argument("--out", default=str(ROOT / "bench" / "results" / "torch_zoo"))
    args = ap.parse_args()
    import torch
    work = Path(args.out)
    work.mkdir(parents=True, exist_ok=True)
    builders = {**nn_models(args.size)}
    try:
        builders.update(hf_models(args.size))
    except ImportError:
        print("transformers is not installed: the Hugging Face models are left out (pip install transformers)")
    results = {}
    for name in args.models.split(","):
        if name not in builders:
            continue
        make, example_of = builders[name]
        torch.manual_seed(0)
        module, example = make().eval(), example_of()
        print(f"{name} ({args.size}):", flush=True)
        try:
            entry = results[name] = import_both(name, module, example, work)
        except Exception as err:  # noqa: BLE001 - an exporter's failure is a result too; the next model runs
            results[name] = {"error": f"{type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"}
            print(f"  {name}: {results[name]['error']}", flush=True)
            continue
        libraries = {}
        kinds = ("pt2", "onnx") if args.tune_onnx or not args.trials else ("pt2",)
        for kind in (k for k in kinds if "script" in entry[k]):
            try:
                libraries.update(built(entry[kind], kind, args.trials, work))
            except (Exception, SystemExit) as err:  # noqa: BLE001 - TVM's build failed: a result, the next path runs
                entry[kind]["build_error"] = str(err).strip().splitlines()[-1][:300]
                print(f"  {kind}: the library was not built: {entry[kind]['build_error']}", flush=True)
        entry["timing"] = time_all(name, module, example, work, libraries, args.rounds, args.calls)
        for label, ms in entry["timing"]["median_ms"].items():
            vs_ort = entry["timing"]["vs_onnxruntime"][label]
            print(f"  {label:<18} {ms:9.3f} ms  {entry['timing']['vs_pytorch'][label]:5.2f}x PyTorch  "
                  f"{f'{vs_ort:5.2f}x' if vs_ort is not None else '   - '} onnxruntime  outputs "
                  f"{'match' if entry['timing']['outputs_match_pytorch'][label] else 'DIFFER'}", flush=True)
    out = ROOT / "bench" / "results" / "torch_zoo.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    earlier = json.loads(out.read_text()) if out.is_file() else {}
    runs = dict(earlier.get("runs") or {})       # other sizes and budgets kept
    runs.setdefault(f"{args.size}-{args.trials}", {}).update(results)
    out.write_text(json.dumps({"runs": runs}, indent=2))
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
