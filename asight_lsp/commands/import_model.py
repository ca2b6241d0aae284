"""``asight import MODEL [-o OUT] [--shape NAME=D,D,...]``: a model through TVM's importer to a
TVMScript file (weights beside it) that every other command accepts (docs/models.md)."""
from __future__ import annotations

import os
import sys

from ..errors import AsightError
from .common import print_json


def add_parser(sub):
    p = sub.add_parser("import", help="an ONNX model (or torch.export .pt2) -> TVMScript file + weights")
    p.add_argument("model", help="model.onnx, or a saved torch.export program (.pt2; needs PyTorch)")
    p.add_argument("-o", "--output", help="TVMScript file to write (default: <model>_relax.py beside the model)")
    p.add_argument("--shape", action="append", default=[], metavar="NAME=D,D,...",
                   help="static shape of an input with symbolic dimensions (repeatable)")
    p.add_argument("--force", action="store_true", help="overwrite an existing output file")
    p.add_argument("--no-check", action="store_true",
                   help="do not run the imported model against onnxruntime (or PyTorch) on one seeded input")
    p.add_argument("--json", action="store_true", help="machine-readable output")
    p.add_argument("--python", help="interpreter for the TVM worker (default: this one)")
    return p


def parse_shapes(items: list[str]) -> dict[str, list[int]]:
    """``["input=1,3,224,224"]`` -> ``{"input": [1, 3, 224, 224]}`` (a usage error otherwise)."""
    shapes = {}
    for item in items:
        name, _, dims = item.partition("=")
        try:
            shapes[name.strip()] = [int(d) for d in dims.split(",")]
        except ValueError:
            raise AsightError(f"--shape {item!r}: expected NAME=D,D,... with integer dimensions") from None
        if not name.strip() or not shapes[name.strip()]:
            raise AsightError(f"--shape {item!r}: expected NAME=D,D,...")
        if any(d < 1 for d in shapes[name.strip()]):
            raise AsightError(f"--shape {item!r}: every dimension must be 1 or more (tuning needs static sizes)")
    return shapes


def output_path(model: str, output: str | None) -> str:
    if output:
        return output
    root, _ = os.path.splitext(model)
    return root + "_relax.py"


def _imported(args, out: str) -> dict | int:
    """The worker's reply, or 1 where the model cannot be imported (the input's fault: one line said).
    An ONNX file is read by an unsandboxed worker that writes the files; a saved torch.export program
    is loaded in the sandbox (loading it unpickles) and the files written here (docs/safety.md)."""
    from ..engine import wire
    from ..engine.client import WorkerClient
    from ..errors import WorkerCrashed, WorkerError, WorkerTimeout
    from ..services.model_import import import_exported
    model, shapes = os.path.abspath(args.model), parse_shapes(args.shape)
    try:
        if is_exported_program(model):
            return import_exported(model, os.path.abspath(out), shapes, args.python, check=not args.no_check)
        with WorkerClient(args.python, default_timeout=1800, sandbox=False) as worker:   # writes files (docs/sandbox.md)
            return worker.request(wire.IMPORT_MODEL, {"model": model, "out": os.path.abspath(out), "shapes": shapes})
    except (WorkerCrashed, WorkerTimeout):
        raise
    except WorkerError as err:   # the model is unreadable or TVM cannot import it: the input's fault (exit 1)
        if err.error_type == "UsageError":      # --shape names no input, or changes a fixed size
            raise
        print(f"asight: error: {err}", file=sys.stderr)
        return 1


def is_exported_program(path: str) -> bool:
    return path.endswith((".pt2", ".pt"))


def run(args) -> int:
    from ..engine import wire
    if not os.path.isfile(args.model):
        raise AsightError(f"no such file: {args.model}")
    out = output_path(args.model, args.output)
    if os.path.abspath(out) == os.path.abspath(args.model):
        raise AsightError(f"-o {out} is the model itself; name another file for the TVMScript")
    weights = os.path.splitext(out)[0] + wire.WEIGHTS_SUFFIX
    for path in (out, weights):       # lexists: a dangling link is something there too
        if os.path.lexists(path) and not args.force:
            raise AsightError(f"{path} exists (use --force to overwrite, or -o another file)")
    reply = _imported(args, out)
    if isinstance(reply, int):
        return reply
    checked = outputs_of(reply, out, args)
    if checked is not None:
        reply["outputs"] = checked
    if args.json:
        print_json(reply)
        return 0 if checked is None or "error" not in checked else 1
    inputs = ", ".join(f"{i['name']}: {i['dtype']}{i['shape']}" for i in reply["inputs"])
    print(f"wrote {out}  ({reply['lines']} lines; {reply['importer']})")
    print(f"      {reply['weights']}  ({reply['params']} weights, {reply['weight_bytes'] / 2**20:.1f} MiB)")
    print(f"inputs: {inputs}")
    if reply.get("renamed"):
        names = ", ".join(f"{old} -> {new}" for old, new in reply["renamed"].items())
        print(f"renamed (not Python names): {names}")
    status = 0
    if checked is not None:
        status = print_check(checked)
    symbolic = [i for i in reply["inputs"] if any(isinstance(d, str) for d in i["shape"])]
    if symbolic:     # tuning refuses them; say so now, with the command that fixes it
        fix = " ".join(f"--shape {i['name']}=" + ",".join("1" if isinstance(d, str) else str(d) for d in i["shape"])
                       for i in symbolic)
        print(f"note:  {', '.join(i['name'] for i in symbolic)} has symbolic dimensions; tuning needs static shapes:")
        print(f"next:  asight import {args.model} --force -o {out} {fix}   (your sizes in place of the 1s)")
        return status
    print(f"next:  asight tune {out} --trials 200   (then: asight profile / hotspots / code / export)")
    return status


def outputs_of(reply: dict, out: str, args) -> dict | None:
    """The imported model's outputs against the reference the model came from, one record for both
    (``views/outputs.verdict`` words it): PyTorch's, compared by the worker that loaded the program;
    onnxruntime's, compared now.  None with ``--no-check``."""
    if args.no_check:
        return None
    if is_exported_program(args.model):
        return reply.pop("check", None)
    return outputs_check(out, args, reply["inputs"])


def outputs_check(out: str, args, inputs: list[dict]) -> dict:
    """The imported file against onnxruntime (``services/import_check``); a model with symbolic
    inputs is not checked (no size to feed it); a build or run that fails is ``{"error": line}``."""
    from ..errors import WorkerCrashed, WorkerError, WorkerTimeout
    from ..services.import_check import check_import
    if any(isinstance(d, str) for i in inputs for d in i["shape"]):
        return {"skipped": "the model has symbolic input dimensions; import with --shape to compare"}
    try:
        return check_import(out, args.model, args.python)
    except (WorkerError, WorkerCrashed, WorkerTimeout) as err:
        return {"error": str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__}


def print_check(checked: dict) -> int:
    """The check's one line; 1 when the imported model did not build or run."""
    from ..views.outputs import verdict
    if "error" in checked:
        print(f"asight: error: the imported model was written but did not build or run for the output check: "
              f"{checked['error']}", file=sys.stderr)
        return 1
    print(verdict(checked)[1])
    return 0

