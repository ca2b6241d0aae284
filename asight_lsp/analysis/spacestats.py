"""Statistics of a user design space's sampling calls over a run's records (pure; no TVM).

A run tuned with ``--space`` records in ``run.json`` (``extra.space.mapping``) the design space's
instruction kinds and, for each sampling instruction, its ordinal and the source line of the
``sch.sample_*`` call that made it (``worker/userspace.probe``).  A database record belongs to the
user's space when its trace, up to the post-processors, has the same instruction kinds (in union
mode the default sketches do not); its decisions are then read per sampling instruction.

``site_stats`` answers, per source line: the decision of the best candidate and the distribution of
values tried with their latencies.  The text helpers format that for inlay hints and hovers.
"""
from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any


@dataclass
class ValueStats:
    value: Any                 # the decision as the user sees it (tile factors, the chosen candidate)
    count: int = 0             # candidates that had it (failed ones included)
    latencies: list = field(default_factory=list)   # µs of the valid ones

    @property
    def best_us(self) -> float | None:
        return min(self.latencies) if self.latencies else None

    @property
    def median_us(self) -> float | None:
        return statistics.median(self.latencies) if self.latencies else None


@dataclass
class SiteStats:
    line: int                  # 0-based source line of the sample_* call
    kind: str                  # SamplePerfectTile | SampleCategorical | ...
    ordinals: list             # the sampling instructions this line made (several inside a loop)
    best: list                 # decision of the best valid candidate, one per instruction
    values: list               # [[ValueStats] sorted by best latency] per instruction
    candidates: int = 0        # records of this space
    valid: int = 0             # of which measured without error


def _kinds_before_postproc(insts: list) -> list[str]:
    kinds = []
    for inst in insts:
        if inst[0] == "EnterPostproc":
            break
        kinds.append(inst[0])
    return kinds


def _plain(value: Any) -> Any:
    if isinstance(value, list):
        return tuple(_plain(v) for v in value)
    return value


def record_values(record: dict, mapping: dict) -> dict[int, Any] | None:
    """``{ordinal: value}`` for a record of the user's space, None for a record of another sketch.

    ``value`` is the tile factors for a tile sample and the chosen candidate (not its index) for a
    categorical sample.
    """
    insts, decisions = record.get("insts") or [], record.get("decisions") or []
    expected = mapping.get("kinds")
    if expected is not None and _kinds_before_postproc(insts) != expected:
        return None
    by_index = {int(d[0]): d[1] for d in decisions if isinstance(d, (list, tuple)) and len(d) == 2}
    out = {}
    for item in mapping.get("instructions", []):
        index = item["index"]
        if index >= len(insts) or insts[index][0] != item["kind"]:
            return None
        decision = by_index.get(index)
        if item["kind"] == "SampleCategorical" and isinstance(decision, int):
            candidates = (insts[index][2] or [[]])[0]
            decision = candidates[decision] if 0 <= decision < len(candidates) else decision
        out[item["ordinal"]] = _plain(decision)
    return out


def site_stats(records: list[dict], mapping: dict) -> dict[int, SiteStats]:
    """Per source line of a sampling call: best decision and the distribution of values tried."""
    by_line: dict[int, list[dict]] = {}
    for item in mapping.get("instructions", []):
        if item.get("line") is not None:
            by_line.setdefault(item["line"], []).append(item)
    rows = [(r, values) for r in records if (values := record_values(r, mapping)) is not None]
    valid = [(r, v) for r, v in rows if r.get("latency_us") is not None]
    best = min(valid, key=lambda rv: rv[0]["latency_us"])[1] if valid else None
    out = {}
    for line, items in sorted(by_line.items()):
        ordinals = [i["ordinal"] for i in items]
        out[line] = SiteStats(line, items[0]["kind"], ordinals,
                              [best.get(o) for o in ordinals] if best else [],
                              [_distribution(rows, o) for o in ordinals], len(rows), len(valid))
    return out


def _distribution(rows: list, ordinal: int) -> list[ValueStats]:
    table: dict[Any, ValueStats] = {}
    for record, values in rows:
        value = values.get(ordinal)
        entry = table.setdefault(value, ValueStats(value))
        entry.count += 1
        if record.get("latency_us") is not None:
            entry.latencies.append(record["latency_us"])
    inf = float("inf")
    return sorted(table.values(), key=lambda v: (v.best_us if v.best_us is not None else inf, -v.count))


# --------------------------------------------------------------------------- text


def format_value(value: Any) -> str:
    if isinstance(value, tuple):
        return "[" + ", ".join(format_value(v) for v in value) + "]"
    return "?" if value is None else str(value)


def _us(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value / 1000:.3f} ms" if value >= 1000 else f"{value:.1f} µs"


def hint_label(stats: SiteStats, max_items: int = 4) -> str | None:
    """``best [16, 4]`` (or ``best [16, 4] · [8, 8] …`` for a call made several times)."""
    if not stats.best:
        return None
    shown = [format_value(v) for v in stats.best[:max_items]]
    more = " …" if len(stats.best) > max_items else ""
    return "best " + " · ".join(shown) + more


def hover_markdown(stats: SiteStats, label: str, run_id: str, max_rows: int = 8) -> str:
    """The distribution of values tried at a sampling call and their latencies (markdown)."""
    lines = [f"**{label}** · run `{run_id}` · {stats.candidates} candidates of this space "
             f"({stats.valid} valid)"]
    for n, (ordinal, table) in enumerate(zip(stats.ordinals, stats.values)):
        if len(stats.ordinals) > 1:
            lines.append(f"\ninstruction {n + 1} of {len(stats.ordinals)} (sampling #{ordinal})")
        best = stats.best[n] if n < len(stats.best) else None
        lines += ["", "| value | tried | best | median |", "|---|---:|---:|---:|"]
        for entry in table[:max_rows]:
            mark = " ★" if best is not None and entry.value == best else ""
            lines.append(f"| `{format_value(entry.value)}`{mark} | {entry.count} | {_us(entry.best_us)} | "
                         f"{_us(entry.median_us)} |")
        if len(table) > max_rows:
            lines.append(f"| … {len(table) - max_rows} more | | | |")
    return "\n".join(lines)
