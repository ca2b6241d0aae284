"""``--target gpu`` in the tuning job (worker/metaschedule.resolve_target) with TVM's real tag list."""
from __future__ import annotations

import pytest

pytestmark = [pytest.mark.tvm]


def test_gpu_resolves_to_the_tvm_tag_of_the_local_gpu(monkeypatch):
    from asight_lsp.worker import metaschedule as M
    monkeypatch.setattr(M, "local_gpus", lambda: [{"name": "NVIDIA H100 80GB HBM3", "compute_cap": "9.0"}])
    target = M.resolve_target("gpu")
    assert target.kind.name == "cuda" and str(target.attrs["arch"]) == "sm_90a"     # the nvidia/nvidia-h100 tag
    assert target.host.kind.name == "llvm"
    monkeypatch.setattr(M, "local_gpus", lambda: [{"name": "NVIDIA L4", "compute_cap": "8.9"}])
    assert str(M.resolve_target("gpu").attrs["arch"]) == "sm_89"                  # no tag: cuda + its arch
