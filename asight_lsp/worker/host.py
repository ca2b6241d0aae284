"""The measuring host: TSC rate, threads, CPU model and flags, a measured fp32 reference peak."""
from __future__ import annotations

import os
import time

import numpy as np

from .compat import host_target, tirx, tvm


_TSC_HZ: float | None = None


_SGEMM: dict | None = None


def host_info() -> dict:
    """TSC frequency, TVM threads, the CPU (LLVM's name, model, SIMD flags) and a measured fp32
    reference peak (numpy/OpenBLAS sgemm)."""
    model, flags = cpu_model_and_flags()
    return {"tsc_hz": tsc_hz(), "threads": int(os.environ.get("TVM_NUM_THREADS") or os.cpu_count() or 1),
            "cpu": str(tvm.get_global_func("tvm.codegen.llvm.GetHostCPUName")()), "model": model,
            "flags": flags, "sgemm": sgemm_peak()}


SIMD_FLAGS = ("sse2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16", "amx_tile")


def cpu_model_and_flags(path: str = "/proc/cpuinfo") -> tuple[str | None, list[str]]:
    """The CPU model name and the SIMD flags the peak rule needs, from ``/proc/cpuinfo``."""
    model, flags = None, []
    try:
        with open(path, errors="replace") as stream:
            for line in stream:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and model is None:
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = [f for f in value.split() if f in SIMD_FLAGS]
                    break
    except OSError:
        pass
    return model, flags


def sgemm_peak(n: int = 512, repeats: int = 7) -> dict:
    """Best fp32 GFLOP/s of numpy's matmul (OpenBLAS, all its threads): a tuned reference."""
    global _SGEMM
    if _SGEMM is None:
        rng = np.random.default_rng(0)
        a, b = rng.random((n, n), dtype=np.float32), rng.random((n, n), dtype=np.float32)
        a @ b
        best = min(_timed(lambda: a @ b) for _ in range(repeats))
        _SGEMM = {"gflops": 2 * n ** 3 / best / 1e9, "n": n,
                  "source": f"numpy.matmul {n}x{n} fp32 (OpenBLAS), best of {repeats}"}
    return _SGEMM


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def tsc_hz() -> float:
    """rdtsc ticks per second, calibrated once per process against perf_counter."""
    global _TSC_HZ
    if _TSC_HZ is None:
        out = tirx.decl_buffer((1,), "int64", name="out")
        func = tirx.PrimFunc([out], tirx.BufferStore(
            out, tirx.call_llvm_intrin("int64", "llvm.readcyclecounter"), [0])).with_attr("global_symbol", "rdtsc")
        rt = tvm.tirx.build(tvm.IRModule({"rdtsc": func}), target=host_target())
        buf = tvm.runtime.tensor(np.zeros(1, "int64"))
        rt["rdtsc"](buf)
        c0, t0 = int(buf.numpy()[0]), time.perf_counter()
        time.sleep(0.1)
        rt["rdtsc"](buf)
        c1, t1 = int(buf.numpy()[0]), time.perf_counter()
        _TSC_HZ = (c1 - c0) / (t1 - t0)
    return _TSC_HZ
