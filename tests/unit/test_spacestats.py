"""Sampling-call statistics of a user design space over records (pure)."""
from __future__ import annotations

import pytest

from asight_lsp.analysis.spacestats import format_value, hint_label, hover_markdown, record_values, site_stats

KINDS = ["GetSBlock", "GetLoops", "SamplePerfectTile", "Split", "SampleCategorical", "Annotate"]
MAPPING = {"kinds": KINDS, "instructions": [
    {"index": 2, "ordinal": 0, "kind": "SamplePerfectTile", "line": 10},
    {"index": 4, "ordinal": 1, "kind": "SampleCategorical", "line": 12}]}


def record(tile, choice, latency, kinds=KINDS):
    insts = [[k, [], [], []] for k in kinds]
    if "SampleCategorical" in kinds:
        insts[kinds.index("SampleCategorical")][2] = [[0, 16, 64], [0.3, 0.3, 0.4]]
    insts += [["EnterPostproc", [], [], []], ["DecomposeReduction", [], [], []]]
    return {"insts": insts, "decisions": [[2, tile], [4, choice]], "latency_us": latency}


def test_record_values_reads_tiles_and_categorical_candidates():
    assert record_values(record([8, 8], 2, 10.0), MAPPING) == {0: (8, 8), 1: 64}
    other = ["GetSBlock", "GetLoops", "SamplePerfectTile", "SamplePerfectTile", "SampleCategorical", "Annotate"]
    assert record_values(record([8, 8], 2, 10.0, other), MAPPING) is None   # a default sketch (union mode)


def test_site_stats_best_and_distribution():
    records = [record([8, 8], 2, 30.0), record([16, 4], 0, 10.0), record([16, 4], 2, 20.0),
               record([8, 8], 0, None), record([4, 16], 1, 50.0, KINDS[:4] + ["SampleCategorical", "Annotate"])]
    stats = site_stats(records, MAPPING)
    assert sorted(stats) == [10, 12]
    tile = stats[10]
    assert tile.best == [(16, 4)] and tile.candidates == 5 and tile.valid == 4
    table = tile.values[0]
    assert [(v.value, v.count, v.best_us) for v in table] == [((16, 4), 2, 10.0), ((8, 8), 2, 30.0), ((4, 16), 1, 50.0)]
    assert table[0].median_us == pytest.approx(15.0)
    choice = stats[12]
    assert choice.best == [0] and [(v.value, v.count) for v in choice.values[0]] == [(0, 2), (64, 2), (16, 1)]
    assert hint_label(tile) == "best [16, 4]" and hint_label(choice) == "best 0"
    text = hover_markdown(tile, "sample_perfect_tile(i)", "r1")
    assert "5 candidates of this space (4 valid)" in text
    assert "| `[16, 4]` ★ | 2 | 10.0 µs | 15.0 µs |" in text and "| `[8, 8]` | 2 | 30.0 µs | 30.0 µs |" in text


def test_site_in_a_loop_has_one_entry_per_instruction():
    kinds = ["GetSBlock", "GetLoops", "SamplePerfectTile", "SamplePerfectTile"]
    mapping = {"kinds": kinds, "instructions": [{"index": 2, "ordinal": 0, "kind": "SamplePerfectTile", "line": 5},
                                                {"index": 3, "ordinal": 1, "kind": "SamplePerfectTile", "line": 5}]}
    recs = [{"insts": [[k, [], [], []] for k in kinds], "decisions": [[2, [2, 32]], [3, [64, 1]]], "latency_us": 1.0}]
    stats = site_stats(recs, mapping)[5]
    assert stats.ordinals == [0, 1] and stats.best == [(2, 32), (64, 1)]
    assert hint_label(stats) == "best [2, 32] · [64, 1]"
    assert "instruction 2 of 2" in hover_markdown(stats, "x", "r")


def test_no_records_no_hint():
    stats = site_stats([], MAPPING)
    assert hint_label(stats[10]) is None and stats[10].candidates == 0
    assert format_value(None) == "?"
