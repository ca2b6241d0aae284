"""A model with TopK and CumSum next to a tuned matmul: tuned, re-measured and exported.

TVM's SplitLayoutRewritePreproc (which folds a tuned kernel's weight re-layout into the constants)
stopped at TopK's and CumSum's kernels, whose root holds no compute block ("There should be a compute
block if there is only one subtree under the root"), so such a model could be tuned but never
measured or exported (``relax_pipeline.split_layout_preproc`` sets them aside)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from tests.models.matmul_model import asight, write_model

pytestmark = [pytest.mark.tvm, pytest.mark.slow]

BODY = ['lv1: R.Tensor((4, 32), dtype="float32") = R.cumsum(lv, axis=1, dtype=None, exclusive=False)',
        'lv2: R.Tuple(R.Tensor((4, 5), dtype="float32"), R.Tensor((4, 5), dtype="int64")) = R.topk(lv1, k=5, axis=-1, '
        'ret_type="both", largest=True, dtype="int64")',
        'gv: R.Tensor((4, 5), dtype="float32") = lv2[0]']


def test_a_model_with_topk_and_cumsum_is_measured_and_exported_after_tuning(tmp_path):
    source = write_model(tmp_path, "topk", "(4, 5)", BODY)
    tuned = asight("tune", str(source), "--trials", "12", "--no-profile", cwd=tmp_path)
    assert tuned.returncode == 0, tuned.stdout + tuned.stderr
    assert "re-measurement failed" not in tuned.stdout + tuned.stderr and "measured untuned" in tuned.stdout
    # the mixed case: the matmul's record (a weight re-layout to split) beside TopK's and CumSum's kernels
    from asight_lsp.store.runs import RunStore
    from asight_lsp.worker.compat import ms, relax, tvm
    from asight_lsp.worker.relax_pipeline import PREPROC, split_layout_preproc
    run = RunStore(str(tmp_path / "home")).get("latest")
    program = _program(source)
    from asight_lsp.worker.metaschedule import resolve_target
    from asight_lsp.worker.relax_pipeline import fuse
    target = resolve_target(None)
    with target, ms.database.JSONDatabase(work_dir=str(run.path)), tvm.transform.PassContext(opt_level=3):
        applied = relax.transform.MetaScheduleApplyDatabase()(fuse(program, target, off=frozenset()))
    assert any(PREPROC in tvm.ir.save_json(f) for f in applied.functions.values())
    split = split_layout_preproc(applied)
    assert {"topk", "cumsum"} <= {gv.name_hint for gv in split.get_global_vars()}
    assert any(gv.name_hint.endswith("_weight_prepack") for gv in split.get_global_vars())
    x = np.random.default_rng(1).standard_normal((4, 16)).astype("float32")
    got = relax.VirtualMachine(tvm.compile(relax.transform.FoldConstant()(split), target=target), tvm.cpu())["main"](
        tvm.runtime.tensor(x)).numpy()
    w = np.load(tmp_path / "topk_relax.weights.npz")["w"]
    expected = -np.sort(-np.cumsum(x @ w, axis=1), axis=1)[:, :5]
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    exported = asight("export", str(source), "-o", str(tmp_path / "topk.so"), cwd=tmp_path)
    assert exported.returncode == 0, exported.stdout + exported.stderr
    assert (tmp_path / "topk.so").stat().st_size > 0 and "outputs vs the untuned build: match" in exported.stdout


def _program(source: Path):
    """The deployable module the tuning job tuned (weights bound)."""
    from asight_lsp.tvmscript.outline import build_outline
    from asight_lsp.tvmscript.pysource import source_lines
    from asight_lsp.worker.parse import parse_unit
    from asight_lsp.worker.relax_pipeline import deployable
    text = source.read_text()
    outline = build_outline(text, str(source))
    unit = outline.units[0]
    parsed = parse_unit(source_lines(text), {"start_line": unit.start_line, "end_line": unit.end_line},
                        outline.constants, outline.aliases)
    module, _ = deployable(parsed, None, str(source.with_name("topk_relax.weights.npz")))
    return module
