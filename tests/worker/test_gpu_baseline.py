"""The GPU baseline (worker/baseline.py): DLight's default schedule of a copy, checked on CPU-side IR;
the live comparison (tuned vs DLight vs cuBLAS through PyTorch) runs only where a GPU is."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from asight_lsp.store.runs import RunStore

pytestmark = [pytest.mark.tvm]
ROOT = Path(__file__).resolve().parents[2]


def parsed(name: str):
    from asight_lsp.tvmscript.outline import build_outline
    from asight_lsp.worker.parse import parse_unit
    text = (ROOT / "fixtures" / name).read_text()
    outline = build_outline(text, name)
    unit = outline.units[0]
    return parse_unit(text.splitlines(), {"start_line": unit.start_line, "end_line": unit.end_line},
                      outline.constants, outline.aliases)


def test_dlight_schedules_its_own_copy_for_a_gpu_and_leaves_cpu_programs_alone():
    from asight_lsp.worker import metaschedule as M
    from asight_lsp.worker.baseline import baseline_of
    from asight_lsp.worker.compat import tvm, tvm_ffi
    target = M.resolve_target("nvidia/nvidia-h100")
    mod = M.gpu_ready(M.plan_for(parsed("matmul_bias_relu.py"), None, target), target).tasks[0].mod
    before = tvm_ffi.structural_hash(mod)
    program, what = baseline_of(mod, target)
    assert what == {"kind": "dlight", "label": "DLight's default schedule"}
    assert tvm_ffi.structural_hash(mod) == before and not program.same_as(mod)    # DLight works in place
    assert "threadIdx.x" in program.script() and "threadIdx" not in mod.script()
    cuda = tvm.tirx.build(program, target=target).imports[0].inspect_source()  # codegen needs no GPU
    assert "__global__" in cuda
    cpu = M.resolve_target("llvm")
    plain = M.plan_for(parsed("matmul64.py"), None, cpu).tasks[0].mod
    assert baseline_of(plain, cpu)[0].same_as(plain)


@pytest.mark.gpu
@pytest.mark.slow
def test_live_tune_on_the_gpu_measures_tuned_vs_dlight_with_the_vendor_line(tmp_path):
    store = tmp_path / ".asight"
    proc = subprocess.run([sys.executable, "-m", "asight_lsp", "tune", str(ROOT / "fixtures" / "matmul64.py"),
                           "--target", "gpu", "--trials", "16", "--work-dir", str(store)],
                          capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    meta = RunStore(str(store)).get("latest").load()
    assert meta.trials_done == 16 and "shortfall" not in meta.extra
    record = meta.measurement
    assert record["baseline"]["kind"] == "dlight" and record["gpu"]["lines"]
    assert "vendor" in record and ("median_us" in record["vendor"] or record["vendor"].get("note"))
    assert "gpu      tuned" in proc.stdout
    counters = subprocess.run([sys.executable, "-m", "asight_lsp", "counters", "--work-dir", str(store), "--budget-s",
                               "60"], capture_output=True, text=True, timeout=1200,
                              env={**os.environ, "PYTHONPATH": str(ROOT)})
    if counters.returncode != 0:      # ncu missing or not permitted: said in one line
        assert "not collected: " in counters.stderr and ("ncu" in counters.stderr or "Nsight" in counters.stderr)
        return
    lines = (RunStore(str(store)).get("latest").path / "counters.jsonl").read_text().splitlines()
    assert lines[0].startswith('{"candidate": "baseline"') and len(lines) >= 2
