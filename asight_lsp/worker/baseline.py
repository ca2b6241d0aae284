"""Latency of a tuning run's programs in the tuning job: the untuned baseline and the tuned Relax
program end to end."""
from __future__ import annotations

import os
import time

import numpy as np

from .compat import ms, normalize_mod, relax, tar, tvm
from .compat import rpc as tvm_rpc
from .metaschedule import MIN_REPEAT_MS, NUMBER, Plan, device_for, parse_rpc


def random_args(params: list[tuple[tuple, str]], device, seed: int = 0) -> list:
    """Random inputs for ``[(shape, dtype), ...]`` on ``device``."""
    rng = np.random.default_rng(seed)
    out = []
    for shape, dtype in params:
        if "float" in dtype:
            data = rng.uniform(-1, 1, size=shape).astype(dtype)
        elif dtype == "bool":
            data = rng.integers(0, 2, size=shape).astype(dtype)
        else:
            data = rng.integers(0, 8, size=shape).astype(dtype)
        out.append(tvm.runtime.tensor(data, device))
    return out


def prim_func_params(func) -> list[tuple[tuple, str]]:
    """(shape, dtype) of every parameter (as MetaSchedule's runner allocates them)."""
    out = []
    for info in ms.arg_info.ArgInfo.from_prim_func(func):
        kind, dtype, shape = info.as_json()[:3]
        if kind != "TENSOR":
            raise ValueError(f"cannot make inputs for a {kind} parameter")
        out.append((tuple(_static(d) for d in shape), str(dtype)))
    return out


def relax_params(func) -> list[tuple[tuple, str]]:
    """(shape, dtype) of a Relax function's tensor parameters (TVM 0.27: ``param.ty``)."""
    out = []
    for param in func.params:
        info = getattr(param, "ty", None) or getattr(param, "struct_info", None)
        shape = getattr(info, "shape", None)
        if shape is None or not hasattr(info, "dtype"):
            raise ValueError(f"parameter {param.name} is not a tensor of known shape")
        dims = shape.values if hasattr(shape, "values") else shape
        out.append((tuple(_static(d) for d in dims), str(info.dtype)))
    return out


def _static(dim) -> int:
    if isinstance(dim, (int, np.integer)):
        return int(dim)
    if hasattr(dim, "value"):
        return int(dim.value)
    raise ValueError(f"dynamic shape dimension {dim}")


def measure_prim(func, target, device=None, seed: int = 0) -> float:
    """Untuned latency (µs) of one PrimFunc built as is for ``target``."""
    device = device or device_for(target)
    mod = normalize_mod(func)
    ex = tvm.compile(mod, target=target)
    args = random_args(prim_func_params(mod["main"]), device, seed)
    return _evaluate(ex.jit() if hasattr(ex, "jit") else ex, "main", args, device)


def _evaluate(module, name: str, args: list, device) -> float:
    start = time.perf_counter()
    module[name](*args)
    device.sync()
    return _median_us(module.time_evaluator, name, device, args, time.perf_counter() - start)


def _median_us(time_evaluator, name: str, device, args: list, once_s: float) -> float:
    """Median over repeats; slow programs get fewer repeats (an untuned 1024^3 matmul takes ~1.5 s)."""
    repeat = 1 if once_s > 0.5 else 3 if once_s > 0.05 else 5
    number, min_ms = (1, 0) if once_s > 0.005 else (NUMBER, MIN_REPEAT_MS)
    evaluator = time_evaluator(name, device, number=number, repeat=repeat, min_repeat_ms=min_ms)
    return float(evaluator(*args).median) * 1e6


def measure_relax(ex, entry: str, func, device, seed: int = 0) -> float:
    """End-to-end latency (µs) of a Relax VM executable's ``entry`` on random inputs."""
    vm = relax.VirtualMachine(ex, device)
    args = random_args(relax_params(func), device, seed)
    start = time.perf_counter()
    vm[entry](*args)
    return _median_us(vm.time_evaluator, entry, device, args, time.perf_counter() - start)


def measure_prim_rpc(func, target, rpc_spec: str, seed: int = 0) -> float:
    """Untuned latency (µs) of a PrimFunc measured on a device from the RPC tracker."""
    import tempfile
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
    args = random_args(prim_func_params(mod["main"]), device, seed)
    return _evaluate(remote, "main", args, device)


def baseline_us(plan: Plan, target, rpc: str | None = None) -> tuple[float | None, dict]:
    """Untuned latency of what the plan tunes: (total µs or None, per-task/per-function µs)."""
    if plan.kind == "relax":
        if rpc:
            return None, {"note": "untuned Relax latency is not measured over RPC"}
        ex = tvm.compile(plan.program, target=target)
        return measure_relax(ex, plan.entry, plan.program[plan.entry], device_for(target)), {}
    per = {}
    for task in plan.tasks:
        func = task.mod["main"]
        per[task.name] = measure_prim_rpc(func, target, rpc) if rpc else measure_prim(func, target)
    return sum(per.values()), per


def tuned_relax_us(plan: Plan, database, target) -> float:
    """End-to-end latency of the Relax program compiled with the tuned database (raw module, §6)."""
    ex = ms.relax_integration.compile_relax(database, plan.program, target, params=None)
    return measure_relax(ex, plan.entry, plan.program[plan.entry], device_for(target))
