"""The baseline a GPU run is measured against, and the vendor library's time (TVM side).

* ``dlight_default``: DLight's default GPU schedule of a PrimFunc module — what a TVM user gets
  without tuning (the untuned TIR cannot run on a GPU: nothing is bound to threads).
  ``ApplyDefaultSchedule`` schedules the module it is given **in place** and returns the same
  object (observed in 0.27; tuning that object afterwards tuned an already-scheduled program), so it
  always gets its own copy.  Works on CPU-side IR: no device is needed to schedule or to generate
  the CUDA source.
* ``vendor_reference``: cuBLAS through PyTorch (``torch.mm``, TF32 off) when PyTorch with CUDA is
  installed and the function computes exactly ``A @ B`` on the same inputs, or cuDNN
  (``F.conv2d``) for a convolution ``analysis/vendor_workload`` recognises (layout, stride,
  padding, dilation, groups) — either checked on its outputs, not guessed from its shape;
  otherwise a note saying why there is none.
"""
from __future__ import annotations

import numpy as np

from ..engine.targets import DEVICE_KINDS
from .records import fresh_copy

GPU_KINDS = DEVICE_KINDS
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


def vendor_workload(mod) -> dict:
    """The vendor call that computes ``mod``'s one PrimFunc (``analysis/vendor_workload.recognise`` on
    its printed TVMScript: the module the run tuned, hoisted allocations included)."""
    from ..analysis.vendor_workload import recognise
    return recognise(mod.script())


def _torch_cuda():
    """(torch, None) when PyTorch with a CUDA device is here, else (None, why)."""
    try:
        from . import compat
        torch = compat.load_torch()
    except ImportError:
        return None, "PyTorch is not installed"
    if not torch.cuda.is_available():
        return None, "PyTorch has no CUDA device here"
    return torch, None


def _time_cuda(torch, call, calls: int) -> list[float]:
    """µs a call of ``call``: 10 warm-up calls, then 5 samples of ``calls`` calls between CUDA events."""
    for _ in range(10):
        call()
    samples = []
    for _ in range(5):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(calls):
            call()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) * 1e3 / calls)
    return samples


def vendor_reference(arrays: list[np.ndarray], output: np.ndarray, calls: int = 100,
                     workload: dict | None = None) -> dict:
    """``{label, median_us, method}`` of the vendor call that computes what the function computed
    (``output``, checked, not guessed): cuDNN through ``F.conv2d`` for a recognised convolution
    (``workload``, ``vendor_workload``), cuBLAS through ``torch.mm`` for ``arrays[0] @ arrays[1]``;
    else ``{note}`` saying why there is none."""
    conv = workload if (workload or {}).get("op") == "conv2d" else None
    torch, why = _torch_cuda()
    if why:
        from ..analysis.vendor_workload import describe
        what = f"cuDNN reference for this {describe(conv)}" if conv else "cuBLAS/cuDNN reference"
        return {"note": f"{why} (no {what})"}
    if conv:
        return cudnn_reference(torch, arrays, output, conv, calls)
    if len(arrays) != 3 or any(a.ndim != 2 for a in arrays) or arrays[0].shape[1] != arrays[1].shape[0]:
        why = (workload or {}).get("why") or "only a plain matmul or a 2-D convolution is recognised"
        return {"note": f"no vendor reference for this workload ({why})"}
    torch.backends.cuda.matmul.allow_tf32 = False
    a, b = (torch.from_numpy(x).cuda() for x in arrays[:2])
    expect = torch.mm(a, b).cpu().numpy()
    if expect.shape != output.shape or not np.allclose(expect, output, rtol=1e-3, atol=1e-3):
        return {"note": "no vendor reference for this workload (its outputs are not A @ B)"}
    samples = _time_cuda(torch, lambda: torch.mm(a, b), calls)
    return {"label": "cuBLAS (PyTorch torch.mm, fp32, TF32 off)", "median_us": float(np.median(samples)),
            "samples_us": samples, "method": f"CUDA events, {calls} calls a sample, 5 samples"}


def cudnn_reference(torch, arrays: list[np.ndarray], output: np.ndarray, conv: dict, calls: int = 100) -> dict:
    """cuDNN (``torch.nn.functional.conv2d``, fp32, TF32 off) on the function's own inputs in its
    layout (NHWC data as a channels-last tensor), kept only when its output equals the function's."""
    from torch.nn import functional as F
    from ..analysis.vendor_workload import describe
    torch.backends.cudnn.allow_tf32 = False
    layout, kernel = conv["layout"], conv["kernel_layout"]
    x = torch.from_numpy(arrays[conv["data"]]).cuda().permute(*[layout.index(c) for c in "NCHW"])
    w = torch.from_numpy(arrays[conv["weight"]]).cuda().permute(*[kernel.index(c) for c in "OIHW"])
    fmt = torch.channels_last if layout == "NHWC" else torch.contiguous_format
    top, bottom, left, right = conv["padding"]
    if top == bottom and left == right:
        pad = (top, left)
    else:                     # asymmetric: padded once, outside the timed calls
        x, pad = F.pad(x, (left, right, top, bottom)), (0, 0)
    x, w = x.contiguous(memory_format=fmt), w.contiguous(memory_format=fmt)

    def call():
        return F.conv2d(x, w, stride=tuple(conv["stride"]), padding=pad, dilation=tuple(conv["dilation"]),
                        groups=conv["groups"])

    got = call().permute(*["NCHW".index(c) for c in layout]).cpu().numpy()
    if got.shape != output.shape or not np.allclose(got, output, rtol=1e-3, atol=1e-3):
        return {"note": f"no vendor reference for this workload (cuDNN's {describe(conv)} does not give its outputs)"}
    samples = _time_cuda(torch, call, calls)
    return {"label": f"cuDNN (PyTorch F.conv2d, fp32, TF32 off, {layout})", "median_us": float(np.median(samples)),
            "samples_us": samples, "method": f"CUDA events, {calls} calls a sample, 5 samples",
            "workload": describe(conv)}
