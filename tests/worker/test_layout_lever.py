"""The layout lever of issue 21 (weights packed into the layout the tuned schedule reads) through the
real tuning job on the tiny imported ResNet, and the trial reserve that keeps every kernel tried.

* the tasks tuned mark their weight parameters layout-free, under the kernels' own names;
* MetaSchedule's records re-lay the convolution weights (``TransformLayout``);
* the tuned build folds that re-layout into the constants: at run time the ``*_prepacked`` kernels
  run, no ``*_weight_prepack`` does, and the outputs equal the untuned build's;
* the per-call profile maps a prepacked kernel back to its task;
* with ``ASIGHT_LEVERS_OFF=layout`` nothing is marked (the ablation's ``-layout``);
* channels-last: the convolutions on bound weights are tuned NHWC, the transforms it inserts are named
  as such (not after the model's bindings), a module whose weights are parameters keeps NCHW, and a
  run keeps the layouts it was tuned with whatever ``ASIGHT_LEVERS_OFF`` says later.
"""
from __future__ import annotations

import re
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

CONVS = {"fused_conv2d_add_relu", "fused_conv2d1_add_relu", "fused_conv2d1_add_add1_relu"}


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    base = tmp_path_factory.mktemp("layout")
    onnx_build.save(onnx_build.tiny_resnet(seed=1, size=8, width=4), base / "tiny.onnx")
    assert asight(["import", str(base / "tiny.onnx"), "--no-check"]) == 0
    mp = pytest.MonkeyPatch()
    mp.setenv("ASIGHT_TRIALS_PER_ITER", "2")
    try:    # 10 trials for 6 kernels with twin transfers: the reserve keeps one for each
        job = start_tune(TuneRequest(file=str(base / "tiny_relax.py"), function=None, trials=10,
                                     store_root=str(base), seed=0))
        meta = job.wait(900)
    finally:
        mp.undo()
    assert meta.state == "done", meta.error
    return base, job.run, meta


def _module(base: Path):
    from tests.tuned_models import deployable_module
    return deployable_module(base / "tiny_relax.py")


def _marked(mod, target, off: frozenset[str] = frozenset()) -> dict:
    from asight_lsp.worker.compat import tirx
    from asight_lsp.worker.relax_pipeline import fuse
    return {gv.name_hint: [int(i) for i in f.attrs["layout_free_buffers"]]
            for gv, f in fuse(mod, target, off=off).functions_items()
            if isinstance(f, tirx.PrimFunc) and f.attrs and "layout_free_buffers" in f.attrs}


def test_weights_are_marked_layout_free_under_the_kernels_own_names(tuned):
    from asight_lsp.worker import metaschedule as ms_side
    base, _, meta = tuned
    marked = _marked(_module(base), ms_side.resolve_target(None))
    assert CONVS <= set(marked) and all(marked[c] == [1, 2] for c in CONVS)   # weight and bias
    assert CONVS <= {t["name"] for t in meta.tasks}                             # the tasks keep those names


def test_every_kernel_got_a_trial_despite_the_transfers(tuned):
    _, _, meta = tuned
    tried = {t for t, us in meta.extra["tuning"]["best_tasks_us"].items() if us is not None}
    assert {t["name"] for t in meta.tasks} <= tried, meta.extra["tuning"]["best_tasks_us"]
    assert not any(t["name"].startswith("reshape") for t in meta.tasks)   # the flatten runs as a VM reshape


def test_the_build_packs_weights_once_and_computes_the_same(tuned):
    from asight_lsp.worker import metaschedule as ms_side
    from asight_lsp.worker.compat import relax, tvm
    from asight_lsp.worker.relax_pipeline import build_tuned, kernel_of
    base, run, _ = tuned
    target = ms_side.resolve_target(None)
    mod = _module(base)
    records = (run.path / "database_tuning_record.json").read_text()
    assert "TransformLayout" in records                  # the schedules re-lay the weights
    db = ms_side.open_database(str(run.path))
    tuned_vm = relax.VirtualMachine(build_tuned(db, mod, target, off=frozenset()), tvm.cpu())
    plain_vm = relax.VirtualMachine(tvm.compile(mod, target=target), tvm.cpu())
    x = np.random.default_rng(0).standard_normal((1, 3, 8, 8)).astype("float32")
    names = []

    def hook(func, name, before, *rest):
        if before:
            names.append(str(name))
        return 0
    tuned_vm.set_instrument(hook)
    out = tuned_vm["main"](tvm.runtime.tensor(x)).numpy()
    np.testing.assert_allclose(out, plain_vm["main"](tvm.runtime.tensor(x)).numpy(), rtol=1e-4, atol=1e-4)
    prepacked = [n for n in names if n.endswith("_prepacked")]
    assert prepacked and not any("weight_prepack" in n for n in names)   # re-laid at build time only
    assert {kernel_of(n) for n in prepacked} <= CONVS | {"fused_matmul_add2"}


