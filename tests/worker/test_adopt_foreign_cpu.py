"""``asight adopt`` of a CPU work folder tuned on an aarch64 server (outside probe 8): the code view's
lowered, llvm and asm levels are built here by LLVM's AArch64 backend (nothing runs), and profile says
why it cannot time the run without sending the user to adopt it again.  The folder is
fixtures/runs/mbr128 with its records' target rewritten as the probe's was."""
from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from asight_lsp.engine.targets import architecture

pytestmark = [pytest.mark.tvm, pytest.mark.slow,
              pytest.mark.skipif(architecture(platform.machine()) == "aarch64", reason="aarch64 is this machine's")]

ROOT = Path(__file__).resolve().parents[2]
FIX = ROOT / "fixtures"
ARM = {"keys": ["arm_cpu", "cpu"], "kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "neoverse-v1",
       "num-cores": 64, "tag": ""}
WIN = {"keys": ["cpu"], "kind": "llvm", "mtriple": "x86_64-pc-windows-msvc", "mcpu": "skylake", "num-cores": 8,
       "tag": ""}


def asight(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asight_lsp", *args], capture_output=True, text=True, timeout=600,
                          cwd=cwd, env={**os.environ, "PYTHONPATH": str(ROOT)})


def adopted(base: Path, target: dict) -> Path:
    folder, ws = base / "cpu_folder", base / "ws"
    folder.mkdir(), ws.mkdir()
    shutil.copy(FIX / "runs" / "mbr128" / "database_workload.json", folder)
    rows = [json.loads(line) for line in (FIX / "runs" / "mbr128" / "database_tuning_record.json").read_text().splitlines()]
    for row in rows:
        row[1][2] = target
    (folder / "database_tuning_record.json").write_text("".join(json.dumps(r) + "\n" for r in rows))
    shutil.copy(FIX / "matmul_bias_relu.py", ws)
    proc = asight("adopt", str(folder), "--file", "matmul_bias_relu.py", cwd=ws)
    assert proc.returncode == 0, proc.stderr
    assert f"target   llvm {target['mcpu']}" in proc.stdout
    return ws


@pytest.fixture(scope="module")
def workspace(tmp_path_factory):
    return adopted(tmp_path_factory.mktemp("arm"), ARM)


@pytest.fixture(scope="module")
def windows(tmp_path_factory):
    if platform.system() == "Windows":
        pytest.skip("Windows is this machine's")
    return adopted(tmp_path_factory.mktemp("win"), WIN)


def code(ws: Path, level: str) -> dict:
    proc = asight("code", "matmul_bias_relu.py", "--level", level, "--json", cwd=ws)
    assert proc.returncode == 0, proc.stderr
    view = json.loads(proc.stdout)
    assert view["status"] == "ok" and view["level"] == level and view["candidate"]["best"]
    return view


def test_the_lowered_llvm_and_asm_levels_are_built_for_aarch64_here(workspace):
    lowered = code(workspace, "lowered")
    assert '"mtriple": "aarch64-linux-gnu"' in lowered["text"] and "feature.has_asimd" in lowered["text"]
    llvm = code(workspace, "llvm")
    assert 'target triple = "aarch64-linux-gnu"' in llvm["text"] and llvm["links"]
    asm = code(workspace, "asm")
    assert "fmla\t" in asm["text"] and " x0" in asm["text"]          # AArch64 instructions and registers
    assert "aarch64 code (built here, not run)" in asm["note"] and "profile it" not in asm["note"]
    assert not any("adopt" in view.get("note", "") for view in (lowered, llvm, asm))


def test_profile_and_hotspots_say_the_run_was_tuned_on_aarch64(workspace):
    here = architecture(platform.machine())
    for args in (("profile", "matmul_bias_relu.py"), ("hotspots", "matmul_bias_relu.py", "--run", "latest")):
        proc = asight(*args, cwd=workspace)
        assert proc.returncode != 0
        assert (f"was tuned on aarch64 and its programs are aarch64 code, which cannot run on this {here} machine"
                in proc.stderr), proc.stderr
        assert "adopt" not in proc.stderr


def test_a_windows_run_builds_its_code_here_and_profile_says_it_was_tuned_for_windows(windows):
    """Outside probe 9, F4: an x86_64-pc-windows-msvc folder was "runs here" (same CPU), and profile and
    hotspots segfaulted the worker loading its Windows library."""
    lowered = code(windows, "lowered")
    assert '"mtriple": "x86_64-pc-windows-msvc"' in lowered["text"]
    llvm = code(windows, "llvm")
    assert 'target triple = "x86_64-pc-windows-msvc"' in llvm["text"]
    asm = code(windows, "asm")
    assert "x86_64-pc-windows-msvc code (built here, not run)" in asm["note"]
    for args in (("profile", "matmul_bias_relu.py"), ("hotspots", "matmul_bias_relu.py", "--run", "latest")):
        proc = asight(*args, cwd=windows)
        assert proc.returncode != 0 and "Segfault" not in proc.stderr
        assert (f"was tuned for x86_64-pc-windows-msvc and its programs are that system's code, which cannot run "
                f"on this {platform.system()} machine" in proc.stderr), proc.stderr


def test_a_triple_this_tvms_llvm_cannot_emit_is_one_sentence(monkeypatch):
    from asight_lsp.worker import programs
    from asight_lsp.worker.compat import tvm
    assert "aarch64" in {str(t) for t in tvm.target.codegen.llvm_get_targets()}     # the wheel's LLVM has it
    programs.measuring_target(ARM, build_only=True)
    monkeypatch.setattr(tvm.target.codegen, "llvm_get_targets", lambda: ["x86_64", "i386", "nvptx64"])
    with pytest.raises(ValueError) as err:
        programs.measuring_target(ARM, build_only=True)
    assert str(err.value) == ("this run's target (mtriple 'aarch64-linux-gnu') makes aarch64 code, and the LLVM in "
                              "this machine's TVM has no aarch64 backend, so its code cannot be built here (the "
                              "scheduled level shows it)")
    with pytest.raises(Exception, match="bring its work folder here"):             # a tune or profile: as before
        programs.measuring_target(ARM)
