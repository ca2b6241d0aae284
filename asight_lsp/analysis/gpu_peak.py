"""The fastest any NVIDIA GPU of an architecture computes, by input type: a latency a record claims
that would need more is no measurement (pure).

A record adopted from elsewhere (``asight adopt``) carries MetaSchedule's run_secs and nothing else
to check them by; "run_secs [2e-6]" for a 2.1 GFLOP fp32 matmul would read "best 2.0 µs" in every
view, 1,074 TFLOP/s.  The ceiling is the dense peak (no sparsity) of the fastest product of the
architecture at the workload's input type, from NVIDIA's datasheets, with a margin (``MARGIN``) for
boost clocks: a bound no real kernel reaches, not an estimate of this one.
"""
from __future__ import annotations

MARGIN = 1.25

# compute capability major.minor prefix -> (product, {input type: dense TFLOP/s at boost clock}).  "fp32"
# is the CUDA cores' rate: TVM's MetaSchedule has no TF32 tensor-core intrinsics, so a float32 program
# runs on the CUDA cores (a bound at the TF32 figure would let an impossible 5 µs on the H100 through).
# "fp16" and "int8" are the tensor cores' (MetaSchedule's MMA intrinsics), or twice and four times
# fp32 where an architecture has none.
PEAKS = {
    "5": ("GTX Titan X (Maxwell)", {"fp32": 7.0, "fp16": 7.0, "int8": 7.0}),
    "6": ("Titan Xp / Tesla P100", {"fp32": 12.2, "fp16": 21.2, "int8": 48.8}),
    "7": ("Tesla V100S / Titan RTX", {"fp32": 16.4, "fp16": 130.0, "int8": 261.0}),
    "8.0": ("A100", {"fp32": 19.5, "fp16": 312.0, "int8": 624.0}),
    "8.6": ("RTX 3090 Ti / A40", {"fp32": 40.0, "fp16": 160.0, "int8": 320.0}),
    "8.7": ("Jetson AGX Orin", {"fp32": 5.3, "fp16": 85.0, "int8": 170.0}),
    "8.9": ("L40S / RTX 4090", {"fp32": 91.6, "fp16": 366.0, "int8": 733.0}),
    "9": ("H100 SXM / H200", {"fp32": 67.0, "fp16": 990.0, "int8": 1979.0}),
    "10": ("B200", {"fp32": 80.0, "fp16": 2250.0, "int8": 4500.0}),
    "12": ("RTX 5090 / RTX PRO 6000", {"fp32": 126.0, "fp16": 420.0, "int8": 840.0}),
}
# warp slots an SM holds, by compute capability (CUDA C Programming Guide, "Technical Specifications
# per Compute Capability"): 64, except Turing's 32 and the consumer Ampere/Ada/Blackwell parts' 48.
WARP_SLOTS = {"7.5": 32, "8.6": 48, "8.7": 48, "8.9": 48, "12": 48}


def warp_slots(arch: str | None) -> int | None:
    """Warp slots an SM of ``arch`` (``sm_90a``) holds; None for an arch not known here."""
    key = _key(arch)
    if key is None:
        return None
    return WARP_SLOTS.get(key) or WARP_SLOTS.get(key.split(".")[0]) or 64


ANY = ("NVIDIA GPU of any architecture", {kind: max(p[1][kind] for p in PEAKS.values()) for kind in ("fp32", "fp16", "int8")})


def _key(arch: str | None) -> str | None:
    """``sm_90a`` -> "9.0": its compute capability, where PEAKS has it or its major; None when unknown."""
    digits = "".join(ch for ch in str(arch or "").removeprefix("sm_") if ch.isdigit())
    if len(digits) >= 2:
        major, minor = digits[:-1], digits[-1]
        if f"{major}.{minor}" in PEAKS or major in PEAKS:
            return f"{major}.{minor}"
    return None


def _architecture(arch: str | None) -> tuple[str, dict]:
    """``sm_90a`` -> the row of compute capability 9.0 (major.minor first, then major); unknown -> ANY."""
    key = _key(arch)
    if key is None:
        return ANY
    return PEAKS.get(key) or PEAKS[key.split(".")[0]]


def input_kind(dtypes: list[str]) -> str:
    """The input type class the fastest units take: the narrowest of the program's buffers."""
    bits = [int("".join(ch for ch in d if ch.isdigit()) or 32) for d in dtypes if str(d).startswith(("float", "bfloat"))]
    ints = [d for d in dtypes if str(d).startswith(("int8", "uint8"))]
    if ints or (bits and min(bits) <= 8):
        return "int8"
    return "fp16" if bits and min(bits) <= 16 else "fp32"


def impossible_rate(flops: float | None, latency_us: float, arch: str | None, dtypes: list[str]) -> str | None:
    """Why ``latency_us`` for ``flops`` cannot have been measured on ``arch`` (None: it can)."""
    if not flops or not latency_us or latency_us <= 0:
        return None
    product, peaks = _architecture(arch)
    kind = input_kind(dtypes)
    ceiling = peaks[kind] * MARGIN
    rate = flops / (latency_us * 1e-6) / 1e12
    if rate <= ceiling:
        return None
    return (f"{latency_us:.3g} µs for {flops:,.0f} FLOP is {rate:,.0f} TFLOP/s, above the {peaks[kind]:,.0f} "
            f"TFLOP/s {kind} peak of the fastest {product} (×{MARGIN} for clocks): not a measurement")
