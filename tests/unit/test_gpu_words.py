"""GPU words (analysis/gpu_words.py), the hover's measured line and the shortfall in the lens, without TVM."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np

from asight_lsp.analysis import featurelayout as fl
from asight_lsp.analysis import counters as cn
from asight_lsp.analysis.counters import by_candidate
from asight_lsp.analysis.gpu_words import gpu_words, launch, short_words
from asight_lsp.server.hover import gpu_lines
from asight_lsp.server.lens import result_lens_title, result_lens_tooltip
from asight_lsp.services.results import FunctionResult
from asight_lsp.services.catalogue import RunView
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


def test_hover_lines_read_the_runs_counters_for_its_best_trial():
    meta = RunMeta(id="r", file="f.py", function="main", target={"kind": "cuda", "arch": "sm_90a"})
    result = FunctionResult("main", RunView(meta, GPU, "fresh"), best={"trial": 76, "latency_us": 134.6})
    assert gpu_lines(result) == [
        "- GPU (measured counters of trial 76):",
        "  - launch (measured): 128 registers a thread, 13,056 B shared memory a block, achieved occupancy 6 %",
        "  - latency-bound: 6 % of warp slots busy, 128 registers a thread (DRAM 1 %, SM 26 % of peak); too few "
        "warps in flight to hide memory and pipeline latency"]
    result.best = {"trial": 0, "latency_us": 1.0}      # a failed build: no counters
    assert gpu_lines(result) == ["- GPU (trial 0): registers, occupancy, limiting factor: not measured (no counters "
                                 "for this candidate)"]
    cpu = FunctionResult("main", RunView(RunMeta(id="c", file="f.py", function="main", target="llvm"), Path("."), "fresh"),
                         best={"trial": 0, "latency_us": 1.0})
    assert gpu_lines(cpu) == []


def with_counters(tmp_path: Path, keep) -> Path:
    """A run folder whose counters.jsonl keeps, on each line, only the metrics ``keep`` names (an ncu
    run with fewer ``--metrics``), beside the run's records (the views check counters against them)."""
    shutil.copy(GPU / "database_tuning_record.json", tmp_path / "database_tuning_record.json")
    lines = []
    for line in (GPU / "counters.jsonl").read_text().splitlines():
        entry = json.loads(line)
        entry["metrics"] = {k: v for k, v in entry["metrics"].items() if k in keep}
        lines.append(json.dumps(entry))
    (tmp_path / "counters.jsonl").write_text("\n".join(lines) + "\n")
    return tmp_path


LAUNCH_ONLY = ("launch__registers_per_thread", "launch__shared_mem_per_block_static",
               "sm__warps_active.avg.pct_of_peak_sustained_active", "gpu__time_duration.sum")
NO_LIMITER = ("limiting factor: not measured (the counters lack sm__throughput.avg.pct_of_peak_sustained_elapsed, "
              "dram__throughput.avg.pct_of_peak_sustained_elapsed)")


def test_each_figure_the_counters_lack_is_said_and_the_hover_says_what_the_loop_view_says(tmp_path):
    rows = rows_with(blockIdx_x_len=256, threadIdx_x_len=64, vthread_len=8)
    partial = by_candidate(read_counters(with_counters(tmp_path, LAUNCH_ONLY)))[0][76]
    words = gpu_words(rows, ["C"], partial)
    assert words["lines"][-2:] == [
        "launch (measured): 128 registers a thread, 13,056 B shared memory a block, achieved occupancy 6 %", NO_LIMITER]
    assert words["not_measured"] == [NO_LIMITER] and words["limiter"] is None
    meta = RunMeta(id="r", file="f.py", function="main", target={"kind": "cuda"})
    hover = gpu_lines(FunctionResult("main", RunView(meta, tmp_path, "fresh"), best={"trial": 76, "latency_us": 134.6}))
    assert [line.removeprefix("  - ") for line in hover[1:]] == words["lines"][-2:]
    only_time = gpu_words(rows, ["C"], {"gpu__time_duration.sum": 216768.0})
    assert only_time["lines"][-2:] == [
        "registers a thread, shared memory a block, achieved occupancy: not measured (the counters lack "
        "launch__registers_per_thread, launch__shared_mem_per_block_static, "
        "sm__warps_active.avg.pct_of_peak_sustained_active)", NO_LIMITER]


def test_the_counters_a_file_lacks_are_named_and_the_limiter_has_a_short_form():
    assert cn.lacking(read_counters(GPU)) == []
    assert cn.lacking([{"metrics": {"gpu__time_duration.sum": 1.0, cn.REGISTERS: 128.0}}]) == [
        cn.SHARED, cn.OCCUPANCY, cn.SM_PEAK, cn.DRAM_PEAK]
    assert short_words(by_candidate(read_counters(GPU))[0][76]) == "latency-bound, occupancy 6 %"
    assert short_words({cn.DRAM_PEAK: 85.0, cn.SM_PEAK: 40.0}) == "memory-bound, DRAM 85 % of peak"
    assert short_words({cn.DRAM_PEAK: 5.0, cn.SM_PEAK: 90.0, cn.OCCUPANCY: 50.0}) == "compute-bound, SM 90 % of peak"
    assert short_words({cn.OCCUPANCY: 6.06}) == "occupancy 6 %" and short_words({}) == "" and short_words(None) == ""


