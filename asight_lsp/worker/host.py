"""The measuring host: TSC rate, threads, CPU model and flags, a measured fp32 reference peak."""
from __future__ import annotations

import os
import time

import numpy as np

from .compat import host_target, tirx, tvm


_TSC_HZ: float | None = None


_SGEMM: dict | None = None


_CLOCK: dict | None = None


def host_info() -> dict:
    """TSC frequency, TVM threads, the CPU (LLVM's name, model, SIMD flags) and a measured fp32
    reference peak (numpy/OpenBLAS sgemm)."""
    model, flags = cpu_model_and_flags()
    return {"tsc_hz": tsc_hz(), "threads": int(os.environ.get("TVM_NUM_THREADS") or os.cpu_count() or 1),
            "cpu": str(tvm.get_global_func("tvm.codegen.llvm.GetHostCPUName")()), "model": model,
            "flags": flags, "sgemm": sgemm_peak(), "clock": clock_figures()}


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


# A dependent chain of integer add + xor (one cycle each on every x86 and Arm core: the result of one
# is the input of the next, so no core runs two per cycle); the loads are off the chain.  LLVM cannot
# vectorise or fold it (add-then-xor is no reduction it knows).
CHAIN_TIR = """
@T.prim_func
def clock_chain(a: T.Buffer((1024,), "int64"), b: T.Buffer((1024,), "int64"), out: T.Buffer((1,), "int64"),
                n: T.int32):
    acc = T.alloc_buffer((1,), "int64", scope="local")
    acc[0] = a[0]
    for r in range(n):
        for i in range(1024):
            acc[0] = T.bitwise_xor(acc[0] + a[i], b[i])
    out[0] = acc[0]
"""
CHAIN_CYCLES_PER_STEP = 2


def clock_figures(rounds: int = 20000, repeats: int = 5) -> dict:
    """The clocks the peak rule chooses from (``analysis/peak.core_clock``): measured (best of
    ``repeats`` timed runs of a dependent add/xor chain of known cycle count, one core), the highest
    ``cpu MHz`` of ``/proc/cpuinfo`` and cpufreq's ``scaling_max_freq`` (None where absent)."""
    global _CLOCK
    if _CLOCK is None:
        _CLOCK = {"measured_hz": _measured_hz(rounds, repeats), "cpuinfo_max_hz": _cpuinfo_max_hz(),
                  "scaling_max_hz": _scaling_max_hz(),
                  "method": f"dependent int64 add+xor chain, {CHAIN_CYCLES_PER_STEP} cycles a step, "
                            f"{rounds * 1024} steps, best of {repeats}"}
    return _CLOCK


def _measured_hz(rounds: int, repeats: int) -> float | None:
    from .compat import parse_script
    try:
        func = parse_script(CHAIN_TIR).with_attr("global_symbol", "clock_chain")
        chain = tvm.tirx.build(tvm.IRModule({"clock_chain": func}), target=host_target())["clock_chain"]
    except Exception:  # noqa: BLE001 - no measured clock: the rule falls back to the others, and says so
        return None
    a = tvm.runtime.tensor(np.arange(1024, dtype="int64"))
    b = tvm.runtime.tensor(np.arange(1024, dtype="int64") * 7)
    out = tvm.runtime.tensor(np.zeros(1, "int64"))
    chain(a, b, out, 100)
    best = min(_timed(lambda: chain(a, b, out, rounds)) for _ in range(repeats))
    return CHAIN_CYCLES_PER_STEP * 1024 * rounds / best


def _cpuinfo_max_hz(path: str = "/proc/cpuinfo") -> float | None:
    try:
        with open(path, errors="replace") as stream:
            mhz = [float(line.partition(":")[2]) for line in stream if line.startswith("cpu MHz")]
    except (OSError, ValueError):
        return None
    return max(mhz) * 1e6 if mhz else None


def _scaling_max_hz() -> float | None:
    best = None
    for cpu in range(os.cpu_count() or 1):
        try:
            with open(f"/sys/devices/system/cpu/cpu{cpu}/cpufreq/scaling_max_freq") as stream:
                khz = float(stream.read().strip())
        except (OSError, ValueError):
            continue
        best = max(best or 0.0, khz * 1e3)
    return best
