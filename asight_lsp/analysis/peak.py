"""Peak fp32 FLOP/s of the measuring host, for "fraction of peak" (pure).

The worker reports the host: its CPU as LLVM names it (``GetHostCPUName``: ``znver3``,
``skylake-avx512`` ...), its ``/proc/cpuinfo`` flags, the TSC rate, the threads TVM uses and a
measured numpy sgemm.  The formula is FLOP per cycle per core x TSC GHz x threads, with FLOP per
cycle from the microarchitecture, not from the flags alone: AVX-512 is 64 fp32 FLOP/cycle only
where a core has two 512-bit FMA pipes.  The peak used is the larger of the formula and the
measured sgemm (turbo clocks exceed the nominal TSC rate).
"""
from __future__ import annotations

# fp32 FLOP per cycle per core = FMA pipes x lanes x 2.  Sources: Agner Fog, "The microarchitecture
# of Intel, AMD and VIA CPUs" (2024), and the vendors' optimization manuals named per row.
MICROARCHITECTURES = (
    # (LLVM CPU names, FLOP/cycle, rule and source)
    (("znver4",), 32, "Zen 4: AVX-512 executed as two 256-bit halves, 2 x 256-bit FMA "
                      "(AMD Software Optimization Guide for Family 19h)"),
    (("znver5",), 64, "Zen 5: 2 x 512-bit FMA (AMD Software Optimization Guide for Family 1Ah)"),
    (("znver2", "znver3"), 32, "Zen 2/3: 2 x 256-bit FMA (AMD Software Optimization Guide for Family 17h/19h)"),
    (("znver1",), 16, "Zen 1: 2 x 128-bit FMA units, 256-bit ops split (AMD Family 17h guide)"),
    (("skylake-avx512", "cascadelake", "cooperlake", "icelake-server", "sapphirerapids", "emeraldrapids",
      "graniterapids"), 64, "Xeon Scalable: 2 x 512-bit FMA (ports 0+1 fused and port 5; Intel 64 and IA-32 "
                            "Architectures Optimization Reference Manual)"),
    (("icelake-client", "tigerlake", "rocketlake", "cannonlake"), 32,
     "client cores with AVX-512: 1 x 512-bit FMA (Intel optimization manual)"),
    (("haswell", "broadwell", "skylake", "alderlake", "raptorlake", "meteorlake", "arrowlake", "lunarlake"), 32,
     "2 x 256-bit FMA (Intel optimization manual)"),
)
FLAG_FALLBACK = (   # unknown CPU name: the widest FMA the flags allow, one pipe for 512-bit
    ("avx512f", 32, "AVX-512 flag, microarchitecture unknown: counted as 1 x 512-bit FMA (conservative)"),
    ("fma", 32, "AVX2 + FMA flags: 2 x 256-bit FMA"),
    ("avx", 16, "AVX flag: 256-bit add + mul"),
    ("sse2", 8, "SSE2 flag: 128-bit add + mul"))


def flops_per_cycle(cpu: str | None, flags: set[str]) -> tuple[int, str] | None:
    """fp32 FLOP per cycle per core and the rule it comes from, or None when nothing is known."""
    name = (cpu or "").lower()
    for names, per_cycle, rule in MICROARCHITECTURES:
        if name in names:
            return per_cycle, f"{name}: {rule}"
    for flag, per_cycle, rule in FLAG_FALLBACK:
        if flag in flags:
            return per_cycle, rule
    return None


def peak_figures(host: dict) -> dict:
    """Peak fp32 FLOP/s: by formula (microarchitecture) and measured (numpy sgemm); the larger is used."""
    threads = int(host.get("threads") or 1)
    ghz = (host.get("tsc_hz") or 0) / 1e9
    rule = flops_per_cycle(host.get("cpu"), set(host.get("flags") or ()))
    formula = None
    if rule and ghz:
        per_cycle, how = rule
        formula = {"gflops": per_cycle * ghz * threads, "flops_per_cycle": per_cycle, "ghz": ghz, "cores": threads,
                   "source": f"formula: {per_cycle} fp32 FLOP/cycle/core ({how}) x {ghz:.3f} GHz (TSC, nominal) "
                             f"x {threads} threads"}
    measured = host.get("sgemm")
    candidates = [c for c in (measured, formula) if c and c.get("gflops")]
    best = max(candidates, key=lambda c: c["gflops"]) if candidates else None
    return {"gflops": best["gflops"] if best else None, "source": best["source"] if best else "unknown",
            "measured": measured, "formula": formula,
            "note": "peak = the larger of the measured reference and the formula (turbo clocks exceed the TSC rate)"}
