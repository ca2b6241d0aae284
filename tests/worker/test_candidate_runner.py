"""The tuning runner on the CPU (``worker/candidate_runner.py``, docs/sandbox.md): every candidate runs
in a sandboxed worker that answers with data.  MetaSchedule's LocalRunner sent results back pickled
to the unsandboxed tuning job (red team round 8: a runner taken over by its candidate could run
anything there).  A candidate that crashes its runner is one failed trial, said as such; the next runs."""
from __future__ import annotations

import math

import pytest

pytestmark = pytest.mark.tvm

GOOD = '''from tvm.script import tirx as T


@T.prim_func(s_tir=True)
def k(A: T.Buffer((16,), "int64"), B: T.Buffer((16,), "int64")):
    T.func_attr({"global_symbol": "k", "tir.noalias": True})
    for i in range(16):
        with T.sblock("B"):
            vi = T.axis.remap("S", [i])
            B[vi] = A[vi] + T.int64(1)
'''

# a store through a pointer forged from an input (zero in the runner): no call by name, a crash
POKE = GOOD.replace("            B[vi] = A[vi] + T.int64(1)\n", '''            T.reads(A[0:16])
            T.writes(B[vi])
            P = T.decl_buffer((1,), "int64", data=T.reinterpret("handle", A[0]))
            P[0] = A[1]
            B[vi] = A[vi]
''')


def _artifact(text: str) -> str:
    from asight_lsp.worker.compat import parse_script, tvm
    from asight_lsp.worker.builder import export_shared
    from asight_lsp.worker.metaschedule import resolve_target
    start = text.index("@T.prim_func")
    func = parse_script("\n" * text[:start].count("\n") + text[start:], {}, {"T": "tirx"})
    return export_shared(tvm.tirx.build(tvm.IRModule({"main": func}), target=resolve_target(None)))


def _input(artifact: str):
    from asight_lsp.worker.compat import ms
    args = [ms.arg_info.TensorInfo("int64", [16]), ms.arg_info.TensorInfo("int64", [16])]
    return ms.runner.RunnerInput(artifact, "cpu", args)


def test_a_crashing_candidate_is_one_failed_trial_and_the_next_one_runs():
    from asight_lsp.worker.metaschedule import make_runner
    runner = make_runner()
    try:
        crashed, good = [f.result() for f in runner.run([_input(_artifact(POKE)), _input(_artifact(GOOD))])]
        assert runner.worker().sandbox["active"] is True and runner.worker().restarts == 1
    finally:
        runner.close()
    assert crashed.run_secs is None and "crashed its sandboxed runner process (SIGSEGV" in crashed.error_msg
    assert good.error_msg is None and len(good.run_secs) >= 1 and all(float(s) > 0 for s in good.run_secs)


def test_the_runners_answer_is_data_checked_before_use():
    from asight_lsp.worker.candidate_runner import costs_of
    assert costs_of({"costs": [1e-5, 2.5e-5]}) == [1e-5, 2.5e-5]
    for bad in (None, [], {"costs": []}, {"costs": "1e-5"}, {"costs": ["x"]}, {"costs": [math.nan]},
                {"costs": [-1.0]}, {"costs": [0]}, {"costs": [True]}, {"costs": [math.inf]}, {"costs": [1e-5] * 10_001}):
        with pytest.raises(ValueError):
            costs_of(bad)


def test_candidates_run_only_in_a_sandboxed_worker():
    from asight_lsp.worker.candidate_runner import run_candidate
    with pytest.raises(PermissionError, match="only in a sandboxed worker"):
        run_candidate({"artifact": "/nonexistent.so", "args": []})
