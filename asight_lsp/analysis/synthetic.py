"""Synthetic runs with known structure, for tests and ``bench/space.py`` (no TVM).

``synthetic_run(n, ...)`` makes what a real run provides: MetaSchedule-shaped JSON records (a
256x256x256 matmul block ``C`` tiled ``SSRSRS``, an optional cache-write sketch, a sampled unroll
step) and the feature cache the worker would write (per-store rows in ``slog`` form derived from
the decisions, scheduled loop nests, baseline rows).  Latency follows a simple cost model of the
decisions plus log-normal noise; ``effect`` plants a known decision -> latency relation.
"""
from __future__ import annotations

import math
from typing import Callable

import numpy as np

from . import featurelayout as fl

EXTENT = 256
SOURCE = '''from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def mm(A: T.Buffer((256, 256), "float32"), B: T.Buffer((256, 256), "float32"), C: T.Buffer((256, 256), "float32")):
    for i, j, k in T.grid(256, 256, 256):
        with T.sblock("C"):
            vi, vj, vk = T.axis.remap("SSR", [i, j, k])
            with T.init():
                C[vi, vj] = T.float32(0)
            C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
'''
UNROLL = [0, 16, 64, 512]


def _perfect_tile(rng: np.random.Generator, n: int, extent: int = EXTENT, max_inner: int = 64) -> list[int]:
    """Random factors (powers of two) whose product is ``extent``, innermost <= max_inner."""
    bits = int(math.log2(extent))
    while True:
        cuts = np.sort(rng.integers(0, bits + 1, n - 1))
        edges = np.concatenate([[0], cuts, [bits]])
        factors = [int(2 ** (edges[i + 1] - edges[i])) for i in range(n)]
        if factors[-1] <= max_inner:
            return factors


def _slog(x: float) -> float:
    return math.copysign(math.log2(abs(x) + 1.0), x)


def _row(vec: int, par: int, lines: float, unroll: int, loops: int) -> np.ndarray:
    row = np.zeros(fl.LENGTH, dtype=np.float32)
    flops = EXTENT ** 3
    row[fl.INDEX["float_add_sub"]] = _slog(flops)
    row[fl.INDEX["float_mul"]] = _slog(flops)
    if vec > 1:
        row[fl.INDEX["vec_num"]], row[fl.INDEX["vec_prod"]], row[fl.INDEX["vec_len"]] = 1, _slog(vec), _slog(vec)
        row[fl.INDEX["vec_pos_inner_spatial"]] = 1
    else:
        row[fl.INDEX["vec_pos_none"]] = 1
    if par > 1:
        row[fl.INDEX["parallel_num"]], row[fl.INDEX["parallel_prod"]] = 1, _slog(par)
        row[fl.INDEX["parallel_len"]] = _slog(par)
        row[fl.INDEX["parallel_pos_outer_spatial"]] = 1
    else:
        row[fl.INDEX["parallel_pos_none"]] = 1
    row[fl.INDEX["unroll_pos_none"]] = 1
    for b, (share, bytes_) in enumerate(((0.4, 2 ** 26), (0.4, 2 ** 26), (0.2, 2 ** 24))):
        row[fl.INDEX[f"buf{b}_read" if b < 2 else f"buf{b}_readwrite"]] = 1
        row[fl.INDEX[f"buf{b}_bytes"]] = _slog(bytes_)
        row[fl.INDEX[f"buf{b}_lines"]] = _slog(lines * share)
        row[fl.INDEX[f"buf{b}_unique_lines"]] = _slog(EXTENT * EXTENT * 4 / 64)
    row[fl.INDEX["outer_prod"]] = _slog(flops)
    row[fl.INDEX["num_loops"]] = _slog(loops)
    row[fl.INDEX["auto_unroll_max_step"]] = _slog(unroll)
    return row


def _insts(cache: bool) -> list:
    insts = [["GetSBlock", [], ["C", "mm"], ["b0"]], ["GetSBlock", [], ["root", "mm"], ["b1"]],
             ["Annotate", ["b0", "\"SSRSRS\""], ["meta_schedule.tiling_structure"], []],
             ["GetLoops", ["b0"], [], ["l2", "l3", "l4"]],
             ["SamplePerfectTile", ["l2"], [4, 64], ["v5", "v6", "v7", "v8"]],
             ["Split", ["l2", "v5", "v6", "v7", "v8"], [1, 0], ["l9", "l10", "l11", "l12"]],
             ["SamplePerfectTile", ["l3"], [4, 64], ["v13", "v14", "v15", "v16"]],
             ["Split", ["l3", "v13", "v14", "v15", "v16"], [1, 0], ["l17", "l18", "l19", "l20"]],
             ["SamplePerfectTile", ["l4"], [2, 64], ["v21", "v22"]],
             ["Split", ["l4", "v21", "v22"], [1, 0], ["l23", "l24"]],
             ["Reorder", ["l9", "l17", "l10", "l18", "l23", "l11", "l19", "l24", "l12", "l20"], [], []]]
    if cache:
        insts.append(["CacheWrite", ["b0"], [0, "global"], ["b25"]])
        insts.append(["ReverseComputeAt", ["b25", "l17"], [1, -1], []])
    insts += [["Annotate", ["b1", 32], ["meta_schedule.parallel"], []],
              ["Annotate", ["b1", 64], ["meta_schedule.vectorize"], []],
              ["SampleCategorical", [], [UNROLL, [0.25] * 4], ["v26"]],
              ["Annotate", ["b1", "v26"], ["meta_schedule.unroll_explicit"], []],
              ["EnterPostproc", [], [], []]]
    return insts


