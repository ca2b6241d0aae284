"""Latencies, speed-ups and times as the editor and the CLI print them."""
from __future__ import annotations

import time


def relative_time(then: float | None, now: float | None = None) -> str:
    """``just now``, ``3 min ago``, ``2 h ago``, ``5 d ago``."""
    if not then:
        return ""
    delta = max((now or time.time()) - then, 0)
    if delta < 45:
        return "just now"
    if delta < 3600:
        return f"{max(round(delta / 60), 1)} min ago"
    if delta < 86400:
        return f"{round(delta / 3600)} h ago"
    return f"{round(delta / 86400)} d ago"


def format_latency(us: float | None) -> str:
    """``5.9 µs``, ``0.20 ms``, ``12.3 ms``, ``1.20 s``."""
    if us is None:
        return "—"
    if us < 100:
        return f"{us:.1f} µs" if us < 10 else f"{us:.0f} µs"
    if us < 1e6:
        ms = us / 1000
        return f"{ms:.2f} ms" if ms < 10 else f"{ms:.1f} ms"
    return f"{us / 1e6:.2f} s"


def format_speedup(speedup: float | None) -> str:
    if not speedup:
        return ""
    return f"{speedup:.0f}×" if speedup >= 10 else f"{speedup:.1f}×"


