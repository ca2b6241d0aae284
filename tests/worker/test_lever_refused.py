"""A lever TVM refuses is skipped where it was refused, named, and the run finishes (issue 38), through
the real tuning job; a data-movement kernel no trial reached is kept on its default schedule, not
missing at export.

The model is the smallest that triggers TVM's own refusal (no forced failure): two convolutions on
bound weights and an ONNX ``Sum``, which the importer writes as broadcast_to + stack + sum;
ConvertLayout (the ``nhwc`` lever) cannot carry channels-last through the 5-D stack ("Invalid SLayout:
can't find S in source layout ABCDE", as in the zoo's ResNet-50 and ShuffleNet).  ShuffleNet's channel
shuffle (Reshape to 5-D, Transpose, Reshape) follows, a kernel that only moves data.  One tuning job of
one trial (the heaviest kernel's; the shuffle is never tried): the job's fixed costs (baseline, the
re-measurement) are most of its ~1-2 min here.
"""
from __future__ import annotations

import numpy as np
import pytest

from asight_lsp.cli import main as asight
from asight_lsp.services.tuning import TuneRequest, start_tune

onnx = pytest.importorskip("onnx")

pytestmark = [pytest.mark.tvm, pytest.mark.slow]


def sum_shuffle_model(c: int = 4, size: int = 4):
    """x -> conv3x3, conv1x1 -> Sum -> channel shuffle (2 groups) -> y; seeded weights, opset 17."""
    from onnx import TensorProto, helper, numpy_helper
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal(s) * 0.2).astype(np.float32), n) for n, s in
             (("wa", (c, c, 3, 3)), ("ba", (c,)), ("wb", (c, c, 1, 1)), ("bb", (c,)))]
    inits += [numpy_helper.from_array(np.array(s, np.int64), n) for n, s in
              (("s5", [1, 2, c // 2, size, size]), ("s4", [1, c, size, size]))]
    nodes = [helper.make_node("Conv", ["x", "wa", "ba"], ["a"], pads=[1, 1, 1, 1]),
             helper.make_node("Conv", ["x", "wb", "bb"], ["b"]),
             helper.make_node("Sum", ["a", "b"], ["s"]),
             helper.make_node("Reshape", ["s", "s5"], ["r"]),
             helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1, 3, 4]),
             helper.make_node("Reshape", ["t", "s4"], ["y"])]
    io = [helper.make_tensor_value_info(n, TensorProto.FLOAT, (1, c, size, size)) for n in ("x", "y")]
    return helper.make_model(helper.make_graph(nodes, "sum_shuffle", io[:1], io[1:], inits),
                             opset_imports=[helper.make_opsetid("", 17)])


@pytest.fixture(scope="module")
def tuned(tmp_path_factory):
    base = tmp_path_factory.mktemp("refused")
    onnx.save(sum_shuffle_model(), base / "m.onnx")
    assert asight(["import", str(base / "m.onnx"), "--no-check"]) == 0
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ASIGHT_TRIALS_PER_ITER", "1")
        job = start_tune(TuneRequest(file=str(base / "m_relax.py"), function=None, trials=1,
                                     store_root=str(base / "store"), seed=0))
        meta = job.wait(900)
    return base, job, meta


def test_refused_lever_is_skipped_named_and_the_run_finishes(tuned):
    from asight_lsp.analysis.levers import REFUSED_KEY, refusal_lines
    _, job, meta = tuned
    assert meta.state == "done", meta.error
    refused = meta.extra[REFUSED_KEY]
    assert {r["lever"] for r in refused} == {"nhwc"}
    assert len({r["kernel"] for r in refused}) == 2 and all("conv2d" in r["kernel"] for r in refused)
    assert all("Invalid SLayout" in r["reason"] and "\n" not in r["reason"] for r in refused)
    said = [e["message"] for e in job.run.events() if e.get("stage") == "lever"]
    assert said == refusal_lines(meta.extra)
    assert meta.measurement and meta.measurement["check"]["ok"]


def test_data_movement_kernel_is_kept_not_missing_at_export(tuned, capsys):
    from asight_lsp.analysis.default_candidate import NOTHING_TO_TUNE
    from asight_lsp.services.export import export_model
    base, _, meta = tuned
    kept = {d["task"] for d in meta.measurement["defaults"] if d.get("default") == NOTHING_TO_TUNE}
    assert any("transpose" in t for t in kept), meta.measurement["defaults"]
    reply = export_model(str(base / "m_relax.py"), str(base / "m.so"), meta.id, store_root=str(base / "store"),
                         allow_untuned=True, measure=False)
    applied = reply["applied"]
    assert kept <= set(applied["nothing_to_tune"]) <= set(applied["default_kept"]) and not kept & set(applied["missing"])
    assert len(reply["levers_refused_text"]) == 2 and reply["check"]["ok"]


def test_a_tvm_error_in_a_step_names_the_step_and_what_to_do(tmp_path):
    """No tuning: TVM's own refusal raised inside a pipeline step is said with the step, TVM's reason
    in one line and what to do; asight's own words pass through unchanged."""
    from asight_lsp.worker.compat import relax
    from asight_lsp.worker.steps import StepFailed, step
    from tvm.relax.frontend.onnx import from_onnx
    mod = from_onnx(sum_shuffle_model())
    with pytest.raises(StepFailed) as got:
        with step("lowering the model", "report it", lambda: "fused_stack_sum"):
            relax.transform.ConvertLayout({"relax.nn.conv2d": ["NHWC", "OHWI"]})(mod)
    assert str(got.value).startswith("lowering the model failed in kernel fused_stack_sum: InternalError: Invalid "
                                      "SLayout") and str(got.value).endswith("; report it")
    from asight_lsp.worker.relax_pipeline import load_weights
    with pytest.raises(ValueError, match="^the weights file"):
        with step("lowering the model", "report it"):
            load_weights(str(tmp_path / "none.npz"))


def test_the_pipeline_converts_what_tvm_takes_and_keeps_the_rest():
    """No tuning: ``relax_pipeline.converted`` on the Sum model leaves both convolutions NCHW and names
    them; on a model TVM takes whole nothing is refused."""
    from asight_lsp.worker import lever_guard
    from asight_lsp.worker.metaschedule import resolve_target
    from asight_lsp.worker.relax_pipeline import converted
    from tvm.relax.frontend.onnx import from_onnx
    lever_guard.start()
    out = converted(from_onnx(sum_shuffle_model()), resolve_target(None), off=frozenset())
    assert 'data_layout="NHWC"' not in out.script()
    assert sorted(r["kernel"].split()[1] for r in lever_guard.refused()) == ["lv", "lv2"]
