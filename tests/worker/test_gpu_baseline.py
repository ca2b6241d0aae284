"""The GPU baseline (worker/baseline.py): DLight's default schedule of a copy, checked on CPU-side IR;
the live comparison (tuned vs DLight vs cuBLAS through PyTorch) runs only where a GPU is."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
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
    mod = M.gpu_ready(M.plan_for(parsed("matmul_bias_relu.py"), None, target, off=frozenset()), target).tasks[0].mod
    before = tvm_ffi.structural_hash(mod)
    program, what = baseline_of(mod, target)
    assert what == {"kind": "dlight", "label": "DLight's default schedule"}
    assert tvm_ffi.structural_hash(mod) == before and not program.same_as(mod)    # DLight works in place
    assert "threadIdx.x" in program.script() and "threadIdx" not in mod.script()
    cuda = tvm.tirx.build(program, target=target).imports[0].inspect_source()  # codegen needs no GPU
    assert "__global__" in cuda
    cpu = M.resolve_target("llvm")
    plain = M.plan_for(parsed("matmul64.py"), None, cpu, off=frozenset()).tasks[0].mod
    assert baseline_of(plain, cpu)[0].same_as(plain)


@pytest.mark.gpu
@pytest.mark.slow
def test_live_tune_on_the_gpu_measures_tuned_vs_dlight_with_the_vendor_line_and_collects_counters(tmp_path):
    store = tmp_path / ".asight"
    proc = subprocess.run([sys.executable, "-m", "asight_lsp", "tune", str(ROOT / "fixtures" / "matmul64.py"),
                           "--target", "gpu", "--trials", "8", "--counters-budget", "20", "--work-dir", str(store)],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert proc.returncode == 0, proc.stderr
    run = RunStore(str(store)).get("latest")
    meta = run.load()
    assert meta.trials_done == 8 and "shortfall" not in meta.extra
    record = meta.measurement
    assert record["baseline"]["kind"] == "dlight" and record["gpu"]["lines"]
    assert "vendor" in record and ("median_us" in record["vendor"] or record["vendor"].get("note"))
    assert "gpu      tuned" in proc.stdout
    if record["gpu"]["kept"] == "baseline":        # DLight won: the run keeps it and says so
        assert record["chosen"] == [] and record["kept"]["text"].startswith("DLight's default kept: tuned ")
    counters = meta.extra["counters"]
    assert f"counters {counters['text']}" in proc.stdout
    if counters["status"] != "ok":                 # ncu missing or not permitted: said in one line
        assert "ncu" in counters["message"] or "Nsight" in counters["message"], counters
        return
    lines = (run.path / "counters.jsonl").read_text().splitlines()
    assert lines[0].startswith('{"candidate": "baseline"') and len(lines) >= 2

def test_the_module_a_gpu_run_tunes_is_recognised_for_its_vendor_call():
    """What ``remeasure.measure_run`` hands ``vendor_reference``: the printed module after
    ``gpu_ready`` (allocations hoisted into an explicit root block) still reads as the convolution."""
    from asight_lsp.worker import metaschedule as M
    from asight_lsp.worker.baseline import vendor_workload
    target = M.resolve_target("nvidia/nvidia-h100")

    def tuned_module(name):
        return M.gpu_ready(M.plan_for(parsed(name), None, target, off=frozenset()), target).tasks[0].mod

    conv = vendor_workload(tuned_module("conv2d_nhwc.py"))
    assert (conv["op"], conv["layout"], conv["kernel_layout"], conv["padding"]) == ("conv2d", "NHWC", "HWIO", [1, 1, 1, 1])
    assert vendor_workload(tuned_module("matmul64.py"))["op"] == "matmul"
    assert vendor_workload(tuned_module("matmul_bias_relu.py"))["op"] is None


def test_without_pytorch_on_cuda_the_vendor_line_says_why_and_names_the_conv():
    from asight_lsp.analysis.vendor_workload import recognise
    from asight_lsp.worker.baseline import _torch_cuda, vendor_reference
    if _torch_cuda()[0] is not None:
        pytest.skip("PyTorch with CUDA is here: the live test covers it")
    conv = recognise((ROOT / "fixtures" / "conv2d_nhwc.py").read_text())
    arrays = [np.zeros(s, "float32") for s in conv["shapes"].values()]
    note = vendor_reference(arrays, arrays[-1], workload=conv)["note"]
    assert note.endswith("(no cuDNN reference for this conv2d NHWC/HWIO, stride 1×1, padding 1,1,1,1)")
    assert note.startswith(("PyTorch is not installed", "PyTorch has no CUDA device here"))


def _conv_numpy(x, w, stride, pad):
    """NHWC/HWIO reference convolution (numpy, float64)."""
    top, bottom, left, right = pad
    x = np.pad(x.astype("float64"), ((0, 0), (top, bottom), (left, right), (0, 0)))
    kh, kw, _, co = w.shape
    ho, wo = (x.shape[1] - kh) // stride + 1, (x.shape[2] - kw) // stride + 1
    out = np.zeros((x.shape[0], ho, wo, co))
    for i in range(kh):
        for j in range(kw):
            patch = x[:, i:i + stride * ho:stride, j:j + stride * wo:stride, :]
            out += np.einsum("nhwc,co->nhwo", patch, w[i, j].astype("float64"))
    return out.astype("float32")



@pytest.mark.gpu
def test_live_cudnn_line_matches_the_recognised_conv():
    from asight_lsp.analysis.vendor_workload import recognise
    from asight_lsp.worker.baseline import _torch_cuda, vendor_reference
    if _torch_cuda()[0] is None:
        pytest.skip(f"cuDNN line needs PyTorch with CUDA: {_torch_cuda()[1]}")
    conv = recognise((ROOT / "fixtures" / "conv2d_nhwc.py").read_text())
    rng = np.random.default_rng(0)
    x, w = (rng.standard_normal(conv["shapes"][k]).astype("float32") for k in ("data", "weight"))
    out = _conv_numpy(x, w, 1, conv["padding"])
    line = vendor_reference([x, w, out], out, workload=conv)
    assert line["label"].startswith("cuDNN (PyTorch F.conv2d") and line["median_us"] > 0, line
    wrong = vendor_reference([x, w, out], out + 1.0, workload=conv)
    assert "does not give its outputs" in wrong["note"]
