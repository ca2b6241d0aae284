"""`asight import` never writes through what is already beside the model (red team round 8, F8): a
weights file or a dangling link named like its outputs makes it stop before any worker starts."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name, dangling", [("model_relax.py", True), ("model_relax.weights.npz", False),
                                            ("model_relax.weights.npz", True)])
def test_import_stops_at_an_output_already_there(tmp_path, name, dangling):
    (tmp_path / "model.onnx").write_bytes(b"not read: the check comes first")
    victim = tmp_path / "victim.txt"
    if not dangling:
        victim.write_text("precious")
    (tmp_path / name).symlink_to(victim)
    done = subprocess.run([sys.executable, "-m", "asight_lsp", "import", "model.onnx"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode != 0 and f"{name} exists (use --force" in done.stderr, done.stderr
    assert (victim.read_text() == "precious") if not dangling else not victim.exists()


def test_compare_onnx_asks_for_at_least_three_rounds(tmp_path):
    """One round gave a "95% CI 0.83-0.83" (model probe round 5)."""
    done = subprocess.run([sys.executable, "-m", "asight_lsp", "model", "x.py", "--rounds", "1"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=60, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2 and "at least 3 rounds" in done.stderr, done.stderr
