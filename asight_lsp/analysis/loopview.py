"""Loop view: per stage (source block), how often each scheduling strategy appears among the
candidates, and what share of the block's loops carries it.

Sources per strategy (each reported in the payload):

* tile split shapes — the ``SamplePerfectTile`` decisions of the trace (per source loop var);
* vectorize length / parallel extent / unroll — the scheduled loop nest of each candidate as the
  TVM worker saw it (``features.msgpack``: extent and kind of every loop around the block, and the
  ``pragma_auto_unroll_max_step`` on them); without that cache, the trace's own annotations;
* cache and compute-at — the trace (``trace_summary`` of one record per sketch, plus each
  candidate's ``SampleComputeLocation`` decision).

Each value also carries the median latency of the candidates that use it (``median_us``, over the
``measured`` of them with a latency): what a value costs, not only how often the search chose it.
"""
from __future__ import annotations

from collections import Counter, defaultdict

import numpy as np

from .candidates import CandidateTable
from .trace_replay import source_blocks
from .trace_summary import summarize_trace

TOP_VALUES = 12
STRATEGIES = ("tile", "vectorize", "parallel", "unroll", "cache", "compute_at")


def _nest_for(loops: dict, block: str) -> list | None:
    """The scheduled loops of a source block (its ``_update`` twin after reduction decomposition)."""
    for name in (block, f"{block}_update"):
        if name in loops:
            return loops[name]
    return None


def _product(values) -> int:
    out = 1
    for v in values:
        out *= int(v or 1)
    return out


def _nest_strategies(nest: list) -> tuple[int, int, int, int]:
    """(vector length, parallel extent, unroll max step, loops under an unroll pragma) of a nest."""
    vec = _product(e for e, k, _ in nest if k == "v") if any(k == "v" for _, k, _ in nest) else 0
    par = _product(e for e, k, _ in nest if k == "p") if any(k == "p" for _, k, _ in nest) else 0
    steps = [step for _, _, step in nest]
    first = next((k for k, step in enumerate(steps) if step), None)
    return vec, par, max(steps, default=0), (len(nest) - first) if first is not None else 0


def _latency_of(latencies: list[float]) -> dict:
    """``median_us`` and ``measured`` (how many latencies it is the median of) of one value."""
    finite = [v for v in latencies if np.isfinite(v)]
    return {"median_us": round(float(np.median(finite)), 3) if finite else None, "measured": len(finite)}


def _distribution(counter: Counter, total: int, latencies: dict | None = None) -> list[dict]:
    """Values by frequency (top ``TOP_VALUES``, the rest as ``other``), each with its share and,
    given ``latencies`` (value -> latencies of the candidates using it), their median latency."""
    items = sorted(counter.items(), key=lambda kv: (-kv[1], str(kv[0])))
    lat = latencies if latencies is not None else {}
    out = [{"value": value, "count": count, "share": round(count / total, 4) if total else 0.0,
            **(_latency_of(lat.get(value, [])) if latencies is not None else {})}
           for value, count in items[:TOP_VALUES]]
    rest = sum(count for _, count in items[TOP_VALUES:])
    if rest:
        other = [v for value, _ in items[TOP_VALUES:] for v in lat.get(value, [])]
        out.append({"value": "other", "count": rest, "share": round(rest / total, 4),
                    **(_latency_of(other) if latencies is not None else {})})
    return out


def _sketch_structure(table: CandidateTable, function) -> dict[int, dict]:
    """Per sketch id: ``{block: {"cache": [...], "compute_at": str, "inline": bool}}`` from one trace."""
    sources = source_blocks(function) if function is not None else []
    out = {}
    for sketch in table.sketches:
        i = int(np.flatnonzero(table.sketch == sketch["id"])[0])
        rec = table.records[i]
        summary = summarize_trace(rec["insts"], rec["decisions"], sources)["blocks"]
        per_block = {}
        for name, s in summary.items():
            cache = [f"{c['kind']} {c['scope']}" for c in s.get("cache", [])]
            where = None
            if s.get("inline"):
                where = "inline"
            elif s.get("compute_at"):
                at = s["compute_at"]
                if at.get("position") is None:
                    where = f"at {at.get('block') or '?'} loop {at.get('loop') or '?'}"
            per_block[name] = {"cache": cache, "compute_at": where}
        out[sketch["id"]] = per_block
    return out


def _location_label(value) -> str:
    if value == -1:
        return "root"
    if value == -2:
        return "inline"
    return f"location {value}"


def loop_view(table: CandidateTable, function=None) -> list[dict]:
    """One entry per stage: strategy distributions, loop shares and sources (see module doc)."""
    idx = np.flatnonzero(table.valid)
    stages = [b for b in (table.blocks or {})] or sorted({d.block for ds in table.decisions for d in ds
                                                          if d.block and d.block != "root"})
    structure = _sketch_structure(table, function) if len(idx) else {}
    has_nests = any(table.loops[i] for i in idx)
    out = []
    for block in stages:
        tally = _StageTally(block)
        for i in idx:
            tally.latency = float(table.latency_us[i])
            tally.add_decisions(table.decisions[i])
            tally.add_sketch(structure.get(int(table.sketch[i]), {}).get(block, {}), table.decisions[i])
            if has_nests:
                tally.add_nest(_nest_for(table.loops[i], block))
        out.append(tally.entry(len(idx), _iter_kinds(function, block)))
    return out


