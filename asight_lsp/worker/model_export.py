"""``asight export``'s TVM side: a Relax model built with a run's chosen records into a shared
library that ``tvm.runtime.load_module`` + ``relax.VirtualMachine`` run.

The weights file beside the source (``asight import``) is bound into the module first
(``BindParams``), so the library takes only the model's inputs.  The build must take the run's
records (``tirx.is_scheduled`` on the kernels, as the measurements check); the library is then
loaded back from disk and its outputs compared with the untuned build on the same inputs.
"""
from __future__ import annotations

import os

from ..engine import wire
from .compat import ms, relax, tvm
from .inputs import compare_outputs
from .model_import import tensor_params
from .parse import parse_request
from .programs import measuring_target
from .records import chosen_database, read_trials, run_database
from .remeasure import applied_kernels, flatten, load_weights, relax_inputs


def bind_weights(mod, fn: str, weights_path: str | None) -> tuple[object, list[str]]:
    """``mod`` with the weights file's arrays bound as constants (by parameter name); the names bound."""
    weights = load_weights(weights_path)
    names = [p.name for p in mod[fn].params if p.name in weights]
    if not names:
        return mod, []
    bound = relax.transform.BindParams(fn, {n: tvm.runtime.tensor(weights[n]) for n in names})(mod)
    return bound, names


def _database(params: dict):
    trials = read_trials(params["run_dir"])
    chosen = params.get("chosen")
    return (chosen_database(trials, chosen) if chosen else run_database(params["run_dir"])), chosen


def export_model(params: dict, emit=None) -> dict:
    """Build, write, reload and check; see the module docstring."""
    fn = params.get("function") or "main"
    parsed = parse_request(params)
    funcs = {gv.name_hint: f for gv, f in parsed.functions_items()} if isinstance(parsed, tvm.IRModule) else {}
    if not isinstance(funcs.get(fn), relax.Function):
        raise ValueError(f"export builds a Relax model: the unit has no Relax function '{fn}'")
    target = measuring_target(params.get("target"))
    mod, bound = bind_weights(parsed, fn, params.get("weights"))
    database, chosen = _database(params)
    applied = applied_kernels(mod, database, target)
    tuned = sorted({c["task"] for c in chosen or []})
    gone = set(tuned) - set(applied["from_records"])
    applied["missing"] = sorted(gone & set(applied["default"]))     # built with TVM's default schedule
    applied["folded"] = sorted(gone - set(applied["default"]))      # no such kernel once the weights are bound
    if tuned and not applied["from_records"]:
        raise ValueError(f"the build applied none of the run's {len(tuned)} tuned kernels (do the records match "
                         "this model? re-tune after editing it)")
    if emit:
        emit({"type": "status", "message": f"building with {len(applied['from_records'])} tuned kernels"})
    executable = ms.relax_integration.compile_relax(database, mod, target, params=None)
    out = params["out"]
    executable.export_library(out)
    loaded = relax.VirtualMachine(tvm.runtime.load_module(out), tvm.cpu(0))
    reference = relax.VirtualMachine(tvm.compile(mod, target=target), tvm.cpu(0))
    arrays = relax_inputs(mod[fn], int(params.get("seed") or 0))
    outputs = [flatten(vm[fn](*[tvm.runtime.tensor(a.copy()) for a in arrays])) for vm in (reference, loaded)]
    check = compare_outputs([f"output{i}" for i in range(len(outputs[0]))], outputs[0], outputs[1])
    inputs = tensor_params(mod[fn], len(mod[fn].params))
    return {"library": out, "bytes": os.path.getsize(out), "target": str(target), "applied": applied,
            "bound_weights": len(bound), "inputs": inputs, "check": check, "function": fn}


HANDLERS = {wire.EXPORT_MODEL: export_model}
