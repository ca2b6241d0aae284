"""A run tuned for another CPU architecture (an adopted aarch64 work folder on x86_64, outside probe 8):
its programs cannot be timed here, so no Profile lens and a refusal that says why without sending the
user to ``asight adopt`` (the run is the adopted folder); tuning a new aarch64 run keeps its refusal."""
from __future__ import annotations

import platform
import shutil
import time
from pathlib import Path

import pytest

from asight_lsp.engine.targets import TargetError, foreign_cpu, require_runs_here, runs_here
from asight_lsp.errors import AsightError
from asight_lsp.services.results import Results
from asight_lsp.store.index import RunIndex
from asight_lsp.store.runs import Run, RunMeta
from asight_lsp.tvmscript.hashing import function_hash
from asight_lsp.tvmscript.outline import build_outline

ROOT = Path(__file__).resolve().parents[2]
ARM = {"keys": ["arm_cpu", "cpu"], "kind": "llvm", "mtriple": "aarch64-linux-gnu", "mcpu": "neoverse-v1",
       "num-cores": 64, "tag": ""}


@pytest.fixture
def x86(monkeypatch):
    """This machine, as an x86_64 one (the rule is about the machine the views run on)."""
    monkeypatch.setattr(platform, "machine", lambda: "x86_64")


def test_which_targets_run_here():
    assert foreign_cpu(ARM, "x86_64") == "aarch64" and not runs_here(ARM, "x86_64")
    assert foreign_cpu(ARM, "aarch64") is None and runs_here(ARM, "aarch64")
    assert foreign_cpu({"kind": "llvm", "mcpu": "znver3"}, "x86_64") is None and runs_here({"kind": "llvm"}, "x86_64")
    assert foreign_cpu({"kind": "cuda", "host": ARM}, "x86_64") == "aarch64"     # its host code is aarch64's
    assert not runs_here({"kind": "cuda", "arch": "sm_90a"}, "x86_64")             # a GPU run: runs_on_device
    assert foreign_cpu({"kind": "cuda", "arch": "sm_90a"}, "x86_64") is None
    assert foreign_cpu("llvm -mtriple=aarch64-linux-gnu", "x86_64") is None       # a run's target is its JSON


@pytest.fixture
def adopted_arm(tmp_path, x86):
    """fixtures/runs/mbr128 as an adopted run whose records say an aarch64 target."""
    source = tmp_path / "matmul_bias_relu.py"
    shutil.copy(ROOT / "fixtures" / "matmul_bias_relu.py", source)
    text = source.read_text()
    fn = build_outline(text, str(source)).functions[0]
    dest = tmp_path / ".asight" / "runs" / "arm"
    shutil.copytree(ROOT / "fixtures" / "runs" / "mbr128", dest)
    meta = RunMeta(id="arm", file=str(source), function=fn.id, source_hashes={fn.id: function_hash(text, fn)},
                   state="done", trials_requested=40, trials_done=40, target=ARM, best_us=115.5,
                   created=time.time(), finished=time.time())
    Run(dest).save(meta)
    return tmp_path / ".asight", source, text, fn


def test_an_adopted_aarch64_run_offers_no_profile_and_tune_stays_a_cpu_tune(adopted_arm):
    from asight_lsp.server.lens import device_target, profiles, static_lenses
    root, source, text, fn = adopted_arm
    result = Results(RunIndex(root, min_interval=0)).result(str(source), fn, function_hash(text, fn))
    assert result.meta.id == "arm" and not result.profiles_here and not result.on_device
    assert not profiles(result) and device_target(result) is None
    titles = [lens[1] for lens in static_lenses("file:///m.py", fn, 3, profiles(result), device_target(result))]
    assert titles == ["▶ Tune", "Search space", "Loop view"]
    tune = static_lenses("file:///m.py", fn, 3, profiles(result), device_target(result))[0][3]
    assert "target" not in tune                     # not a tune of the aarch64 target (that one is refused)


def test_profiling_it_anyway_says_it_was_tuned_on_aarch64_not_to_adopt_it(adopted_arm):
    from asight_lsp.services.profiling import profile_file
    root, source, _, fn = adopted_arm
    with pytest.raises(AsightError) as err:         # refused before any worker is asked (none is given)
        profile_file(str(source), fn.id, run="arm", store_root=str(root))
    said = str(err.value)
    assert said.startswith("run arm was tuned on aarch64 and its programs are aarch64 code, which cannot run on "
                           "this x86_64 machine: profile and hotspots time programs here")
    assert "adopt" not in said and "115.5 µs there" in said and "asight code --level asm" in said


def test_tuning_a_new_aarch64_run_keeps_its_refusal():
    with pytest.raises(TargetError, match="tune on aarch64 hardware and bring its work folder here"):
        require_runs_here("aarch64-linux-gnu", "x86_64")
