"""Nsight Compute CSV -> counters (analysis/ncu.py), on three kernels of the recorded H100 ncu run."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from asight_lsp.analysis import ncu

GPU = Path(__file__).resolve().parents[2] / "fixtures" / "gpu"


def test_the_recorded_csv_reads_as_one_launch_per_kernel_with_its_counters():
    launches = ncu.parse_csv((GPU / "h100_ncu_first3.csv").read_text())
    assert [l["id"] for l in launches] == [0, 1, 2]
    first = launches[0]
    assert first["kernel"] == "main_kernel" and first["block"] == "(64, 1, 1)" and first["grid"] == "(256, 1, 1)"
    assert set(first["metrics"]) == set(ncu.METRICS)
    assert first["metrics"]["gpu__time_duration.sum"] == 216768.0      # "216,768" in the CSV
    # the same numbers the probe's counters.jsonl holds for that kernel (record line 76, the fastest)
    line = json.loads((GPU / "counters.jsonl").read_text().splitlines()[0])
    assert line["candidate"] == 76 and line["metrics"] == first["metrics"]


def test_several_kernels_make_one_program_line():
    a = {"metrics": {"gpu__time_duration.sum": 300.0, "dram__throughput.avg.pct_of_peak_sustained_elapsed": 10.0,
                     "launch__registers_per_thread": 32.0}}
    b = {"metrics": {"gpu__time_duration.sum": 100.0, "dram__throughput.avg.pct_of_peak_sustained_elapsed": 50.0,
                     "launch__registers_per_thread": 128.0}}
    out = ncu.program_metrics([a, b])
    assert out["gpu__time_duration.sum"] == 400.0 and out["launch__registers_per_thread"] == 128.0
    assert out["dram__throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(20.0)


def test_why_ncu_gave_nothing_is_one_line():
    perm = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters"
    assert ncu.problem("", perm, 1).startswith("ncu is not permitted to read this GPU's performance counters")
    assert ncu.problem("", "==ERROR== something broke\n", 1) == "ncu failed: ==ERROR== something broke"
    assert ncu.problem("==PROF== Disconnected\n", "", 0) == "ncu profiled no kernel"
    assert ncu.problem((GPU / "h100_ncu_first3.csv").read_text(), "", 0) is None
