"""The untuned baseline of a run measured on an RPC device (TVM side).

A run that measures through a TVM RPC tracker cannot be re-measured here (the device is remote):
its untuned PrimFuncs are timed on the device with the harness before tuning, and its headline
stays the runner's in-tuning figures, labelled as such (docs/measurement.md).
"""
from __future__ import annotations

import os
import tempfile

import numpy as np

from .compat import normalize_mod, tar, tvm
from .compat import rpc as tvm_rpc
from .harness import Program, evaluator_timer, time_rounds
from .inputs import random_arrays
from .metaschedule import Plan, parse_rpc
from .programs import buffer_specs, entry_name


def measure_prim_rpc(func, target, rpc_spec: str, seed: int = 0) -> float:
    """Untuned latency (µs, median of the harness's repeats) of a PrimFunc on a device of the tracker."""
    host, port, key = parse_rpc(rpc_spec)
    session = tvm_rpc.connect_tracker(host, port).request(key, priority=0, session_timeout=60)
    mod = normalize_mod(func)
    lib = tvm.tirx.build(mod, target=target)
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "baseline.tar")
        lib.export_library(path, fcompile=tar)
        session.upload(path)
    remote = session.load_module("baseline.tar")
    device = session.device(target.kind.name, 0) if target.kind.name != "llvm" else session.cpu()
    arrays = random_arrays([(shape, dtype) for _, shape, dtype in buffer_specs(mod["main"])], seed)
    args = [tvm.runtime.tensor(a, device) for a in arrays]
    raw = time_rounds([Program("untuned", evaluator_timer(remote.time_evaluator, entry_name(mod), device, args))])
    return float(np.median(raw["samples_us"]["untuned"]))


def baseline_us(plan: Plan, target, rpc: str) -> tuple[float | None, dict]:
    """Untuned latency of what the plan tunes on the RPC device: (total µs or None, per PrimFunc µs)."""
    if plan.kind == "relax":
        return None, {"note": "untuned Relax latency is not measured over RPC"}
    per = {task.name: measure_prim_rpc(task.mod["main"], target, rpc) for task in plan.tasks}
    return sum(per.values()), per
