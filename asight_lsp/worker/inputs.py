"""What the measured programs are fed and how their outputs are compared: seeded random inputs
(the same for the untuned and the tuned program) and an allclose per output buffer."""
from __future__ import annotations

import numpy as np

DEFAULT_RTOL, DEFAULT_ATOL = 1e-3, 1e-4   # atol is scaled by max(1, max |reference|)


def random_arrays(specs: list[tuple[tuple, str]], seed: int) -> list[np.ndarray]:
    """Random inputs: floats in [-1, 1), small non-negative ints (safe as indices), random bools."""
    rng = np.random.default_rng(seed)
    out = []
    for shape, dtype in specs:
        dtype = str(dtype)
        if dtype.startswith("float") or dtype.startswith("bfloat"):
            out.append((rng.random(shape) * 2 - 1).astype(dtype))
        elif dtype == "bool":
            out.append(rng.random(shape) < 0.5)
        else:
            out.append(rng.integers(0, 2, size=shape).astype(dtype))
    return out


def runner_arguments(device, args_info: list, alloc_repeat: int) -> list[list]:
    """The arguments MetaSchedule's ``LocalRunner`` times a candidate on (its ``f_alloc_argument``):
    floats filled as TVM's default does (``random_fill_for_measure``), integers and bools zero.

    TVM's default fills integer tensors with random values too, and a kernel that indexes with one
    (an embedding lookup, ``take``, ``gather``) then reads out of bounds: every trial of such a task
    died with "Subprocess terminated" and the run ended with 0 measured.  Zero is a valid index on
    any axis.  Runs in the runner's subprocess, so TVM is imported here and not at module level."""
    from .compat import tvm
    try:
        fill = tvm.get_global_func("tvm.contrib.random.random_fill_for_measure")
    except (ValueError, RuntimeError, AttributeError):
        fill = None
    repeated = []
    for _ in range(alloc_repeat):
        args = []
        for info in args_info:
            if info[0] != "TENSOR":
                raise NotImplementedError(f"argument kind {info[0]!r}")
            dtype, shape = str(info[1]), [int(d) for d in info[2]]
            arg = tvm.runtime.empty(shape=shape, dtype=dtype, device=device)
            if fill is not None and dtype.startswith(("float", "bfloat")):
                fill(arg)
            else:
                arg.copyfrom(np.zeros(shape, dtype=dtype))
            args.append(arg)
        repeated.append(args)
    return repeated


# The least tolerance a low-precision output is compared with: half precision has an epsilon of ~1e-3
# (float16) and ~8e-3 (bfloat16), and a sum of hundreds of products in another order differs by
# several of them (a float16 matmul over 288 products: 1e-2 relative between two correct programs).
LOW_PRECISION = {"float16": 1e-2, "bfloat16": 5e-2}


def tolerance(dtype, rtol: float, atol: float) -> tuple[float, float]:
    """(rtol, atol) for an output of ``dtype``: the requested ones, at least ``LOW_PRECISION``'s."""
    floor = LOW_PRECISION.get(str(dtype), 0.0)
    return max(rtol, floor), max(atol, floor)


def compare_outputs(names: list[str], reference: list[np.ndarray], candidate: list[np.ndarray],
                    rtol: float = DEFAULT_RTOL, atol: float = DEFAULT_ATOL,
                    source: str = "numpy.isclose on random inputs (same inputs for both programs)") -> dict:
    """allclose per buffer, with the buffer's dtype's tolerance (``tolerance``: float16 and bfloat16
    looser), said per buffer: the one rule for any two programs' outputs (the tuned program against
    the untuned one, an imported model against onnxruntime).  Another number of outputs, or another
    shape, is a mismatch too."""
    buffers = [_compare_buffer(name, ref, got, rtol, atol) for name, ref, got in zip(names, reference, candidate)]
    ok = all(b["ok"] for b in buffers) and len(reference) == len(candidate)
    out = {"ok": ok, "rtol": rtol, "atol": atol, "atol_scaled_by": "max(1, max|reference|)",
           "buffers": buffers, "source": source}
    if len(reference) != len(candidate):
        out["count"] = {"reference": len(reference), "candidate": len(candidate)}
    return out


def _compare_buffer(name: str, ref: np.ndarray, got: np.ndarray, rtol: float, atol: float) -> dict:
    ref, got = np.asarray(ref), np.asarray(got)
    b_rtol, b_atol = tolerance(ref.dtype, rtol, atol)
    entry = {"name": name, "dtype": str(ref.dtype), "elements": int(ref.size),
             **({"rtol": b_rtol, "atol": b_atol} if (b_rtol, b_atol) != (rtol, atol) else {})}
    if ref.shape != got.shape:
        return {**entry, "ok": False, "shape": {"reference": list(ref.shape), "candidate": list(got.shape)},
                "max_abs_err": float("inf"), "max_rel_err": float("inf"), "mismatched": int(ref.size)}
    ref64, got64 = ref.astype(np.float64), got.astype(np.float64)
    scale = max(1.0, float(np.max(np.abs(ref64)))) if ref64.size else 1.0
    diff = np.abs(ref64 - got64)
    close = np.isclose(got64, ref64, rtol=b_rtol, atol=b_atol * scale, equal_nan=True)
    return {**entry, "ok": bool(close.all()), "max_abs_err": float(diff.max()) if diff.size else 0.0,
            "max_rel_err": float((diff / np.maximum(np.abs(ref64), 1e-30)).max()) if diff.size else 0.0,
            "mismatched": int((~close).sum())}
