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
WIN = {"keys": ["cpu"], "kind": "llvm", "mtriple": "x86_64-pc-windows-msvc", "mcpu": "skylake", "num-cores": 8,
       "tag": ""}


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


def test_a_triple_for_another_os_does_not_run_here():
    """Outside probe 9, F4: only the architecture was compared, so a folder tuned on Windows offered
    the Profile lens and profile/hotspots segfaulted the worker loading a Windows library."""
    assert foreign_cpu(WIN, "x86_64", "Linux") == "x86_64-pc-windows-msvc" and not runs_here(WIN, "x86_64", "Linux")
    for triple in ("x86_64-apple-darwin", "x86_64-apple-macosx10.15", "x86_64-pc-windows-gnu", "x86_64-w64-mingw32",
                   "x86_64-unknown-linux-msvc"):
        assert foreign_cpu({"kind": "llvm", "mtriple": triple}, "x86_64", "Linux") == triple, triple
    for triple in ("x86_64-unknown-linux-gnu", "x86_64-linux-gnu", "", None, "x86_64-unknown-unknown"):
        assert runs_here({"kind": "llvm", "mtriple": triple}, "x86_64", "Linux"), triple
    assert runs_here(WIN, "x86_64", "Windows") and runs_here({**WIN, "mtriple": "x86_64-apple-darwin"}, "x86_64", "Darwin")
    assert not runs_here({**WIN, "mtriple": "x86_64-unknown-linux-gnu"}, "x86_64", "Windows")
    assert foreign_cpu({**WIN, "mtriple": "aarch64-pc-windows-msvc"}, "x86_64", "Linux") == "aarch64"   # the CPU first


def test_tuning_for_another_os_is_refused_before_anything_is_built(monkeypatch):
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    with pytest.raises(TargetError, match=r"^the target's mtriple 'x86_64-pc-windows-msvc' makes code for another "
                                          r"system, which this Linux machine cannot run"):
        require_runs_here("x86_64-pc-windows-msvc", "x86_64")
    require_runs_here("x86_64-linux-gnu", "x86_64")


@pytest.fixture
def adopted_win(tmp_path, x86, monkeypatch):
    monkeypatch.setattr(platform, "system", lambda: "Linux")
    return _adopted(tmp_path, WIN, "win")


def test_an_adopted_windows_run_offers_no_profile_and_says_it_was_tuned_for_windows(adopted_win):
    from asight_lsp.server.lens import device_target, profiles, static_lenses
    from asight_lsp.services.profiling import profile_file
    root, source, text, fn = adopted_win
    result = Results(RunIndex(root, min_interval=0)).result(str(source), fn, function_hash(text, fn))
    assert result.meta.id == "win" and not result.profiles_here and not profiles(result)
    titles = [lens[1] for lens in static_lenses("file:///m.py", fn, 3, profiles(result), device_target(result))]
    assert titles == ["▶ Tune", "Search space", "Loop view"]
    with pytest.raises(AsightError) as err:         # refused before any worker is asked (none is given)
        profile_file(str(source), fn.id, run="win", store_root=str(root))
    assert str(err.value).startswith("run win was tuned for x86_64-pc-windows-msvc and its programs are that "
                                     "system's code, which cannot run on this Linux machine: profile and hotspots")


def _adopted(tmp_path, target: dict, run_id: str):
    source = tmp_path / "matmul_bias_relu.py"
    shutil.copy(ROOT / "fixtures" / "matmul_bias_relu.py", source)
    text = source.read_text()
    fn = build_outline(text, str(source)).functions[0]
    dest = tmp_path / ".asight" / "runs" / run_id
    shutil.copytree(ROOT / "fixtures" / "runs" / "mbr128", dest)
    meta = RunMeta(id=run_id, file=str(source), function=fn.id, source_hashes={fn.id: function_hash(text, fn)},
                   state="done", trials_requested=40, trials_done=40, target=target, best_us=115.5,
                   created=time.time(), finished=time.time())
    Run(dest).save(meta)
    return tmp_path / ".asight", source, text, fn


@pytest.fixture
def adopted_arm(tmp_path, x86):
    """fixtures/runs/mbr128 as an adopted run whose records say an aarch64 target."""
    return _adopted(tmp_path, ARM, "arm")


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
