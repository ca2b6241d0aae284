"""``asight model --compare-onnx``'s TVM side: the tuned model (built as ``asight export`` builds it:
weights bound, the run's chosen records) and onnxruntime on the same ONNX file, timed in the same
process in interleaved rounds on the same inputs, outputs compared.

Both use the same number of threads: TVM's ``TVM_NUM_THREADS`` (the usable cores, as every
measurement here) and onnxruntime's ``intra_op_num_threads``.  Each round times each contender
``calls`` times back to back (the mean per call), in alternating order, each block after the
process has gone quiet (``harness.quiesce``) and one untimed call: both runtimes' worker threads spin
a while after a call (TVM's ~110 ms, onnxruntime's ~35 ms here), and a block timed in that while
shares the cores with them.  A fixed 50 ms pause was too short for TVM's: onnxruntime timed after
TVM ran up to 2x its time, and the ratio flattered TVM by 3-8 % (docs/measurement.md).  The ratio
and its interval are ``analysis/versus.py``'s; ``settled_s`` says how long the pauses took.
"""
from __future__ import annotations

import os
import time

import numpy as np

from ..analysis import versus
from ..engine import wire
from .compat import relax, tvm
from .harness import quiesce
from .inputs import compare_outputs
from .model_export import _database
from .model_import import tensor_params
from .relax_pipeline import build_tuned, deployable
from .parse import parse_to_run
from .programs import measuring_target
from .remeasure import flatten
from .tune_plan import params_levers

ONNX_DTYPES = {"tensor(float)": "float32", "tensor(float16)": "float16", "tensor(double)": "float64",
               "tensor(int64)": "int64", "tensor(int32)": "int32", "tensor(int8)": "int8", "tensor(uint8)": "uint8",
               "tensor(bool)": "bool"}


def onnxruntime_module():
    try:
        import onnxruntime
    except ImportError:
        raise ValueError("onnxruntime is not installed in the worker's Python: pip install onnxruntime "
                         "(then asight model --compare-onnx times the tuned model against it)") from None
    return onnxruntime


def _inputs(session, model_inputs: list[dict], seed: int) -> list[tuple[str, np.ndarray]]:
    """Seeded inputs for each ONNX input: its shape, or where a dimension is symbolic (a dynamic batch)
    the tuned model's (imported with ``--shape``); floats normal, integers 0 or 1 (a valid index on any
    axis of two or more), booleans random."""
    rng = np.random.default_rng(seed)
    out = []
    for k, spec in enumerate(session.get_inputs()):
        shape = list(spec.shape)
        model = model_inputs[k]["shape"] if k < len(model_inputs) else None
        if any(not isinstance(d, int) for d in shape):
            if model is None or len(model) != len(shape) or not all(isinstance(d, int) for d in model) or any(
                    isinstance(d, int) and d != m for d, m in zip(shape, model)):
                raise ValueError(f"ONNX input {spec.name} has symbolic dimensions {shape}, and the tuned model's "
                                 f"input {k} ({model}) does not fix them")
            shape = model
        dtype = ONNX_DTYPES.get(spec.type, "float32")
        if dtype == "bool":
            value = rng.integers(0, 2, shape).astype(bool)
        elif np.issubdtype(np.dtype(dtype), np.integer):
            value = rng.integers(0, 2, shape).astype(dtype)
        else:
            value = rng.standard_normal(shape).astype(dtype)
        out.append((spec.name, value))
    return out


def _tuned_vm(params: dict, fn: str, off: frozenset[str]):
    """The tuned model's VM (built as asight export builds it, without the levers ``off``) and its
    input parameters."""
    parsed = parse_to_run(params)
    target = measuring_target(params.get("target"))
    mod, _ = deployable(parsed, fn, params.get("weights"))     # as asight export builds it
    database = _database(params)[0]
    inputs = tensor_params(mod[fn], len(mod[fn].params))
    return relax.VirtualMachine(build_tuned(database, mod, target, off=off), tvm.cpu(0)), inputs


def interleaved(contenders: dict, rounds: int, budget_s: float, settled: list | None = None,
                calls: int | None = None) -> tuple[dict, int]:
    """Per contender the per-round mean µs per call; ``calls`` per block (default: so that a round
    takes ~budget_s/rounds).  ``settled`` (optional) receives the seconds each pause before a block
    waited (``harness.quiesce``)."""
    names = list(contenders)
    once = {name: per_call_s(fn) for name, fn in contenders.items()}
    calls = calls or max(1, int(budget_s / rounds / max(sum(once.values()), 1e-6)))
    per = {n: [] for n in names}
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            waited = quiesce()
            if settled is not None:
                settled.append(waited)
            contenders[name]()
            started = time.perf_counter()
            for _ in range(calls):
                contenders[name]()
            per[name].append((time.perf_counter() - started) / calls * 1e6)
    return per, calls