def test_the_per_call_profile_maps_prepacked_kernels_to_their_call_sites(tuned):
    from asight_lsp.worker import metaschedule as ms_side
    from asight_lsp.worker import relax_profile
    from asight_lsp.worker.compat import relax, tvm
    from asight_lsp.worker.relax_pipeline import build_tuned
    base, run, _ = tuned
    target = ms_side.resolve_target(None)
    mod = _module(base)
    vm = relax.VirtualMachine(build_tuned(ms_side.open_database(str(run.path)), mod, target, off=frozenset()), tvm.cpu())
    x = tvm.runtime.tensor(np.zeros((1, 3, 8, 8), "float32"))
    per_run, _ = relax_profile._time_calls(vm, [x], 2)
    sites = relax_profile.call_sites(mod, target, fused=True, off=frozenset())
    rows = relax_profile.task_latencies(per_run, sites, {})
    assert CONVS <= {r["task"] for r in rows}
    assert all(r["mapped"] for r in rows if r["task"] in CONVS)   # each call tied to its bindings
    assert not any(r["task"].endswith("_prepacked") for r in rows)


def test_the_ablation_switch_marks_nothing(tuned, monkeypatch):
    from asight_lsp.worker import metaschedule as ms_side
    from asight_lsp.worker.tune_plan import env_levers
    base, _, _ = tuned
    monkeypatch.setenv("ASIGHT_LEVERS_OFF", "layout")
    assert _marked(_module(base), ms_side.resolve_target(None), env_levers()) == {}


def test_a_transferred_schedule_marks_its_postprocessing(tuned):
    """A twin transfer's trace enters postprocessing before the postprocessors' instructions (the
    weight re-layout among them), as MetaSchedule's own records do: a search that mutates the record
    replays it without them (a TransformLayout replayed on other tiles aborted a ResNet-18 tuning job)."""
    from asight_lsp.worker import metaschedule as ms_side
    from asight_lsp.worker import intrinsics, twins
    from asight_lsp.worker.compat import ms
    base, run, _ = tuned
    target = ms_side.resolve_target(None)
    intrinsics.prepare(target)
    mods = {t.name: t.mod for t in ms_side.plan_for(_module(base), None, target, off=frozenset()).tasks}
    donor, twin = "fused_conv2d1_add_relu", "fused_conv2d1_add_add1_relu"
    record = twins.best_record(ms_side.open_database(str(run.path)), mods[donor])
    assert record is not None
    ctx = ms.TuneContext(mod=mods[twin], target=target, space_generator="post-order-apply",
                         search_strategy="evolutionary", task_name=twin)
    sch, _ = twins.transfer(record.trace, mods[twin], ctx.space_generator.postprocs, 0)
    kinds = [i.kind.name for i in sch.trace.insts]
    assert "TransformLayout" in kinds and "EnterPostproc" in kinds
    assert kinds.index("EnterPostproc") < kinds.index("TransformLayout")


def test_an_empty_choice_builds_every_default_schedule(tuned):
    """A measurement whose every task kept its default schedule (``chosen`` = []) is a choice: the
    profile's tuned build applies no record (it applied the whole database, so the Model panel said
    "default schedule kept" and showed the tuned kernels' times under it)."""
    from asight_lsp.worker import measure
    from asight_lsp.worker import metaschedule as ms_side
    base, run, _ = tuned
    target = ms_side.resolve_target(None)
    opts = measure._options({"timing": False, "stages": False, "check": True,
                             "weights": str(base / "tiny_relax.weights.npz")})
    detail, headline = measure._profile_relax(_module(base), target, str(run.path), [], opts, "main", frozenset())
    assert headline["tuned"] == ["tuned"] and headline["check"]["ok"]    # measured, the same outputs: no "tuned —"
    assert headline["applied"]["from_records"] == []
    assert not any(r["tuned"] for r in detail["task_records"].values()), detail["task_records"]
    calls = detail["tasks"]["tuned"]["tasks"]       # the fused build with every default schedule
    assert CONVS <= {c["task"] for c in calls} and not any(c.get("weights_packed") for c in calls)
    chosen, _ = measure._profile_relax(_module(base), target, str(run.path), None, opts, "main", frozenset())
    assert any(r["tuned"] for r in chosen["task_records"].values())   # no choice at all: the fastest records


