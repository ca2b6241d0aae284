"""Peak fp32 FLOP/s of the measuring host, for "fraction of peak" (pure).

The worker reports the host (TSC rate, threads, CPU flags, a measured numpy sgemm); the formula
here turns flags into FLOP per cycle.
"""
from __future__ import annotations



FORMULA_FLOPS_PER_CYCLE = (  # fp32 FLOP per cycle per core, assuming 2 FMA pipes (true for Zen/Skylake-SP+)
    ("avx512f", 64, "2 x 512-bit FMA"), ("fma", 32, "2 x 256-bit FMA (AVX2)"),
    ("avx", 16, "256-bit add + mul"), ("sse2", 8, "128-bit add + mul"))


def peak_figures(host: dict, flags: set[str]) -> dict:
    """Peak fp32 FLOP/s: measured (numpy sgemm) and by formula; the larger one is used."""
    threads = int(host.get("threads") or 1)
    ghz = (host.get("tsc_hz") or 0) / 1e9
    formula = None
    for flag, per_cycle, how in FORMULA_FLOPS_PER_CYCLE:
        if flag in flags and ghz:
            formula = {"gflops": per_cycle * ghz * threads, "flops_per_cycle": per_cycle, "ghz": ghz, "cores": threads,
                       "source": f"formula: {per_cycle} fp32 FLOP/cycle/core ({how}, from /proc/cpuinfo flags) "
                                 f"x {ghz:.3f} GHz (TSC, nominal) x {threads} threads"}
            break
    measured = host.get("sgemm")
    candidates = [c for c in (measured, formula) if c and c.get("gflops")]
    best = max(candidates, key=lambda c: c["gflops"]) if candidates else None
    return {"gflops": best["gflops"] if best else None, "source": best["source"] if best else "unknown",
            "measured": measured, "formula": formula,
            "note": "peak = the larger of the measured reference and the formula (turbo clocks exceed the TSC rate)"}