def per_call_s(fn, least_s: float = 0.05) -> float:
    """Seconds a call, from blocks of calls doubled until one takes ``least_s`` (one call alone, the
    first after a pause, ran several times slower: rounds timed 0.2-1 s where ~20 s was asked)."""
    fn()
    calls = 1
    while True:
        started = time.perf_counter()
        for _ in range(calls):
            fn()
        elapsed = time.perf_counter() - started
        if elapsed >= least_s or calls >= 1 << 20:
            return elapsed / calls
        calls *= 2


def compare_onnx(params: dict, emit=None, off: frozenset[str] | None = None) -> dict:
    """See the module text.  Returns ``{versus summary, threads, calls, rounds, outputs_match, load}``.
    ``off``: the request's levers (its run's, ``tune_plan.params_levers``)."""
    ort = onnxruntime_module()
    fn = params.get("function") or "main"
    threads = int(os.environ.get("TVM_NUM_THREADS") or os.cpu_count() or 1)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    session = ort.InferenceSession(params["onnx"], options, providers=["CPUExecutionProvider"])
    if emit:
        emit({"type": "status", "message": "building the tuned model"})
    vm, model_inputs = _tuned_vm(params, fn, params_levers(params) if off is None else off)
    inputs = _inputs(session, model_inputs, int(params.get("seed") or 0))
    dev = tvm.cpu(0)
    tvm_args = [tvm.runtime.tensor(a, dev) for _, a in inputs]
    feed = dict(inputs)
    try:
        tvm_out = flatten(vm[fn](*tvm_args))
    except Exception as err:  # noqa: BLE001 - the ONNX inputs are not the model's
        raise ValueError(f"the tuned model does not take the ONNX file's inputs "
                         f"({', '.join(f'{n}{list(a.shape)}' for n, a in inputs)}): {str(err).splitlines()[0]}") from None
    ort_out = session.run(None, feed)
    check = compare_outputs([o.name for o in session.get_outputs()], ort_out, tvm_out,
                            source=f"numpy.isclose on seeded inputs, the tuned build against onnxruntime {ort.__version__}")
    if emit:
        emit({"type": "status", "message": "timing the tuned model and onnxruntime, interleaved"})
    load_before = os.getloadavg()[0]
    settled: list[float] = []
    per, calls = interleaved({"tuned TVM": lambda: vm[fn](*tvm_args), "onnxruntime": lambda: session.run(None, feed)},
                             int(params.get("rounds") or 15), float(params.get("budget_s") or 20.0), settled)
    out = versus.summary("tuned TVM", "onnxruntime", per["tuned TVM"], per["onnxruntime"])
    out.update(threads=threads, calls=calls, rounds=len(per["onnxruntime"]), outputs_match=check["ok"],
               tolerance=max((b.get("rtol", check["rtol"]) for b in check["buffers"]), default=check["rtol"]),
               outputs=check,
               samples_us=per, load={"before": load_before, "after": os.getloadavg()[0]},
               settled_s={"median": float(np.median(settled)), "max": float(np.max(settled))},
               versions={"onnxruntime": ort.__version__, "tvm": tvm.__version__},
               method=f"same process, {len(per['onnxruntime'])} rounds in alternating order, {calls} calls a round "
                      f"per contender (mean per call) after the other's threads went idle and one untimed call, "
                      f"{threads} threads each")
    return out


def onnx_time(params: dict, emit=None, off=None) -> dict:
    """``onnx_time``: onnxruntime's time of one call of ``params["onnx"]`` on seeded inputs (the
    median of ``rounds`` blocks, each after the process went quiet), with the threads every
    measurement here uses: what a tuning job shows its estimate beside (``asight tune --compare-onnx``).
    ``inputs``: the tuned model's inputs (``model_import.tensor_params``) where the file's are symbolic."""
    ort = onnxruntime_module()
    threads = int(os.environ.get("TVM_NUM_THREADS") or os.cpu_count() or 1)
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    try:
        session = ort.InferenceSession(params["onnx"], options, providers=["CPUExecutionProvider"])
        feed = dict(_inputs(session, params.get("inputs") or [], int(params.get("seed") or 0)))
        per, calls = interleaved({"onnxruntime": lambda: session.run(None, feed)}, int(params.get("rounds") or 7),
                                 float(params.get("budget_s") or 3.0))
    except ValueError:
        raise
    except Exception as err:  # noqa: BLE001 - onnxruntime's own errors are not one type: one line
        raise ValueError(f"onnxruntime {ort.__version__} cannot run {os.path.basename(params['onnx'])}: "
                         f"{str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__}") from None
    return {"median_us": float(np.median(per["onnxruntime"])), "rounds": len(per["onnxruntime"]), "calls": calls,
            "threads": threads, "onnxruntime": ort.__version__}


def time_in_sandbox(model: str) -> tuple[dict | None, str | None]:
    """(``onnx_time``'s reply, None) from the sandboxed worker (it runs the ONNX file), or (None, why)."""
    from ..errors import AsightError
    from .parse import sandboxed_worker
    try:
        return sandboxed_worker().request(wire.ONNX_TIME, {"onnx": model}, timeout=600), None
    except AsightError as err:
        return None, f"onnxruntime was not timed: {err}"


HANDLERS = {wire.COMPARE_ONNX: compare_onnx, wire.ONNX_TIME: onnx_time}