def test_export_into_a_missing_folder_says_so(tuned, capsys):
    base, run, _ = tuned
    out = base / "nope" / "sub" / "lib.so"
    assert asight(["export", str(base / "tiny_relax.py"), "--run", run.id, "--work-dir", str(base), "-o", str(out)]) != 0
    assert f"the folder {out.parent} does not exist; create it first" in capsys.readouterr().err


def _conv_blocks(fused) -> set[str]:
    from asight_lsp.worker.compat import tirx
    text = "".join(f.script() for _, f in fused.functions_items() if isinstance(f, tirx.PrimFunc))
    return {name for name in ("conv2d_nhwc", "conv2d_nchw") if f'"{name}"' in text}


def test_convolutions_on_bound_weights_are_tuned_channels_last(tuned):
    from asight_lsp.worker import metaschedule as ms_side
    from asight_lsp.worker.compat import relax, tvm
    from asight_lsp.store.database import workloads_text
    from asight_lsp.worker.relax_pipeline import bindings, converted, fuse
    base, run, meta = tuned
    target = ms_side.resolve_target(None)
    mod = _module(base)
    assert _conv_blocks(fuse(mod, target, off=frozenset())) == {"conv2d_nhwc"}
    assert "conv2d_nhwc" in workloads_text(run.path)                            # what the run tuned
    names = [b.var.name for b in bindings(converted(mod, target, off=frozenset())["main"])]
    own = [b.var.name for b in bindings(mod["main"])]
    added = [n for n in names if n not in own]
    assert added and all(n.startswith("layout_transform") for n in added)      # no transform under a model name
    assert sorted(n for n in names if n in own) == sorted(own)                  # every binding of the model kept
    unbound = _module_with_parameters(base)
    assert _conv_blocks(fuse(unbound, target, off=frozenset())) == {"conv2d_nchw"}   # a weight parameter: its layout kept
    x = tvm.runtime.tensor(np.random.default_rng(1).standard_normal((1, 3, 8, 8)).astype("float32"))
    outs = [relax.VirtualMachine(tvm.compile(m, target=target), tvm.cpu())["main"](x).numpy()
            for m in (mod, converted(mod, target, off=frozenset()))]
    np.testing.assert_allclose(outs[0], outs[1], rtol=1e-4, atol=1e-4)


def _module_with_parameters(base: Path):
    from asight_lsp.tvmscript.outline import build_outline
    from asight_lsp.worker.parse import parse_unit
    text = (base / "tiny_relax.py").read_text()
    unit = build_outline(text).units[0]
    outline = build_outline(text)
    return parse_unit(text.splitlines(), {"start_line": unit.start_line, "end_line": unit.end_line},
                      outline.constants, outline.aliases)


def test_a_run_keeps_the_layouts_it_was_tuned_with(tuned, monkeypatch):
    from asight_lsp.worker import metaschedule as ms_side
    from asight_lsp.worker.relax_pipeline import channels_last, prepacks
    from asight_lsp.worker.tune_plan import env_levers, request_levers
    _, run, meta = tuned
    target = ms_side.resolve_target(None)
    assert meta.extra["levers_off"] == []                       # recorded when the run was made
    monkeypatch.setenv("ASIGHT_LEVERS_OFF", "nhwc,layout,twins")
    now = env_levers()
    assert channels_last(target, off=now) is None and not prepacks(target, off=now)
    on_run = request_levers(str(run.path))                      # a job on the run: its own layouts
    assert channels_last(target, off=on_run) and prepacks(target, off=on_run)
    assert on_run == {"twins"}                                  # the other levers: the environment's
    assert request_levers(None) == now                          # a request without a run: the environment's


def test_a_run_made_before_the_record_is_read_as_it_was_tuned(tuned, tmp_path):
    """Runs made before channels-last existed were tuned NCHW: their export and views keep NCHW (else
    every kernel lacks a record and the export refuses), and pack weights where their workloads did."""
    import json
    import shutil
    from asight_lsp.worker.tune_plan import run_levers
    _, run, _ = tuned
    old = tmp_path / run.id
    shutil.copytree(run.path, old)
    data = json.loads((old / "run.json").read_text())
    data["extra"].pop("levers_off")
    (old / "run.json").write_text(json.dumps(data))
    assert run_levers(str(old), set()) == {"nhwc"}                 # its workloads carry layout_free_buffers
    (old / "database_workload.json").unlink()
    assert run_levers(str(old), set()) == {"nhwc", "layout"}


