"""The baseline a GPU run is measured against, and the vendor library's time (TVM side).

* ``dlight_default``: DLight's default GPU schedule of a PrimFunc module — what a TVM user gets
  without tuning (the untuned TIR cannot run on a GPU: nothing is bound to threads).
  ``ApplyDefaultSchedule`` schedules the module it is given **in place** and returns the same
  object (observed in 0.27; tuning that object afterwards tuned an already-scheduled program), so it
  always gets its own copy.  Works on CPU-side IR: no device is needed to schedule or to generate
  the CUDA source.
* ``vendor_reference``: cuBLAS through PyTorch (``torch.mm``, TF32 off) when PyTorch with CUDA is
  installed and the function computes exactly ``A @ B`` on the same inputs (checked on its
  outputs, not guessed from its shape); otherwise a note saying why there is none.
"""
from __future__ import annotations

import numpy as np

from .records import fresh_copy

GPU_KINDS = ("cuda", "rocm", "vulkan", "metal", "opencl")
DLIGHT = {"kind": "dlight", "label": "DLight's default schedule"}


def is_gpu(target) -> bool:
    return target.kind.name in GPU_KINDS


def dlight_default(mod, target):
    """DLight's default GPU schedule of a copy of ``mod`` (``mod`` itself is left as it was)."""
    from .compat import dlight as dl
    copy = fresh_copy(mod)
    with target:
        return dl.ApplyDefaultSchedule(dl.gpu.Matmul(), dl.gpu.GEMV(), dl.gpu.Reduction(),
                                       dl.gpu.GeneralReduction(), dl.gpu.Fallback())(copy)


def baseline_of(mod, target):
    """(program the run's tuned one is compared with, its description): DLight on a GPU, the untuned
    program on a CPU."""
    if is_gpu(target):
        return dlight_default(mod, target), DLIGHT
    return mod, {"kind": "untuned", "label": "the untuned program"}


def vendor_reference(arrays: list[np.ndarray], output: np.ndarray, calls: int = 100) -> dict:
    """``{label, median_us, method}`` of cuBLAS for ``arrays[0] @ arrays[1]`` when that is what the
    function computed (``output``), else ``{note}``."""
    try:
        import torch
    except ImportError:
        return {"note": "PyTorch is not installed (no cuBLAS/cuDNN reference)"}
    if not torch.cuda.is_available():
        return {"note": "PyTorch has no CUDA device here"}
    if len(arrays) != 3 or any(a.ndim != 2 for a in arrays) or arrays[0].shape[1] != arrays[1].shape[0]:
        return {"note": "no vendor reference for this workload (only a plain matmul is recognised)"}
    torch.backends.cuda.matmul.allow_tf32 = False
    a, b = (torch.from_numpy(x).cuda() for x in arrays[:2])
    expect = torch.mm(a, b).cpu().numpy()
    if expect.shape != output.shape or not np.allclose(expect, output, rtol=1e-3, atol=1e-3):
        return {"note": "no vendor reference for this workload (its outputs are not A @ B)"}
    for _ in range(10):
        torch.mm(a, b)
    samples = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            torch.mm(a, b)
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / calls)
    return {"label": "cuBLAS (PyTorch torch.mm, fp32, TF32 off)", "median_us": float(np.median(samples)),
            "samples_us": samples, "method": f"CUDA events, {calls} calls a sample, 5 samples"}


