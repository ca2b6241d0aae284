"""A real tune that measures fewer trials than asked says why, with counts (analysis/shortfall.py):
builds that time out, a design space that runs out; and the GPU cause found on CPU-side IR: a function
whose T.alloc_buffer statements stay in the body gets every sampled schedule rejected by VerifyGPUCode."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from asight_lsp.store.runs import RunStore
from asight_lsp.views.runs import run_summary

pytestmark = [pytest.mark.tvm, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
TINY = '''from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def add_one(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
    for i in range(4):
        with T.sblock("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] + T.float32(1)
'''


def tune(src: Path, store: Path, trials: int, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "asight_lsp", "tune", str(src), "--trials", str(trials),
                           "--work-dir", str(store)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "ASIGHT_TRIALS_PER_ITER": "8", **env})


def test_builds_that_time_out_fail_the_run_with_the_count(tmp_path):
    store = tmp_path / ".asight"
    proc = tune(ROOT / "fixtures" / "matmul64.py", store, 8, ASIGHT_BUILD_TIMEOUT_S="0.001")   # no build finishes in 1 ms (50 ms did, once)
    assert proc.returncode == 2, proc.stderr
    meta = RunStore(str(store)).get("latest").load()
    short = meta.extra["shortfall"]
    assert (short["measured"], short["requested"], short["build_timeout"]) == (0, 8, 8)
    assert meta.state == "failed" and meta.error.startswith("measured 0 of 8 trials: 8 build(s) timed out")
    assert "why      measured 0 of 8 trials: 8 build(s) timed out" in proc.stdout
    assert run_summary(meta)["shortfall"] == short["text"]


def test_a_space_that_runs_out_says_so_and_keeps_what_it_measured(tmp_path):
    src = tmp_path / "tiny.py"
    src.write_text(TINY)
    store = tmp_path / ".asight"
    proc = tune(src, store, 32)
    assert proc.returncode == 0, proc.stderr
    meta = RunStore(str(store)).get("latest").load()
    short = meta.extra["shortfall"]
    assert meta.state == "done" and short["measured"] == meta.trials_done < 32
    assert short["not_proposed"] == 32 - meta.trials_done
    assert short["search_ended"] and short["search_ended"][0]["why"] in ("sampling", "repeats")
    assert f"why      measured {meta.trials_done} of 32 trials: {32 - meta.trials_done} never proposed" in proc.stdout


def test_gpu_space_samples_only_once_the_allocations_sit_in_the_root_block():
    """The cause of "done, 0 of 32 trials" on an H100, checked on CPU-side IR for nvidia/nvidia-h100."""
    from asight_lsp.tvmscript.outline import build_outline
    from asight_lsp.worker import metaschedule as M
    from asight_lsp.worker.compat import ms
    from asight_lsp.worker.intrinsics import gpu_intrinsics
    from asight_lsp.worker.parse import parse_unit
    gpu_intrinsics()
    text = (ROOT / "fixtures" / "matmul_bias_relu.py").read_text()
    outline = build_outline(text, "mbr.py")
    unit = outline.units[0]
    parsed = parse_unit(text.splitlines(), {"start_line": unit.start_line, "end_line": unit.end_line},
                        outline.constants, outline.aliases)
    target = M.resolve_target("nvidia/nvidia-h100")

    def sampled(mod):
        ctx = ms.TuneContext(mod=mod, target=target, space_generator="post-order-apply",
                             search_strategy="evolutionary", num_threads=1).clone()
        ctx.pre_tuning(max_trials=8, num_trials_per_iter=8, design_spaces=ctx.generate_design_space(),
                       database=ms.database.MemoryDatabase(), cost_model=ms.cost_model.RandomModel())
        return ctx.search_strategy.generate_measure_candidates()

    as_parsed = M.plan_for(parsed, None, target, off=frozenset())
    assert sampled(as_parsed.tasks[0].mod) is None          # VerifyGPUCode rejects every sample
    ready = M.gpu_ready(M.plan_for(parsed, None, target, off=frozenset()), target)
    assert len(sampled(ready.tasks[0].mod)) == 8
    cpu = M.resolve_target("llvm")
    plain = M.plan_for(parsed, None, cpu, off=frozenset())
    assert M.gpu_ready(plain, cpu).tasks[0].mod.same_as(plain.tasks[0].mod)   # CPU runs keep their hashes