class _StageTally:
    """Counts of one stage's strategies over the candidates."""

    def __init__(self, block: str):
        self.block = block
        self.counters = {s: Counter() for s in STRATEGIES}
        self.latencies = {s: defaultdict(list) for s in STRATEGIES}   # strategy -> value -> latencies
        self.tile_latencies: dict[str, dict] = defaultdict(lambda: defaultdict(list))
        self.latency = float("nan")   # of the candidate being added
        self.tiles: dict[str, Counter] = defaultdict(Counter)
        self.factors: dict[str, list[Counter]] = {}
        self.kinds, self.loops_total, self.split_loops, self.source_loops, self.present = Counter(), 0, 0, 0, 0

    def add_decisions(self, decisions: list) -> None:
        for d in decisions:
            if d.block == self.block and d.inst == "SamplePerfectTile" and isinstance(d.value, list):
                var = d.loop_var or f"loop{d.loop}"
                shape = "×".join(str(v) for v in d.value)
                self.tiles[var][shape] += 1
                self.tile_latencies[var][shape].append(self.latency)
                per_pos = self.factors.setdefault(var, [Counter() for _ in d.value])
                for pos, value in enumerate(d.value[:len(per_pos)]):
                    per_pos[pos][int(value)] += 1
                self.source_loops += 1
                self.split_loops += sum(1 for v in d.value if v > 1) > 1
            elif d.block == self.block and d.inst == "SampleComputeLocation":
                self._count("compute_at", _location_label(d.value))

    def _count(self, strategy: str, value) -> None:
        self.counters[strategy][value] += 1
        self.latencies[strategy][value].append(self.latency)

    def add_sketch(self, sketch: dict, decisions: list) -> None:
        """What the candidate's sketch fixed for this block (cache, a compute-at without a sample)."""
        self._count("cache", ", ".join(sketch.get("cache") or []) or "none")
        sampled = any(d.block == self.block and d.inst == "SampleComputeLocation" for d in decisions)
        if not sampled:   # no sampled location: where the sketch put the block, else at the root
            self._count("compute_at", sketch.get("compute_at") or "root")

    def add_nest(self, nest) -> None:
        """The scheduled loop nest of the block in one candidate (None: the block was inlined)."""
        if nest is None:
            for name in ("vectorize", "parallel", "unroll"):
                self._count(name, "inlined")
            return
        self.present += 1
        self.loops_total += len(nest)
        self.kinds.update(kind for _, kind, _ in nest)
        vec, par, unroll, under = _nest_strategies(nest)
        self.kinds["under_unroll_pragma"] += under
        self._count("vectorize", vec)
        self._count("parallel", par)
        self._count("unroll", unroll)

    def entry(self, n: int, iter_kinds: str | None) -> dict:
        share = {}
        if self.loops_total:
            share = {"parallel": self.kinds["p"] / self.loops_total, "vectorized": self.kinds["v"] / self.loops_total,
                     "unrolled": self.kinds["u"] / self.loops_total, "serial": self.kinds["s"] / self.loops_total,
                     "under_unroll_pragma": self.kinds["under_unroll_pragma"] / self.loops_total}
            if self.kinds["t"]:   # a GPU schedule: loops bound to blockIdx / threadIdx / vthread
                share["thread_bound"] = self.kinds["t"] / self.loops_total
                del share["parallel"], share["vectorized"]   # a GPU schedule binds threads; its vector loads
                #                                                  sit in the cache stages, not this block's nest
        if self.source_loops:
            share["split"] = self.split_loops / self.source_loops
        return {
            "block": self.block, "candidates": int(n), "iter_kinds": iter_kinds,
            "strategies": {
                "tile": {var: _distribution(c, n, self.tile_latencies[var]) for var, c in self.tiles.items()},
                "tile_factors": {var: [_distribution(c, n) for c in per_pos] for var, per_pos in self.factors.items()},
                **{s: _distribution(self.counters[s], n, self.latencies[s]) for s in STRATEGIES
                   if s != "tile" and not (s in ("parallel", "vectorize") and self.kinds["t"])}},
            "loop_share": {k: round(v, 4) for k, v in share.items()},
            "mean_loops": round(self.loops_total / self.present, 2) if self.present else None,
        }


def _iter_kinds(function, block: str) -> str | None:
    if function is None:
        return None
    for blk in function.blocks:
        if blk.name == block:
            return blk.iter_kinds
    return None


SOURCES = {
    "tile": "trace: SamplePerfectTile decisions (factors outermost first)",
    "tile_factors": "trace: SamplePerfectTile decisions, one distribution per factor position (outermost first)",
    "vectorize": "scheduled loop nest (TVM worker): product of vectorized loop extents around the block; 0 = none",
    "parallel": "scheduled loop nest (TVM worker): product of parallel loop extents around the block; 0 = none",
    "unroll": "scheduled loop nest (TVM worker): pragma_auto_unroll_max_step on an enclosing loop; 0 = none",
    "cache": "trace: CacheRead/CacheWrite of the candidate's sketch",
    "compute_at": "trace: SampleComputeLocation decision, or the sketch's ComputeAt/ReverseComputeAt/inline",
    "loop_share": "scheduled loop nest: share of the block's loops of each kind, over all candidates; "
                  "split = share of tiled source loops cut into more than one non-unit factor",
}
