"""Why a tune measured fewer trials than asked (analysis/shortfall.py), on a recorded MetaSchedule log."""
from __future__ import annotations

from pathlib import Path

from asight_lsp.analysis import shortfall as sf

LOG = Path(__file__).resolve().parents[2] / "fixtures" / "gpu" / "verify_gpu_rejection.log"


def test_rejections_read_from_a_real_task_log_take_the_running_total():
    counts = sf.rejections(LOG.read_text())
    assert counts["VerifyGPUCode"] == max(int(line.split(": ")[1].split()[0]) for line in LOG.read_text().splitlines()
                                          if "VerifyGPUCode" in line)
    assert counts["VerifyGPUCode"] >= 512 and counts["_sampling_failed"] is True
    assert "DisallowDynamicLoop" not in counts      # zero counts are left out


def test_zero_trials_because_every_sample_was_rejected_names_the_postprocessor():
    rejected = sf.merge_rejections([sf.rejections(LOG.read_text())])
    out = sf.summarise(32, 0, 0, [], [{"task": "main", "why": "sampling", "proposed": 0}], rejected)
    assert out["measured"] == 0 and out["not_proposed"] == 32
    assert out["text"].startswith("measured 0 of 32 trials: 32 never proposed: the design space produced no valid")
    assert f"VerifyGPUCode rejected {rejected['VerifyGPUCode']}" in out["text"]


def test_counts_split_timeouts_from_other_build_failures_and_runs():
    groups = [{"stage": "build", "reason": "LocalBuilder: Timeout, killed after N seconds", "count": 5},
              {"stage": "build", "reason": "InternalError: x (in f)", "count": 2},
              {"stage": "run", "reason": "RuntimeError: y", "count": 1}]
    out = sf.summarise(16, 12, 8, groups, [{"task": "main", "why": "sampling", "proposed": 12}], {})
    assert (out["build_timeout"], out["build_failed"], out["run_failed"], out["not_proposed"]) == (5, 2, 1, 4)
    assert out["measured"] == 4
    assert out["reasons"] == ["4 never proposed: the design space produced no new candidates (the search ran out)",
                              "5 build(s) timed out", "2 build(s) failed (most often: InternalError: x (in f))",
                              "1 run(s) failed (most often: RuntimeError: y)"]


def test_repeats_and_full_runs():
    assert sf.summarise(8, 8, 0) is None
    assert sf.summarise(0, 0, 0) is None
    out = sf.summarise(8, 3, 0, [], [{"task": "t", "why": "repeats", "proposed": 3}], {})
    assert "only schedules the run already measured" in out["text"]


def test_a_task_whose_search_failed_is_named_with_its_error():
    """One task's search raising ends that task (worker/search.BudgetedSearch), and the run says so."""
    ends = [{"task": "fused_conv2d3_add3_relu2", "why": "failed", "proposed": 8,
             "error": "RuntimeError: Check failed: (args.size() == initial_indices_orig.size()) is false"}]
    out = sf.summarise(512, 300, 0, search_ends=ends)
    assert out["measured"] == 300 and out["not_proposed"] == 212
    assert "212 never proposed" in out["text"]
    assert "the search of 1 task(s) failed and stopped (fused_conv2d3_add3_relu2: RuntimeError: Check failed" in out["text"]
