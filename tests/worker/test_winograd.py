"""The Winograd lever of issue 21 (``worker/winograd.py``; rule ``analysis/levers.winograd_fits``)
through TVM and the real tuning job, on a ResNet-style model whose block convolutions are large
enough (96 channels at 16x16: 21 M multiply-adds each) and whose stem is not (3 input channels):

* the convolutions that fit are rewritten under their bindings' names, the others are not, and the
  rewritten module computes what the model computes;
* a tuning job tunes them as ``conv2d_winograd`` kernels (the epilogue fused), twins among them whose
  schedules transfer, and the tuned build computes what the untuned build does;
* ``ASIGHT_LEVERS_OFF=winograd`` keeps the direct convolution, and a run keeps the form it was tuned
  with whatever the switch says later (its export finds a record for every kernel).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from asight_lsp.cli import main as asight
from asight_lsp.services.tuning import TuneRequest, start_tune

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "fixtures" / "models"))
onnx_build = pytest.importorskip("onnx_build")

pytestmark = [pytest.mark.tvm, pytest.mark.slow]

SIZE, WIDTH = 16, 96


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    base = tmp_path_factory.mktemp("winograd")
    onnx_build.save(onnx_build.tiny_resnet(seed=2, size=SIZE, width=WIDTH), base / "wide.onnx")
    assert asight(["import", str(base / "wide.onnx"), "--no-check"]) == 0
    return base


def _module(base: Path):
    from tests.tuned_models import deployable_module
    return deployable_module(base / "wide_relax.py")


def _run(mod, target, x):
    from asight_lsp.worker.compat import relax, tvm
    vm = relax.VirtualMachine(tvm.compile(mod, target=target), tvm.cpu())
    return vm["main"](tvm.runtime.tensor(x)).numpy()


def _calls(func) -> dict:
    from asight_lsp.worker.relax_pipeline import bindings
    out = {}
    for b in bindings(func):
        op = getattr(b.value, "op", None)
        name = getattr(op, "name", None)
        if name == "relax.call_tir":
            name = b.value.args[0].name_hint
        out[b.var.name] = name
    return out


def test_the_block_convolutions_are_rewritten_under_their_names_and_compute_the_same(model):
    from asight_lsp.worker import metaschedule as ms_side
    from asight_lsp.worker.relax_pipeline import converted
    target = ms_side.resolve_target(None)
    mod = _module(model)
    before = _calls(mod["main"])
    after = _calls(converted(mod, target, off=frozenset())["main"])
    convs = [v for v, op in before.items() if op == "relax.nn.conv2d"]
    rewritten = [v for v in convs if str(after.get(v, "")).startswith("conv2d_winograd")]
    assert len(convs) == 5 and len(rewritten) == 4, after       # the stem (3 channels in) stays direct
    assert after[next(v for v in convs if v not in rewritten)] == "relax.nn.conv2d"
    x = np.random.default_rng(0).standard_normal((1, 3, SIZE, SIZE)).astype("float32")
    np.testing.assert_allclose(_run(converted(mod, target, off=frozenset()), target, x), _run(mod, target, x),
                               rtol=1e-4, atol=1e-4)


def test_the_switch_keeps_the_direct_convolution(model, monkeypatch):
    from asight_lsp.worker import metaschedule as ms_side
    from asight_lsp.worker.relax_pipeline import converted
    from asight_lsp.worker.tune_plan import env_levers
    monkeypatch.setenv("ASIGHT_LEVERS_OFF", "winograd")
    after = _calls(converted(_module(model), ms_side.resolve_target(None), off=env_levers())["main"])
    assert not any(str(op).startswith("conv2d_winograd") for op in after.values())


@pytest.fixture(scope="module")
def tuned(model):
    mp = pytest.MonkeyPatch()
    mp.setenv("ASIGHT_TRIALS_PER_ITER", "2")
    try:
        job = start_tune(TuneRequest(file=str(model / "wide_relax.py"), function=None, trials=12,
                                     store_root=str(model), seed=0))
        meta = job.wait(900)
    finally:
        mp.undo()
    assert meta.state == "done", meta.error
    return job.run, meta


def test_a_tuning_job_tunes_winograd_kernels_and_the_build_computes_the_same(model, tuned):
    from asight_lsp.worker import metaschedule as ms_side
    from asight_lsp.worker.relax_pipeline import build_tuned
    from asight_lsp.worker.compat import relax, tvm
    run, meta = tuned
    names = {t["name"] for t in meta.tasks}
    wino = sorted(n for n in names if "conv2d_winograd" in n)
    assert len(wino) == 2 and any("add" in n and "relu" in n for n in wino), names   # two twins, epilogues fused
    assert meta.extra["pipeline_levers"] and "winograd" not in meta.extra["levers_off"]
    relations = meta.extra["twins"]["relations"]
    assert relations[wino[0]]["op"] == "bgemm" and relations[wino[0]]["twins"] == [wino[1]], relations
    # a twin's schedule replays onto the other (its trace reaches the transform matrices by get_producers:
    # inlined first, the replay failed "2 vs. 1" outputs on every transfer)
    transfers = [t for t in meta.extra["twins"]["transfers"] if t["task"] in wino]
    assert transfers and not any(t.get("error") for t in transfers), transfers
    target = ms_side.resolve_target(None)
    mod = _module(model)
    vm = relax.VirtualMachine(build_tuned(ms_side.open_database(str(run.path)), mod, target, off=frozenset()), tvm.cpu())
    x = np.random.default_rng(1).standard_normal((1, 3, SIZE, SIZE)).astype("float32")
    out = vm["main"](tvm.runtime.tensor(x)).numpy()
    np.testing.assert_allclose(out, _run(mod, target, x), rtol=1e-3, atol=1e-4)


def test_a_run_keeps_its_winograd_kernels_when_the_switch_is_set_later(model, tuned, monkeypatch, capsys):
    run, _ = tuned
    monkeypatch.setenv("ASIGHT_LEVERS_OFF", "winograd")
    lib = model / "wide.so"
    assert asight(["export", str(model / "wide_relax.py"), "--run", run.id, "--work-dir", str(model),
                   "-o", str(lib)]) == 0, capsys.readouterr().err
    assert lib.exists() and "no record" not in capsys.readouterr().out