def test_lens_says_how_many_trials_were_measured_and_why():
    meta = RunMeta(id="r", file="f.py", function="main", state="failed", trials_requested=32, trials_done=0)
    meta.extra["shortfall"] = {"measured": 0, "requested": 32,
                               "text": "measured 0 of 32 trials: 32 never proposed: the design space produced no "
                                       "valid candidate"}
    result = FunctionResult("main", RunView(meta, Path("."), "fresh"))
    assert "⚠ 0 of 32 trials measured" in result_lens_title(result)
    assert result_lens_tooltip(result).startswith("Measured 0 of 32 trials: 32 never proposed")


def recorded_best(run_dir: Path = GPU):
    """The recorded matmul's function and a result for its best trial (76) whose run folder is ``run_dir``."""
    from asight_lsp.analysis.trace_replay import source_blocks
    from asight_lsp.analysis.trace_summary import summarize_trace
    from asight_lsp.store.runs import read_records
    from asight_lsp.tvmscript.outline import build_outline
    fn = build_outline((GPU / "matmul1024.py").read_text()).functions[0]
    best = next(r for r in read_records(GPU) if r["trial"] == 76)
    meta = RunMeta(id="h100", file="matmul1024.py", function=fn.id, state="done", trials_done=128,
                   target={"kind": "cuda", "arch": "sm_90a"})
    return fn, FunctionResult(fn.id, RunView(meta, run_dir, "fresh"), best, summarize_trace(best["insts"], best["decisions"],
                                                                                   source_blocks(fn)))


SCHEDULE = "unroll 128 · cache C_local · cache A_shared · cache B_shared · blockIdx.x 256 · vthread 8 · threadIdx.x 64"


def test_block_hover_and_inlay_of_the_recorded_gpu_run_name_binding_with_extents_and_limiter():
    from asight_lsp.server.hover import hover_markdown
    from asight_lsp.server.inlay import block_hints
    fn, result = recorded_best()
    hover = hover_markdown("block", fn, fn.blocks[0], result).splitlines()
    assert f"- best schedule (trial 76, 0.13 ms): {SCHEDULE}" in hover
    assert "- GPU (measured counters of trial 76):" in hover
    assert ("  - latency-bound: 6 % of warp slots busy, 128 registers a thread (DRAM 1 %, SM 26 % of peak); too few "
            "warps in flight to hide memory and pipeline latency") in hover
    (_, label, tip), = block_hints(fn, result)
    assert label == f"{SCHEDULE} · latency-bound, occupancy 6 %"
    assert tip.splitlines()[-3:] == [
        "GPU (measured counters of trial 76):",
        "launch (measured): 128 registers a thread, 13,056 B shared memory a block, achieved occupancy 6 %",
        "latency-bound: 6 % of warp slots busy, 128 registers a thread (DRAM 1 %, SM 26 % of peak); too few warps "
        "in flight to hide memory and pipeline latency"]


def test_inlay_hint_and_hover_of_a_run_with_some_of_the_counters(tmp_path):
    from asight_lsp.server.hover import hover_markdown
    from asight_lsp.server.inlay import block_hints
    (tmp_path / "p").mkdir()
    fn, result = recorded_best(with_counters(tmp_path / "p", LAUNCH_ONLY))
    (_, label, tip), = block_hints(fn, result)
    assert label == f"{SCHEDULE} · occupancy 6 %" and tip.splitlines()[-1] == NO_LIMITER
    hover = hover_markdown("block", fn, fn.blocks[0], result).splitlines()
    assert hover[-2:] == ["  - launch (measured): 128 registers a thread, 13,056 B shared memory a block, achieved "
                          "occupancy 6 %", f"  - {NO_LIMITER}"]
    (tmp_path / "t").mkdir()
    fn, result = recorded_best(with_counters(tmp_path / "t", ("gpu__time_duration.sum",)))
    (_, label, _), = block_hints(fn, result)
    assert label == SCHEDULE
    assert hover_markdown("block", fn, fn.blocks[0], result).splitlines()[-1] == f"  - {NO_LIMITER}"


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
    result = FunctionResult(fn.id, RunView(meta, GPU, "fresh"), best, summarize_trace(best["insts"], best["decisions"],
                                                                           source_blocks(fn)))
    lines = hover_markdown("block", fn, fn.blocks[0], result).splitlines()
    kept = next(i for i, line in enumerate(lines) if "DLight's default kept" in line)
    assert lines[kept] == ("- ⚠ DLight's default kept: tuned 140.0 µs vs DLight 120.0 µs: the run keeps DLight's "
                           "default schedule; below, the best tuned one")
    assert kept < next(i for i, line in enumerate(lines) if line.startswith("- best schedule (trial 76"))
