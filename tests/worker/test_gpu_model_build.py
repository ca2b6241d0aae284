"""A model's tuned build for a GPU (issue 20, item 7): the kernels with a record run the record's
schedule, the others DLight's default (TIR without thread binding cannot run on a GPU), and the
library exports.  Built here for the H100's tag without a GPU (TVM's CUDA codegen needs no device);
the record is a MetaSchedule design-space sample of the kernel (what a tuning run commits), not a
measured one.  Loading and timing the library needs a GPU: not here."""
from __future__ import annotations

import re

import numpy as np
import pytest

pytestmark = [pytest.mark.tvm]

LAUNCH = re.compile(r'extern "C" __global__ void (?:__launch_bounds__\((\d+)\) )?(\w+?)_kernel')


def model():
    from tvm.script import ir as I
    from tvm.script import relax as R
    weight = np.random.default_rng(0).standard_normal((128, 256)).astype("float32")

    @I.ir_module
    class Module:
        @R.function
        def main(x: R.Tensor((64, 128), "float32")):
            R.func_attr({"num_input": 1})
            with R.dataflow():
                lv = R.matmul(x, R.const(weight))
                lv1 = R.nn.relu(lv)
                gv = R.sum(lv1, axis=[1])
                R.output(gv)
            return gv
    return Module


def launch_bounds(executable) -> dict[str, int]:
    """Threads a block of each CUDA kernel in a built library (TVM's generated CUDA source)."""
    def sources(module):
        own = module.inspect_source() if module.kind == "cuda" else ""
        return own + "".join(sources(m) for m in module.imports)
    return {name: int(threads or 1) for threads, name in LAUNCH.findall(sources(executable.mod))}


def test_a_gpu_model_build_runs_the_records_schedule_and_dlight_elsewhere(tmp_path):
    from asight_lsp.worker.compat import ms, tvm
    from asight_lsp.worker.relax_pipeline import build_tuned, fuse
    from tvm.s_tir.meta_schedule.tune_context import _normalize_mod
    target = tvm.target.Target("nvidia/nvidia-h100")
    mod = model()
    fused = fuse(mod, target)
    kernel = _normalize_mod(fused[next(gv for gv in fused.get_global_vars() if gv.name_hint == "fused_matmul_relu")])
    context = ms.TuneContext(mod=kernel, target=target, space_generator="post-order-apply",
                             search_strategy="replay-trace", num_threads=1, rand_state=0)
    sample = context.generate_design_space()[0]
    database = ms.database.MemoryDatabase()
    database.commit_tuning_record(ms.database.TuningRecord(
        sample.trace, database.commit_workload(kernel), [2e-6], target, ms.arg_info.ArgInfo.from_prim_func(kernel["main"])))

    built = launch_bounds(build_tuned(database, mod, target))
    alone = launch_bounds(tvm.compile(sample.mod, target=target))          # the record's schedule, built alone
    dlight = launch_bounds(tvm.compile(mod, target=target))               # TVM without records: DLight
    assert set(built) == {"fused_matmul_relu", "sum"}
    assert built["fused_matmul_relu"] == alone["main"]
    assert built["sum"] == dlight["sum"]                                   # no record: DLight's schedule
    library = tmp_path / "model.so"
    build_tuned(database, mod, target).export_library(str(library))
    assert library.stat().st_size > 0
