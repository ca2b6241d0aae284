"""``--target gpu`` (engine/targets.py): nvidia-smi's GPU name -> TVM's tag, on recorded nvidia-smi outputs."""
from __future__ import annotations

import subprocess

import pytest

from asight_lsp.engine.targets import TargetError, gpu_label, gpu_target, local_gpus, parse_nvidia_smi
from asight_lsp.errors import AsightError
from asight_lsp.services.tuning import check_target

# A few of TVM 0.27's tags (tvm.target.list_tags()), enough to resolve the GPUs below.
TAGS = {"nvidia/nvidia-h100", "nvidia/nvidia-a100", "nvidia/nvidia-t4", "nvidia/geforce-rtx-3080",
        "nvidia/rtx-a6000", "nvidia/nvidia-v100", "nvidia/geforce-rtx-4090",
        "nvidia/nvidia-a10g", "nvidia/quadro-rtx-8000"}


@pytest.mark.parametrize("smi, tag", [
    ("NVIDIA H100 80GB HBM3, 9.0", "nvidia/nvidia-h100"),          # the machine
    ("NVIDIA A100-SXM4-80GB, 8.0", "nvidia/nvidia-a100"),
    ("Tesla T4, 7.5", "nvidia/nvidia-t4"),
    ("Tesla V100-SXM2-16GB, 7.0", "nvidia/nvidia-v100"),
    ("NVIDIA GeForce RTX 3080, 8.6", "nvidia/geforce-rtx-3080"),
    ("NVIDIA GeForce RTX 4090, 8.9", "nvidia/geforce-rtx-4090"),
    ("NVIDIA RTX A6000, 8.6", "nvidia/rtx-a6000"),
    ("NVIDIA A10G, 8.6", "nvidia/nvidia-a10g"),
    ("Quadro RTX 8000, 7.5", "nvidia/quadro-rtx-8000"),
])
def test_nvidia_smi_names_resolve_to_tvm_tags(smi, tag):
    gpu = parse_nvidia_smi(smi + "\n")[0]
    assert gpu_target(gpu, TAGS) == tag


def test_a_gpu_tvm_has_no_tag_for_gets_cuda_with_its_arch():
    gpu = parse_nvidia_smi("NVIDIA L4, 8.9\n")[0]
    assert gpu_target(gpu, TAGS) == {"kind": "cuda", "arch": "sm_89"}
    assert gpu_label(gpu) == "gpu:NVIDIA L4:sm_89"


def fake(stdout="", returncode=0, stderr="", missing=False):
    def run(cmd, **_):
        if missing:
            raise FileNotFoundError(cmd[0])
        return subprocess.CompletedProcess(cmd, returncode, stdout, stderr)
    return run


def test_without_a_gpu_the_error_is_one_clear_line():
    with pytest.raises(TargetError, match=r"^--target gpu: no NVIDIA GPU on this machine \(nvidia-smi not found\)"):
        local_gpus(fake(missing=True))
    with pytest.raises(TargetError, match="nvidia-smi lists no GPU .NVIDIA-SMI has failed"):
        local_gpus(fake(returncode=9, stderr="NVIDIA-SMI has failed because it couldn't communicate with the driver"))
    two = local_gpus(fake("NVIDIA H100 80GB HBM3, 9.0\nNVIDIA H100 80GB HBM3, 9.0\n"))
    assert len(two) == 2 and two[0] == {"name": "NVIDIA H100 80GB HBM3", "compute_cap": "9.0"}


def test_check_target_keeps_cuda_tags_and_json_and_refuses_gpu_here(monkeypatch):
    assert check_target("cuda") == "cuda"
    assert check_target("nvidia/nvidia-h100") == "nvidia/nvidia-h100"
    assert check_target('{"kind": "cuda", "arch": "sm_90a"}') == '{"arch":"sm_90a","kind":"cuda"}'
    monkeypatch.setattr("asight_lsp.services.tuning.local_gpus", lambda: [{"name": "NVIDIA H100 80GB HBM3",
                                                                            "compute_cap": "9.0"}])
    assert check_target("gpu") == "gpu:NVIDIA H100 80GB HBM3:sm_90"
    monkeypatch.setattr("asight_lsp.services.tuning.local_gpus", lambda: local_gpus(fake(missing=True)))
    with pytest.raises(AsightError, match="no NVIDIA GPU"):
        check_target("gpu")


def test_a_missing_device_shows_in_files_and_environment_without_tvm():
    """Probe 4, F6 (``engine/targets.device_missing``): only sure answers; None lets the tuning job ask TVM."""
    from asight_lsp.engine.targets import device_missing
    assert device_missing("cuda", {"CUDA_VISIBLE_DEVICES": ""}, "linux").startswith("no NVIDIA GPU visible to CUDA")
    assert device_missing("cuda", {"CUDA_VISIBLE_DEVICES": "-1,0"}, "linux").startswith("no NVIDIA GPU visible")
    assert device_missing("metal", {}, "linux") == "no Metal device on this machine (Metal is macOS's)"
    assert device_missing("metal", {}, "darwin") is None
    assert device_missing("webgpu", {}, "linux").startswith("no WebGPU device")
    assert device_missing("vulkan", {"VK_ICD_FILENAMES": "/opt/icd.json"}, "linux") is None
    assert device_missing("opencl", {"OCL_ICD_VENDORS": "/opt/vendors"}, "linux") is None
    assert device_missing("vulkan", {}, "win32") is None and device_missing("llvm", {}, "linux") is None
