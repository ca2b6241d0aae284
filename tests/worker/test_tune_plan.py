"""The levers a job or request works without are a value passed down (``worker/tune_plan.py``), never a
switch read from a global:

* they are decided from the environment and the run: ``ASIGHT_LEVERS_OFF``, a run's recorded pipeline
  levers, a run made before that record (read from its workloads);
* two plans with different levers build their own kernels in one process, at the same time (a
  module-global stack of levers gave each the other's, whichever pushed last);
* the worker's request loop decides them once per request and hands them to the handler.
"""
from __future__ import annotations

import json
import threading

import numpy as np
import pytest

pytestmark = pytest.mark.tvm

CONV = """
@I.ir_module
class Module:
    @R.function
    def main(x: R.Tensor((1, 3, 8, 8), dtype="float32"),
             w: R.Tensor((4, 3, 3, 3), dtype="float32")) -> R.Tensor((1, 4, 8, 8), dtype="float32"):
        R.func_attr({"num_input": 1})
        with R.dataflow():
            lv: R.Tensor((1, 4, 8, 8), dtype="float32") = R.nn.conv2d(x, w, padding=[1, 1, 1, 1])
            lv1: R.Tensor((1, 4, 8, 8), dtype="float32") = R.nn.relu(lv)
            R.output(lv1)
        return lv1
"""


def _run_dir(root, extra: dict, workloads: str | None = None) -> str:
    from asight_lsp.store.runs import Run, RunMeta
    path = root / "runs" / f"run-{len(list(root.glob('runs/*')))}"
    Run(path).save(RunMeta(id=path.name, file=str(root / "m.py"), function="main", extra=extra))
    if workloads is not None:
        (path / "database_workload.json").write_text(workloads)
    return str(path)


def test_levers_come_from_the_environment_and_the_run(tmp_path, monkeypatch):
    from asight_lsp.worker.tune_plan import env_levers, params_levers, request_levers
    monkeypatch.setenv("ASIGHT_LEVERS_OFF", "twins,layout")
    assert env_levers() == {"twins", "layout"}
    assert request_levers(None) == params_levers({}) == {"twins", "layout"}     # no run: the environment's
    recorded = _run_dir(tmp_path, {"levers_off": ["nhwc"], "pipeline_levers": ["layout", "nhwc", "winograd"]})
    assert request_levers(recorded) == {"twins", "nhwc"}     # the run's pipeline levers, the others as now
    assert params_levers({"run_dir": recorded}) == {"twins", "nhwc"}
    before = _run_dir(tmp_path, {})                          # made before the record, no workloads file
    assert request_levers(before) == {"twins", "nhwc", "layout", "winograd"}
    marked = _run_dir(tmp_path, {}, "")                      # an empty workloads file: nothing marked
    assert request_levers(marked) == {"twins", "nhwc", "layout", "winograd"}
    assert request_levers(str(tmp_path / "runs" / "missing")) == {"twins", "nhwc", "layout", "winograd"}
    monkeypatch.setenv("ASIGHT_LEVERS_OFF", "layuot")
    with pytest.raises(ValueError, match="unknown lever"):
        request_levers(None)


def _model(tmp_path):
    from asight_lsp.worker.compat import parse_script
    from asight_lsp.worker.relax_pipeline import deployable
    np.savez(tmp_path / "w.npz", w=np.random.default_rng(0).standard_normal((4, 3, 3, 3)).astype("float32"))
    mod, bound = deployable(parse_script(CONV), "main", str(tmp_path / "w.npz"))
    assert bound == ["w"]
    return mod


def _kernels(fused) -> tuple[set, bool]:
    """(convolution layouts, whether any kernel has layout-free weights) of a fused module."""
    from asight_lsp.worker.compat import tirx
    funcs = [f for _, f in fused.functions_items() if isinstance(f, tirx.PrimFunc)]
    text = "".join(f.script() for f in funcs)
    return ({n for n in ("conv2d_nhwc", "conv2d_nchw") if f'"{n}"' in text},
            any(f.attrs is not None and "layout_free_buffers" in f.attrs for f in funcs))


def test_two_plans_with_different_levers_build_their_own_kernels_at_once(tmp_path):
    from asight_lsp.worker.metaschedule import plan_for, resolve_target
    from asight_lsp.worker.relax_pipeline import fuse
    from asight_lsp.worker.tune_plan import TunePlan
    mod, target = _model(tmp_path), resolve_target(None)
    plans = {"all on": TunePlan(None, target, None, frozenset()),
             "no layouts": TunePlan(None, target, None, frozenset({"nhwc", "layout"}))}
    start, out, errors = threading.Barrier(len(plans)), {}, []

    def build(name: str, plan: TunePlan) -> None:
        try:
            start.wait()
            out[name] = [_kernels(fuse(mod, plan.target, off=plan.levers_off)) for _ in range(3)]
        except Exception as err:  # noqa: BLE001 - reported below
            errors.append(err)

    threads = [threading.Thread(target=build, args=item) for item in plans.items()]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert out["all on"] == [({"conv2d_nhwc"}, True)] * 3            # channels-last, weights layout-free
    assert out["no layouts"] == [({"conv2d_nchw"}, False)] * 3       # the model's layout, nothing marked
    names = {p: [t.name for t in plan_for(mod, None, target, off=plan.levers_off).tasks] for p, plan in plans.items()}
    assert names["all on"] and names["no layouts"]                   # both plan tasks, each of its own kernels


def test_the_request_loop_hands_each_request_its_run_levers(tmp_path, monkeypatch):
    """``__main__._serve`` decides the levers once per request (its ``run_dir``'s, else the
    environment's) and passes them to the handler; a typo in the environment fails only a request
    whose handler needs them (or one on a run), as it did when the levers were read where used."""
    from asight_lsp.worker import __main__ as loop
    monkeypatch.setenv("ASIGHT_LEVERS_OFF", "budget")
    run = _run_dir(tmp_path, {"levers_off": ["layout"], "pipeline_levers": ["layout", "nhwc", "winograd"]})
    seen, frames = [], []

    def handler(params, emit, off):
        seen.append(off)
        return {"ok": True}

    loop._serve(handler, 1, {"run_dir": run}, None, lambda _out, frame: frames.append(frame))
    loop._serve(handler, 2, {}, None, lambda _out, frame: frames.append(frame))
    assert seen == [{"budget", "layout"}, {"budget"}]
    monkeypatch.setenv("ASIGHT_LEVERS_OFF", "layuot")
    loop._serve(handler, 3, {}, None, lambda _out, frame: frames.append(frame))
    loop._serve(handler, 4, {"run_dir": run}, None, lambda _out, frame: frames.append(frame))
    assert seen[2] is None and len(seen) == 3                        # no run: the handler decides (a ping answers)
    assert "unknown lever" in json.dumps(frames[-1]["error"])         # on a run: refused, as before
