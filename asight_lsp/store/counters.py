"""Measured hardware counters of a run: ``<run>/counters.jsonl`` (TVM-free; docs/analytics.md).

One JSON object a line, one line per profiled program::

    {"candidate": <line index in database_tuning_record.json> | "baseline",
     "tool": "ncu (Nsight Compute 2025.3)",
     "metrics": {"dram__throughput.avg.pct_of_peak_sustained_elapsed": 1.16, ...}}

``candidate`` is the record's line in MetaSchedule's records file (its trial number in every view);
``"baseline"`` is the untuned program (on a GPU: DLight's default schedule).  Metric names are the
tool's own (Nsight Compute's ``unit__counter.rollup`` names); values are finite numbers ≥ 0 (counts,
sizes, percentages, rates).  One line per program: a second line for the same candidate is refused.
A line that is not of this shape is refused with its line number (nothing is half-read).
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

from ..errors import AsightError
from .files import NotPlainFile, printable_name, read_plain

COUNTERS = "counters.jsonl"
COUNTERS_LIMIT = 8 << 20     # bytes (the H100 run's: 28 KB)


def parse_counters(text: str, where: str = COUNTERS) -> list[dict]:
    """The entries of a counters file's text; AsightError naming the first bad line.  Lines end at
    "\n" only (a "\r" before it is whitespace to JSON): ``str.splitlines`` also split at U+2028,
    U+2029 and other characters JSON allows in a string, so such a line would be "not JSON"."""
    out, seen = [], {}
    for number, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            entry = json.loads(line, object_pairs_hook=_one_each)
        except _DuplicateKey as err:
            raise AsightError(f"{where}:{number}: the key {str(err)[:80]!r} appears twice in one object") from None
        except json.JSONDecodeError as err:
            raise AsightError(f"{where}:{number}: not JSON ({err.msg})") from None
        except RecursionError:
            raise AsightError(f"{where}:{number}: not JSON (nested too deeply)") from None
        problem = _problem(entry) or _again(entry, seen, number)
        if problem:
            raise AsightError(f"{where}:{number}: {problem}")
        out.append({"line": number, "candidate": entry["candidate"], "tool": str(entry.get("tool") or "unknown tool"),
                    "metrics": {str(k): float(v) for k, v in entry["metrics"].items()}})
    return out


class _DuplicateKey(ValueError):
    pass


def _one_each(pairs: list) -> dict:
    """A JSON object whose keys are distinct: JSON keeps the last of two "candidate" keys silently,
    which would move the best's counters to another record."""
    out = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def _again(entry: dict, seen: dict, number: int) -> str | None:
    """A second line for one program: which of two measurements is meant cannot be told."""
    first = seen.setdefault(entry["candidate"], number)
    if first != number:
        return f"candidate {entry['candidate']!r} again (line {first} has it): one line per program"
    return None


def _problem(entry) -> str | None:
    if not isinstance(entry, dict):
        return "expected an object {candidate, tool, metrics}"
    cand = entry.get("candidate")
    if cand != "baseline" and (isinstance(cand, bool) or not isinstance(cand, int) or cand < 0):
        return f"candidate must be a record's line index (0, 1, ...) or \"baseline\", not {cand!r}"
    if not isinstance(entry.get("metrics"), dict) or not entry["metrics"]:
        return "metrics must be a non-empty object {name: number}"
    named = [("tool", entry.get("tool"))] + [("a metric name", name) for name in entry["metrics"]]
    for what, text in named:
        if text is not None and not printable_name(text, 200):
            return f"{what} {str(text)[:60]!r} is not one line of printable text (the views show it)"
    for name, value in entry["metrics"].items():
        if not _plain_number(value):
            return f"metric {str(name)[:80]!r} must be a finite number ≥ 0, not {_json_words(value)}"
        bound = _bound(str(name))
        if bound and not (value <= bound[0] and (not bound[1] or float(value).is_integer())):
            return f"metric {str(name)[:80]!r} is {value!r}: {bound[2]}"
    return _occupancy_problem(entry["metrics"])


def _json_words(value) -> str:
    """A JSON value as JSON names it: null, the text "1.16", true (Python's 'None' read as a value)."""
    if value is None:
        return "null (no value: ncu's n/a?)"
    if isinstance(value, str):
        return f"the text {value[:40]!r}"
    if isinstance(value, bool):
        return str(value).lower()
    return repr(value)[:40]


