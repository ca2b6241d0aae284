"""GPU words (analysis/gpu_words.py), the hover's measured line and the shortfall in the lens, without TVM."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from asight_lsp.analysis import featurelayout as fl
from asight_lsp.analysis.counters import by_candidate
from asight_lsp.analysis.gpu_words import gpu_words, launch
from asight_lsp.server.hover import gpu_line
from asight_lsp.server.lens import result_lens_title, result_lens_tooltip
from asight_lsp.services.results import FunctionResult
from asight_lsp.store.counters import read_counters
from asight_lsp.store.runs import RunMeta

GPU = Path(__file__).resolve().parents[2] / "fixtures" / "gpu"


def rows_with(**extents) -> np.ndarray:
    """Two feature rows as PerStoreFeature stores them (slog), the launch extents on the second."""
    rows = np.zeros((2, fl.LENGTH), dtype=np.float32)
    for name, value in {"is_gpu": 1, **extents}.items():
        rows[1, fl.INDEX[name]] = np.log2(value + 1)
    return rows


def test_launch_extents_come_from_the_feature_rows_and_cpu_programs_have_none():
    rows = rows_with(blockIdx_x_len=256, threadIdx_x_len=64, vthread_len=8)
    assert launch(rows) == {"blockIdx.x": 256, "threadIdx.x": 64, "vthread": 8}
    cpu = np.zeros((1, fl.LENGTH), dtype=np.float32)
    assert launch(cpu) == {} and gpu_words(cpu, ["C"]) is None


def test_words_of_the_recorded_best_candidate_with_its_counters():
    metrics = by_candidate(read_counters(GPU))[0][76]
    words = gpu_words(rows_with(blockIdx_x_len=256, threadIdx_x_len=64, vthread_len=8),
                      ["A_shared", "B_shared", "C_local", "C"], metrics)
    assert words["lines"] == [
        "threads: blockIdx.x 256 × threadIdx.x 64 · vthread 8 (256 blocks of 64 threads)",
        "memory: shared A_shared, B_shared; local C_local",
        "launch (measured): 128 registers a thread, 13,056 B shared memory a block, achieved occupancy 6 %",
        "latency-bound: 6 % of warp slots busy, 128 registers a thread (DRAM 1 %, SM 26 % of peak); too few warps "
        "in flight to hide memory and pipeline latency"]
    unmeasured = gpu_words(rows_with(threadIdx_x_len=32), ["C"])
    assert unmeasured["lines"][-1].startswith("registers, occupancy, limiting factor: not measured")


def test_hover_line_reads_the_runs_counters_for_its_best_trial():
    meta = RunMeta(id="r", file="f.py", function="main")
    result = FunctionResult("main", meta, GPU, stale=False, best={"trial": 76, "latency_us": 134.6})
    assert gpu_line(result) == ("- GPU (measured counters of trial 76): latency-bound: 6 % of warp slots busy, "
                                "128 registers a thread (DRAM 1 %, SM 26 % of peak); too few warps in flight to "
                                "hide memory and pipeline latency; 13,056 B shared memory a block, achieved "
                                "occupancy 6 %")
    result.best = {"trial": 0, "latency_us": 1.0}      # a failed build: no counters
    assert gpu_line(result) is None


def test_lens_says_how_many_trials_were_measured_and_why():
    meta = RunMeta(id="r", file="f.py", function="main", state="failed", trials_requested=32, trials_done=0)
    meta.extra["shortfall"] = {"measured": 0, "requested": 32,
                               "text": "measured 0 of 32 trials: 32 never proposed: the design space produced no "
                                       "valid candidate"}
    result = FunctionResult("main", meta, Path("."), stale=False)
    assert "⚠ 0 of 32 trials measured" in result_lens_title(result)
    assert result_lens_tooltip(result).startswith("Measured 0 of 32 trials: 32 never proposed")


def test_block_hover_and_inlay_of_the_recorded_gpu_run_name_binding_and_limiter():
    from asight_lsp.analysis.trace_replay import source_blocks
    from asight_lsp.analysis.trace_summary import summarize_trace
    from asight_lsp.server.hover import hover_markdown
    from asight_lsp.server.inlay import block_hints
    from asight_lsp.store.runs import read_records
    from asight_lsp.tvmscript.outline import build_outline
    fn = build_outline((GPU / "matmul1024.py").read_text()).functions[0]
    best = next(r for r in read_records(GPU) if r["trial"] == 76)
    meta = RunMeta(id="h100", file="matmul1024.py", function=fn.id, state="done", trials_done=128)
    result = FunctionResult(fn.id, meta, GPU, False, best, summarize_trace(best["insts"], best["decisions"],
                                                                           source_blocks(fn)))
    block = fn.blocks[0]
    hover = hover_markdown("block", fn, block, result)
    assert "threadIdx.x" in hover and "blockIdx.x" in hover
    assert "- GPU (measured counters of trial 76): latency-bound: 6 % of warp slots busy" in hover
    (_, label, tip), = block_hints(fn, result)
    assert "threadIdx.x" in label and "GPU (measured counters of trial 76): latency-bound" in tip


def test_a_block_hover_of_a_run_that_kept_dlight_says_so_first():
    from asight_lsp.analysis.default_candidate import keep_baseline
    from asight_lsp.analysis.trace_replay import source_blocks
    from asight_lsp.analysis.trace_summary import summarize_trace
    from asight_lsp.server.hover import hover_markdown
    from asight_lsp.store.runs import read_records
    from asight_lsp.tvmscript.outline import build_outline
    from tests.conftest import measured
    fn = build_outline((GPU / "matmul1024.py").read_text()).functions[0]
    best = next(r for r in read_records(GPU) if r["trial"] == 76)
    record = keep_baseline({**measured(120.0, 140.0), "baseline": {"kind": "dlight", "label": "DLight's default schedule"},
                            "chosen": [{"task": "main", "trial": 76}], "defaults": []})
    meta = RunMeta(id="h100", file="matmul1024.py", function=fn.id, state="done", trials_done=128, measurement=record)
    result = FunctionResult(fn.id, meta, GPU, False, best, summarize_trace(best["insts"], best["decisions"],
                                                                           source_blocks(fn)))
    lines = hover_markdown("block", fn, fn.blocks[0], result).splitlines()
    kept = next(i for i, line in enumerate(lines) if "DLight's default kept" in line)
    assert lines[kept] == ("- ⚠ DLight's default kept: tuned 140.0 µs vs DLight 120.0 µs: the run keeps DLight's "
                           "default schedule; below, the best tuned one")
    assert kept < next(i for i, line in enumerate(lines) if line.startswith("- best schedule (trial 76"))
