"""``asight import``'s output check: the imported file (weights bound, untuned: ``tvm.compile`` of
the deployable module) and onnxruntime on the ONNX file, both run once on the same seeded inputs,
outputs compared by ``inputs.compare_outputs`` (the rule every comparison of outputs uses).

It runs in a sandboxed worker (it runs the model); the import itself runs unsandboxed to write the
files.  Without onnxruntime it says so and compares nothing.
"""
from __future__ import annotations

import time

from ..engine import wire
from .compat import relax, tvm
from .inputs import compare_outputs
from .model_import import tensor_params
from .onnx_compare import _inputs, onnxruntime_module
from .parse import parse_to_run
from .programs import first_line, measuring_target
from .relax_pipeline import deployable
from .remeasure import flatten

NOT_INSTALLED = ("onnxruntime is not installed in the worker's Python (pip install onnxruntime): "
                 "the imported model's outputs were not compared with the ONNX file's")


def session(ort, path: str):
    """An onnxruntime CPU session on ``path``, quiet (old exporters' weights-as-inputs warn once each)."""
    options = ort.SessionOptions()
    options.log_severity_level = 3
    return ort.InferenceSession(path, options, providers=["CPUExecutionProvider"])


def check_import(params: dict, emit=None, off=None) -> dict:
    """``{check, against, seconds, inputs}``, or ``{skipped}`` without onnxruntime."""
    try:
        ort = onnxruntime_module()
    except ValueError:
        return {"skipped": NOT_INSTALLED}
    started = time.perf_counter()
    try:
        reference = session(ort, params["onnx"])
    except Exception as err:  # noqa: BLE001 - onnxruntime refuses the file (an operator of an opset it dropped)
        return {"skipped": f"onnxruntime {ort.__version__} cannot load the ONNX file: {first_line(err)}"}
    mod, _ = deployable(parse_to_run(params), "main", params.get("weights"))
    seed = int(params.get("seed") or 0)
    inputs = _inputs(reference, tensor_params(mod["main"], len(mod["main"].params)), seed)
    if emit:
        emit({"type": "status", "message": "building the imported model (untuned) to compare with onnxruntime"})
    vm = relax.VirtualMachine(tvm.compile(mod, target=measuring_target(None)), tvm.cpu(0))
    got = flatten(vm["main"](*[tvm.runtime.tensor(a, tvm.cpu(0)) for _, a in inputs]))
    try:
        want = reference.run(None, dict(inputs))
    except Exception as err:  # noqa: BLE001 - onnxruntime refuses what the ONNX file asks (a slope that does not broadcast)
        return {"skipped": f"onnxruntime {ort.__version__} cannot run the ONNX file: {first_line(err)}"}
    names = [o.name for o in reference.get_outputs()]
    check = compare_outputs(names, want, got, source=f"numpy.isclose on one seeded input (seed {seed}), "
                                                     f"the untuned build against onnxruntime {ort.__version__}")
    return {"check": check, "against": f"onnxruntime {ort.__version__}", "seconds": time.perf_counter() - started,
            "inputs": [f"{name}{list(a.shape)}" for name, a in inputs]}


HANDLERS = {wire.CHECK_IMPORT: check_import}