REGISTERS, OCCUPANCY = "launch__registers_per_thread", "sm__warps_active.avg.pct_of_peak_sustained_active"


def _occupancy_problem(metrics: dict) -> str | None:
    """Achieved occupancy no kernel with that many registers a thread reaches: an SM holds 65,536
    registers, allocated 256 to a warp at a time, and at least 32 warp slots (e.g. "90 % of warp slots
    busy" with 128 registers a thread, where 50 % is the most)."""
    regs, occupancy = metrics.get(REGISTERS), metrics.get(OCCUPANCY)
    if regs is not None and regs < 1:
        return f"metric {REGISTERS!r} is {regs!r}: a kernel uses at least one register a thread"
    if occupancy is not None and occupancy < 100 / 64 - 0.05:
        return (f"achieved occupancy {occupancy:g} % is below one warp of an SM's warp slots (1 of at most 64: "
                "1.56 %), and an active SM holds at least one: not a measurement (percentages written as "
                "fractions?)")
    if regs is None or occupancy is None:
        return None
    most = max_occupancy(regs, 32)
    if occupancy > most + 0.5:
        return (f"achieved occupancy {occupancy:g} % with {int(regs)} registers a thread: warps that use that many "
                f"registers fill at most {most:.0f} % of the warp slots of any NVIDIA SM (32 or more)")
    return None


def max_occupancy(regs: float, warp_slots: int) -> float:
    """The largest share (%) of an SM's ``warp_slots`` that warps using ``regs`` registers a thread can
    fill: 65,536 registers an SM, allocated 256 to a warp at a time."""
    per_warp = -(-int(regs) * 32 // 256) * 256
    return min(100.0, 65536 // per_warp / warp_slots * 100)


def _bound(name: str) -> tuple | None:
    """(largest value, whole number?, what it is) for metrics whose range is known: a percentage of a
    peak, registers a thread, shared memory a block (so "occupancy 250 %" is refused, not shown)."""
    if "pct_of_peak" in name:           # occupancy, throughputs: a share of a peak (rounding aside) is ≤ 100 %
        return 100.5, False, "a share of a peak above 100 % is not a measurement"
    if "pct" in name or name.endswith("hit_rate"):   # ncu reports a little over 100 at times (L2 hits 102.89 on the H100)
        return 150.0, False, "a percentage this far above 100 is not a measurement"
    if name.startswith("launch__registers_per_thread"):
        return 255.0, True, "registers a thread are a whole number, at most 255 on NVIDIA GPUs"
    if name.startswith("launch__shared_mem_per_block_static"):     # 60,000 B is over any GPU's 48 KiB
        return float(48 << 10), True, "static shared memory a block is whole bytes, at most 48 KiB on NVIDIA GPUs"
    if name.startswith("launch__shared_mem_per_block"):
        return float(1 << 20), True, "shared memory a block is whole bytes, at most 1 MiB"
    return None


def _plain_number(value) -> bool:
    """A finite number ≥ 0 that fits a float (JSON allows a 400-digit integer)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value)) and value >= 0
    except OverflowError:
        return False


def read_counters(run_dir: str | os.PathLike) -> list[dict] | None:
    """The run's counters (None when it has no counters file)."""
    path = Path(run_dir) / COUNTERS
    if not os.path.lexists(path):
        return None
    if not path.is_symlink() and not path.is_file():     # a folder there is an error, not "no counters"
        raise AsightError(f"{path} is not a regular file (a folder, a FIFO or a device)")
    return parse_counters(counters_text(path), str(path))


def counters_text(path: Path) -> str:
    """A counters file's text: bounded, plain (200 MiB of newlines would take the untrusted server to
    1.9 GB per hover), UTF-8 (the bad line is named)."""
    try:
        data = read_plain(path, COUNTERS_LIMIT)
    except (NotPlainFile, OSError) as err:
        raise AsightError(str(err) if str(path) in str(err) else f"{path}: {err}") from None
    try:
        return data.decode("utf-8-sig")        # a byte-order mark (an editor on Windows) is no line's
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        raise AsightError(f"{path}:{line}: not UTF-8 text") from None
