"""Failed candidates grouped by reason (analysis/failures.py): pure, no TVM."""
from asight_lsp.services.catalogue import RunView
from asight_lsp.analysis import failures as F

TRACEBACK = """LocalBuilder: An exception occurred
Traceback (most recent call last):
  File "/x/tvm/meta_schedule/builder/local_builder.py", line 165, in _worker_func
    rt_mod: Module = f_build(mod, target, _deserialize_params(params))
  File "/x/tvm/driver.py", line 12, in build
    raise err
tvm.error.InternalError: S_global has duplicate definitions at 0x7f3a12bc00
"""


def test_reason_is_the_error_line_not_the_builder_header_with_the_innermost_frame():
    assert F.reason(TRACEBACK) == "tvm.error.InternalError: S_global has duplicate definitions at 0x… (in build)"
    cpp = ('  File "/project/src/target/llvm/codegen_llvm.cc", line 429, in virtual llvm::Value* '
           'tvm::codegen::CodeGenLLVM::GetThreadIndex(const tvm::tirx::IterVar&)\n'
           'tvm.error.InternalError: not implemented\n')
    assert F.reason(cpp) == "tvm.error.InternalError: not implemented (in tvm::codegen::CodeGenLLVM::GetThreadIndex)"


def test_same_error_from_other_candidates_groups_numbers_and_addresses_masked():
    other = TRACEBACK.replace("0x7f3a12bc00", "0x55d0aa").replace("line 165", "line 170")
    sized = "RuntimeError: buffer of 4096 bytes exceeds 2048\n"
    groups = F.group([{"stage": "build", "message": TRACEBACK}, {"stage": "build", "message": other},
                      {"stage": "run", "message": sized},
                      {"stage": "run", "message": sized.replace("4096", "8192")}], log="/r/failures.log")
    assert [(g["count"], g["stage"]) for g in groups] == [(2, "build"), (2, "run")]
    assert groups[1]["reason"] == "RuntimeError: buffer of N bytes exceeds N"
    assert all(g["log"] == "/r/failures.log" for g in groups)


def test_different_errors_stay_apart_and_largest_comes_first():
    groups = F.group([{"stage": "run", "message": "LocalRunner: Timeout, killed after 30.0 seconds"}] +
                     [{"stage": "build", "message": TRACEBACK}] * 3)
    assert [g["count"] for g in groups] == [3, 1]
    assert groups[1]["reason"] == "LocalRunner: Timeout, killed after N seconds"


def test_empty_message_has_a_reason():
    assert F.reason("") == "failed without a message"
    assert F.reason("LocalBuilder: An exception occurred\n") == "failed without a message"


def test_merge_adds_counts_across_batches():
    a = F.group([{"stage": "build", "message": TRACEBACK}], "/l")
    b = F.group([{"stage": "build", "message": TRACEBACK}, {"stage": "run", "message": "ValueError: x"}], "/l")
    merged = F.merge(a, b)
    assert {(g["stage"], g["count"]) for g in merged} == {("build", 2), ("run", 1)}


def test_summary_lines_count_reasons_and_point_to_the_log():
    groups = F.group([{"stage": "build", "message": TRACEBACK}] * 17, "/runs/r1/failures.log")
    lines = F.summary_lines(groups)
    assert lines[0] == "17 candidate(s) failed; by reason:"
    assert "17 × build: tvm.error.InternalError: S_global has duplicate definitions" in lines[1]
    assert "(in build)" in lines[1]
    assert lines[-1].endswith("/runs/r1/failures.log")
    assert F.summary_lines([]) == []


def test_lens_tooltip_names_the_failures_with_or_without_a_measurement():
    import time
    from pathlib import Path

    from asight_lsp.server.lens import result_lens_tooltip
    from asight_lsp.services.results import FunctionResult
    from asight_lsp.store.runs import RunMeta

    groups = F.group([{"stage": "build", "message": TRACEBACK}] * 17 +
                     [{"stage": "run", "message": "RuntimeError: x"}] * 2, "/ws/.asight/runs/r/failures.log")
    meta = RunMeta(id="r", file="f.py", function="main", state="done", trials_done=32, trials_requested=32,
                   best_us=61.0, finished=time.time(), extra={"failures": groups})
    tip = result_lens_tooltip(FunctionResult("main", RunView(meta, Path("."), "fresh")))
    assert tip.startswith("19 candidate(s) failed; by reason:")
    assert "17 × build: tvm.error.InternalError: S_global has duplicate definitions" in tip
    assert "2 × run: RuntimeError: x" in tip and tip.endswith("full messages: /ws/.asight/runs/r/failures.log")
    meta.extra = {}
    assert result_lens_tooltip(FunctionResult("main", RunView(meta, Path("."), "fresh"))) is None
