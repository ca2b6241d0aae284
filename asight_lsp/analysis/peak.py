"""Peak fp32 FLOP/s of the measuring host, for "fraction of peak" (pure).

The worker reports the host: its CPU as LLVM names it (``GetHostCPUName``: ``znver3``,
``skylake-avx512`` ...), its ``/proc/cpuinfo`` flags, the TSC rate, the threads TVM uses and a
measured numpy sgemm.  The formula is FLOP per cycle per core x TSC GHz x threads, with FLOP per
cycle from the microarchitecture, not from the flags alone: AVX-512 is 64 fp32 FLOP/cycle only
where a core has two 512-bit FMA pipes.  The peak used is the larger of the formula and the
measured sgemm.

The clock (``core_clock``) is the one the cores actually reach, not the nominal TSC rate: on this
host (znver5, 2 vCPUs) the TSC says 2.60 GHz and a dependent add/xor chain runs at 4.1-4.2 GHz, so
a TSC formula put a tuned kernel at 112 % of "peak" (issue 21).  The highest of the clocks the
worker reports is used and named: measured chain, cpufreq ``scaling_max_freq``, ``/proc/cpuinfo``
``cpu MHz`` (on a VM often the TSC rate), the TSC.  A fraction of peak is never above 1
(``peak_fraction``): an achieved rate above the peak says the peak is wrong, and the profile says so.
"""
from __future__ import annotations

from .gpu_peak import MARGIN, input_kind

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


CLOCK_SOURCES = (   # (key in host["clock"] or host, label), most direct first: the first wins a tie
    ("measured_hz", "measured: dependent add/xor chain"),
    ("scaling_max_hz", "cpufreq scaling_max_freq"),
    ("cpuinfo_max_hz", "/proc/cpuinfo cpu MHz, highest core"),
    ("tsc_hz", "TSC, nominal"))


def core_clock(host: dict) -> tuple[float, str] | None:
    """The clock the cores reach (GHz) and where it comes from: the highest of the measured chain,
    cpufreq's maximum, /proc/cpuinfo and the TSC (an overestimate keeps the fraction honest: a peak
    too low is what put kernels above 100 %)."""
    clocks = {**(host.get("clock") or {}), "tsc_hz": host.get("tsc_hz")}
    best = None
    for key, label in CLOCK_SOURCES:
        hz = clocks.get(key)
        if hz and hz > 0 and (best is None or hz > best[0] * 1e9):
            best = (hz / 1e9, label)
    return best


def peak_fraction(gflops: float | None, peak: dict) -> float | None:
    """Achieved / peak, never above 1 (an achieved rate above the peak is flagged by ``exceeded``)."""
    if not gflops or not peak.get("gflops"):
        return None
    return min(gflops / peak["gflops"], 1.0)


def exceeded(peak: dict, achieved: list[tuple[str, float | None]]) -> dict:
    """The peak with a note when a measured rate is above it (the peak is then wrong, not the rate)."""
    over = [(name, g) for name, g in achieved if g and peak.get("gflops") and g > peak["gflops"]]
    if not over:
        return peak
    name, g = max(over, key=lambda item: item[1])
    return {**peak, "exceeded_by": {"name": name, "gflops": g},
            "note": f"{name} ran {g:.1f} GFLOP/s, above this peak: the peak is too low (fractions capped at 100 %)"}


def peak_figures(host: dict) -> dict:
    """Peak fp32 FLOP/s: by formula (microarchitecture x the clock the cores reach) and measured (numpy
    sgemm); the larger is used."""
    threads = int(host.get("threads") or 1)
    clock = core_clock(host)
    rule = flops_per_cycle(host.get("cpu"), set(host.get("flags") or ()))
    formula = None
    if rule and clock:
        per_cycle, how = rule
        ghz, clock_source = clock
        formula = {"gflops": per_cycle * ghz * threads, "flops_per_cycle": per_cycle, "ghz": ghz, "cores": threads,
                   "clock_source": clock_source,
                   "source": f"formula: {per_cycle} fp32 FLOP/cycle/core ({how}) x {ghz:.3f} GHz ({clock_source}) "
                             f"x {threads} threads"}
    measured = host.get("sgemm")
    candidates = [c for c in (measured, formula) if c and c.get("gflops")]
    best = max(candidates, key=lambda c: c["gflops"]) if candidates else None
    return {"gflops": best["gflops"] if best else None, "source": best["source"] if best else "unknown",
            "measured": measured, "formula": formula,
            "note": "peak = the larger of the measured reference and the formula at the clock the cores reach"}


# A CPU record adopted from elsewhere may claim any latency (1 ps for a 524,288-FLOP matmul would read
# "best 0.0 µs"), so it is checked against a bound: no CPU core computes more than 2 x 512-bit FMA
# (64 fp32 FLOP) a cycle at 6.5 GHz; AMX tiles (Sapphire Rapids) do 16x that in bf16 and 32x in int8.
# The cores are the target's ``num-cores`` (or 1,024 where it names none): a bound no real program
# reaches, not a peak.  A call under 1 µs is bounded by a few cores' work whatever ``num-cores`` says:
# TVM's parallel launch (waking its thread pool) takes longer than that, so such a call ran on at most
# 4 cores (else 5 ns for 524,288 FLOP on a target without ``num-cores`` would pass the 1,024-core bound).
CPU_CORE_FP32_TFLOPS = 64 * 6.5e9 / 1e12
CPU_KIND_SCALE = {"fp32": 1, "fp16": 16, "int8": 32}
CPU_CORES_UNKNOWN = 1024
CPU_SHORT_CALL_US = 1.0
CPU_SHORT_CALL_CORES = 4


def cpu_impossible_rate(flops: float | None, latency_us: float, cores, dtypes: list[str]) -> str | None:
    """Why ``latency_us`` for ``flops`` cannot have been measured on a CPU of ``cores`` cores (None: it can).
    The cores are ``cores`` (1,024 where it is none), but at most 4 for a call under 1 µs: waking TVM's
    thread pool for a parallel launch takes longer than that, so a shorter call is a few cores' work."""
    if not flops or not latency_us or latency_us <= 0:
        return None
    count = int(cores) if isinstance(cores, (int, float)) and not isinstance(cores, bool) and 0 < cores < 1 << 20 \
        else CPU_CORES_UNKNOWN
    short = latency_us < CPU_SHORT_CALL_US and count > CPU_SHORT_CALL_CORES
    count = CPU_SHORT_CALL_CORES if short else count
    kind = input_kind(dtypes)
    ceiling = CPU_CORE_FP32_TFLOPS * CPU_KIND_SCALE[kind] * count * MARGIN
    rate = flops / (latency_us * 1e-6) / 1e12
    if rate <= ceiling:
        return None
    cores_words = (f"{count:,} CPU cores (a call under 1 µs is a few cores' work: waking TVM's thread pool "
                   f"takes longer)" if short else f"{count:,} CPU cores")
    return (f"{latency_us:.3g} µs for {flops:,.0f} FLOP is {rate:,.3g} TFLOP/s, above what {cores_words} "
            f"compute at {kind} ({ceiling:,.3g} TFLOP/s: 2 x 512-bit FMA{' and AMX' if kind != 'fp32' else ''} at "
            f"6.5 GHz, ×{MARGIN} for clocks): not a measurement")
