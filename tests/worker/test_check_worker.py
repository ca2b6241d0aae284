"""Diagnostics through the real TVM worker, and the worker's crash/restart behaviour."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from asight_lsp.errors import WorkerCrashed, WorkerTimeout
from asight_lsp.tvmscript.diagnostics import check_text
from tests.conftest import FIXTURES, ROOT, fixture_text

pytestmark = pytest.mark.tvm

CLEAN = ["matmul.py", "matmul64.py", "matmul_bias_relu.py", "conv2d_nhwc.py", "depthwise_conv2d.py",
         "batch_matmul.py", "softmax.py", "relax_cnn.py"]

# file -> [(0-based line, 0-based col, source, text in message)]
BROKEN = {
    "syntax_error.py": [(5, 22, "python", "expected ':'")],
    "undefined_name.py": [(8, 28, "safety", "'Bias'")],
    "bad_namespace_call.py": [(5, 13, "safety", "'T.grd' is not part of TVMScript")],  # by exact member
    "wrong_arity.py": [(7, 21, "tvmscript", "kinds.size() == bindings.size()")],
    "not_well_formed.py": [(12, 12, "well-formed", "Loop iterator var i")],
    "one_of_two_broken.py": [(16, 22, "python", "never closed")],
}


@pytest.mark.parametrize("name", CLEAN)
def test_clean_fixture_has_no_diagnostics(name, worker):
    result = check_text(fixture_text(name), name, worker)
    assert result.diagnostics == []
    assert result.parsed_units == [u.name for u in result.outline.units]


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_broken_fixture_diagnostics_at_exact_place(name, worker):
    result = check_text(fixture_text(f"broken/{name}"), name, worker)
    found = [(d["range"]["start"]["line"], d["range"]["start"]["character"], d["source"], d["message"])
             for d in result.diagnostics]
    assert len(found) == len(BROKEN[name]), found
    for (line, col, source, text), got in zip(BROKEN[name], found):
        assert got[:3] == (line, col, source), got
        assert text in got[3]


def test_well_formed_error_points_at_the_statement_not_1_1(worker):
    text = fixture_text("broken/not_well_formed.py")
    [diag] = check_text(text, "x", worker).diagnostics
    line = text.splitlines()[diag["range"]["start"]["line"]]
    assert line.strip() == "B[i] = B[vi] + T.float32(1)"


def test_one_broken_unit_does_not_hide_the_others(worker):
    text = fixture_text("matmul64.py") + "\n\n" + fixture_text("broken/bad_namespace_call.py").split("\n", 1)[1]
    result = check_text(text, "x", worker)
    assert result.parsed_units == ["matmul64"]
    assert [d["source"] for d in result.diagnostics] == ["safety"]
    wrong_arity = fixture_text("matmul64.py") + "\n\n" + fixture_text("broken/wrong_arity.py").split("\n", 1)[1]
    result = check_text(wrong_arity, "x", worker)
    assert result.parsed_units == ["matmul64"] and [d["source"] for d in result.diagnostics] == ["tvmscript"]


def test_hostile_files_never_reach_tvm(worker, tmp_path, monkeypatch):
    """Refused statically, or (a shape string computed at parse time) when Relax evaluates it; a
    text_* payload is a comment (issue 22): only the unit ``ok`` the gate read reaches TVM, cleanly.
    Every payload through the CLI: tests/worker/test_gate.py."""
    monkeypatch.chdir(tmp_path)
    for path in sorted((FIXTURES / "hostile").glob("*.py")):
        result = check_text(path.read_text(), path.name, worker)
        if path.name.startswith("text_"):
            assert result.parsed_units == ["ok"] and result.diagnostics == [], path.name
            continue
        assert result.parsed_units == []
        assert any(d["message"].startswith("not evaluated") for d in result.diagnostics), path.name
    assert not (tmp_path / "ASIGHT_PWNED").exists()


@pytest.mark.parametrize("text", [b"", bytes(range(256)) * 64, b"\xff\xfe garbage \x00",
                                  b"@T.prim_func\ndef f(A: T.Buffer((8,), 'float32')):\n    A[0] = "
                                  + b"(" * 3000 + b"1" + b")" * 3000 + b"\n"])
def test_garbage_input_gives_a_diagnostic_not_a_crash(text, worker):
    result = check_text(text, "garbage", worker)
    if text:
        assert result.diagnostics and result.diagnostics[0]["severity"] == "error"
    assert worker.request("ping")["pid"]


def test_ten_megabyte_file(worker, tmp_path):
    big = tmp_path / "big.py"
    big.write_text(fixture_text("matmul64.py") + "# padding\n" * (10 * 1024 * 1024 // 10))
    proc = subprocess.run([sys.executable, "-m", "asight_lsp", "check", str(big)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 1 and "too large" in proc.stdout


def test_killed_worker_is_restarted_with_a_clear_error(worker):
    pid = worker.request("ping")["pid"]
    killer = threading.Timer(0.5, lambda: os.kill(pid, signal.SIGKILL))
    killer.start()
    with pytest.raises(WorkerCrashed, match="died while handling 'debug.sleep'"):
        worker.request("debug.sleep", {"seconds": 30})
    new_pid = worker.request("ping")["pid"]
    assert new_pid != pid
    assert check_text(fixture_text("matmul64.py"), "x", worker).parsed_units == ["matmul64"]


def test_killed_between_requests_restarts_silently(worker):
    pid = worker.request("ping")["pid"]
    os.kill(pid, signal.SIGKILL)
    time.sleep(0.2)
    assert worker.request("ping")["pid"] != pid


def test_hung_worker_times_out_and_restarts(worker):
    with pytest.raises(WorkerTimeout, match="did not answer"):
        worker.request("debug.sleep", {"seconds": 30}, timeout=1.0)
    assert worker.request("ping")["pid"]


def test_cli_check_exit_codes_and_format(tmp_path):
    def run(*args):
        return subprocess.run([sys.executable, "-m", "asight_lsp", *args], capture_output=True, text=True,
                              timeout=120, cwd=ROOT)
    ok = run("check", "fixtures/matmul.py")
    assert ok.returncode == 0, ok.stderr
    bad = run("check", "fixtures/broken/bad_namespace_call.py")
    assert bad.returncode == 1
    assert bad.stdout.startswith("fixtures/broken/bad_namespace_call.py:6:14: error: ")
    js = run("check", "--json", "fixtures/broken/wrong_arity.py")
    assert js.returncode == 1 and '"errors": 1' in js.stdout
    missing = run("check", "no/such/file.py")
    assert missing.returncode == 2 and missing.stderr.strip() == "asight: error: no such file: no/such/file.py"
    several = run("check", "fixtures/matmul.py", "no/such/file.py", "fixtures/broken/bad_namespace_call.py",
                  "fixtures/matmul.py")
    assert several.returncode == 2 and several.stderr.strip() == "asight: error: no such file: no/such/file.py"
    lines = several.stdout.splitlines()            # the readable ones still checked, each said once in its order
    assert sum(line.startswith("fixtures/matmul.py") for line in lines) == 1
    assert lines[0].startswith("fixtures/matmul.py: no problems") and lines[1].startswith("fixtures/broken/bad_namespace_call.py:6:14: error: ")
    usage = run("check")
    assert usage.returncode == 2 and "required: file" in usage.stderr and "Traceback" not in usage.stderr