CONV_THEN_TRANSPOSE = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 3, 8, 8), dtype="float32"), w: R.Tensor((4, 3, 3, 3), dtype="float32"),
             wt: R.Tensor((4, 2, 2, 2), dtype="float32")) -> R.Tensor((1, 2, 16, 16), dtype="float32"):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            lv: R.Tensor((1, 4, 8, 8), dtype="float32") = R.nn.conv2d(x, w, padding=[1, 1, 1, 1])
            lv1: R.Tensor((1, 2, 16, 16), dtype="float32") = R.nn.conv2d_transpose(lv, wt, strides=[2, 2])
            R.output(lv1)
        return lv1
"""


def test_a_transposed_convolution_after_a_converted_one_keeps_its_layout(tmp_path):
    """A U-Net's ConvTranspose reads a convolution's output: ConvertLayout gave it that output's NHWC,
    which TVM cannot lower, and the model failed to build ("CodeGenVM cannot emit this Relax operator
    directly").  It keeps NCHW (a transform before it) and computes what the unconverted model does."""
    from asight_lsp.worker import metaschedule as ms_side
    from asight_lsp.worker.compat import parse_script, relax, tvm
    from asight_lsp.worker.relax_pipeline import deployable, fuse, legalize
    rng = np.random.default_rng(0)
    np.savez(tmp_path / "w.npz", w=rng.standard_normal((4, 3, 3, 3)).astype("float32"),
             wt=rng.standard_normal((4, 2, 2, 2)).astype("float32"))
    mod, bound = deployable(parse_script(CONV_THEN_TRANSPOSE), "main", str(tmp_path / "w.npz"))
    assert bound == ["w", "wt"]
    target = ms_side.resolve_target(None)
    left = {getattr(b.value.op, "name", "") for b in legalize(mod, target, off=frozenset())["main"].body.blocks[0].bindings}
    assert left <= {"relax.call_tir", ""}                                   # every operator lowered
    assert _conv_blocks(fuse(mod, target, off=frozenset())) == {"conv2d_nhwc"}   # the convolution still converted
    x = tvm.runtime.tensor(rng.standard_normal((1, 3, 8, 8)).astype("float32"))
    plain = relax.VirtualMachine(tvm.compile(mod, target=target), tvm.cpu())["main"](x).numpy()
    lowered = relax.VirtualMachine(tvm.compile(legalize(mod, target, off=frozenset()), target=target),
                                   tvm.cpu())["main"](x).numpy()
    np.testing.assert_allclose(lowered, plain, rtol=1e-4, atol=1e-4)


def test_a_weight_of_another_shape_or_dtype_is_refused(tmp_path):
    """A weights file whose array is not its parameter's shape (or dtype) built another model without
    a word (a 5x5 kernel where the file declares 3x3); it is refused, naming both."""
    from asight_lsp.worker.compat import parse_script
    from asight_lsp.worker.relax_pipeline import deployable
    rng = np.random.default_rng(0)
    good = {"w": rng.standard_normal((4, 3, 3, 3)).astype("float32"), "wt": rng.standard_normal((4, 2, 2, 2)).astype("float32")}
    for name, bad, words in (("shape", {**good, "w": np.zeros((4, 3, 5, 5), "float32")}, "has shape (4, 3, 5, 5), but the model declares (4, 3, 3, 3)"),
                             ("dtype", {**good, "wt": good["wt"].astype("float64")}, "'wt' in")):
        np.savez(tmp_path / f"{name}.npz", **bad)
        with pytest.raises(ValueError, match=re.escape(words)):
            deployable(parse_script(CONV_THEN_TRANSPOSE), "main", str(tmp_path / f"{name}.npz"))
    (tmp_path / "text.npz").write_text("not an npz")
    with pytest.raises(ValueError, match="is not a readable .npz of arrays"):
        deployable(parse_script(CONV_THEN_TRANSPOSE), "main", str(tmp_path / "text.npz"))
    # a weight missing from the file stayed an input: another program than the one tuned, said as such
    np.savez(tmp_path / "missing.npz", w=good["w"])
    with pytest.raises(ValueError, match=re.escape("has no array for 'wt' (1 of the model's 2 weights are there")):
        deployable(parse_script(CONV_THEN_TRANSPOSE), "main", str(tmp_path / "missing.npz"))
