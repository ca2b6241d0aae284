"""Measured counters (analysis/counters.py, store/counters.py) on the recorded H100 run (fixtures/gpu)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from asight_lsp.analysis import contour as ct
from asight_lsp.analysis import counters as cn
from asight_lsp.errors import AsightError
from asight_lsp.store.counters import parse_counters, read_counters
from asight_lsp.store.runs import read_records

GPU = Path(__file__).resolve().parents[2] / "fixtures" / "gpu"


@pytest.fixture(scope="module")
def recorded():
    entries = read_counters(GPU)
    latency = {r["trial"]: r["latency_us"] for r in read_records(GPU)}
    return entries, latency


def test_metric_names_fall_in_dram_sm_gpu_and_launch_descriptors_are_words():
    assert cn.metric_group("dram__throughput.avg.pct_of_peak_sustained_elapsed") == "dram"
    assert cn.metric_group("smsp__warp_issue_stalled_barrier_per_warp_active.pct") == "sm"
    assert cn.metric_group("l1tex__t_sector_hit_rate.pct") == "sm"
    assert cn.metric_group("lts__t_sector_hit_rate.pct") == "gpu"
    assert cn.metric_group("launch__registers_per_thread") is None
    assert cn.direction("sm__throughput.avg.pct_of_peak_sustained_elapsed") == 1
    assert cn.direction("smsp__warp_issue_stalled_long_scoreboard_per_warp_active.pct") == -1
    assert cn.direction("gpu__time_duration.sum") == 0          # latency itself: not a resource


def test_recorded_counters_rank_the_candidates_as_their_latency_does(recorded):
    entries, latency = recorded
    cands, baseline, tool = cn.by_candidate(entries)
    assert len(cands) == 41 and baseline is None and tool == "ncu (Nsight Compute 2025.3)"
    trials = np.array(sorted(cands))
    gains, used = cn.group_gains(cands, baseline, trials)
    speed = -np.log([latency[t] for t in trials])
    rho_dram, n, _ = ct.spearman(gains["dram"], speed)
    assert n == 41 and rho_dram > 0.98                     # README: ρ(DRAM throughput, latency) = −0.99
    assert used["dram"] == ["dram__throughput.avg.pct_of_peak_sustained_elapsed"]
    assert "gpu__time_duration.sum" not in used["gpu"]
    agreement = ct.agreement(gains, np.array([latency[t] for t in trials]))
    assert agreement["verdict"] == "agrees" and agreement["rho"] > 0.8
    text = cn.agreement_message(agreement, "measured (Nsight Compute)")
    assert text.startswith("The measured (Nsight Compute) counters agree with the latencies: Spearman ρ = +0.")
    assert "DRAM +0.99" in text


def test_gains_are_taken_against_the_baseline_when_the_file_has_one():
    entries = parse_counters('{"candidate": "baseline", "tool": "ncu", "metrics": {"dram__throughput.avg.pct": 10}}\n'
                             '{"candidate": 3, "tool": "ncu", "metrics": {"dram__throughput.avg.pct": 40, '
                             '"smsp__stall.pct": 20}}\n')
    cands, baseline, _ = cn.by_candidate(entries)
    gains, used = cn.group_gains(cands, baseline, np.array([3, 4]))
    assert gains["dram"][0] == pytest.approx(2.0) and np.isnan(gains["dram"][1])
    # a metric the baseline line lacks is taken against the median profiled candidate, said (it was
    # dropped: a baseline timed alone made the contour the model; outside probe 12, F1)
    assert gains["sm"][0] == pytest.approx(0.0)
    _, against, lacking = cn.reference(cands, baseline)
    assert against == "the baseline's counters (the median profiled candidate for the metrics its line lacks)"
    assert lacking == {"smsp__stall.pct"}
    [sm] = [c for c in cn.categories(used, "ncu", against, lacking) if c["id"] == "sm"]
    assert sm["source"] == ("measured: ncu — mean log2 gain of smsp__stall.pct against the median profiled candidate "
                            "(the baseline's line lacks it)")
    full = {"dram__throughput.avg.pct": 10, "smsp__stall.pct": 5}
    assert cn.reference(cands, full)[1:] == ("the baseline's counters", set())
    # a baseline with none of the contour's metrics (a time alone): the median's contour, said so (probe 13, F2)
    timed = {"gpu__time_duration.sum": 25000.0}
    assert cn.reference(cands, timed)[1:] == ("the median profiled candidate (the baseline's line has none of the "
                                              "metrics the contour uses)", set())


def test_the_fastest_recorded_candidate_is_latency_bound_in_plain_words(recorded):
    entries, latency = recorded
    cands, _, _ = cn.by_candidate(entries)
    fastest = min(cands, key=lambda t: latency[t])
    assert fastest == 76
    words = cn.limiter(cands[fastest])
    assert words["kind"] == "latency-bound"
    assert words["text"].startswith("latency-bound: 6 % of warp slots busy, 128 registers a thread (DRAM 1 %, SM 26 %")
    busy = cn.limiter({"dram__throughput.avg.pct_of_peak_sustained_elapsed": 85.0,
                       "sm__throughput.avg.pct_of_peak_sustained_elapsed": 40.0})
    assert busy["kind"] == "memory-bound"


@pytest.mark.parametrize("line, message", [
    ("not json", "not JSON"),
    ('{"candidate": -1, "metrics": {"a": 1}}', "candidate must be"),
    ('{"candidate": "best", "metrics": {"a": 1}}', "candidate must be"),
    ('{"candidate": 2, "metrics": {}}', "metrics must be"),
    ('{"candidate": 2, "metrics": {"sm__x.pct": NaN}}', "metric 'sm__x.pct' must be a finite number ≥ 0, not nan"),
    ('{"candidate": 2, "metrics": {"dram__x.pct": -5}}', "metric 'dram__x.pct' must be a finite number ≥ 0, not -5"),
    ('{"candidate": 2, "metrics": {"sm__x.pct": "high"}}', "metric 'sm__x.pct' must be a finite number ≥ 0, not the text 'high'"),
    ('{"candidate": 2, "metrics": {"sm__x.pct": true}}', "metric 'sm__x.pct' must be a finite number"),
    ('{"candidate": 1, "metrics": {"a": 99}}', r"candidate 1 again \(line 1 has it\): one line per program"),
    ('{"candidate": 2, "metrics": {"sm__warps_active.avg.pct_of_peak_sustained_active": 250}}',
     "metric '[^']+' is 250: a share of a peak above 100 % is not a measurement"),
    ('{"candidate": 2, "metrics": {"sm__warps_active.avg.pct_of_peak_sustained_active": 140}}',   # probe 4, F3
     "metric '[^']+' is 140: a share of a peak above 100 % is not a measurement"),
    ('{"candidate": 2, "metrics": {"dram__throughput.avg.pct_of_peak_sustained_elapsed": 149}}',
     "metric '[^']+' is 149: a share of a peak above 100 % is not a measurement"),
    ('{"candidate": 2, "metrics": {"lts__t_sector_hit_rate.pct": 151}}', "metric '[^']+' is 151: a percentage this far"),
    ('{"candidate": 2, "metrics": {"a": 1}, "candidate": 3}', "the key 'candidate' appears twice in one object"),
    ('{"candidate": 2, "metrics": {"launch__registers_per_thread": 100000}}', "metric '[^']+' is 100000: registers"),
    ('{"candidate": 2, "metrics": {"launch__registers_per_thread": 0.5}}', "metric '[^']+' is 0.5: registers"),
    ('{"candidate": 2, "metrics": {"launch__shared_mem_per_block_static": 1e9}}', "metric '[^']+' is 1000000000.0: st"),
    ('{"candidate": 2, "metrics": {"launch__shared_mem_per_block_static": 60000}}',          # probe 6, N6
     "metric '[^']+' is 60000: static shared memory a block is whole bytes, at most 48 KiB"),
    ('{"candidate": 2, "metrics": {"launch__registers_per_thread": 0}}', "metric '[^']+' is 0: a kernel uses at least"),
    ('{"candidate": 2, "metrics": {"launch__registers_per_thread": 128, '            # probe 5, N2
     '"sm__warps_active.avg.pct_of_peak_sustained_active": 90}}',
     "achieved occupancy 90 % with 128 registers a thread: warps that use that many registers fill at most 50 % of the warp slots of any NVIDIA SM"),
])
def test_a_bad_counters_line_is_refused_with_its_number(line, message):
    with pytest.raises(AsightError, match=f"f.jsonl:2: {message}"):
        parse_counters('{"candidate": 1, "metrics": {"a": 1}}\n' + line, "f.jsonl")


def test_a_counters_file_is_read_bounded_and_only_when_plain(tmp_path, monkeypatch):
    """Red team round 10: 200 MiB of newlines were read whole on every hover (1.9 GB in the server)."""
    from asight_lsp.store import counters as store
    (tmp_path / "counters.jsonl").write_bytes((GPU / "counters.jsonl").read_bytes())
    assert len(read_counters(tmp_path)) > 0
    monkeypatch.setattr(store, "COUNTERS_LIMIT", 1 << 10)
    with pytest.raises(AsightError, match="more than"):
        read_counters(tmp_path)
    (tmp_path / "counters.jsonl").unlink()
    (tmp_path / "counters.jsonl").symlink_to(GPU / "counters.jsonl")
    with pytest.raises(AsightError, match="symbolic link"):
        read_counters(tmp_path)


def test_adopt_refuses_counters_of_records_the_function_lacks_and_notes_failed_ones():
    """Outside probe F5: counters of candidate 500 (no such record) or of a failed build entered the
    median reference silently and moved the measured contour."""
    from asight_lsp.services.adopt import counter_candidates
    records = read_records(GPU)
    failed = next(r["trial"] for r in records if r["latency_us"] is None)
    entries = parse_counters('{"candidate": 76, "metrics": {"a": 1}}\n{"candidate": "baseline", "metrics": {"a": 1}}\n'
                             f'{{"candidate": {failed}, "metrics": {{"a": 1}}}}\n', "c.jsonl")
    assert counter_candidates(entries, records, 0, "c.jsonl") == (
        f"counters of candidate {failed} (line 3) not used: no measured latency there (a failed build or run)")
    assert counter_candidates(entries[:2], records, 0, "c.jsonl") is None
    ghost = parse_counters('{"candidate": 500, "metrics": {"a": 1}}', "c.jsonl")
    with pytest.raises(AsightError, match=r"c.jsonl:1: candidate 500 is not a record of this function \(the records "
                                          r"file has lines 0..127\)"):
        counter_candidates(ghost, records, 0, "c.jsonl")
    with pytest.raises(AsightError, match="that record is of workload 0, not the adopted function's 1"):
        counter_candidates(entries[:1], records, 1, "c.jsonl")


def test_a_value_no_float_holds_and_a_byte_that_is_not_utf8_are_refused_with_their_line(tmp_path):
    """Outside probe 2, F2: both were internal errors at adopt."""
    with pytest.raises(AsightError, match=r"f.jsonl:1: metric 'a' must be a finite number ≥ 0"):
        parse_counters('{"candidate": 1, "metrics": {"a": 1' + "0" * 400 + '}}', "f.jsonl")
    (tmp_path / "counters.jsonl").write_bytes(b'{"candidate": 1, "metrics": {"a": 1}}\n'
                                              b'{"candidate": 2, "tool": "caf\xe9", "metrics": {"a": 1}}\n')
    with pytest.raises(AsightError, match=r"counters.jsonl:2: not UTF-8 text$"):
        read_counters(tmp_path)


def test_counters_of_a_torn_last_record_say_the_line_is_torn():
    from asight_lsp.services.adopt import counter_candidates
    records = read_records(GPU)[:-1]
    entries = parse_counters(f'{{"candidate": {len(records)}, "metrics": {{"a": 1}}}}', "c.jsonl")
    with pytest.raises(AsightError, match=f"record {len(records)} is the records file's torn last line"):
        counter_candidates(entries, records, 0, "c.jsonl", torn=True)


def test_a_counters_file_the_views_cannot_read_is_the_models_why_not_a_missing_file():
    """Outside probe 2, F4: a 12 MiB file was dropped and the contour said "the run has no counters.jsonl"."""
    from asight_lsp.views.searchspace import _counters_why
    origin = {"origin": "model", "why": "the run has no counters.jsonl"}
    _counters_why(origin, None, ["counters not used: c.jsonl is 12 MiB, more than the 8 MiB the product reads"])
    assert origin["why"] == "counters not used: c.jsonl is 12 MiB, more than the 8 MiB the product reads"


def test_counters_whose_metrics_the_contour_does_not_use_say_so():
    """Outside probe 3, F7: unknown metrics gave "no counters match the run's measured candidates"."""
    from types import SimpleNamespace
    from asight_lsp.views.searchspace import _unmatched
    table = SimpleNamespace(trials=np.array([3, 4]), valid=np.array([True, True]))
    assert _unmatched([{"candidate": 3, "metrics": {"foo.bar": 1.0}}], table).startswith(
        "none of counters.jsonl's metrics is one the contour uses")
    assert _unmatched([{"candidate": 9, "metrics": {"foo.bar": 1.0}}], table) == \
        "no counters match the run's measured candidates"


def test_an_l2_hit_rate_over_100_and_a_rounded_full_peak_are_measurements():
    """ncu reports L2 hit rates a little over 100 (102.89 on the H100 run) and a busy unit at 100.x %."""
    entries = parse_counters('{"candidate": 1, "metrics": {"lts__t_sector_hit_rate.pct": 102.89, '
                             '"sm__throughput.avg.pct_of_peak_sustained_elapsed": 100.3}}', "f.jsonl")
    assert entries[0]["metrics"]["lts__t_sector_hit_rate.pct"] == 102.89


def test_a_counters_path_that_is_a_folder_is_said_not_taken_for_no_counters(tmp_path):
    """Outside probe 6, N9: a folder named counters.jsonl made the views say "no counters for this candidate"."""
    from asight_lsp.store.counters import read_counters
    assert read_counters(tmp_path) is None
    (tmp_path / "counters.jsonl").mkdir()
    with pytest.raises(AsightError, match=r"counters.jsonl is not a regular file \(a folder, a FIFO"):
        read_counters(tmp_path)