TILE_INSTS = (4, 6, 8)  # instruction indices of the three SamplePerfectTile


def default_latency(tiles: list[list[int]], unroll: int, cache: bool) -> float:
    """A plausible cost (µs): parallel outer tiles, vectorised inner j, moderate k tiles help."""
    par = tiles[0][0] * tiles[1][0]
    vec = tiles[1][-1]
    k_in = tiles[2][-1]
    cost = 2000.0 / min(par, 2) / min(max(vec, 1), 8)
    cost *= 1.0 + 0.15 * abs(math.log2(k_in) - 4) / 4
    cost *= 0.9 if cache else 1.0
    cost *= 1.0 - 0.05 * (unroll > 0)
    return cost


def synthetic_run(n: int, seed: int = 0, effect: Callable | None = None, noise: float = 0.15,
                  latency: Callable | None = default_latency, failed: float = 0.0) -> tuple[list[dict], dict]:
    """``(records, feature_cache)`` of a synthetic run of ``n`` candidates.

    ``effect(tiles, unroll, cache) -> factor`` multiplies the latency (a planted principle);
    ``latency=None`` gives pure noise around 1000 µs.  ``failed`` is the share of failed records.
    """
    rng = np.random.default_rng(seed)
    records, entries = [], {}
    target = {"kind": "llvm", "mcpu": "znver3", "num-cores": 2, "keys": ["cpu"]}
    for t in range(n):
        cache = bool(rng.random() < 0.6)
        tiles = [_perfect_tile(rng, 4), _perfect_tile(rng, 4), _perfect_tile(rng, 2)]
        choice = int(rng.integers(0, 4))
        unroll = UNROLL[choice]
        base = latency(tiles, unroll, cache) if latency else 1000.0
        factor = effect(tiles, unroll, cache) if effect else 1.0
        lat_us = base * factor * float(np.exp(rng.normal(0, noise)))
        insts = _insts(cache)
        cat_index = next(i for i, inst in enumerate(insts) if inst[0] == "SampleCategorical")
        decisions = [[TILE_INSTS[0], tiles[0]], [TILE_INSTS[1], tiles[1]], [TILE_INSTS[2], tiles[2]],
                     [cat_index, choice]]
        ok = rng.random() >= failed
        secs = [lat_us * 1e-6] if ok else [1e10]
        records.append({"trial": t, "workload": 0, "insts": insts, "decisions": decisions, "run_secs": secs,
                        "latency_us": lat_us if ok else None, "target": target, "args_info": []})
        par, vec = tiles[0][0] * tiles[1][0], tiles[1][-1]
        lines = 2 ** 22 / (tiles[2][-1] ** 0.5) / max(vec, 1) ** 0.3 * float(np.exp(rng.normal(0, 0.1)))
        rows = [_row(vec, par, lines, unroll, 10)]
        stores = ["C"]
        if cache:
            rows.insert(0, _row(vec, 1, lines * 0.5, unroll, 8))
            stores.insert(0, "C_global")
        nest = [[par, "p", unroll], [tiles[0][1], "s", 0], [tiles[1][1], "s", 0], [tiles[2][0], "s", 0],
                [tiles[0][2], "s", 0], [tiles[1][2], "s", 0], [tiles[2][1], "s", 0], [tiles[0][3], "s", 0],
                [vec, "v", 0]]
        arr = np.stack(rows).astype("<f4")
        entries[t] = {"n_rows": len(rows), "rows": arr.tobytes(), "stores": stores,
                      "blocks": {"C_update": nest, "C_init": nest[:1]}, "error": None}
    base_row = _row(1, 1, 2 ** 26, 0, 3)
    cache = {"schema": "asight.features/1", "feature_length": fl.LENGTH, "records": entries,
             "baselines": {0: {"n_rows": 1, "rows": base_row[None].astype("<f4").tobytes(), "stores": ["C"],
                               "blocks": {"C": [[256, "s", 0]] * 3}, "error": None}}}
    return records, cache
